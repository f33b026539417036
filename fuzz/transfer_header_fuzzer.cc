// The transfer port's decoders (daemon/transfer_protocol.h): what a peer daemon sends the
// owner of a segment, and what the owner answers; and the RDMA encodings that travel as a
// CONTROL payload or in a segment's published endpoint (daemon/rdma_endpoint.h).
//
// The input is read by every decoder at once: its first 48 bytes as a request header, its
// first 24 as a reply header, the whole of it as an RDMA segment descriptor and as a
// queue-pair endpoint, and (as a segment's "rdma" endpoint) for ResolveRdmaRemote with a
// range taken from bytes 4..20 (a descriptor's gid, which no rule constrains).
//
// Invariants:
//  - a request header decodes iff its magic, version and op are known, and re-encodes to
//    the same 48 bytes whether it decodes or not (every field is read);
//  - a reply header decodes iff its magic is known and re-encodes to the same 24 bytes
//    when its code is one of the table's (FromWire maps any other to INTERNAL_ERROR);
//  - an RDMA descriptor or endpoint that decodes holds what the header documents (exact
//    length, version, mtu 1..5, rd_atomic > 0, a 24-bit psn, a device name of 1..64
//    bytes) and re-encodes to the same bytes;
//  - a range ResolveRdmaRemote accepts lies inside the segment, with no overflow.
#include <cstring>
#include <memory>
#include <string>

#include "common/error_code.h"
#include "daemon/rdma_endpoint.h"
#include "daemon/transfer_protocol.h"
#include "fuzz/fuzz_util.h"

namespace {

using namespace mooncake;

void CheckRequest(const char* in) {
  transfer::RequestHeader h;
  const bool ok = transfer::DecodeRequest(in, &h);
  const bool known_op = h.op >= static_cast<uint16_t>(transfer::Op::kWrite) &&
                        h.op <= static_cast<uint16_t>(transfer::Op::kControl);
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
  CheckRdma(std::string(bytes, size), offset, length);
  return 0;
}
