// The Unix-socket protocol's decoders as mooncaked runs them (daemon/server/uds_server.cc,
// daemon/service/store_service.cc): the input is what a client writes on its connection. It is
// sent through a real socket pair in pieces, uds::FrameReader cuts what arrives into
// frames, uds::ParseMessage reads each as [id, head, args], the first must be HELLO and
// parse as HelloArgs, and every later one must name an op whose Args parse
// (common/uds/uds_ops.h, and POOL_FENCE). Where the daemon would close the connection, the
// input ends.
//
// Invariants:
//  - framing: FrameReader returns exactly the frames a plain reading of the length
//    prefixes gives, in order, however the bytes were split, and reports an oversized
//    prefix exactly when one comes up before the bytes run out;
//  - ParseMessage accepts only [uint, int, array] with nothing after it (docs/protocol.md:
//    trailing bytes are malformed), and a message it accepts, packed again, parses back
//    equal; ParseMessageInPlace (the daemon's) accepts the same frames, reading the same
//    id, head and arguments, and a refusal says why;
//  - an op's Args (and, read as results, its Reply) that parse hold no list over
//    kMaxBatch, and packed again by RequestFrame parse back to the same bytes.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "common/uds/uds_ops.h"
#include "fuzz/fuzz_util.h"

namespace {

using namespace mooncake;
using namespace mooncake::uds;

// ---- limits a parsed struct must keep ----

template <class T>
void CheckLimits(const T&) {}
template <class T>
void CheckLimits(const std::vector<T>& v);

struct LimitVisitor {
  template <class T>
  void operator()(const char*, const T& field) {
    CheckLimits(field);
  }
  template <class T>
  void Spread(const char* name, const std::vector<T>& v) {
    FUZZ_CHECK(v.size() <= kMaxBatch, "%s spreads %zu entries", name, v.size());
    for (const T& e : v) CheckLimits(e);
  }
};

template <class T, class = std::enable_if_t<fields_detail::HasFields<T>::value>>
void CheckStruct(const T& s) {
  LimitVisitor v;
  T::Fields(s, v);
}

template <class T>
void CheckLimits(const std::vector<T>& v) {
  FUZZ_CHECK(v.size() <= kMaxBatch, "a list of %zu entries", v.size());
  for (const T& e : v) {
    if constexpr (fields_detail::HasFields<T>::value) {
      CheckStruct(e);
    } else {
      CheckLimits(e);
    }
  }
}

// ---- round trips ----

std::string Bytes(FrameBuilder& frame) { return std::string(frame.data(), frame.size()); }

Message Reparse(FrameBuilder& frame) {
  Message again;
  FUZZ_CHECK(ParseMessage(frame.data() + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes,
                          &again),
             "a frame FrameBuilder packed does not parse");
  return again;
}

// T parsed from args: within limits, and packing it is a fixed point of parse + pack.
template <class T>
void ParseTyped(const Message& m, const char* what) {
  T parsed;
  if (!ParseFields(m.args, &parsed)) return;
  CheckStruct(parsed);
  RequestFrame packed(m.id, static_cast<Op>(m.head), parsed);
  Message again = Reparse(packed);
  T reparsed;
  FUZZ_CHECK(ParseFields(again.args, &reparsed), "%s packed does not parse back", what);
  RequestFrame repacked(m.id, static_cast<Op>(m.head), reparsed);
  FUZZ_CHECK(Bytes(packed) == Bytes(repacked), "%s changes when packed and parsed again", what);
}

// What Run<op> does before its handler (daemon/service/store_service.cc): parse op's Args; false
// when they do not (the daemon closes the connection). The reply struct is parsed from
// the same items too, as libmc parses results: one more strict reader of the same shapes.
bool ParseOp(const Message& m) {
  switch (m.head) {
#define MC_FUZZ_OP_(name, wire, code, Args, Reply, note) \
  case code: {                                           \
    ParseTyped<Reply>(m, wire " results");               \
    Args parsed;                                         \
    if (!ParseFields(m.args, &parsed)) return false;     \
    ParseTyped<Args>(m, wire " args");                   \
    return true;                                         \
  }
    MC_UDS_OPS(MC_FUZZ_OP_)
#undef MC_FUZZ_OP_
    case static_cast<int64_t>(Op::kPoolFence): {  // UdsServer::OnPoolFence
      NoArgs none;
      return ParseFields(m.args, &none);
    }
    default:
      return false;
  }
}

// msgpack's packing recurses; a frame nested deeper than this is checked
// only by the daemon's path (which does not recurse), not by the round trip.
bool ShallowerThan(const msgpack::object& o, int depth) {
  if (depth == 0) return false;
  if (o.type == msgpack::type::ARRAY) {
    for (uint32_t i = 0; i < o.via.array.size; ++i) {
      if (!ShallowerThan(o.via.array.ptr[i], depth - 1)) return false;
    }
  } else if (o.type == msgpack::type::MAP) {
    for (uint32_t i = 0; i < o.via.map.size; ++i) {
      if (!ShallowerThan(o.via.map.ptr[i].key, depth - 1) ||
          !ShallowerThan(o.via.map.ptr[i].val, depth - 1)) {
        return false;
      }
    }
  }
  return true;
}

// m's payload as FrameBuilder lays it out, packed with msgpack's smallest encodings: a
// fixed point of parse + pack. (Into a string: FrameBuffer, which never sees an empty
// string without a pointer in the daemon, would memcpy from the null pointer of an empty
// msgpack string here.)
std::string PackAgain(const Message& m) {
  struct Sink {
    std::string bytes;
    void write(const char* data, size_t length) { bytes.append(data, length); }
  } sink;
  msgpack::packer<Sink> p(sink);
  const msgpack::object& args = m.handle.get().via.array.ptr[2];
  p.pack_array(3);
  p.pack(m.id);
  p.pack(m.head);
  p.pack(args);
  return sink.bytes;
}

// One frame's payload, as UdsServer::OnFrame takes it; false when the daemon would close.
bool OnFrame(const std::string& payload, bool* hello_done) {
  // The daemon parses in place (UdsServer::OnFrame); the copying parse must agree.
  Message m, in_place;
  std::string why, why_in_place;
  const bool parsed = ParseMessage(payload.data(), payload.size(), &m, &why);
  const bool parsed_in_place =
      ParseMessageInPlace(payload.data(), payload.size(), &in_place, &why_in_place);
  FUZZ_CHECK(parsed == parsed_in_place, "ParseMessage %d, ParseMessageInPlace %d", parsed,
             parsed_in_place);
  if (!parsed) {
    FUZZ_CHECK(!why.empty() && !why_in_place.empty(), "a frame refused without a reason");
    return false;
  }
  FUZZ_CHECK(in_place.id == m.id && in_place.head == m.head &&
                 in_place.args.size() == m.args.size(),
             "the two parses read different messages");
  // Where the first value of the payload ends (counts bounded as ParseMessage bounds them:
  // msgpack allocates for them up front).
  size_t consumed = 0;
  bool one_value = false;
  try {
    const msgpack::unpack_limit limit(payload.size(), payload.size() / 2);
    msgpack::object_handle first =
        msgpack::unpack(payload.data(), payload.size(), consumed, nullptr, nullptr, limit);
    one_value = consumed == payload.size();
  } catch (const std::exception&) {
  }
  FUZZ_CHECK(one_value, "ParseMessage accepted a %zu-byte frame holding %zu bytes of message",
             payload.size(), consumed);
  if (ShallowerThan(m.handle.get(), 64)) {
    std::string packed = PackAgain(m);
    Message back;
    FUZZ_CHECK(ParseMessage(packed.data(), packed.size(), &back),
               "a message packed again does not parse");
    FUZZ_CHECK(back.id == m.id && back.head == m.head, "id or head changed when packed again");
    FUZZ_CHECK(PackAgain(back) == packed, "args changed when packed and parsed again");
  }
  if (!*hello_done) {
    if (m.head != static_cast<int64_t>(Op::kHello)) return false;
    HelloArgs hello;
    if (!ParseFields(m.args, &hello)) return false;
    *hello_done = true;
    return true;
  }
  return IsRequestOp(m.head) && ParseOp(m);
}

// The frames a plain reading of the length prefixes finds in bytes; *oversized when one
// says more than kMaxFrameBytes before the bytes run out.
std::vector<std::string> ReferenceFrames(const uint8_t* data, size_t size, bool* oversized) {
  std::vector<std::string> frames;
  *oversized = false;
  size_t pos = 0;
  while (size - pos >= kFrameHeaderBytes) {
    uint32_t length = 0;
    for (uint32_t i = 0; i < kFrameHeaderBytes; ++i) length |= uint32_t{data[pos + i]} << (8 * i);
    if (length > kMaxFrameBytes) {
      *oversized = true;
      break;
    }
    if (size - pos - kFrameHeaderBytes < length) break;
    frames.emplace_back(reinterpret_cast<const char*>(data) + pos + kFrameHeaderBytes, length);
    pos += kFrameHeaderBytes + length;
  }
  return frames;
}

// Piece sizes the input is written in: from one byte to more than a read takes, chosen
// by the input's fingerprint so that a crash reproduces.
size_t NextPiece(uint32_t* state) {
  *state ^= *state << 13;
  *state ^= *state >> 17;
  *state ^= *state << 5;
  static const size_t kSizes[] = {1, 3, 4, 5, 17, 512, 4096, 70000};
  return kSizes[*state % (sizeof(kSizes) / sizeof(kSizes[0]))];
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mooncake::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bool expect_oversized = false;
  const std::vector<std::string> expected = ReferenceFrames(data, size, &expect_oversized);

  int sv[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0,
             "socketpair: %s", std::strerror(errno));
  FrameReader reader;
  std::vector<std::string> frames;
  bool oversized = false;
  bool open = true;  // the daemon has not closed the connection
  bool hello_done = false;
  uint32_t state = mooncake::fuzz::Fingerprint(data, size) | 1;
  size_t sent = 0;
  while (open && !oversized) {
    if (sent < size) {
      size_t piece = std::min(NextPiece(&state), size - sent);
      ssize_t n = send(sv[0], data + sent, piece, MSG_NOSIGNAL);
      FUZZ_CHECK(n > 0 || errno == EAGAIN, "send: %s", std::strerror(errno));
      if (n > 0) sent += static_cast<size_t>(n);
    }
    FrameReader::Status status = reader.ReadFrom(sv[1]);
    FUZZ_CHECK(status == FrameReader::Status::kOk || status == FrameReader::Status::kWouldBlock,
               "ReadFrom of a live socket pair: status %d", static_cast<int>(status));
    const char* at = nullptr;
    size_t length = 0;
    while (open && reader.Next(&at, &length, &oversized)) {
      std::string payload(at, length);
      FUZZ_CHECK(payload.size() <= kMaxFrameBytes, "a %zu-byte frame", payload.size());
      FUZZ_CHECK(frames.size() < expected.size() && payload == expected[frames.size()],
                 "frame %zu differs from the length prefixes' reading", frames.size());
      frames.push_back(payload);
      open = OnFrame(payload, &hello_done);
    }
    // Everything sent has been read: what is left is less than a frame.
    if (sent == size && status == FrameReader::Status::kWouldBlock) break;
  }
  close(sv[0]);
  close(sv[1]);
  if (open) {  // else the daemon stopped reading at a frame it refused
    FUZZ_CHECK(frames.size() == expected.size(), "%zu frames read, %zu in the bytes",
               frames.size(), expected.size());
    FUZZ_CHECK(oversized == expect_oversized, "oversized %d, expected %d", oversized,
               expect_oversized);
  }
  return 0;
}
