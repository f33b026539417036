#include "daemon/transfer/rdma_transport.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "common/base/error_code.h"
#include "common/base/logging.h"
#include "daemon/transfer/rdma_batch.h"
#include "daemon/transfer/rdma_device.h"
#include "daemon/transfer/rdma_endpoint.h"
#include "daemon/transfer/rdma_queue_pair.h"

namespace mooncake {

namespace {

using Clock = std::chrono::steady_clock;

// Peers read and write a segment; the NIC writes a pool for this daemon's READs, and reads
// it for WRITEs (always allowed).
constexpr int kPeerAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
constexpr int kLocalAccess = IBV_ACCESS_LOCAL_WRITE;

// The devices ibv_get_device_list reports, and why there are none when there are none.
struct DeviceList {
  ibv_device** list = nullptr;
  int count = 0;
  std::string none_reason;
  DeviceList() {
    errno = 0;
    list = ibv_get_device_list(&count);
    if (list == nullptr) {
      // ENOSYS: no kernel RDMA support at all; libibverbs says nothing else.
      none_reason = std::string("ibv_get_device_list returned none: ") + std::strerror(errno);
      count = 0;
    } else if (count == 0) {
      none_reason = "ibv_get_device_list returned none";
    }
  }
  ~DeviceList() {
    if (list != nullptr) ibv_free_device_list(list);
  }
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;

  std::string Names() const {
    if (count == 0) return "none (" + none_reason + ")";
    std::string names;
    for (int i = 0; i < count; ++i) {
      names += (i > 0 ? ", " : "") + std::string(ibv_get_device_name(list[i]));
    }
    return names;
  }
};

void Deregister(const std::vector<ibv_mr*>& mrs) {
  for (ibv_mr* mr : mrs) {
    if (int rc = ibv_dereg_mr(mr); rc != 0) {
      MC_LOG_ERROR("ibv_dereg_mr: %s", std::strerror(rc));
    }
  }
}

}  // namespace

std::vector<std::string> ListRdmaDevices() {
  DeviceList devices;
  std::vector<std::string> names;
  for (int i = 0; i < devices.count; ++i) names.push_back(ibv_get_device_name(devices.list[i]));
  return names;
}

std::unique_ptr<RdmaTransport> RdmaTransport::Open(const std::vector<std::string>& devices,
                                                   ControlCaller* control, std::string* error,
                                                   int gid_index) {
  DeviceList found;
  std::unique_ptr<RdmaTransport> t(new RdmaTransport);
  if (devices.empty()) {
    if (found.count == 0) {
      *error = "no RDMA device found (" + found.none_reason + ")";
      return nullptr;
    }
    // Any device will do: those without an active port (or GID) are passed over.
    std::string unusable;
    for (int i = 0; i < found.count; ++i) {
      std::string why;
      auto d = RdmaDevice::Open(found.list[i], gid_index, &why);
      if (d != nullptr) {
        t->devices_.push_back(std::move(d));
      } else {
        MC_LOG_WARN("%s; not using it", why.c_str());
        unusable += "; " + why;
      }
    }
    if (t->devices_.empty()) {
      *error = "no usable RDMA device" + unusable;
      return nullptr;
    }
  } else {
    for (const std::string& name : devices) {
      int i = 0;
      while (i < found.count && name != ibv_get_device_name(found.list[i])) ++i;
      if (i == found.count) {
        *error = "RDMA device " + name + " not found; have: " + found.Names();
        return nullptr;
      }
      if (t->FindDevice(name) != nullptr) {
        *error = "RDMA device " + name + " named twice";
        return nullptr;
      }
      auto d = RdmaDevice::Open(found.list[i], gid_index, error);
      if (d == nullptr) return nullptr;
      t->devices_.push_back(std::move(d));
    }
  }
  t->control_ = control;
  std::random_device random;
  t->instance_ = (static_cast<uint64_t>(random()) << 32) | random();
  for (const auto& d : t->devices_) {
    t->max_request_bytes_ = std::min(t->max_request_bytes_, std::max(1u, d->max_msg_size()));
    MC_LOG_INFO("RDMA device %s: port %u, lid %u, mtu %d, %s", d->name().c_str(), d->port(),
                d->lid(), 128 << d->mtu(), d->ethernet() ? "RoCE" : "InfiniBand");
  }
  return t;
}

RdmaTransport::~RdmaTransport() {
  // Queue pairs go with their maps; registrations must go before the devices' PDs.
  Deregister(memory_.TakeAll());
}

const RdmaDevice* RdmaTransport::FindDevice(const std::string& name) const {
  for (const auto& d : devices_) {
    if (d->name() == name) return d.get();
  }
  return nullptr;
}

ErrorCode RdmaTransport::RegisterMemory(char* base, uint64_t size, MemoryAccess access) {
  if (base == nullptr || size == 0) return ErrorCode::INVALID_PARAMS;
  std::vector<ibv_mr*> mrs;
  const int flags = access == MemoryAccess::kPeers ? kPeerAccess : kLocalAccess;
  for (const auto& d : devices_) {
    ibv_mr* mr = ibv_reg_mr(d->pd(), base, size, flags);
    if (mr == nullptr) {
      int saved = errno;
      MC_LOG_ERROR("RDMA device %s: ibv_reg_mr of %llu bytes at %p: %s%s", d->name().c_str(),
                   static_cast<unsigned long long>(size), static_cast<void*>(base),
                   std::strerror(saved),
                   saved == ENOMEM ? " (is RLIMIT_MEMLOCK large enough to pin it?)" : "");
      Deregister(mrs);
      return ErrorCode::TRANSFER_FAIL;
    }
    mrs.push_back(mr);
  }
  std::unique_lock<std::shared_mutex> lock(memory_mu_);
  if (!memory_.Insert(base, size, mrs, access == MemoryAccess::kPeers)) {
    lock.unlock();
    MC_LOG_ERROR("RDMA registration of %llu bytes at %p overlaps a registered range",
                 static_cast<unsigned long long>(size), static_cast<void*>(base));
    Deregister(mrs);
    return ErrorCode::INVALID_PARAMS;
  }
  return ErrorCode::OK;
}

void RdmaTransport::UnregisterMemory(char* base) {
  std::vector<ibv_mr*> mrs;
  {
    std::unique_lock<std::shared_mutex> lock(memory_mu_);
    mrs = memory_.Remove(base);
  }
  if (mrs.empty()) {
    MC_LOG_WARN("RDMA unregistration of %p, which is not registered", static_cast<void*>(base));
  }
  Deregister(mrs);
}

bool RdmaTransport::DescribeSegment(char* base, uint64_t size, rpc::TransportEndpoint* out) {
  std::shared_lock<std::shared_mutex> lock(memory_mu_);
  const RdmaMemoryMap::Region* region = memory_.Find(base, size);
  if (region == nullptr || size == 0 || !region->for_peers) {
    return false;  // not registered, or a pool: no peer may address it
  }
  size_t i = next_device_.fetch_add(1, std::memory_order_relaxed) % devices_.size();
  const RdmaDevice& d = *devices_[i];
  RdmaSegmentDescriptor desc;
  desc.mtu = d.mtu();
  desc.lid = d.lid();
  std::memcpy(desc.gid, d.gid(), sizeof(desc.gid));
  desc.rkey = region->mrs[i]->rkey;
  desc.base = reinterpret_cast<uintptr_t>(base);
  desc.size = size;
  out->protocol = "rdma";
  out->address = d.name();
  out->descriptor = EncodeRdmaDescriptor(desc);
  return true;
}

std::shared_ptr<RdmaTransport::Connection> RdmaTransport::ConnectionTo(
    const RdmaRemote& remote) {
  std::string name = remote.peer + "/" + remote.device;
  std::lock_guard<std::mutex> lock(connections_mu_);
  std::shared_ptr<Connection>& c = connections_[name];
  if (c == nullptr) {
    c = std::make_shared<Connection>();
    c->name = name;
    // Connections, like segments, are spread over this side's devices.
    c->device = next_device_.fetch_add(1, std::memory_order_relaxed) % devices_.size();
  }
  return c;
}

bool RdmaTransport::Connect(Connection* c, const RdmaRemote& remote, Clock::time_point deadline) {
  const RdmaDevice& device = *devices_[c->device];
  std::string error;
  std::unique_ptr<RdmaQueuePair> qp = RdmaQueuePair::Create(&device, kMaxOutstanding, &error);
  if (qp == nullptr) {
    MC_LOG_ERROR("RDMA connection to %s from %s: %s", c->name.c_str(), device.name().c_str(),
                 error.c_str());
    return false;
  }
  RdmaQpEndpoint mine = qp->local();
  mine.instance = instance_;
  mine.device = remote.device;  // the device the peer is asked to answer from
  std::string request = EncodeRdmaQpEndpoint(mine);
  if (request.empty()) {
    MC_LOG_ERROR("RDMA connection to %s: the device name is not one a peer can have",
                 c->name.c_str());
    return false;
  }
  std::string reply;
  ErrorCode rc = control_->CallControl(remote.peer, transfer::ControlChannel::kRdmaConnect,
                                       request, &reply, deadline);
  if (rc != ErrorCode::OK) {
    MC_LOG_ERROR("RDMA connection to %s: the connect request failed: %d (%s)", c->name.c_str(),
                 ToInt(rc), ErrorName(rc));
    return false;
  }
  RdmaQpEndpoint theirs;
  if (!DecodeRdmaQpEndpoint(reply, &theirs)) {
    MC_LOG_ERROR("RDMA connection to %s: the peer's endpoint (%zu bytes) does not decode",
                 c->name.c_str(), reply.size());
    return false;
  }
  if (!qp->Connect(theirs, &error)) {
    MC_LOG_ERROR("RDMA connection to %s: %s", c->name.c_str(), error.c_str());
    return false;
  }
  MC_LOG_INFO("RDMA connected to %s from %s (qp %u -> %u)", c->name.c_str(),
              device.name().c_str(), mine.qpn, theirs.qpn);
  c->qp = std::move(qp);
  return true;
}

void RdmaTransport::Execute(std::vector<TransferOp*>* ops, Clock::time_point deadline) {
  struct Group {
    std::shared_ptr<Connection> connection;
    RdmaRemote first;  // where a new connection is made to
    std::vector<RdmaWork> works;
  };
  std::vector<Group> groups;  // in the order of their first op
  for (TransferOp* op : *ops) {
    op->result = ErrorCode::TRANSFER_FAIL;
    RdmaRemote remote;
    std::string why;
    if (!ResolveRdmaRemote(*op, &remote, &why)) {
      MC_LOG_ERROR("RDMA transfer refused: %s", why.c_str());
      continue;
    }
    std::shared_ptr<Connection> c = ConnectionTo(remote);
    RdmaWork work{op, 0, remote.addr, remote.segment.rkey};
    {
      std::shared_lock<std::shared_mutex> lock(memory_mu_);
      const RdmaMemoryMap::Region* region = memory_.Find(op->local, op->length);
      if (region == nullptr) {
        MC_LOG_ERROR("RDMA transfer refused: local buffer %p of %llu bytes is not registered",
                     static_cast<void*>(op->local), static_cast<unsigned long long>(op->length));
        continue;
      }
      work.lkey = region->mrs[c->device]->lkey;
    }
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group& x) { return x.connection == c; });
    if (g == groups.end()) {
      groups.push_back(Group{c, remote, {}});
      g = groups.end() - 1;
    }
    g->works.push_back(work);
  }
  for (Group& g : groups) {
    Connection& c = *g.connection;
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.qp == nullptr) {  // every op of the group stays failed unless it connects
      if (Clock::now() >= deadline) {
        MC_LOG_ERROR("RDMA to %s: deadline passed before connecting; %zu ops fail",
                     c.name.c_str(), g.works.size());
        continue;
      }
      if (!Connect(&c, g.first, deadline)) continue;
    }
    if (!RunRdmaBatch(c.qp.get(), g.works, max_request_bytes_, deadline, c.name)) {
      // Its state (and any request still in flight) is unknown: destroying the queue pair
      // stops the NIC from touching our buffers before their ops are reported failed.
      MC_LOG_WARN("RDMA connection to %s torn down; the next transfer reconnects",
                  c.name.c_str());
      c.qp.reset();
    }
  }
}

ControlHandler RdmaTransport::control_handler() {
  return [this](const std::string& request, std::string* reply) {
    return Accept(request, reply);
  };
}

ErrorCode RdmaTransport::Accept(const std::string& request, std::string* reply) {
  RdmaQpEndpoint theirs;
  if (!DecodeRdmaQpEndpoint(request, &theirs)) {
    MC_LOG_WARN("RDMA connect request of %zu bytes refused: it does not decode",
                request.size());
    return ErrorCode::INVALID_PARAMS;
  }
  const RdmaDevice* device = FindDevice(theirs.device);
  if (device == nullptr) {
    MC_LOG_WARN("RDMA connect request for device %s refused: this daemon does not use it",
                theirs.device.c_str());
    return ErrorCode::INVALID_PARAMS;
  }
  std::string error;
  // The answering side never posts: one send slot is all its queue pair needs.
  std::unique_ptr<RdmaQueuePair> qp = RdmaQueuePair::Create(device, 1, &error);
  if (qp == nullptr || !qp->Connect(theirs, &error)) {
    MC_LOG_ERROR("RDMA connect request on %s from qp %u: %s", device->name().c_str(),
                 theirs.qpn, error.c_str());
    return ErrorCode::TRANSFER_FAIL;
  }
  RdmaQpEndpoint mine = qp->local();
  mine.instance = instance_;
  *reply = EncodeRdmaQpEndpoint(mine);

  std::lock_guard<std::mutex> lock(served_mu_);
  // A reconnect of the same transport replaces its old queue pair, which it has dropped.
  Served& slot = served_[{theirs.instance, device->name()}];
  slot.sequence = ++served_sequence_;
  slot.qp = std::move(qp);
  if (served_.size() > kMaxServedQueuePairs) {
    // Most likely left by a peer that went away; were it alive, its next transfer fails
    // (the queue pair is gone) and it reconnects.
    auto oldest = std::min_element(
        served_.begin(), served_.end(),
        [](const auto& a, const auto& b) { return a.second.sequence < b.second.sequence; });
    served_.erase(oldest);
  }
  return ErrorCode::OK;
}

}  // namespace mooncake
