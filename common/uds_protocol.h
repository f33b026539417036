// The framing of the Unix-socket protocol between libmooncake_store and mooncaked
// (docs/protocol.md): length-prefixed msgpack frames, a request id on every message, and
// one file descriptor (the client's pool) passed with SCM_RIGHTS at the handshake. The
// operations themselves, their arguments and replies, are in common/uds/uds_ops.h.
#ifndef MOONCAKE_COMMON_UDS_PROTOCOL_H_
#define MOONCAKE_COMMON_UDS_PROTOCOL_H_

#include <msgpack.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mooncake {
namespace uds {

// ---- limits (docs/protocol.md, "Frames") ----
//
// Input is untrusted: these bound what one frame can make its reader allocate, whatever
// its bytes say. libmc's largest frames (batches, cut at about 16 MiB) stay far below
// every one of them.
//
// The payload of one frame, at most. The reader's buffer never grows past one frame.
constexpr uint32_t kMaxFrameBytes = 32u << 20;
// ... and of a connection's first frame (HELLO is a few hundred bytes): a connection that
// has not said who it is cannot make the daemon buffer more.
constexpr uint32_t kMaxHelloFrameBytes = 64u << 10;
constexpr uint32_t kFrameHeaderBytes = 4;
// Entries of one batch (and items of any one array).
constexpr size_t kMaxBatch = 65536;
// Nesting: [id, op, [args: [entries: [entry]]]] is 4 deep; a little room for new ops.
constexpr size_t kMaxDepth = 6;
// One string or bin (keys are 4 KiB at most; a longer but well-formed one is the
// handlers' -600, not a malformed frame).
constexpr size_t kMaxStringBytes = 1u << 20;
// msgpack objects one frame may hold: each costs 24 bytes once parsed, and a frame of
// 1-byte items would otherwise cost 24x its size. A full BATCH_PUT is about 5 x kMaxBatch.
constexpr size_t kMaxFrameObjects = 8 * kMaxBatch;

// The bytes of one frame: a msgpack stream that keeps small frames inline (on the
// builder's stack), because msgpack::sbuffer mallocs 8 KiB for every frame, however small,
// and most frames are a few dozen bytes.
class FrameBuffer {
 public:
  FrameBuffer() = default;
  FrameBuffer(const FrameBuffer&) = delete;
  FrameBuffer& operator=(const FrameBuffer&) = delete;
  void write(const char* data, size_t length);  // the msgpack stream interface
  char* data() { return heap_ ? heap_.get() : inline_; }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kInlineBytes = 512;  // a header and a key of a few hundred bytes
  char inline_[kInlineBytes];
  std::unique_ptr<char[]> heap_;  // once a frame outgrows inline_
  size_t size_ = 0;
  size_t capacity_ = kInlineBytes;
};

// Builds one frame: [id, head, [args...]] behind its length prefix. head is the op of a
// request or the code of a response. Pack exactly arg_count items into args() (with
// uds::PackFields, common/uds/uds_fields.h).
class FrameBuilder {
 public:
  FrameBuilder(uint64_t id, int64_t head, uint32_t arg_count);
  FrameBuilder(const FrameBuilder&) = delete;
  FrameBuilder& operator=(const FrameBuilder&) = delete;
  msgpack::packer<FrameBuffer>& args() { return packer_; }
  // The finished frame, length prefix included.
  const char* data();
  size_t size() const { return buffer_.size(); }

 private:
  FrameBuffer buffer_;
  msgpack::packer<FrameBuffer> packer_;
};

// Reads positional values from a msgpack array. A getter that meets the wrong type, or
// runs past the end, marks the reader failed and returns a zero value; callers read
// everything, then check ok() once. common/uds/uds_fields.h reads whole structs with it.
class ArgReader {
 public:
  ArgReader() = default;
  explicit ArgReader(const msgpack::object& array);
  bool ok() const { return ok_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - next_; }

  std::string Str();
  uint64_t U64();
  int64_t I64();
  bool Bool();
  // A msgpack boolean, or the integer 0 or 1.
  bool Flag();
  ArgReader Array();
  // Marks the reader failed (a shape error found by the caller).
  void Fail() { ok_ = false; }

 private:
  const msgpack::object* Next();
  const msgpack::object* items_ = nullptr;
  size_t size_ = 0;
  size_t next_ = 0;
  bool ok_ = false;
};

// One parsed message. Keeps the msgpack zone alive for its ArgReader.
struct Message {
  uint64_t id = 0;
  int64_t head = 0;  // op (request) or code (response)
  ArgReader args;
  msgpack::object_handle handle;
  // Bytes its zone holds, once Detach made it self-contained: what keeping it costs.
  size_t bytes = 0;
};

// Parses a frame payload (without the length prefix) into a self-contained message (its
// strings copied into its zone). false, with *why when asked, when the payload is not
// exactly one [uint, int, array] within the limits above: a wrong shape, an array over
// kMaxBatch, a map or ext, a string over kMaxStringBytes, nesting over kMaxDepth, more
// than kMaxFrameObjects objects, or bytes after the array. No allocation exceeds a small
// multiple of the payload's size, and a large payload's objects are counted before any
// is built.
bool ParseMessage(const char* payload, size_t length, Message* out, std::string* why = nullptr);
// The same, but the message's strings point into payload, which must outlive it: for a
// message used on the spot (the daemon's event loop answers many requests before the
// next read). Detach it to keep it longer.
bool ParseMessageInPlace(const char* payload, size_t length, Message* out,
                         std::string* why = nullptr);
// A self-contained copy of m (one exactly sized zone, strings copied): for a message
// parsed in place that must outlive its payload.
Message Detach(const Message& m);

// Writes a whole frame, retrying partial writes and EINTR; attaches fd_to_pass (if >= 0)
// with SCM_RIGHTS. false when the peer is gone or the send times out.
bool SendFrame(int sock, const char* frame, size_t length, int fd_to_pass = -1);

// Accumulates bytes read from a stream socket and cuts them into frame payloads. The
// buffer holds at most one frame beyond what a single read brings (it grows to the length
// a frame's prefix announces, never further) and shrinks back once a large frame is
// consumed (Trim), so an idle connection holds 64 KiB at most.
class FrameReader {
 public:
  enum class Status { kOk, kWouldBlock, kClosed, kError };

  // The longest payload accepted (kMaxFrameBytes unless set lower, e.g. before HELLO).
  void set_max_frame_bytes(uint32_t bytes) { max_frame_bytes_ = bytes; }
  // One recvmsg() into the buffer; descriptors that arrive are kept for TakeFds(). Reads
  // nothing (kOk) while the next frame's prefix announces an oversized one.
  Status ReadFrom(int sock);
  // The next complete payload: *payload points into the buffer and stays valid until the
  // next ReadFrom or Trim. false when none is complete yet; sets *oversized (and returns
  // false) when a length prefix exceeds the maximum.
  bool Next(const char** payload, size_t* length, bool* oversized);
  // Frees a buffer grown for a large frame once every byte of it was consumed.
  void Trim();
  size_t capacity() const { return capacity_; }
  std::vector<int> TakeFds();
  // A descriptor and the stream offset just past the read it came with. The kernel hands
  // a descriptor over with the first bytes of the write that sent it and ends the read
  // there, so it belongs to the last frame starting before that offset: the one at
  // [start, start + 4 + length) with start < end <= start + 4 + length.
  struct ArrivedFd {
    int fd;
    uint64_t end;
  };
  std::vector<ArrivedFd> TakeArrivedFds();
  // The stream offset where the frame Next returns next begins (bytes consumed so far).
  uint64_t consumed() const { return consumed_; }
  ~FrameReader();

 private:
  // A raw buffer, not a std::string: resizing a string zero-fills it, which cost more
  // than the read itself on every request.
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
  size_t start_ = 0;  // bytes before this are consumed
  size_t end_ = 0;    // bytes before this hold data
  uint32_t max_frame_bytes_ = kMaxFrameBytes;
  std::vector<int> fds_;
  std::vector<uint64_t> fd_ends_;  // fds_[i] came with the read that ended here
  uint64_t received_ = 0;          // bytes read from the stream
  uint64_t consumed_ = 0;          // bytes of the frames Next handed out
};

}  // namespace uds
}  // namespace mooncake

#endif  // MOONCAKE_COMMON_UDS_PROTOCOL_H_
