#include "master/log/state_records.h"

#include <msgpack.hpp>

#include "common/uds/uds_protocol.h"

namespace mooncake {

namespace {

// The msgpack stream interface over a std::string the caller owns.
struct StringSink {
  std::string* out;
  void write(const char* data, size_t length) { out->append(data, length); }
};
using Packer = msgpack::packer<StringSink>;

void PackString(Packer& p, std::string_view s) {
  p.pack_str(static_cast<uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

void PackObject(Packer& p, std::string_view key, uint64_t size, int64_t checksum, bool hard_pin,
                const ReplicaRecord* replicas, size_t replica_count, int64_t soft_pin_until,
                std::string_view group) {
  // The trailing fields are written only when they say something (see the header).
  p.pack_array(!group.empty() ? 7 : soft_pin_until > 0 ? 6 : 5);
  PackString(p, key);
  p.pack(size);
  p.pack(checksum);
  p.pack(hard_pin);
  p.pack_array(static_cast<uint32_t>(replica_count));
  for (size_t i = 0; i < replica_count; ++i) {
    p.pack_array(3);
    p.pack(replicas[i].segment_id);
    p.pack(replicas[i].offset);
    p.pack(static_cast<uint64_t>(replicas[i].kind));
  }
  if (soft_pin_until > 0 || !group.empty()) p.pack(soft_pin_until);
  if (!group.empty()) PackString(p, group);
}

void PackSegment(Packer& p, const SegmentRecord& s) {
  p.pack_array(9);
  p.pack(s.segment_id);
  PackString(p, s.name);
  p.pack(s.base);
  p.pack(s.size);
  p.pack(s.daemon_id);
  p.pack(s.incarnation);
  p.pack_array(static_cast<uint32_t>(s.endpoints.size()));
  for (const EndpointRecord& e : s.endpoints) {
    p.pack_array(3);
    PackString(p, e.protocol);
    PackString(p, e.address);
    p.pack_bin(static_cast<uint32_t>(e.descriptor.size()));
    p.pack_bin_body(e.descriptor.data(), static_cast<uint32_t>(e.descriptor.size()));
  }
  p.pack(s.lent_by_client);
  p.pack(static_cast<uint64_t>(s.kind));
}

// Reading reuses the Unix-socket protocol's strict array reader: the same job (exact
// msgpack types, exact field counts) for another format.
using uds::ArgReader;

bool ReadObject(ArgReader a, ObjectRecord* out) {
  if (a.size() < 5 || a.size() > 7) return false;
  out->key = a.Str();
  out->size = a.U64();
  out->checksum = a.I64();
  out->hard_pin = a.Bool();
  ArgReader list = a.Array();
  if (!a.ok() || out->key.empty()) return false;
  out->replicas.resize(list.size());
  for (ReplicaRecord& r : out->replicas) {
    ArgReader fields = list.Array();
    if (fields.size() != 3) return false;
    r.segment_id = fields.I64();
    r.offset = fields.U64();
    uint64_t kind = fields.U64();
    if (!fields.ok() || kind > 255) return false;
    r.kind = static_cast<uint8_t>(kind);
  }
  out->soft_pin_until_unix_ms = a.size() >= 6 ? a.I64() : 0;
  out->group = a.size() == 7 ? a.Str() : std::string();
  return list.ok() && a.ok() && out->soft_pin_until_unix_ms >= 0 &&
         (a.size() < 7 || !out->group.empty());
}

bool ReadSegment(ArgReader a, SegmentRecord* out) {
  if (a.size() < 7 || a.size() > 9) return false;
  out->segment_id = a.I64();
  out->name = a.Str();
  out->base = a.I64();
  out->size = a.I64();
  out->daemon_id = a.I64();
  out->incarnation = a.I64();
  ArgReader list = a.Array();
  if (!a.ok()) return false;
  out->endpoints.resize(list.size());
  for (EndpointRecord& e : out->endpoints) {
    ArgReader fields = list.Array();
    if (fields.size() != 3) return false;
    e.protocol = fields.Str();
    e.address = fields.Str();
    e.descriptor = fields.Str();
    if (!fields.ok()) return false;
  }
  out->lent_by_client = a.size() >= 8 && a.Bool();
  uint64_t kind = a.size() == 9 ? a.U64() : 0;
  if (kind > 1) return false;  // a kind this version does not know
  out->kind = static_cast<uint8_t>(kind);
  return list.ok() && a.ok();
}

// Parses bytes as exactly one msgpack value (trailing bytes are malformed). msgpack
// allocates for the count an array or map declares before it reads the items (a 5-byte
// record asked for 5 GB), so no count may exceed the bytes that could hold the items, nor
// nesting go deeper than a record does (4: a log record's object's replicas).
bool Unpack(std::string_view bytes, msgpack::object_handle* out) {
  constexpr size_t kMaxNesting = 8;
  const size_t n = bytes.size();
  const msgpack::unpack_limit limit(n, n / 2, n, n, n, kMaxNesting);
  try {
    size_t offset = 0;
    *out = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr, nullptr, limit);
    return offset == bytes.size();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

void AppendObject(std::string* out, std::string_view key, uint64_t size, int64_t checksum,
                  bool hard_pin, const ReplicaRecord* replicas, size_t replica_count,
                  int64_t soft_pin_until_unix_ms, std::string_view group) {
  StringSink sink{out};
  Packer p(sink);
  PackObject(p, key, size, checksum, hard_pin, replicas, replica_count, soft_pin_until_unix_ms,
             group);
}

void AppendSegment(std::string* out, const SegmentRecord& segment) {
  StringSink sink{out};
  Packer p(sink);
  PackSegment(p, segment);
}

void AppendArrayHeader(std::string* out, uint32_t count) {
  StringSink sink{out};
  Packer p(sink);
  p.pack_array(count);
}

void AppendPublishRecord(std::string* out, std::string_view key, uint64_t size, int64_t checksum,
                         bool hard_pin, const ReplicaRecord* replicas, size_t replica_count,
                         int64_t soft_pin_until_unix_ms, std::string_view group) {
  StringSink sink{out};
  Packer p(sink);
  p.pack_array(2);
  p.pack(static_cast<uint64_t>(LogOp::kPublish));
  PackObject(p, key, size, checksum, hard_pin, replicas, replica_count, soft_pin_until_unix_ms,
             group);
}

void AppendRemoveRecord(std::string* out, std::string_view key) {
  StringSink sink{out};
  Packer p(sink);
  p.pack_array(2);
  p.pack(static_cast<uint64_t>(LogOp::kRemove));
  PackString(p, key);
}

void AppendMountRecord(std::string* out, const SegmentRecord& segment) {
  StringSink sink{out};
  Packer p(sink);
  p.pack_array(2);
  p.pack(static_cast<uint64_t>(LogOp::kMount));
  PackSegment(p, segment);
}

void AppendUnmountRecord(std::string* out, int64_t segment_id) {
  StringSink sink{out};
  Packer p(sink);
  p.pack_array(2);
  p.pack(static_cast<uint64_t>(LogOp::kUnmount));
  p.pack(segment_id);
}

bool DecodeLogRecord(std::string_view bytes, LogRecord* out) {
  msgpack::object_handle handle;
  if (!Unpack(bytes, &handle)) return false;
  ArgReader top(handle.get());
  if (top.size() != 2) return false;
  uint64_t op = top.U64();
  if (!top.ok()) return false;
  out->op = static_cast<LogOp>(op);
  switch (out->op) {
    case LogOp::kPublish:
      return ReadObject(top.Array(), &out->object);
    case LogOp::kRemove:
      out->key = top.Str();
      return top.ok() && !out->key.empty();
    case LogOp::kMount:
      return ReadSegment(top.Array(), &out->segment);
    case LogOp::kUnmount:
      out->segment_id = top.I64();
      return top.ok();
  }
  return false;  // an op this version does not know
}

bool DecodeSegments(std::string_view bytes, std::vector<SegmentRecord>* out) {
  msgpack::object_handle handle;
  if (!Unpack(bytes, &handle)) return false;
  ArgReader list(handle.get());
  if (!list.ok()) return false;
  out->resize(list.size());
  for (SegmentRecord& s : *out) {
    if (!ReadSegment(list.Array(), &s)) return false;
  }
  return list.ok();
}

bool DecodeObjects(std::string_view bytes, const std::function<void(ObjectRecord&&)>& visit) {
  msgpack::object_handle handle;
  if (!Unpack(bytes, &handle)) return false;
  ArgReader list(handle.get());
  if (!list.ok()) return false;
  for (size_t i = list.size(); i > 0; --i) {
    ObjectRecord object;
    if (!ReadObject(list.Array(), &object)) return false;
    visit(std::move(object));
  }
  return list.ok();
}

}  // namespace mooncake
