// The wire format of the transfer port, daemon to daemon (docs/protocol.md, "Transfer
// port"). One-sided operations on the owner's mounted segments, addressed by what the
// master returned in a replica descriptor: (segment id, offset, length).
//
// A request is a fixed 48-byte header, little-endian, then for WRITE, CONTROL and
// READ_DISK its payload of `length` bytes:
//
//   u32 magic "MCTP" | u16 version | u16 op | u64 request id | i64 segment id |
//   u64 offset | u64 length | i64 master epoch
//
// The master epoch (READ, READ_DISK and WRITE; 0 for CONTROL) names the master whose grant the peer
// holds: the read lease of a READ, the reservation of a WRITE. The owner refuses either
// under another master's grant with -707 LEASE_EXPIRED: after a master restart the new
// master may already have given that range to another object (daemon/base/epoch_gate.h).
// 0 asks for no check.
//
// HELLO (op 0x100) may open a connection, and only open it: it names the peer daemon, so
// that the owner counts the connection against that daemon's share of the port rather
// than against its source address (daemon/transfer/transfer_connections.h), and it starts the
// cluster-key handshake. Its segment id, offset and master epoch are 0; its length is that
// of the payload, at most kMaxHelloPayload, a list of fields `u16 tag | u16 length |
// value`, in increasing tag order (so each at most once), no byte after the last field:
//
//   tag 1, daemon name: the peer's "host:port" as it publishes its segments, 1..255
//          printable ASCII characters; required
//   tag 2, client nonce: kNonceBytes random bytes, fresh for this connection; sent by a
//          peer that holds the cluster key (common/auth/cluster_key.h), and by no other
//
// An unknown tag is refused, so a field that must be understood can be added with a tag
// of its own. The reply to a HELLO with a client nonce carries the owner's server nonce
// (kNonceBytes, its whole payload); to one without, no payload. Ops from 0x100 up set up a
// connection; those below move bytes.
//
// AUTH (op 0x101) follows a HELLO with a client nonce, at once, and proves the peer holds
// the key: its payload is the client proof, ClusterKey::Prove(kClient, kAuthContext,
// client nonce, server nonce), kProofBytes; its segment id, offset and master epoch are 0.
// The owner answers OK with its own proof, ProveWith(the key that checked, kServer, the
// same context and nonces), as the payload, which the peer checks before it sends a byte
// more: an owner that cannot prove the key is not one. Or it answers -1400
// UNAUTHENTICATED (a wrong proof, or an AUTH where none is due) and closes the connection.
//
// Who must say what. An owner with a cluster key serves nothing before the handshake has
// succeeded: a READ, WRITE or CONTROL first, a HELLO without a client nonce, or anything
// but AUTH after the HELLO is refused with -1400 and the connection closed, its payload
// unread. Both messages must arrive within the handshake deadline. An owner without a key
// admits only peers on its own host (loopback, or the very address they connected to),
// refusing others at accept, without a byte; such peers need no handshake, HELLO is
// optional, and a HELLO with a client nonce (the peer expects a key this owner does not
// have) is refused with -1400.
//
// READ_DISK (op 4) reads a range of a disk replica: an object on the owner's SSD tier,
// found by key in its index (docs/ssd.md). Its segment id is the owner's LOCAL_DISK
// segment, its offset 0, its length that of the payload (kDiskReadFixedBytes + the key's
// length, the key 1..kMaxDiskKey bytes), its master epoch that of the lease as for READ;
// the payload:
//
//   u64 value offset | u64 length | u64 value size | i64 checksum | key
//
// value size and checksum (-1: none) name the value the master listed: an owner whose SSD
// holds another value under the key (or none) answers -704 OBJECT_NOT_FOUND. The range
// must lie inside the value and be 1..kMaxDiskRead bytes (a peer reads more in several
// requests, as it stripes a READ); the owner reads it from its SSD, checked, and replies
// with exactly `length` bytes, or -801 CHECKSUM_MISMATCH when the SSD copy is corrupt
// (the owner drops it), -1300 RESOURCE_LIMIT_EXCEEDED when its disk reads stayed all
// busy for half the stall timeout, -707, -101 or -600 as for READ (-600 also for a
// segment of this owner that is not its disk segment). TCP only: an RDMA NIC cannot read
// an SSD.
//
// A reply is a fixed 24-byte header, then for a successful READ or READ_DISK the `length`
// bytes read and for CONTROL the reply payload:
//
//   u32 magic "MCTR" | i32 code | u64 request id | u64 length
//
// Requests on one connection are answered in order, one at a time. Every request is
// checked before a byte of payload is touched: a bad magic, version or op, an unknown
// segment, or a range outside the segment gets an error reply (-600 INVALID_PARAMS,
// -101 SEGMENT_NOT_FOUND, -707 LEASE_EXPIRED, -1305 TOO_MANY_CONNECTIONS,
// -1400 UNAUTHENTICATED) and a log line;
// so does a field an op does not use that is not 0 (the offset and master epoch of a
// CONTROL). After a refused WRITE, CONTROL, HELLO or AUTH, and after any request refused
// for want of the handshake, the owner closes the connection rather than reading a payload
// it cannot trust the length of. A READ_DISK is checked in two steps: its header (offset 0,
// a payload length in bounds) before the payload is read, refused by closing as above;
// then the payload, read in full, and everything it names, refused with the connection
// kept (the stream is in step).
#ifndef MOONCAKE_DAEMON_TRANSFER_PROTOCOL_H_
#define MOONCAKE_DAEMON_TRANSFER_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/base/error_code.h"
#include "common/base/tenant_key.h"

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
// READ_DISK: the payload's fixed fields (value offset, length, value size, checksum), the
// longest key (a stored key), and the most bytes one request reads (the owner reads them
// into a buffer of its own before the reply: one of DiskReadSlots' buffers).
constexpr uint64_t kDiskReadFixedBytes = 32;
constexpr uint64_t kMaxDiskKey = tenant_key::kMaxStoredKeyLen;
constexpr uint64_t kMaxDiskRead = 4ull << 20;
// A HELLO is a name and room for a few fields more.
constexpr uint64_t kMaxHelloPayload = 1024;
constexpr size_t kMaxDaemonName = 255;
// The handshake's sizes (ClusterKey::kNonceBytes, kProofBytes) and the context its proofs
// are made for, which no other protocol uses.
constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;
constexpr const char* kAuthContext = "transfer";

enum class Op : uint16_t {
  kWrite = 1,    // payload -> segment[offset, offset + length)
  kRead = 2,     // segment[offset, offset + length) -> reply payload
  kControl = 3,  // payload is handed to a registered handler (segment id names which);
                 // its answer is the reply payload
  kReadDisk = 4,  // a range of a disk replica (payload: DiskRead) -> reply payload
  kHello = 0x100,  // first on a connection: who the peer is (payload: HELLO fields)
  kAuth = 0x101,   // second, with a cluster key: the peer's proof (payload: client proof)
};

// True for the ops above. (A switch: two ops given one number do not compile.)
bool KnownOp(uint16_t op);

// Which handler a CONTROL request is for (carried in the segment id field).
enum class ControlChannel : int64_t {
  kRdmaConnect = 1,      // exchange of RDMA queue-pair endpoints (daemon/transfer/rdma_transport.h)
  kCacheInvalidate = 2,  // INVALIDATE: forget keys (or everything) in the read cache; the
                         // payload is in daemon/cluster/cache_invalidator.h, the reply empty
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

// What a HELLO says.
struct Hello {
  std::string daemon_name;   // "host:port"
  std::string client_nonce;  // kNonceBytes, or empty: the peer holds no cluster key
};

// What a READ_DISK asks.
struct DiskRead {
  uint64_t value_offset = 0;
  uint64_t length = 0;
  uint64_t value_size = 0;
  int64_t checksum = -1;
  std::string key;
};

// The payload of a READ_DISK.
std::string EncodeDiskRead(const DiskRead& read);
// False, with *why, when payload is not one this version accepts: shorter than the fixed
// fields, a key empty or over kMaxDiskKey, a length of 0 or over kMaxDiskRead, a range
// outside the value (overflow included).
bool DecodeDiskRead(const char* payload, size_t length, DiskRead* read, const char** why);

// The payload of a HELLO.
std::string EncodeHello(const Hello& hello);
// False, with *why, when payload is not a HELLO this version accepts: a field cut short,
// an unknown tag, tags out of order or repeated, bytes after the last field, no daemon
// name, a name that is empty, longer than kMaxDaemonName or not printable ASCII, or a
// client nonce that is not kNonceBytes.
bool DecodeHello(const char* payload, size_t length, Hello* hello, const char** why);

void EncodeRequest(const RequestHeader& h, char out[kRequestHeaderSize]);
// False when the bytes are not a request this version understands (magic, version, op);
// the fields read so far are still filled in, for the log.
bool DecodeRequest(const char in[kRequestHeaderSize], RequestHeader* h);
void EncodeReply(const ReplyHeader& h, char out[kReplyHeaderSize]);
bool DecodeReply(const char in[kReplyHeaderSize], ReplyHeader* h);

}  // namespace transfer
}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TRANSFER_PROTOCOL_H_
