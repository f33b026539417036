#include "daemon/transfer/rdma_endpoint.h"

#include <cstring>

#include "common/base/little_endian.h"

namespace mooncake {

namespace {

// enum ibv_mtu: IBV_MTU_256 = 1 .. IBV_MTU_4096 = 5.
bool ValidMtu(uint8_t mtu) { return mtu >= 1 && mtu <= 5; }

// Reads little-endian fields off the front of a buffer; the caller checked its length.
class Reader {
 public:
  explicit Reader(const std::string& in) : p_(in.data()) {}
  uint64_t Le(int bytes) { return GetLittleEndian(&p_, bytes); }
  void Bytes(void* out, size_t n) {
    std::memcpy(out, p_, n);
    p_ += n;
  }

 private:
  const char* p_;
};

}  // namespace

std::string EncodeRdmaDescriptor(const RdmaSegmentDescriptor& d) {
  std::string out;
  out.reserve(kRdmaDescriptorSize);
  AppendLittleEndian(&out, kRdmaEncodingVersion, 1);
  AppendLittleEndian(&out, d.mtu, 1);
  AppendLittleEndian(&out, d.lid, 2);
  out.append(reinterpret_cast<const char*>(d.gid), sizeof(d.gid));
  AppendLittleEndian(&out, d.rkey, 4);
  AppendLittleEndian(&out, d.base, 8);
  AppendLittleEndian(&out, d.size, 8);
  return out;
}

bool DecodeRdmaDescriptor(const std::string& in, RdmaSegmentDescriptor* d) {
  if (in.size() != kRdmaDescriptorSize) return false;
  Reader r(in);
  if (r.Le(1) != kRdmaEncodingVersion) return false;
  RdmaSegmentDescriptor v;
  v.mtu = static_cast<uint8_t>(r.Le(1));
  v.lid = static_cast<uint16_t>(r.Le(2));
  r.Bytes(v.gid, sizeof(v.gid));
  v.rkey = static_cast<uint32_t>(r.Le(4));
  v.base = r.Le(8);
  v.size = r.Le(8);
  if (!ValidMtu(v.mtu)) return false;
  *d = v;
  return true;
}

std::string EncodeRdmaQpEndpoint(const RdmaQpEndpoint& e) {
  if (e.device.empty() || e.device.size() > kRdmaMaxDeviceName) return "";
  std::string out;
  out.reserve(kRdmaQpEndpointFixedSize + e.device.size());
  AppendLittleEndian(&out, kRdmaEncodingVersion, 1);
  AppendLittleEndian(&out, e.mtu, 1);
  AppendLittleEndian(&out, e.rd_atomic, 1);
  AppendLittleEndian(&out, e.lid, 2);
  out.append(reinterpret_cast<const char*>(e.gid), sizeof(e.gid));
  AppendLittleEndian(&out, e.qpn, 4);
  AppendLittleEndian(&out, e.psn, 4);
  AppendLittleEndian(&out, e.instance, 8);
  AppendLittleEndian(&out, e.device.size(), 1);
  out += e.device;
  return out;
}

bool DecodeRdmaQpEndpoint(const std::string& in, RdmaQpEndpoint* e) {
  if (in.size() <= kRdmaQpEndpointFixedSize) return false;  // a device name is required
  Reader r(in);
  if (r.Le(1) != kRdmaEncodingVersion) return false;
  RdmaQpEndpoint v;
  v.mtu = static_cast<uint8_t>(r.Le(1));
  v.rd_atomic = static_cast<uint8_t>(r.Le(1));
  v.lid = static_cast<uint16_t>(r.Le(2));
  r.Bytes(v.gid, sizeof(v.gid));
  v.qpn = static_cast<uint32_t>(r.Le(4));
  v.psn = static_cast<uint32_t>(r.Le(4));
  v.instance = r.Le(8);
  size_t name_len = r.Le(1);
  if (name_len == 0 || name_len > kRdmaMaxDeviceName ||
      in.size() != kRdmaQpEndpointFixedSize + name_len) {
    return false;
  }
  if (!ValidMtu(v.mtu) || v.rd_atomic == 0 || v.psn >= (1u << 24)) return false;
  v.device = in.substr(kRdmaQpEndpointFixedSize);
  *e = std::move(v);
  return true;
}

bool ResolveRdmaRemote(const TransferOp& op, RdmaRemote* out, std::string* why) {
  if (op.remote == nullptr) {
    *why = "no remote segment";
    return false;
  }
  const RemoteSegment& seg = *op.remote;
  const rpc::TransportEndpoint* rdma = seg.Endpoint("rdma");
  if (rdma == nullptr) {
    *why = "segment " + std::to_string(seg.segment_id) + " of " + seg.name +
           " has no rdma endpoint";
    return false;
  }
  // Queue pairs are set up over the owner's transfer port, which its tcp endpoint names.
  const rpc::TransportEndpoint* tcp = seg.Endpoint("tcp");
  if (tcp == nullptr) {
    *why = "segment " + std::to_string(seg.segment_id) + " of " + seg.name +
           " has no tcp endpoint to connect through";
    return false;
  }
  RdmaRemote r;
  if (!DecodeRdmaDescriptor(rdma->descriptor, &r.segment)) {
    *why = "segment " + std::to_string(seg.segment_id) + " of " + seg.name +
           " has an rdma descriptor this version cannot decode (" +
           std::to_string(rdma->descriptor.size()) + " bytes)";
    return false;
  }
  if (op.length > r.segment.size || op.remote_offset > r.segment.size - op.length) {
    *why = "range [" + std::to_string(op.remote_offset) + ", +" + std::to_string(op.length) +
           ") outside segment " + std::to_string(seg.segment_id) + " of " +
           std::to_string(r.segment.size) + " bytes";
    return false;
  }
  r.peer = tcp->address;
  r.device = rdma->address;
  r.addr = r.segment.base + op.remote_offset;
  *out = std::move(r);
  return true;
}

}  // namespace mooncake
