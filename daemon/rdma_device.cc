#include "daemon/transfer/rdma_device.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mooncake {

namespace {

// Outstanding RDMA READs a queue pair asks for: enough to keep a link busy with 1 MiB
// reads, and no more than the device allows.
constexpr int kWantedRdAtomic = 16;

bool AllZero(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

}  // namespace

std::unique_ptr<RdmaDevice> RdmaDevice::Open(ibv_device* device, int gid_index,
                                             std::string* error) {
  std::unique_ptr<RdmaDevice> d(new RdmaDevice);
  d->name_ = ibv_get_device_name(device);
  d->gid_index_ = gid_index;
  const std::string what = "RDMA device " + d->name_ + ": ";
  d->context_ = ibv_open_device(device);
  if (d->context_ == nullptr) {
    *error = what + "ibv_open_device: " + std::strerror(errno);
    return nullptr;
  }
  ibv_device_attr attr;
  if (int rc = ibv_query_device(d->context_, &attr); rc != 0) {
    *error = what + "ibv_query_device: " + std::strerror(rc);
    return nullptr;
  }
  ibv_port_attr port;
  for (uint8_t p = 1; p <= attr.phys_port_cnt && d->port_ == 0; ++p) {
    if (ibv_query_port(d->context_, p, &port) == 0 && port.state == IBV_PORT_ACTIVE) {
      d->port_ = p;
    }
  }
  if (d->port_ == 0) {
    *error = what + "no ACTIVE port (of " + std::to_string(attr.phys_port_cnt) + ")";
    return nullptr;
  }
  d->lid_ = port.lid;
  d->ethernet_ = port.link_layer == IBV_LINK_LAYER_ETHERNET;
  d->mtu_ = static_cast<uint8_t>(port.active_mtu);
  d->max_msg_size_ = port.max_msg_sz;
  d->max_qp_wr_ = attr.max_qp_wr;
  d->max_rd_atomic_ = static_cast<uint8_t>(
      std::min({kWantedRdAtomic, attr.max_qp_rd_atom, attr.max_qp_init_rd_atom}));
  if (gid_index < 0 || gid_index >= port.gid_tbl_len) {
    *error = what + "GID index " + std::to_string(gid_index) + " outside the port's table of " +
             std::to_string(port.gid_tbl_len);
    return nullptr;
  }
  ibv_gid gid;
  errno = 0;
  if (int rc = ibv_query_gid(d->context_, d->port_, gid_index, &gid); rc != 0) {
    *error = what + "ibv_query_gid(port " + std::to_string(d->port_) + ", index " +
             std::to_string(gid_index) + "): " + std::strerror(errno ? errno : rc);
    return nullptr;
  }
  std::memcpy(d->gid_, gid.raw, sizeof(d->gid_));
  if (d->ethernet_ && AllZero(d->gid_, sizeof(d->gid_))) {
    *error = what + "RoCE port " + std::to_string(d->port_) + " has no GID at index " +
             std::to_string(gid_index) + " (is an IP address configured on its interface?)";
    return nullptr;
  }
  d->pd_ = ibv_alloc_pd(d->context_);
  if (d->pd_ == nullptr) {
    *error = what + "ibv_alloc_pd: " + std::strerror(errno);
    return nullptr;
  }
  return d;
}

RdmaDevice::~RdmaDevice() {
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  if (context_ != nullptr) ibv_close_device(context_);
}

}  // namespace mooncake
