#include "common/uds/uds_protocol.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace mooncake {
namespace uds {

void FrameBuffer::write(const char* data, size_t length) {
  if (capacity_ - size_ < length) {
    size_t capacity = std::max(capacity_ * 2, size_ + length);
    std::unique_ptr<char[]> grown(new char[capacity]);
    std::memcpy(grown.get(), this->data(), size_);
    heap_ = std::move(grown);
    capacity_ = capacity;
  }
  std::memcpy(this->data() + size_, data, length);
  size_ += length;
}

FrameBuilder::FrameBuilder(uint64_t id, int64_t head, uint32_t arg_count) : packer_(buffer_) {
  static const char kPlaceholder[kFrameHeaderBytes] = {0, 0, 0, 0};
  buffer_.write(kPlaceholder, kFrameHeaderBytes);
  packer_.pack_array(3);
  packer_.pack(id);
  packer_.pack(head);
  packer_.pack_array(arg_count);
}

const char* FrameBuilder::data() {
  uint32_t payload = static_cast<uint32_t>(buffer_.size() - kFrameHeaderBytes);
  unsigned char* p = reinterpret_cast<unsigned char*>(buffer_.data());
  for (uint32_t i = 0; i < kFrameHeaderBytes; ++i) p[i] = (payload >> (8 * i)) & 0xff;
  return buffer_.data();
}

ArgReader::ArgReader(const msgpack::object& array) {
  if (array.type != msgpack::type::ARRAY) return;
  items_ = array.via.array.ptr;
  size_ = array.via.array.size;
  ok_ = true;
}

const msgpack::object* ArgReader::Next() {
  if (!ok_ || next_ >= size_) {
    ok_ = false;
    return nullptr;
  }
  return &items_[next_++];
}

std::string ArgReader::Str() {
  const msgpack::object* o = Next();
  if (o == nullptr) return {};
  if (o->type == msgpack::type::STR) return std::string(o->via.str.ptr, o->via.str.size);
  if (o->type == msgpack::type::BIN) return std::string(o->via.bin.ptr, o->via.bin.size);
  ok_ = false;
  return {};
}

uint64_t ArgReader::U64() {
  const msgpack::object* o = Next();
  if (o == nullptr) return 0;
  if (o->type == msgpack::type::POSITIVE_INTEGER) return o->via.u64;
  ok_ = false;
  return 0;
}

int64_t ArgReader::I64() {
  const msgpack::object* o = Next();
  if (o == nullptr) return 0;
  if (o->type == msgpack::type::NEGATIVE_INTEGER) return o->via.i64;
  if (o->type == msgpack::type::POSITIVE_INTEGER && o->via.u64 <= INT64_MAX) {
    return static_cast<int64_t>(o->via.u64);
  }
  ok_ = false;
  return 0;
}

bool ArgReader::Bool() {
  const msgpack::object* o = Next();
  if (o == nullptr) return false;
  if (o->type == msgpack::type::BOOLEAN) return o->via.boolean;
  ok_ = false;
  return false;
}

bool ArgReader::Flag() {
  const msgpack::object* o = Next();
  if (o == nullptr) return false;
  if (o->type == msgpack::type::BOOLEAN) return o->via.boolean;
  if (o->type == msgpack::type::POSITIVE_INTEGER && o->via.u64 <= 1) return o->via.u64 == 1;
  ok_ = false;
  return false;
}

ArgReader ArgReader::Array() {
  const msgpack::object* o = Next();
  ArgReader inner = o ? ArgReader(*o) : ArgReader();
  if (!inner.ok()) ok_ = false;
  return inner;
}

namespace {

// The first chunk of a message's zone: msgpack's default mallocs 8 KiB for every message,
// while most are a few dozen bytes; a larger one makes the zone grow as needed.
constexpr size_t kZoneChunkBytes = 512;
// Payloads up to this size are parsed at once: whatever they declare, their objects cost
// at most 24 x (their size + kMaxDepth x their size) bytes. Larger ones are counted first.
constexpr size_t kCountAboveBytes = 64u << 10;

msgpack::unpack_limit Limits(size_t length) {
  // An array cannot have more items than the payload has bytes: a 10-byte frame cannot
  // declare 65536 of them (the parser allocates what an array declares before it reads).
  size_t array = std::min(kMaxBatch, length);
  return msgpack::unpack_limit(array, /*map=*/0, kMaxStringBytes, kMaxStringBytes, /*ext=*/0,
                               kMaxDepth);
}

// Counts the objects a payload holds with msgpack's event parser, which builds nothing,
// stopping as soon as a limit is passed.
class ObjectCounter : public msgpack::null_visitor {
 public:
  bool start_array(uint32_t items) {
    objects_ += items;
    return ++depth_ <= kMaxDepth && objects_ <= kMaxFrameObjects;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool start_map(uint32_t) { return false; }  // no op uses one
  size_t objects() const { return objects_; }

 private:
  size_t objects_ = 1;
  size_t depth_ = 0;
};

void Say(std::string* why, const char* text) {
  if (why != nullptr) *why = text;
}

// The shape check shared by both parsers: [uint, int, array].
bool ReadTop(Message* out, std::string* why) {
  ArgReader top(out->handle.get());
  if (top.size() != 3) {
    Say(why, "not an array of 3 items");
    return false;
  }
  out->id = top.U64();
  out->head = top.I64();
  out->args = top.Array();
  if (!top.ok()) Say(why, "not [id, op or code, args]");
  return top.ok();
}

bool Parse(const char* payload, size_t length, bool in_place, Message* out, std::string* why) {
  if (length > kCountAboveBytes) {
    ObjectCounter counter;
    size_t offset = 0;
    bool parsed = msgpack::v2::parse(payload, length, offset, counter);
    if (counter.objects() > kMaxFrameObjects) {
      Say(why, "more msgpack objects than a frame may hold");
      return false;
    }
    if (!parsed) {
      Say(why, "not msgpack, nested too deep, or a map");
      return false;
    }
  }
  auto reference = [](msgpack::type::object_type, size_t, void* in_place) -> bool {
    return in_place != nullptr;
  };
  try {
    std::unique_ptr<msgpack::zone> zone(new msgpack::zone(kZoneChunkBytes));
    size_t offset = 0;
    bool referenced = false;
    msgpack::object object = msgpack::v2::unpack(*zone, payload, length, offset, referenced,
                                                 reference, in_place ? out : nullptr,
                                                 Limits(length));
    if (offset != length) {
      Say(why, offset == 0 ? "not one complete msgpack value" : "bytes after the message");
      return false;
    }
    out->handle = msgpack::object_handle(object, std::move(zone));
  } catch (const msgpack::size_overflow&) {
    Say(why, "an array, string or nesting over the protocol's limits, or a map or ext");
    return false;
  } catch (const std::exception&) {
    Say(why, "not one msgpack value");
    return false;
  }
  return ReadTop(out, why);
}

}  // namespace

bool ParseMessage(const char* payload, size_t length, Message* out, std::string* why) {
  return Parse(payload, length, false, out, why);
}

bool ParseMessageInPlace(const char* payload, size_t length, Message* out, std::string* why) {
  return Parse(payload, length, true, out, why);
}

Message Detach(const Message& m) {
  Message copy;
  copy.bytes = msgpack::aligned_zone_size(m.handle.get());
  copy.handle = msgpack::clone(m.handle.get());
  ReadTop(&copy, nullptr);  // the shape was checked when m was parsed
  return copy;
}

bool SendFrame(int sock, const char* frame, size_t length, int fd_to_pass) {
  size_t sent = 0;
  while (sent < length) {
    struct iovec iov;
    iov.iov_base = const_cast<char*>(frame + sent);
    iov.iov_len = length - sent;
    struct msghdr msg;
    std::memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (fd_to_pass >= 0 && sent == 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      struct cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cmsg), &fd_to_pass, sizeof(int));
    }
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;  // EAGAIN here means the send timeout expired
    }
    sent += static_cast<size_t>(n);
  }
  return true;
}

namespace {

constexpr size_t kReadChunk = 64 * 1024;

uint32_t LengthPrefix(const char* at) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(at);
  uint32_t length = 0;
  for (uint32_t i = 0; i < kFrameHeaderBytes; ++i) length |= static_cast<uint32_t>(p[i]) << (8 * i);
  return length;
}

}  // namespace

FrameReader::Status FrameReader::ReadFrom(int sock) {
  if (start_ > 0) {  // drop consumed frames; what stays is at most one partial frame
    std::memmove(buffer_.get(), buffer_.get() + start_, end_ - start_);
    end_ -= start_;
    start_ = 0;
  }
  // Room for many small frames per read, or for the whole of the frame being read.
  size_t wanted = kReadChunk;
  if (end_ >= kFrameHeaderBytes) {
    uint32_t length = LengthPrefix(buffer_.get());
    if (length > max_frame_bytes_) return Status::kOk;  // Next reports it
    wanted = std::max(wanted, kFrameHeaderBytes + static_cast<size_t>(length));
  }
  if (capacity_ < wanted) {
    std::unique_ptr<char[]> grown(new char[wanted]);
    if (end_ > 0) std::memcpy(grown.get(), buffer_.get(), end_);
    buffer_ = std::move(grown);
    capacity_ = wanted;
  }
  if (capacity_ == end_) return Status::kOk;  // a whole frame is buffered already
  struct iovec iov;
  iov.iov_base = buffer_.get() + end_;
  iov.iov_len = capacity_ - end_;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  struct msghdr msg;
  std::memset(&msg, 0, sizeof(msg));
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    end_ += static_cast<size_t>(n);
    received_ += static_cast<uint64_t>(n);
  }
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); n >= 0 && c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds_.push_back(fd);
      fd_ends_.push_back(received_);
    }
  }
  if (n > 0) return Status::kOk;
  if (n == 0) return Status::kClosed;
  return (errno == EAGAIN || errno == EWOULDBLOCK) ? Status::kWouldBlock : Status::kError;
}

bool FrameReader::Next(const char** payload, size_t* length, bool* oversized) {
  *oversized = false;
  size_t available = end_ - start_;
  if (available < kFrameHeaderBytes) return false;
  uint32_t announced = LengthPrefix(buffer_.get() + start_);
  if (announced > max_frame_bytes_) {
    *oversized = true;
    return false;
  }
  if (available < kFrameHeaderBytes + announced) return false;
  *payload = buffer_.get() + start_ + kFrameHeaderBytes;
  *length = announced;
  start_ += kFrameHeaderBytes + announced;
  consumed_ += kFrameHeaderBytes + announced;
  return true;
}

void FrameReader::Trim() {
  if (start_ != end_ || capacity_ <= kReadChunk) return;
  buffer_.reset();
  capacity_ = start_ = end_ = 0;
}

std::vector<int> FrameReader::TakeFds() {
  std::vector<int> out;
  out.swap(fds_);
  fd_ends_.clear();
  return out;
}

std::vector<FrameReader::ArrivedFd> FrameReader::TakeArrivedFds() {
  std::vector<ArrivedFd> out;
  for (size_t i = 0; i < fds_.size(); ++i) out.push_back({fds_[i], fd_ends_[i]});
  fds_.clear();
  fd_ends_.clear();
  return out;
}

FrameReader::~FrameReader() {
  for (int fd : fds_) close(fd);
}

}  // namespace uds
}  // namespace mooncake
