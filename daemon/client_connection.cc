#include "daemon/service/client_connection.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace mooncake {

ClientConnection::ClientConnection(int fd, uint64_t id, Teardown teardown)
    : fd_(fd), id_(id), teardown_(std::move(teardown)) {
  struct ucred cred;
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    peer_pid_ = cred.pid;
    peer_uid_ = cred.uid;
    peer_gid_ = cred.gid;
  }
}

ClientConnection::~ClientConnection() {
  UnmapPool();
  if (file_fd_ >= 0) close(file_fd_);
  close(fd_);
}

bool ClientConnection::AttachPool(int pool_fd, uint64_t pool_size, std::string* why) {
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
      pool_identity_ = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
      return true;
    }
    *why = std::string("cannot map the pool: ") + std::strerror(errno);
  }
  close(pool_fd);
  return false;
}

char* ClientConnection::PoolRange(uint64_t offset, uint64_t length) const {
  if (pool_ == nullptr || length > pool_size_ || offset > pool_size_ - length) return nullptr;
  return pool_ + offset;
}

void ClientConnection::UnmapPool() {
  if (pool_ != nullptr) munmap(pool_, pool_size_);
  if (pool_fd_ >= 0) close(pool_fd_);
  pool_ = nullptr;
  pool_fd_ = -1;
  pool_size_ = 0;
}

bool ClientConnection::Send(uds::FrameBuilder* frame) {
  const char* data = frame->data();
  return SendBytes(data, frame->size());
}

bool ClientConnection::SendBytes(const char* data, size_t size) {
  bool ok;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    ok = uds::SendFrame(fd_, data, size);
  }
  if (!ok) Close();  // a Request is held, so the teardown waits for it
  return ok;
}

ClientConnection::TrySendResult ClientConnection::TrySend(const char* data, size_t size) {
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
  Close();  // a Request is held, so the teardown waits for it
  return TrySendResult::kFailed;
}

ClientConnection::Request::~Request() {
  if (client_ == nullptr || !client_->Release()) return;
  // client_ keeps the client (and so teardown_) alive until the call returns.
  client_->teardown_(client_);
}

ClientConnection::Request ClientConnection::Acquire(int limit) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || active_ >= limit) return Request();
  ++active_;
  return Request(shared_from_this());
}

bool ClientConnection::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  --active_;
  return closed_ && active_ == 0;
}

void ClientConnection::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    // Wakes the event loop (it sees end-of-file) and fails any blocked write.
    shutdown(fd_, SHUT_RDWR);
    if (active_ > 0) return;  // the last Request runs the teardown
  }
  std::shared_ptr<ClientConnection> self = shared_from_this();  // alive until the call returns
  teardown_(self);
}

bool ClientConnection::ReleaseInput(size_t bytes, size_t limit) {
  size_t left = input_bytes_.fetch_sub(bytes) - bytes;
  return left < limit && input_paused_.load();
}

bool ClientConnection::PauseInput(size_t limit) {
  if (input_bytes_.load() < limit) return false;  // nearly always: one load per frame
  input_paused_.store(true);
  if (input_bytes_.load() >= limit) return true;
  input_paused_.store(false);
  return false;
}

bool ClientConnection::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

bool ClientConnection::Quiet() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_ == 0;
}

template <typename T>
uint64_t ClientConnection::StagedTable<T>::Add(std::shared_ptr<T> entry, uint64_t* next_id) {
  if (entries_.size() >= kMaxStaged) return 0;
  uint64_t id = (*next_id)++;
  entries_[id] = std::move(entry);
  return id;
}

template <typename T>
std::shared_ptr<T> ClientConnection::StagedTable<T>::Find(uint64_t id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second;
}

template <typename T>
std::shared_ptr<T> ClientConnection::StagedTable<T>::Take(uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return nullptr;
  std::shared_ptr<T> entry = std::move(it->second);
  entries_.erase(it);
  return entry;
}

template <typename T>
std::vector<std::shared_ptr<T>> ClientConnection::StagedTable<T>::TakeAll() {
  std::vector<std::shared_ptr<T>> out;
  for (auto& e : entries_) out.push_back(std::move(e.second));
  entries_.clear();
  return out;
}

uint64_t ClientConnection::AddPut(std::shared_ptr<StagedPut> put) {
  std::lock_guard<std::mutex> lock(mu_);
  return puts_.Add(std::move(put), &next_staged_id_);
}

std::shared_ptr<StagedPut> ClientConnection::FindPut(uint64_t put_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return puts_.Find(put_id);
}

std::shared_ptr<StagedPut> ClientConnection::TakePut(uint64_t put_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return puts_.Take(put_id);
}

std::vector<std::shared_ptr<StagedPut>> ClientConnection::TakeAllPuts() {
  std::lock_guard<std::mutex> lock(mu_);
  return puts_.TakeAll();
}

uint64_t ClientConnection::AddGet(std::shared_ptr<StagedGet> get) {
  std::lock_guard<std::mutex> lock(mu_);
  return gets_.Add(std::move(get), &next_staged_id_);
}

std::shared_ptr<StagedGet> ClientConnection::FindGet(uint64_t get_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return gets_.Find(get_id);
}

bool ClientConnection::EraseGet(uint64_t get_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return gets_.Take(get_id) != nullptr;
}

void ClientConnection::ClearGets() {
  std::lock_guard<std::mutex> lock(mu_);
  gets_.TakeAll();
}

bool ClientConnection::ReserveSegmentBytes(uint64_t size, uint64_t limit) {
  std::lock_guard<std::mutex> lock(mu_);
  if (size > limit || segment_bytes_ > limit - size) return false;
  segment_bytes_ += size;
  return true;
}

void ClientConnection::ReturnSegmentBytes(uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  segment_bytes_ -= size;
}

uint64_t ClientConnection::segment_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segment_bytes_;
}

void ClientConnection::AddSegment(int64_t segment_id, uint64_t counted) {
  std::lock_guard<std::mutex> lock(mu_);
  segments_.emplace_back(segment_id, counted);
}

std::vector<int64_t> ClientConnection::TakeSegments() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> out;
  for (const auto& s : segments_) {
    out.push_back(s.first);
    segment_bytes_ -= s.second;
  }
  segments_.clear();
  return out;
}

bool ClientConnection::TakeSegment(int64_t segment_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = segments_.begin(); it != segments_.end(); ++it) {
    if (it->first != segment_id) continue;
    segment_bytes_ -= it->second;
    segments_.erase(it);
    return true;
  }
  return false;
}

void ClientConnection::set_client_name(std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  client_name_ = std::move(name);
}

void ClientConnection::SetFileFd(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_fd_ >= 0) close(file_fd_);
  file_fd_ = fd;
}

int ClientConnection::TakeFileFd() {
  std::lock_guard<std::mutex> lock(mu_);
  int fd = file_fd_;
  file_fd_ = -1;
  return fd;
}

bool ClientConnection::lends_segments() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !segments_.empty();
}

std::string ClientConnection::client_name() const {
  std::lock_guard<std::mutex> lock(mu_);
  return client_name_;
}

}  // namespace mooncake
