// One opened RDMA device: its verbs context, the protection domain every registration and
// queue pair of this daemon on it belongs to, and the port and GID it talks through.
//
// The port is the device's first ACTIVE one. The GID (at a configurable index, 0 by
// default) addresses the port across subnets and is what RoCE routes by, so on an
// Ethernet link layer a zero GID is refused rather than discovered at connect time.
#ifndef MOONCAKE_DAEMON_RDMA_DEVICE_H_
#define MOONCAKE_DAEMON_RDMA_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>

struct ibv_context;
struct ibv_device;
struct ibv_pd;

namespace mooncake {

class RdmaDevice {
 public:
  // nullptr, with *error naming the device and what failed, when it cannot be used.
  static std::unique_ptr<RdmaDevice> Open(ibv_device* device, int gid_index,
                                          std::string* error);
  ~RdmaDevice();
  RdmaDevice(const RdmaDevice&) = delete;
  RdmaDevice& operator=(const RdmaDevice&) = delete;

  const std::string& name() const { return name_; }
  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  uint8_t port() const { return port_; }
  uint16_t lid() const { return lid_; }
  const uint8_t* gid() const { return gid_; }  // 16 bytes
  int gid_index() const { return gid_index_; }
  bool ethernet() const { return ethernet_; }  // RoCE: every packet needs the GRH
  uint8_t mtu() const { return mtu_; }          // enum ibv_mtu of the active port
  uint32_t max_msg_size() const { return max_msg_size_; }
  int max_qp_wr() const { return max_qp_wr_; }
  uint8_t max_rd_atomic() const { return max_rd_atomic_; }  // outstanding READs per QP

 private:
  RdmaDevice() = default;
  std::string name_;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  uint8_t port_ = 0;
  uint16_t lid_ = 0;
  uint8_t gid_[16] = {};
  int gid_index_ = 0;
  bool ethernet_ = false;
  uint8_t mtu_ = 0;
  uint32_t max_msg_size_ = 0;
  int max_qp_wr_ = 0;
  uint8_t max_rd_atomic_ = 0;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_RDMA_DEVICE_H_
