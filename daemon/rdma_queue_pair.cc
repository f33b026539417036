#include "daemon/transfer/rdma_queue_pair.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

namespace mooncake {

namespace {

// Polls before sleeping on the channel: a 1 MiB request takes ~100 us at 100 Gb/s, and
// waking from poll(2) costs tens of microseconds, so a short spin saves small batches
// that cost; long transfers sleep instead of burning a worker's core.
constexpr int kSpinPolls = 2000;
// Transport timeout 4.096 us * 2^14 = 67 ms per try, 7 tries: a dead peer surfaces as
// IBV_WC_RETRY_EXC_ERR within about half a second.
constexpr uint8_t kAckTimeout = 14;
constexpr uint8_t kRetries = 7;
constexpr uint8_t kRnrRetries = 7;  // moot: RNR NAKs answer SENDs, never posted here
constexpr uint8_t kMinRnrTimer = 12;
constexpr uint8_t kHopLimit = 64;

bool AllZero(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

std::string VerbError(const char* what, int rc) {
  return std::string(what) + ": " + std::strerror(rc);
}

}  // namespace

std::unique_ptr<RdmaQueuePair> RdmaQueuePair::Create(const RdmaDevice* device,
                                                     int max_send_wr, std::string* error) {
  std::unique_ptr<RdmaQueuePair> q(new RdmaQueuePair(device));
  q->max_send_wr_ = std::max(1, std::min(max_send_wr, device->max_qp_wr()));
  q->channel_ = ibv_create_comp_channel(device->context());
  if (q->channel_ == nullptr) {
    *error = VerbError("ibv_create_comp_channel", errno);
    return nullptr;
  }
  // Non-blocking, so that WaitCompletions sleeps in poll(2), which honours the deadline.
  int flags = fcntl(q->channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(q->channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    *error = VerbError("fcntl(O_NONBLOCK) on the completion channel", errno);
    return nullptr;
  }
  // Every send is signaled and nothing is ever received: one entry per request in flight.
  q->cq_ = ibv_create_cq(device->context(), q->max_send_wr_, nullptr, q->channel_, 0);
  if (q->cq_ == nullptr) {
    *error = VerbError("ibv_create_cq", errno);
    return nullptr;
  }
  ibv_qp_init_attr init{};
  init.send_cq = q->cq_;
  init.recv_cq = q->cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = static_cast<uint32_t>(q->max_send_wr_);
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  q->qp_ = ibv_create_qp(device->pd(), &init);
  if (q->qp_ == nullptr) {
    *error = VerbError("ibv_create_qp", errno);
    return nullptr;
  }
  q->psn_ = std::random_device()() & 0xffffff;
  return q;
}

RdmaQueuePair::~RdmaQueuePair() {
  // In this order: a QP holds its CQ, a CQ its channel.
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
}

RdmaQpEndpoint RdmaQueuePair::local() const {
  RdmaQpEndpoint e;
  e.mtu = device_->mtu();
  e.rd_atomic = device_->max_rd_atomic();
  e.lid = device_->lid();
  std::memcpy(e.gid, device_->gid(), sizeof(e.gid));
  e.qpn = qp_->qp_num;
  e.psn = psn_;
  e.device = device_->name();
  return e;
}

bool RdmaQueuePair::Connect(const RdmaQpEndpoint& remote, std::string* error) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = device_->port();
  attr.qp_access_flags =
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  int rc = ibv_modify_qp(qp_, &attr,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) {
    *error = VerbError("ibv_modify_qp(INIT)", rc);
    return false;
  }

  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(std::min(device_->mtu(), remote.mtu));
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = device_->max_rd_atomic();
  attr.min_rnr_timer = kMinRnrTimer;
  attr.ah_attr.dlid = remote.lid;
  attr.ah_attr.port_num = device_->port();
  // RoCE routes by GID only; on InfiniBand a GID makes the path work across subnets too.
  if (device_->ethernet() || !AllZero(remote.gid, sizeof(remote.gid))) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_->gid_index());
    attr.ah_attr.grh.hop_limit = kHopLimit;
  }
  rc = ibv_modify_qp(qp_, &attr,
                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                         IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) {
    *error = VerbError("ibv_modify_qp(RTR)", rc);
    return false;
  }

  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = kAckTimeout;
  attr.retry_cnt = kRetries;
  attr.rnr_retry = kRnrRetries;
  attr.sq_psn = psn_;
  // No more READs in flight than the peer serves, nor than this device issues.
  attr.max_rd_atomic = std::min(device_->max_rd_atomic(), remote.rd_atomic);
  rc = ibv_modify_qp(qp_, &attr,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                         IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) {
    *error = VerbError("ibv_modify_qp(RTS)", rc);
    return false;
  }
  return true;
}

int RdmaQueuePair::PostSend(ibv_send_wr* wr, ibv_send_wr** bad) {
  return ibv_post_send(qp_, wr, bad);
}

int RdmaQueuePair::WaitCompletions(ibv_wc* wc, int max,
                                   std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    for (int i = 0; i < kSpinPolls; ++i) {
      int n = ibv_poll_cq(cq_, max, wc);
      if (n != 0) return n > 0 ? n : -1;
    }
    // Arm, then look once more: a completion that arrived before arming raises no event.
    if (ibv_req_notify_cq(cq_, 0) != 0) return -1;
    int n = ibv_poll_cq(cq_, max, wc);
    if (n != 0) return n > 0 ? n : -1;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return 0;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    pollfd p{channel_->fd, POLLIN, 0};
    int ready = poll(&p, 1, static_cast<int>(std::min<decltype(left)>(left, 1000)));
    if (ready < 0 && errno != EINTR) return -1;
    if (ready > 0) {
      ibv_cq* cq = nullptr;
      void* context = nullptr;
      // Every event must be acknowledged before the CQ can be destroyed.
      if (ibv_get_cq_event(channel_, &cq, &context) == 0) ibv_ack_cq_events(cq, 1);
    }
  }
}

}  // namespace mooncake
