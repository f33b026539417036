#include "common/uds_protocol.h"

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

bool ParseMessage(const char* payload, size_t length, Message* out) {
  // msgpack allocates for the count an array or map declares before it reads the items
  // (an 11-byte frame asked for 89 GB), so no count may exceed the bytes that could hold
  // the items, nor nesting go deeper than a message does (4: a BATCH_PUT entry, a
  // config's list). One message per frame, nothing after it (docs/protocol.md).
  constexpr size_t kMaxNesting = 8;
  const msgpack::unpack_limit limit(length, length / 2, length, length, length, kMaxNesting);
  size_t consumed = 0;
  try {
    out->handle = msgpack::unpack(payload, length, consumed, nullptr, nullptr, limit);
  } catch (const std::exception&) {
    return false;
  }
  if (consumed != length) return false;
  ArgReader top(out->handle.get());
  if (top.size() != 3) return false;
  out->id = top.U64();
  out->head = top.I64();
  out->args = top.Array();
  return top.ok();
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

FrameReader::Status FrameReader::ReadFrom(int sock) {
  constexpr size_t kReadChunk = 64 * 1024;
  if (start_ > 0) {  // drop consumed frames; what stays is at most one partial frame
    std::memmove(buffer_.get(), buffer_.get() + start_, end_ - start_);
    end_ -= start_;
    start_ = 0;
  }
  if (capacity_ - end_ < kReadChunk) {
    size_t capacity = std::max(capacity_ * 2, end_ + kReadChunk);
    std::unique_ptr<char[]> grown(new char[capacity]);
    if (end_ > 0) std::memcpy(grown.get(), buffer_.get(), end_);
    buffer_ = std::move(grown);
    capacity_ = capacity;
  }
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
  if (n > 0) end_ += static_cast<size_t>(n);
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); n >= 0 && c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds_.push_back(fd);
    }
  }
  if (n > 0) return Status::kOk;
  if (n == 0) return Status::kClosed;
  return (errno == EAGAIN || errno == EWOULDBLOCK) ? Status::kWouldBlock : Status::kError;
}

bool FrameReader::Next(std::string* payload, bool* oversized) {
  *oversized = false;
  size_t available = end_ - start_;
  if (available < kFrameHeaderBytes) return false;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(buffer_.get() + start_);
  uint32_t length = 0;
  for (uint32_t i = 0; i < kFrameHeaderBytes; ++i) length |= static_cast<uint32_t>(p[i]) << (8 * i);
  if (length > kMaxFrameBytes) {
    *oversized = true;
    return false;
  }
  if (available < kFrameHeaderBytes + length) return false;
  payload->assign(buffer_.get() + start_ + kFrameHeaderBytes, length);
  start_ += kFrameHeaderBytes + length;
  return true;
}

std::vector<int> FrameReader::TakeFds() {
  std::vector<int> out;
  out.swap(fds_);
  return out;
}

FrameReader::~FrameReader() {
  for (int fd : fds_) close(fd);
}

}  // namespace uds
}  // namespace mooncake
