// The wire format of the transfer port, daemon to daemon (docs/protocol.md, "Transfer
// port"). One-sided operations on the owner's mounted segments, addressed by what the
// master returned in a replica descriptor: (segment id, offset, length).
//
// A request is a fixed 48-byte header, little-endian, then for WRITE and CONTROL its
// payload of `length` bytes:
//
//   u32 magic "MCTP" | u16 version | u16 op | u64 request id | i64 segment id |
//   u64 offset | u64 length | i64 master epoch
//
// The master epoch (READ and WRITE; 0 for CONTROL) names the master whose grant the peer
// holds: the read lease of a READ, the reservation of a WRITE. The owner refuses either
// under another master's grant with -707 LEASE_EXPIRED: after a master restart the new
// master may already have given that range to another object (daemon/epoch_gate.h).
// 0 asks for no check.
//
// A reply is a fixed 24-byte header, then for a successful READ the `length` bytes read
// and for CONTROL the reply payload:
//
//   u32 magic "MCTR" | i32 code | u64 request id | u64 length
//
// Requests on one connection are answered in order, one at a time. Every request is
// checked before a byte of payload is touched: a bad magic, version or op, an unknown
// segment, or a range outside the segment gets an error reply (-600 INVALID_PARAMS,
// -101 SEGMENT_NOT_FOUND, -707 LEASE_EXPIRED) and a log line. After a refused WRITE or CONTROL the owner
// closes the connection rather than reading a payload it cannot trust the length of.
#ifndef MOONCAKE_DAEMON_TRANSFER_PROTOCOL_H_
#define MOONCAKE_DAEMON_TRANSFER_PROTOCOL_H_

#include <cstddef>
#include <cstdint>

#include "common/error_code.h"

namespace mooncake {
namespace transfer {

constexpr uint32_t kRequestMagic = 0x5054434d;  // "MCTP"
constexpr uint32_t kReplyMagic = 0x5254434d;    // "MCTR"
constexpr uint16_t kVersion = 1;
constexpr size_t kRequestHeaderSize = 48;
constexpr size_t kReplyHeaderSize = 24;
// CONTROL payloads (RDMA connection set-up, cache invalidations) are small; anything
// longer is hostile.
constexpr uint64_t kMaxControlPayload = 64 * 1024;

enum class Op : uint16_t {
  kWrite = 1,    // payload -> segment[offset, offset + length)
  kRead = 2,     // segment[offset, offset + length) -> reply payload
  kControl = 3,  // payload is handed to a registered handler (segment id names which);
                 // its answer is the reply payload
};

// Which handler a CONTROL request is for (carried in the segment id field).
enum class ControlChannel : int64_t {
  kRdmaConnect = 1,      // exchange of RDMA queue-pair endpoints (daemon/rdma_transport.h)
  kCacheInvalidate = 2,  // INVALIDATE: forget keys (or everything) in the read cache; the
                         // payload is in daemon/cache_invalidator.h, the reply empty
};

struct RequestHeader {
  uint32_t magic = kRequestMagic;
  uint16_t version = kVersion;
  uint16_t op = 0;
  uint64_t request_id = 0;
  int64_t segment_id = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  int64_t master_epoch = 0;
};

struct ReplyHeader {
  uint32_t magic = kReplyMagic;
  ErrorCode code = ErrorCode::OK;  // the i32 on the wire; one outside the table decodes as
                                   // INTERNAL_ERROR (FromWire)
  uint64_t request_id = 0;
  uint64_t length = 0;
};

void EncodeRequest(const RequestHeader& h, char out[kRequestHeaderSize]);
// False when the bytes are not a request this version understands (magic, version, op);
// the fields read so far are still filled in, for the log.
bool DecodeRequest(const char in[kRequestHeaderSize], RequestHeader* h);
void EncodeReply(const ReplyHeader& h, char out[kReplyHeaderSize]);
bool DecodeReply(const char in[kReplyHeaderSize], ReplyHeader* h);

}  // namespace transfer
}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TRANSFER_PROTOCOL_H_
