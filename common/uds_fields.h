// The one codec of the Unix-socket protocol's arguments and results (docs/protocol.md):
// every request and reply struct of common/uds/uds_ops.h lists its fields once, in wire order,
// and this header packs, parses and documents any such struct from that list.
//
// A struct takes part by declaring
//
//   template <class Self, class Visitor>
//   static void Fields(Self& self, Visitor& v) { v("key", self.key); v("size", self.size); }
//
// (static, so that the same list serves a const struct being packed and a mutable one
// being parsed). The names are what docs/protocol.md shows. On the wire a struct is a
// msgpack array of its fields; a nested struct is an array inside it; a std::vector is an
// array of its elements. One field may be declared with v.Spread(name, vector) instead:
// its elements then stand in the enclosing array itself (the per-entry results of the
// batch ops: `[code, code, ...]`); it must be the last field.
//
// Input policy (Parse): the shape must match exactly — the right msgpack type for every
// field, no field missing, none extra, no list over kMaxBatch entries — or the whole
// message is malformed (false). Values are not judged here: key lengths, sizes and pool
// ranges are the handlers' business, since a bad value costs a -600 answer, not the
// connection.
//
// Field types: std::string (msgpack str; bin accepted), uint64_t (positive int), int64_t
// (any int), bool (msgpack bool), Flag (bool, or the ints 0 and 1: C callers pass int
// flags), std::vector<T>, and structs declaring Fields.
#ifndef MOONCAKE_COMMON_UDS_FIELDS_H_
#define MOONCAKE_COMMON_UDS_FIELDS_H_

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/uds/uds_protocol.h"

namespace mooncake {
namespace uds {

// A boolean that also accepts the integers 0 and 1 on the wire.
struct Flag {
  bool value = false;
};

using Packer = msgpack::packer<FrameBuffer>;

namespace fields_detail {

// ---- counting: how many items the top-level array holds ----
struct Counter {
  uint32_t count = 0;
  template <class T>
  void operator()(const char*, const T&) { ++count; }
  template <class T>
  void Spread(const char*, const std::vector<T>& v) { count += static_cast<uint32_t>(v.size()); }
};

// True for a struct that lists its fields (the nested structs of a message).
template <class T, class = void>
struct HasFields : std::false_type {};
template <class T>
struct HasFields<T, std::void_t<decltype(&T::template Fields<T, Counter>)>> : std::true_type {};

// ---- packing ----
inline void Write(Packer& p, const std::string& v) { p.pack(v); }
inline void Write(Packer& p, uint64_t v) { p.pack(v); }
inline void Write(Packer& p, int64_t v) { p.pack(v); }
inline void Write(Packer& p, bool v) { p.pack(v); }
inline void Write(Packer& p, Flag v) { p.pack(v.value); }
template <class T>
void Write(Packer& p, const std::vector<T>& v);
template <class T, class = std::enable_if_t<HasFields<T>::value>>
void Write(Packer& p, const T& s);

struct PackVisitor {
  Packer& p;
  template <class T>
  void operator()(const char*, const T& field) { Write(p, field); }
  template <class T>
  void Spread(const char*, const std::vector<T>& v) {
    for (const T& e : v) Write(p, e);
  }
};

template <class T>
void Write(Packer& p, const std::vector<T>& v) {
  p.pack_array(static_cast<uint32_t>(v.size()));
  for (const T& e : v) Write(p, e);
}

template <class T, class>
void Write(Packer& p, const T& s) {
  Counter c;
  T::Fields(s, c);
  p.pack_array(c.count);
  PackVisitor v{p};
  T::Fields(s, v);
}

// ---- parsing ----
inline void Read(ArgReader& r, std::string* out) { *out = r.Str(); }
inline void Read(ArgReader& r, uint64_t* out) { *out = r.U64(); }
inline void Read(ArgReader& r, int64_t* out) { *out = r.I64(); }
inline void Read(ArgReader& r, bool* out) { *out = r.Bool(); }
inline void Read(ArgReader& r, Flag* out) { out->value = r.Flag(); }
template <class T>
void Read(ArgReader& r, std::vector<T>* out);
template <class T, class = std::enable_if_t<HasFields<T>::value>>
void Read(ArgReader& r, T* s);

struct ParseVisitor {
  ArgReader& r;
  template <class T>
  void operator()(const char*, T& field) { Read(r, &field); }
  template <class T>
  void Spread(const char*, std::vector<T>& v) {
    if (r.remaining() > kMaxBatch) return r.Fail();
    v.resize(r.remaining());
    for (T& e : v) Read(r, &e);
  }
};

template <class T>
void Read(ArgReader& r, std::vector<T>* out) {
  ArgReader list = r.Array();
  if (!list.ok() || list.size() > kMaxBatch) return r.Fail();
  out->resize(list.size());
  for (T& e : *out) Read(list, &e);
  if (!list.ok()) r.Fail();
}

// The fields of s from the items of r, all of them and nothing more.
template <class T>
bool ReadFields(ArgReader& r, T* s) {
  ParseVisitor v{r};
  T::Fields(*s, v);
  return r.ok() && r.remaining() == 0;
}

template <class T, class>
void Read(ArgReader& r, T* s) {
  ArgReader inner = r.Array();
  if (!inner.ok() || !ReadFields(inner, s)) r.Fail();
}

// ---- documenting: "[key, pool_offset, size]" ----
template <class T>
struct Doc {
  static std::string Of(const char* name) { return name; }
};

struct DocVisitor {
  std::string text;
  template <class T>
  void operator()(const char* name, const T&) { Add(Doc<T>::Of(name)); }
  template <class T>
  void Spread(const char* name, const std::vector<T>&) { Add(Doc<T>::Of(name) + ", ..."); }
  void Add(const std::string& item) { text += (text.empty() ? "" : ", ") + item; }
};

template <class T>
std::string DocOfFields() {
  DocVisitor v;
  const T sample{};
  T::Fields(sample, v);
  return "[" + v.text + "]";
}


// A list of structs shows one entry's layout: "[[key, pool_offset, size], ...]".
template <class T>
struct Doc<std::vector<T>> {
  static std::string Of(const char* name) {
    if constexpr (HasFields<T>::value) return "[" + DocOfFields<T>() + ", ...]";
    return "[" + Doc<T>::Of(name) + ", ...]";
  }
};

}  // namespace fields_detail

// The number of items s packs into its top-level array (FrameBuilder wants it first).
template <class T>
uint32_t FieldCount(const T& s) {
  fields_detail::Counter c;
  T::Fields(s, c);
  return c.count;
}

// Packs the fields of s into p, one array item each (the frame's args or results).
template <class T>
void PackFields(Packer& p, const T& s) {
  fields_detail::PackVisitor v{p};
  T::Fields(s, v);
}

// Parses the items of r (a message's args or results) into *s; false when the shape is
// wrong (see the input policy above). r is consumed.
template <class T>
bool ParseFields(ArgReader r, T* s) {
  return fields_detail::ReadFields(r, s);
}

// One value of any field type (a nested struct as its array), packed or read on its own:
// for tests that build frames by hand. ReadValue fails r on a wrong shape.
template <class T>
void PackValue(Packer& p, const T& value) {
  fields_detail::Write(p, value);
}
template <class T>
void ReadValue(ArgReader& r, T* value) {
  fields_detail::Read(r, value);
}

// "[key, pool_offset, size]": the layout docs/protocol.md shows for T.
template <class T>
std::string DescribeFields() {
  return fields_detail::DocOfFields<T>();
}

}  // namespace uds
}  // namespace mooncake

#endif  // MOONCAKE_COMMON_UDS_FIELDS_H_
