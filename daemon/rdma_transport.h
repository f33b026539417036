// The RDMA transport: one-sided RDMA READ and WRITE between this daemon's registered
// memory and segments other daemons published with an "rdma" endpoint.
//
// Devices. Open() uses the named devices, or every one found; each gets a protection
// domain, and its first ACTIVE port and GID are what peers connect to. Memory is
// registered with every device; a segment is published through one of them (round robin
// over mounts, which spreads segments across NICs).
//
// Connections. One reliable-connected queue pair per (peer, peer device), made on the
// first transfer there: this side sends its endpoint as a CONTROL request (channel
// kRdmaConnect) to the peer's transfer port (the segment's "tcp" endpoint); the peer's
// control_handler() creates and connects its queue pair and answers with its endpoint.
// The peer keeps one queue pair per (asking transport, device) -- a reconnect replaces it
// -- and at most kMaxServedQueuePairs in all, dropping the oldest (its user reconnects).
// A connection whose batch failed or timed out is torn down and made anew next time.
//
// Thread-safety: every method may be called from any thread. Batches to one peer device
// take turns on its connection, each keeping up to kMaxOutstanding requests in flight;
// Executes on other threads to other peers run in parallel (one Execute serves its peers
// one after another). The transport must outlive the transfer server holding its
// control_handler().
#ifndef MOONCAKE_DAEMON_RDMA_TRANSPORT_H_
#define MOONCAKE_DAEMON_RDMA_TRANSPORT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "daemon/transfer/rdma_memory_map.h"
#include "daemon/transfer/transport.h"

namespace mooncake {

class RdmaDevice;
class RdmaQueuePair;
struct RdmaRemote;

// Names of this host's RDMA devices; empty when there are none or the kernel has no RDMA
// support.
std::vector<std::string> ListRdmaDevices();

class RdmaTransport : public Transport {
 public:
  static constexpr int kMaxOutstanding = 128;  // work requests in flight per connection
  static constexpr uint32_t kMaxRequestBytes = 1u << 20;  // larger ops are split
  static constexpr size_t kMaxServedQueuePairs = 1024;

  // devices: the names to use; empty for every device found. control reaches peers'
  // transfer ports and must outlive the transport. gid_index: the GID of each port to use
  // (RoCE setups may need another than 0). nullptr, with *error saying what was missing,
  // when a named device does not exist or cannot be used, or no device is usable at all.
  static std::unique_ptr<RdmaTransport> Open(const std::vector<std::string>& devices,
                                             ControlCaller* control, std::string* error,
                                             int gid_index = 0);
  ~RdmaTransport() override;

  const char* protocol() const override { return "rdma"; }
  // Registers with every device: 0, -600 for an empty or overlapping range, -800 when a
  // device refuses (e.g. RLIMIT_MEMLOCK too low to pin it). Remote read and write access
  // only for kPeers (segments); a pool can be the local side of a transfer and nothing else.
  ErrorCode RegisterMemory(char* base, uint64_t size, MemoryAccess access) override;
  void UnregisterMemory(char* base) override;
  // {"rdma", device name, EncodeRdmaDescriptor(...)}; false unless [base, base + size)
  // lies in memory registered for kPeers.
  bool DescribeSegment(char* base, uint64_t size, rpc::TransportEndpoint* out) override;
  // An op fails with -800 (and a log line) when its segment has no usable rdma endpoint,
  // its range is outside the segment, its local buffer is not registered, the connection
  // cannot be made, or its requests do not all complete successfully before deadline.
  void Execute(std::vector<TransferOp*>* ops,
               std::chrono::steady_clock::time_point deadline) override;

  // What the transfer server calls for CONTROL requests of channel kRdmaConnect: the
  // request is the asking side's RdmaQpEndpoint, the reply this side's. -600 for a request
  // that does not decode or names a device this transport does not use, -800 when the
  // queue pair cannot be made.
  ControlHandler control_handler();

 private:
  // A connection to one device of one peer; mu is held while it is used or made.
  struct Connection {
    std::string name;   // "host:port/device", for log lines
    size_t device = 0;  // index in devices_ of this side's end
    std::mutex mu;
    std::unique_ptr<RdmaQueuePair> qp;  // null until connected, and after a failure
  };
  struct Served {
    uint64_t sequence = 0;  // when it was accepted: the oldest goes first
    std::unique_ptr<RdmaQueuePair> qp;
  };

  RdmaTransport() = default;
  std::shared_ptr<Connection> ConnectionTo(const RdmaRemote& remote);
  // Makes c->qp; false (logged) when it cannot.
  bool Connect(Connection* c, const RdmaRemote& remote,
               std::chrono::steady_clock::time_point deadline);
  ErrorCode Accept(const std::string& request, std::string* reply);
  const RdmaDevice* FindDevice(const std::string& name) const;

  std::vector<std::unique_ptr<RdmaDevice>> devices_;  // destroyed last: all else uses them
  ControlCaller* control_ = nullptr;
  uint64_t instance_ = 0;  // random: tells this transport's connect requests from others'
  uint32_t max_request_bytes_ = kMaxRequestBytes;
  std::atomic<size_t> next_device_{0};

  std::shared_mutex memory_mu_;
  RdmaMemoryMap memory_;

  std::mutex connections_mu_;
  std::map<std::string, std::shared_ptr<Connection>> connections_;  // by Connection::name

  std::mutex served_mu_;
  uint64_t served_sequence_ = 0;
  std::map<std::pair<uint64_t, std::string>, Served> served_;  // by (instance, device)
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_RDMA_TRANSPORT_H_
