// The framing of the Unix-socket protocol between libmooncake_store and mooncaked
// (docs/protocol.md): length-prefixed msgpack frames, a request id on every message, and
// one file descriptor (the client's pool) passed with SCM_RIGHTS at the handshake. The
// operations themselves, their arguments and replies, are in common/uds_ops.h.
#ifndef MOONCAKE_COMMON_UDS_PROTOCOL_H_
#define MOONCAKE_COMMON_UDS_PROTOCOL_H_

#include <msgpack.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mooncake {
namespace uds {

constexpr uint32_t kMaxFrameBytes = 64u << 20;
constexpr uint32_t kFrameHeaderBytes = 4;
constexpr size_t kMaxBatch = 65536;


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
// uds::PackFields, common/uds_fields.h).
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
// everything, then check ok() once. common/uds_fields.h reads whole structs with it.
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
};

// Parses a frame payload (without the length prefix); false when it is not
// [uint, int, array].
bool ParseMessage(const char* payload, size_t length, Message* out);

// Writes a whole frame, retrying partial writes and EINTR; attaches fd_to_pass (if >= 0)
// with SCM_RIGHTS. false when the peer is gone or the send times out.
bool SendFrame(int sock, const char* frame, size_t length, int fd_to_pass = -1);

// Accumulates bytes read from a stream socket and cuts them into frame payloads.
class FrameReader {
 public:
  enum class Status { kOk, kWouldBlock, kClosed, kError };

  // One recvmsg() into the buffer; descriptors that arrive are kept for TakeFds().
  Status ReadFrom(int sock);
  // Moves the next complete payload into *payload. false when none is complete yet.
  // Sets *oversized (and returns false) when a length prefix exceeds kMaxFrameBytes.
  bool Next(std::string* payload, bool* oversized);
  std::vector<int> TakeFds();
  ~FrameReader();

 private:
  // A raw buffer, not a std::string: resizing a string zero-fills it, which cost more
  // than the read itself on every request.
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
  size_t start_ = 0;  // bytes before this are consumed
  size_t end_ = 0;    // bytes before this hold data
  std::vector<int> fds_;
};

}  // namespace uds
}  // namespace mooncake

#endif  // MOONCAKE_COMMON_UDS_PROTOCOL_H_
