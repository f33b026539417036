// The transfer port's decoders (daemon/transfer/transfer_protocol.h): what a peer daemon sends the
// owner of a segment, and what the owner answers; the payloads of a HELLO and of a cache
// INVALIDATE (daemon/cluster/cache_invalidator.h); and the RDMA encodings that travel as a CONTROL
// payload or in a segment's published endpoint (daemon/transfer/rdma_endpoint.h).
//
// The input is read by every decoder at once: its first 48 bytes as a request header, its
// first 24 as a reply header, the whole of it as a HELLO payload, an INVALIDATE payload, an
// RDMA segment descriptor and a queue-pair endpoint, and (as a segment's "rdma" endpoint)
// for ResolveRdmaRemote with a range taken from bytes 4..20 (a descriptor's gid, which no
// rule constrains). Cut at each newline, it is also a list of keys (and its first byte a
// payload limit) that the INVALIDATE encoder packs, and each piece a daemon name a HELLO
// carries.
//
// Invariants:
//  - a request header decodes iff its magic, version and op (WRITE, READ, CONTROL,
//    READ_DISK, HELLO, AUTH) are known, and re-encodes to the same 48 bytes whether it
//    decodes or not (every field is read);
//  - a reply header decodes iff its magic is known and re-encodes to the same 24 bytes
//    when its code is one of the table's (FromWire maps any other to INTERNAL_ERROR);
//  - a HELLO that decodes names a daemon of 1..255 printable ASCII bytes, carries a client
//    nonce of exactly 32 bytes or none, and re-encodes to the same bytes (its fields come
//    in one order); one refused says why; a HELLO encoded decodes to what was encoded
//    exactly when the name keeps those rules (with no nonce, and with a 32-byte one);
//  - a READ_DISK payload that decodes has a key of 1..kMaxDiskKey bytes and a range of
//    1..kMaxDiskRead bytes inside the value (no overflow), and re-encodes to the same bytes;
//  - an INVALIDATE that decodes re-encodes to the same bytes (a list of no keys, which
//    the encoder never sends, is the 5-byte header alone), and the handler the transfer
//    port runs acknowledges it with an empty reply, refusing anything else with -600; keys
//    encoded into payloads of a limit decode back, in order, each payload within the limit
//    unless it holds one key;
//  - an RDMA descriptor or endpoint that decodes holds what the header documents (exact
//    length, version, mtu 1..5, rd_atomic > 0, a 24-bit psn, a device name of 1..64
//    bytes) and re-encodes to the same bytes;
//  - a range ResolveRdmaRemote accepts lies inside the segment, with no overflow.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/base/error_code.h"
#include "daemon/cluster/cache_invalidator.h"
#include "daemon/transfer/rdma_endpoint.h"
#include "daemon/transfer/transfer_protocol.h"
#include "fuzz/fuzz_util.h"

namespace {

using namespace mooncake;

void CheckRequest(const char* in) {
  transfer::RequestHeader h;
  const bool ok = transfer::DecodeRequest(in, &h);
  const bool known_op = (h.op >= static_cast<uint16_t>(transfer::Op::kWrite) &&
                         h.op <= static_cast<uint16_t>(transfer::Op::kReadDisk)) ||
                        h.op == static_cast<uint16_t>(transfer::Op::kHello) ||
                        h.op == static_cast<uint16_t>(transfer::Op::kAuth);
  FUZZ_CHECK(ok == (h.magic == transfer::kRequestMagic && h.version == transfer::kVersion &&
                    known_op),
             "request header accepted %d with magic %08x version %u op %u", ok, h.magic,
             h.version, h.op);
  char again[transfer::kRequestHeaderSize];
  transfer::EncodeRequest(h, again);
  FUZZ_CHECK(std::memcmp(in, again, sizeof(again)) == 0, "request header re-encodes differently");
}

void CheckReply(const char* in) {
  transfer::ReplyHeader h;
  const bool ok = transfer::DecodeReply(in, &h);
  FUZZ_CHECK(ok == (h.magic == transfer::kReplyMagic), "reply accepted %d with magic %08x", ok,
             h.magic);
  FUZZ_CHECK(IsKnownErrorCode(ToInt(h.code)), "reply decoded to code %d, not in the table",
             ToInt(h.code));
  int32_t wire;
  std::memcpy(&wire, in + 4, sizeof(wire));  // little-endian hosts only, like the tests
  char again[transfer::kReplyHeaderSize];
  transfer::EncodeReply(h, again);
  if (IsKnownErrorCode(wire) && wire <= 0) {
    FUZZ_CHECK(std::memcmp(in, again, sizeof(again)) == 0, "reply header re-encodes differently");
  } else {
    FUZZ_CHECK(h.code == ErrorCode::INTERNAL_ERROR, "code %d outside the table decoded as %d",
               wire, ToInt(h.code));
  }
}

bool ValidDaemonName(const std::string& name) {
  if (name.empty() || name.size() > transfer::kMaxDaemonName) return false;
  for (char c : name) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

void CheckHello(const std::string& in, const std::vector<std::string>& names) {
  transfer::Hello hello;
  const char* why = nullptr;
  if (transfer::DecodeHello(in.data(), in.size(), &hello, &why)) {
    FUZZ_CHECK(ValidDaemonName(hello.daemon_name), "HELLO accepted a %zu-byte name",
               hello.daemon_name.size());
    FUZZ_CHECK(hello.client_nonce.empty() || hello.client_nonce.size() == transfer::kNonceBytes,
               "HELLO accepted a %zu-byte client nonce", hello.client_nonce.size());
    FUZZ_CHECK(transfer::EncodeHello(hello) == in, "HELLO re-encodes differently");
  } else {
    FUZZ_CHECK(why != nullptr && *why != '\0', "HELLO refused without a reason");
  }
  // Each piece as a name, alone and with a nonce (the input's first 32 bytes, padded).
  const std::string nonce =
      (in + std::string(transfer::kNonceBytes, 'n')).substr(0, transfer::kNonceBytes);
  for (const std::string& name : names) {
    for (const std::string& client_nonce : {std::string(), nonce}) {
      transfer::Hello sent{name, client_nonce};
      const std::string payload = transfer::EncodeHello(sent);
      transfer::Hello got;
      const bool ok = transfer::DecodeHello(payload.data(), payload.size(), &got, &why);
      FUZZ_CHECK(ok == ValidDaemonName(name), "HELLO of a %zu-byte name: decoded %d",
                 name.size(), ok);
      FUZZ_CHECK(!ok || (got.daemon_name == name && got.client_nonce == client_nonce),
                 "HELLO decoded another name or nonce");
    }
  }
}

void CheckDiskRead(const std::string& in) {
  transfer::DiskRead r;
  const char* why = nullptr;
  if (!transfer::DecodeDiskRead(in.data(), in.size(), &r, &why)) {
    FUZZ_CHECK(why != nullptr, "READ_DISK payload refused without a reason");
    return;
  }
  FUZZ_CHECK(!r.key.empty() && r.key.size() <= transfer::kMaxDiskKey, "READ_DISK key of %zu",
             r.key.size());
  FUZZ_CHECK(r.length >= 1 && r.length <= transfer::kMaxDiskRead && r.length <= r.value_size &&
                 r.value_offset <= r.value_size - r.length,
             "READ_DISK range outside the value");
  FUZZ_CHECK(transfer::EncodeDiskRead(r) == in, "READ_DISK payload does not re-encode");
}

void CheckInvalidate(const std::string& in, const std::vector<std::string>& keys,
                     size_t max_payload, const std::vector<int32_t>& which) {
  bool everything = false;
  std::vector<std::string> decoded;
  const bool accepted = invalidation::Decode(in, &everything, &decoded);
  // The receiving half as the transfer port runs it, over a read cache of its own.
  static ReadCache cache(/*enabled=*/true);
  static const ControlHandler handler = CacheInvalidator::Handler(&cache);
  std::string reply = "not answered";
  const ErrorCode code = handler(in, &reply);
  FUZZ_CHECK(accepted ? code == ErrorCode::OK && reply.empty()
                      : code == ErrorCode::INVALID_PARAMS,
             "the INVALIDATE handler answered %d to a payload Decode %s", ToInt(code),
             accepted ? "accepts" : "refuses");
  if (accepted) {
    if (everything) {
      FUZZ_CHECK(decoded.empty() && in == invalidation::EncodeEverything(),
                 "an INVALIDATE of everything with %zu keys, %zu bytes", decoded.size(),
                 in.size());
    } else {
      const std::vector<std::string> again = invalidation::EncodeKeys(decoded, {}, in.size());
      FUZZ_CHECK(decoded.empty() ? again.empty() && in.size() == 5
                                 : again.size() == 1 && again[0] == in,
                 "an INVALIDATE of %zu keys re-encodes differently", decoded.size());
    }
  }
  std::vector<std::string> expected;
  if (which.empty()) {
    expected = keys;
  } else {
    for (int32_t i : which) {
      if (i >= 0 && static_cast<size_t>(i) < keys.size()) expected.push_back(keys[i]);
    }
  }
  std::vector<std::string> got;
  for (const std::string& payload : invalidation::EncodeKeys(keys, which, max_payload)) {
    std::vector<std::string> part;
    FUZZ_CHECK(invalidation::Decode(payload, &everything, &part) && !everything && !part.empty(),
               "an encoded INVALIDATE does not decode to keys");
    FUZZ_CHECK(payload.size() <= max_payload || part.size() == 1,
               "a %zu-byte INVALIDATE of %zu keys for a limit of %zu", payload.size(),
               part.size(), max_payload);
    got.insert(got.end(), part.begin(), part.end());
  }
  FUZZ_CHECK(got == expected, "%zu keys encoded, %zu decoded", expected.size(), got.size());
  FUZZ_CHECK(invalidation::Decode(invalidation::EncodeEverything(), &everything, &got) &&
                 everything && got.empty(),
             "INVALIDATE of everything does not decode");
}

void CheckRdma(const std::string& in, uint64_t offset, uint64_t length) {
  RdmaSegmentDescriptor d;
  if (DecodeRdmaDescriptor(in, &d)) {
    FUZZ_CHECK(in.size() == kRdmaDescriptorSize && in[0] == kRdmaEncodingVersion,
               "a %zu-byte descriptor of version %d decoded", in.size(), in[0]);
    FUZZ_CHECK(d.mtu >= 1 && d.mtu <= 5, "descriptor mtu %u", d.mtu);
    FUZZ_CHECK(EncodeRdmaDescriptor(d) == in, "descriptor re-encodes differently");
  }
  RdmaQpEndpoint e;
  if (DecodeRdmaQpEndpoint(in, &e)) {
    FUZZ_CHECK(in[0] == kRdmaEncodingVersion && e.mtu >= 1 && e.mtu <= 5 && e.rd_atomic > 0 &&
                   e.psn < (1u << 24) && !e.device.empty() &&
                   e.device.size() <= kRdmaMaxDeviceName &&
                   in.size() == kRdmaQpEndpointFixedSize + e.device.size(),
               "endpoint decoded against its rules (mtu %u rd_atomic %u psn %u device %zu bytes)",
               e.mtu, e.rd_atomic, e.psn, e.device.size());
    FUZZ_CHECK(EncodeRdmaQpEndpoint(e) == in, "endpoint re-encodes differently");
  }

  // The segment as the master published it: this input is its rdma descriptor.
  auto segment = std::make_shared<RemoteSegment>();
  segment->segment_id = 7;
  segment->name = "10.0.0.1:12300";
  rpc::TransportEndpoint tcp, rdma;
  tcp.protocol = "tcp";
  tcp.address = "10.0.0.1:12300";
  rdma.protocol = "rdma";
  rdma.address = "mlx5_0";
  rdma.descriptor = in;
  segment->endpoints = {tcp, rdma};
  TransferOp op;
  op.remote = segment;
  op.remote_offset = offset;
  op.length = length;
  RdmaRemote remote;
  std::string why;
  if (ResolveRdmaRemote(op, &remote, &why)) {
    FUZZ_CHECK(length <= remote.segment.size && offset <= remote.segment.size - length,
               "range [%llu, +%llu) accepted in a segment of %llu bytes",
               static_cast<unsigned long long>(offset), static_cast<unsigned long long>(length),
               static_cast<unsigned long long>(remote.segment.size));
    FUZZ_CHECK(remote.addr == remote.segment.base + offset && remote.peer == tcp.address &&
                   remote.device == rdma.address,
               "resolved to another address, peer or device");
  } else {
    FUZZ_CHECK(!why.empty(), "refused without a reason");
  }
}

uint64_t Le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mooncake::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* bytes = reinterpret_cast<const char*>(data);
  if (size >= transfer::kRequestHeaderSize) CheckRequest(bytes);
  if (size >= transfer::kReplyHeaderSize) CheckReply(bytes);
  const uint64_t offset = size >= 12 ? Le64(data + 4) : 0;
  const uint64_t length = size >= 20 ? Le64(data + 12) : 0;
  const std::string in(bytes, size);
  // The input cut at each newline: names for HELLO, keys (1..4096 bytes) for INVALIDATE.
  std::vector<std::string> pieces;
  for (size_t start = 0; start <= in.size();) {
    size_t end = std::min(in.find('\n', start), in.size());
    pieces.push_back(in.substr(start, end - start));
    start = end + 1;
  }
  std::vector<std::string> keys;
  for (const std::string& p : pieces) {
    if (!p.empty()) keys.push_back(p);
  }
  // The limit from the first byte (small ones split the keys into many payloads), and
  // with the second byte odd every other key (and two indices outside the list).
  const size_t max_payload = size > 0 ? 8 + data[0] : transfer::kMaxControlPayload;
  std::vector<int32_t> which;
  if (size > 1 && (data[1] & 1)) {
    for (size_t i = 0; i < keys.size(); i += 2) which.push_back(static_cast<int32_t>(i));
    which.push_back(-1);
    which.push_back(static_cast<int32_t>(keys.size()));
  }
  CheckHello(in, pieces);
  CheckDiskRead(in);
  CheckInvalidate(in, keys, max_payload, which);
  CheckRdma(in, offset, length);
  return 0;
}
