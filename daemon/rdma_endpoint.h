// What two RDMA daemons tell each other, as bytes: the descriptor a segment is published
// with (through the master, in its "rdma" endpoint) and the queue-pair endpoint two
// daemons exchange over the transfer port before their first one-sided operation.
//
// Both are compact, versioned and little-endian, so that daemons of different builds
// interoperate or refuse each other plainly. Decoding accepts exactly one version and
// exactly its length: a short, long or other-version buffer is refused, never guessed at.
//
//   segment descriptor (40 bytes):
//     u8 version (1) | u8 mtu (enum ibv_mtu) | u16 lid | u8 gid[16] | u32 rkey |
//     u64 base | u64 size
//   queue-pair endpoint (38 bytes + device name):
//     u8 version (1) | u8 mtu | u8 rd_atomic | u16 lid | u8 gid[16] | u32 qpn | u32 psn |
//     u64 instance | u8 device length | device name
//
// The segment's device name is not in its descriptor: it is the endpoint's address.
#ifndef MOONCAKE_DAEMON_RDMA_ENDPOINT_H_
#define MOONCAKE_DAEMON_RDMA_ENDPOINT_H_

#include <cstdint>
#include <string>

#include "daemon/transfer/transport.h"

namespace mooncake {

constexpr uint8_t kRdmaEncodingVersion = 1;
constexpr size_t kRdmaDescriptorSize = 40;
constexpr size_t kRdmaQpEndpointFixedSize = 38;
constexpr size_t kRdmaMaxDeviceName = 64;  // IBV_SYSFS_NAME_MAX

// How peers reach one registered segment: the owner's port (lid, gid), the memory key and
// the segment's range in the owner's address space.
struct RdmaSegmentDescriptor {
  uint8_t mtu = 0;  // enum ibv_mtu of the owner's port: 1 (256) .. 5 (4096)
  uint16_t lid = 0;
  uint8_t gid[16] = {};
  uint32_t rkey = 0;
  uint64_t base = 0;
  uint64_t size = 0;
};

// One side of a reliable connection. In a connect request, device is the device the
// answering daemon is asked to connect from (the one named by the segment's endpoint) and
// instance identifies the asking transport, so that a reconnect replaces its old queue
// pair; in the reply, device is the one used and instance the answerer's.
struct RdmaQpEndpoint {
  uint8_t mtu = 0;
  // RDMA READs this side serves at once: the peer must not have more outstanding.
  uint8_t rd_atomic = 0;
  uint16_t lid = 0;
  uint8_t gid[16] = {};
  uint32_t qpn = 0;
  uint32_t psn = 0;  // 24 bits
  uint64_t instance = 0;
  std::string device;
};

std::string EncodeRdmaDescriptor(const RdmaSegmentDescriptor& d);
// False for anything but exactly kRdmaDescriptorSize bytes of this version with a valid mtu.
bool DecodeRdmaDescriptor(const std::string& in, RdmaSegmentDescriptor* d);

// Empty when the endpoint cannot be encoded (device name empty or too long).
std::string EncodeRdmaQpEndpoint(const RdmaQpEndpoint& e);
// False unless in is exactly one endpoint of this version, with a valid mtu, rd_atomic > 0,
// a 24-bit psn and a non-empty device name.
bool DecodeRdmaQpEndpoint(const std::string& in, RdmaQpEndpoint* e);

// Where one op goes: the peer to connect to, the device it serves the segment from, and
// the remote address and key of the op's range.
struct RdmaRemote {
  std::string peer;    // "host:port" of the owner's transfer port (its "tcp" endpoint)
  std::string device;  // the owner's device (the "rdma" endpoint's address)
  RdmaSegmentDescriptor segment;
  uint64_t addr = 0;   // segment.base + op.remote_offset
};

// Resolves op's remote side from its segment's endpoints. False, with *why for the log,
// when the segment has no "rdma" or "tcp" endpoint, the descriptor does not decode, or
// [remote_offset, remote_offset + length) is not inside it.
bool ResolveRdmaRemote(const TransferOp& op, RdmaRemote* out, std::string* why);

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_RDMA_ENDPOINT_H_
