#include "daemon/client_session.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mooncake {

ClientSession::ClientSession(int fd, uint64_t id) : fd_(fd), id_(id) {
  struct ucred cred;
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) peer_pid_ = cred.pid;
}

ClientSession::~ClientSession() {
  UnmapPool();
  close(fd_);
}

bool ClientSession::AttachPool(int pool_fd, uint64_t pool_size, std::string* why) {
  int seals = fcntl(pool_fd, F_GET_SEALS);
  struct stat st;
  const int kNeeded = F_SEAL_SHRINK | F_SEAL_GROW;
  if (seals < 0) {
    *why = std::string("pool fd cannot be sealed (not a memfd?): ") + std::strerror(errno);
  } else if ((seals & kNeeded) != kNeeded) {
    *why = "pool memfd is not sealed with F_SEAL_SHRINK | F_SEAL_GROW";
  } else if (fstat(pool_fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != pool_size) {
    *why = "pool memfd size differs from pool_size";
  } else {
    void* p = mmap(nullptr, pool_size, PROT_READ | PROT_WRITE, MAP_SHARED, pool_fd, 0);
    if (p != MAP_FAILED) {
      pool_ = static_cast<char*>(p);
      pool_size_ = pool_size;
      pool_fd_ = pool_fd;
      return true;
    }
    *why = std::string("cannot map the pool: ") + std::strerror(errno);
  }
  close(pool_fd);
  return false;
}

char* ClientSession::PoolRange(uint64_t offset, uint64_t length) const {
  if (pool_ == nullptr || length > pool_size_ || offset > pool_size_ - length) return nullptr;
  return pool_ + offset;
}

void ClientSession::UnmapPool() {
  if (pool_ != nullptr) munmap(pool_, pool_size_);
  if (pool_fd_ >= 0) close(pool_fd_);
  pool_ = nullptr;
  pool_fd_ = -1;
  pool_size_ = 0;
}

bool ClientSession::Send(uds::FrameBuilder* frame) {
  const char* data = frame->data();
  return SendBytes(data, frame->size());
}

bool ClientSession::SendBytes(const char* data, size_t size) {
  bool ok;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    ok = uds::SendFrame(fd_, data, size);
  }
  if (!ok) Close();  // a request is running, so this never asks for the teardown
  return ok;
}

ClientSession::TrySendResult ClientSession::TrySend(const char* data, size_t size) {
  bool ok;
  {
    // A worker holding the lock may be stuck behind a client that does not read.
    std::unique_lock<std::mutex> lock(write_mu_, std::try_to_lock);
    if (!lock.owns_lock()) return TrySendResult::kBusy;
    ssize_t n;
    do {
      n = send(fd_, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return TrySendResult::kBusy;
    // Part of a frame cannot be taken back: finish it, blocking (bounded by SO_SNDTIMEO).
    // A Unix stream socket takes a small frame whole or not at all, so this is rare.
    ok = n >= 0 && (static_cast<size_t>(n) == size ||
                    uds::SendFrame(fd_, data + n, size - static_cast<size_t>(n)));
  }
  if (ok) return TrySendResult::kSent;
  Close();  // a request is running, so this never asks for the teardown
  return TrySendResult::kFailed;
}

bool ClientSession::Acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return false;
  ++active_;
  return true;
}

ClientSession::AcquireResult ClientSession::AcquireBounded(int limit) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return AcquireResult::kClosed;
  if (active_ >= limit) return AcquireResult::kTooMany;
  ++active_;
  return AcquireResult::kAcquired;
}

bool ClientSession::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  --active_;
  if (closed_ && active_ == 0 && !torn_down_) {
    torn_down_ = true;
    return true;
  }
  return false;
}

bool ClientSession::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return false;
  closed_ = true;
  // Wakes the event loop (it sees end-of-file) and fails any blocked write.
  shutdown(fd_, SHUT_RDWR);
  if (active_ == 0) {
    torn_down_ = true;
    return true;
  }
  return false;
}

bool ClientSession::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

bool ClientSession::Quiet() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_ == 0;
}

uint64_t ClientSession::AddPut(std::shared_ptr<StagedPut> put) {
  std::lock_guard<std::mutex> lock(mu_);
  if (puts_.size() >= kMaxStaged) return 0;
  uint64_t id = next_staged_id_++;
  puts_[id] = std::move(put);
  return id;
}

std::shared_ptr<StagedPut> ClientSession::FindPut(uint64_t put_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = puts_.find(put_id);
  return it == puts_.end() ? nullptr : it->second;
}

std::shared_ptr<StagedPut> ClientSession::TakePut(uint64_t put_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = puts_.find(put_id);
  if (it == puts_.end()) return nullptr;
  std::shared_ptr<StagedPut> put = std::move(it->second);
  puts_.erase(it);
  return put;
}

std::vector<std::shared_ptr<StagedPut>> ClientSession::TakeAllPuts() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<StagedPut>> out;
  for (auto& p : puts_) out.push_back(std::move(p.second));
  puts_.clear();
  return out;
}

uint64_t ClientSession::AddGet(std::shared_ptr<StagedGet> get) {
  std::lock_guard<std::mutex> lock(mu_);
  if (gets_.size() >= kMaxStaged) return 0;
  uint64_t id = next_staged_id_++;
  gets_[id] = std::move(get);
  return id;
}

std::shared_ptr<StagedGet> ClientSession::FindGet(uint64_t get_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = gets_.find(get_id);
  return it == gets_.end() ? nullptr : it->second;
}

bool ClientSession::EraseGet(uint64_t get_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return gets_.erase(get_id) > 0;
}

void ClientSession::ClearGets() {
  std::lock_guard<std::mutex> lock(mu_);
  gets_.clear();
}

void ClientSession::AddSegment(int64_t segment_id) {
  std::lock_guard<std::mutex> lock(mu_);
  segments_.push_back(segment_id);
}

std::vector<int64_t> ClientSession::TakeSegments() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> out;
  out.swap(segments_);
  return out;
}

}  // namespace mooncake
