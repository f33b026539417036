// One interface, two transports: how this daemon moves bytes between its own memory (an
// application's pool or a segment it owns) and a segment another daemon owns.
//
// Transfers are one-sided: the owner's CPU (TCP) or NIC (RDMA) serves them without the
// owner's store logic taking part. Both transports address a remote replica the same way,
// by the segment's published descriptor and an offset in it; what differs is which
// endpoint of the descriptor they use ("tcp": host:port of the owner's transfer port,
// "rdma": the owner's device, queue-pair bootstrap address and memory key).
//
// Local memory must be registered before it is transferred to or from (RDMA pins it and
// gets keys; TCP has nothing to do), and a segment's endpoints are asked of every
// transport when it is mounted, so that peers learn how to reach it.
#ifndef MOONCAKE_DAEMON_TRANSPORT_H_
#define MOONCAKE_DAEMON_TRANSPORT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "MasterService.h"
#include "common/base/error_code.h"
#include "daemon/transfer/transfer_protocol.h"

namespace mooncake {

// A segment another daemon owns, as the master published it at mount.
struct RemoteSegment {
  int64_t segment_id = 0;
  std::string name;  // "host:port" of the owner
  uint64_t base = 0;  // in the owner's address space (RDMA addresses need it)
  uint64_t size = 0;  // a disk segment: its SSD capacity
  std::vector<rpc::TransportEndpoint> endpoints;
  // A LOCAL_DISK segment (the owner's SSD tier, docs/ssd.md): its objects are found by key
  // in the owner's index, never by offset, so it is read with READ_DISK only (over TCP) and
  // never written.
  bool disk = false;

  // The endpoint of this protocol ("tcp", "rdma"), or null.
  const rpc::TransportEndpoint* Endpoint(const std::string& protocol) const {
    for (const auto& e : endpoints) {
      if (e.protocol == protocol) return &e;
    }
    return nullptr;
  }
};

enum class TransferKind { kRead, kWrite };

// Which object of a disk replica a read wants: the owner looks it up by key in its SSD
// index and serves it only if it holds that very value (size, and checksum when both know
// one), so a key re-written meanwhile is never served as the listed value.
struct DiskAddress {
  std::string key;  // a stored key (common/base/tenant_key.h)
  uint64_t value_size = 0;
  int64_t checksum = -1;  // the value's CRC32C as the master listed it; -1: none
};

// Who may touch registered memory. A segment is read and written by peers (RDMA: it gets
// a remote key, published with the segment); an application's pool only by this daemon's
// own transfers (RDMA: a local key only, so no peer can address it, key or no key).
enum class MemoryAccess { kLocalOnly, kPeers };

// One transfer: kRead copies remote -> local, kWrite local -> remote.
struct TransferOp {
  TransferKind kind = TransferKind::kRead;
  std::shared_ptr<const RemoteSegment> remote;
  uint64_t remote_offset = 0;  // inside the remote segment; of a disk replica: in the value
  char* local = nullptr;       // registered memory of this daemon
  uint64_t length = 0;
  // The epoch of the master whose grant covers the transfer (kRead: its lease; kWrite: its
  // reservation), which the owner checks (daemon/transfer/transfer_protocol.h); 0: unchecked.
  int64_t master_epoch = 0;
  ErrorCode result = ErrorCode::OK;  // set by Execute: OK, or why not (TRANSFER_FAIL, ...)
  // Checksums while the bytes are hot: a transport that can (TCP, which touches every byte
  // on the CPU anyway) computes the CRC32C of the bytes moved, piece by piece in parallel,
  // and sets has_crc. One that cannot (RDMA: the NIC moves them) leaves has_crc false.
  bool want_crc = false;
  bool has_crc = false;
  uint32_t crc = 0;
  // Set for a read of a disk replica (remote->disk): sent as READ_DISK, over TCP.
  std::shared_ptr<const DiskAddress> disk = nullptr;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // "tcp" or "rdma": the endpoint protocol this transport publishes and uses.
  virtual const char* protocol() const = 0;

  // Memory of this daemon that transfers may touch, as access says. OK, or why not.
  virtual ErrorCode RegisterMemory(char* base, uint64_t size, MemoryAccess access) = 0;
  virtual void UnregisterMemory(char* base) = 0;

  // The endpoint under which peers reach [base, base + size), a segment of this daemon
  // being mounted; false when this transport publishes none for it.
  virtual bool DescribeSegment(char* base, uint64_t size, rpc::TransportEndpoint* out) = 0;

  // Runs every op, in parallel where the transport can, and returns when each has ended
  // (result set). No op may run past deadline: one that would fails with TRANSFER_FAIL.
  virtual void Execute(std::vector<TransferOp*>* ops,
                       std::chrono::steady_clock::time_point deadline) = 0;
};

// CONTROL requests over the transfer port (daemon/transfer/transfer_protocol.h): how the RDMA
// transport exchanges queue-pair endpoints with a peer before its first one-sided
// operation. The TCP transport is the caller; the transfer server dispatches to handlers,
// which answer OK (reply sent back as the payload) or why not (sent back as the code).
using ControlHandler = std::function<ErrorCode(const std::string& request, std::string* reply)>;

class ControlCaller {
 public:
  virtual ~ControlCaller() = default;
  // Sends request to the handler of channel on the daemon whose transfer port is address
  // ("host:port") and waits for its answer: the handler's code, or TRANSFER_FAIL when the
  // peer cannot be reached or does not answer before deadline.
  virtual ErrorCode CallControl(const std::string& address, transfer::ControlChannel channel,
                                const std::string& request, std::string* reply,
                                std::chrono::steady_clock::time_point deadline) = 0;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TRANSPORT_H_
