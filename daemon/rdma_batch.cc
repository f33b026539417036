#include "daemon/transfer/rdma_batch.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>

#include "common/base/error_code.h"
#include "common/base/logging.h"

namespace mooncake {

namespace {

struct OpState {
  uint32_t in_flight = 0;  // posted requests not yet completed
  bool failed = false;
};

const char* KindName(TransferKind kind) { return kind == TransferKind::kWrite ? "WRITE" : "READ"; }

}  // namespace

bool RunRdmaBatch(RdmaSendQueue* queue, const std::vector<RdmaWork>& works,
                  uint32_t max_wr_bytes, std::chrono::steady_clock::time_point deadline,
                  const std::string& peer) {
  const int window = std::max(1, queue->max_outstanding());
  max_wr_bytes = std::max<uint32_t>(1, max_wr_bytes);
  std::vector<ibv_send_wr> wrs(window);
  std::vector<ibv_sge> sges(window);
  std::vector<ibv_wc> wcs(window);
  std::vector<OpState> state(works.size());
  size_t next = 0;      // the first op not wholly posted,
  uint64_t offset = 0;  // and how much of it is
  int outstanding = 0;
  bool healthy = true;
  bool expired = false;  // nothing more is posted once the deadline has passed
  size_t flushed = 0;
  for (;;) {
    if (healthy && !expired && next < works.size() &&
        std::chrono::steady_clock::now() >= deadline) {
      MC_LOG_ERROR("RDMA to %s: deadline passed with %zu of %zu ops not wholly posted",
                   peer.c_str(), works.size() - next, works.size());
      expired = true;
    }
    int n = 0;
    while (healthy && !expired && next < works.size() && outstanding + n < window) {
      const RdmaWork& w = works[next];
      if (w.op->length == 0) {
        ++next;
        continue;
      }
      uint64_t len = std::min<uint64_t>(max_wr_bytes, w.op->length - offset);
      sges[n] = ibv_sge{};
      sges[n].addr = reinterpret_cast<uintptr_t>(w.op->local) + offset;
      sges[n].length = static_cast<uint32_t>(len);
      sges[n].lkey = w.lkey;
      ibv_send_wr& wr = wrs[n];
      wr = ibv_send_wr{};
      wr.wr_id = next;
      wr.sg_list = &sges[n];
      wr.num_sge = 1;
      wr.opcode = w.op->kind == TransferKind::kWrite ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.rdma.remote_addr = w.remote_addr + offset;
      wr.wr.rdma.rkey = w.rkey;
      if (n > 0) wrs[n - 1].next = &wr;
      ++state[next].in_flight;
      ++n;
      offset += len;
      if (offset == w.op->length) {
        ++next;
        offset = 0;
      }
    }
    if (n > 0) {
      ibv_send_wr* bad = nullptr;
      int rc = queue->PostSend(wrs.data(), &bad);
      int posted = n;
      if (rc != 0) {
        posted = (bad >= wrs.data() && bad < wrs.data() + n) ? static_cast<int>(bad - wrs.data())
                                                             : 0;
        MC_LOG_ERROR("RDMA to %s: ibv_post_send failed after %d of %d requests: %s",
                     peer.c_str(), posted, n, std::strerror(rc));
        for (int i = posted; i < n; ++i) {
          OpState& s = state[wrs[i].wr_id];
          --s.in_flight;
          s.failed = true;
        }
        healthy = false;
      }
      outstanding += posted;
    }
    if (outstanding == 0) break;  // all done, or broken with nothing left in flight
    int k = queue->WaitCompletions(wcs.data(), outstanding, deadline);
    if (k <= 0) {
      if (k == 0) {
        MC_LOG_ERROR("RDMA to %s: deadline passed with %d requests in flight", peer.c_str(),
                     outstanding);
      } else {
        MC_LOG_ERROR("RDMA to %s: polling the completion queue failed", peer.c_str());
      }
      healthy = false;
      break;
    }
    for (int j = 0; j < k; ++j) {
      const ibv_wc& wc = wcs[j];
      OpState& s = state[wc.wr_id];
      --s.in_flight;
      --outstanding;
      if (wc.status == IBV_WC_SUCCESS) continue;
      s.failed = true;
      healthy = false;
      if (wc.status == IBV_WC_WR_FLUSH_ERR) {
        ++flushed;  // collateral of the failure logged below; one line for all of them
        continue;
      }
      const TransferOp& op = *works[wc.wr_id].op;
      MC_LOG_ERROR("RDMA %s of %llu bytes at remote 0x%llx to %s failed: %s (vendor error 0x%x)",
                   KindName(op.kind), static_cast<unsigned long long>(op.length),
                   static_cast<unsigned long long>(works[wc.wr_id].remote_addr), peer.c_str(),
                   ibv_wc_status_str(wc.status), wc.vendor_err);
    }
  }
  if (flushed > 0) {
    MC_LOG_WARN("RDMA to %s: %zu requests flushed by the queue pair's error", peer.c_str(),
                flushed);
  }
  for (size_t i = 0; i < works.size(); ++i) {
    bool done = works[i].op->length == 0 ||
                (i < next && state[i].in_flight == 0 && !state[i].failed);
    works[i].op->result = done ? ErrorCode::OK : ErrorCode::TRANSFER_FAIL;
  }
  return healthy;
}

}  // namespace mooncake
