#include "daemon/uds_server.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "common/logging.h"
#include "common/socket_timeout.h"

namespace mooncake {

namespace {

constexpr uint64_t kListenTag = UINT64_MAX;
constexpr uint64_t kWakeTag = UINT64_MAX - 1;
constexpr int kSendTimeoutMs = 5000;  // a client that stops reading its responses is dropped
constexpr int kRecvTimeoutMs = 1000;  // reads follow readiness; this only bounds surprises
// Requests one connection may have queued or running. libmc has one request in flight per
// calling thread, so this is far above any honest client, and it bounds the memory a
// client that never reads its answers can make the daemon hold.
constexpr int kMaxInFlight = 16384;

bool MakeAddress(const std::string& path, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr->sun_path)) return false;
  std::memcpy(addr->sun_path, path.c_str(), path.size());
  return true;
}

// True when something accepts connections on path right now.
bool SomeoneListens(const sockaddr_un& addr) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool live = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return live;
}

}  // namespace

UdsServer::UdsServer(StoreService* service, size_t worker_threads)
    : service_(service), pool_(worker_threads) {}

UdsServer::~UdsServer() {
  if (loop_.joinable()) Shutdown(0);
  if (listen_fd_ >= 0) close(listen_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool UdsServer::Listen(const std::string& path, unsigned mode, std::string* error) {
  sockaddr_un addr;
  if (!MakeAddress(path, &addr)) {
    *error = "socket path too long: " + path;
    return false;
  }
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) {
    *error = "cannot create " + dir.string() + ": " + ec.message();
    return false;
  }
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      *error = path + " exists and is not a socket";
      return false;
    }
    if (SomeoneListens(addr)) {
      *error = path + " is in use by a running daemon";
      return false;
    }
    unlink(path.c_str());  // left behind by a daemon that died
  }
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      chmod(path.c_str(), mode) != 0 || listen(listen_fd_, 512) != 0) {
    *error = "cannot listen on " + path + ": " + std::strerror(errno);
    return false;
  }
  if (stat(path.c_str(), &st) == 0) socket_inode_ = st.st_ino;
  path_ = path;

  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  struct epoll_event ev;
  std::memset(&ev, 0, sizeof(ev));
  ev.events = EPOLLIN;
  ev.data.u64 = kListenTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = kWakeTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  return true;
}

void UdsServer::Start() {
  loop_ = std::thread([this] { Loop(); });
}

void UdsServer::Loop() {
  struct epoll_event events[64];
  while (!stopping_.load()) {
    int n = epoll_wait(epoll_fd_, events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      MC_LOG_ERROR("epoll_wait: %s", std::strerror(errno));
      break;
    }
    for (int i = 0; i < n && !stopping_.load(); ++i) {
      uint64_t tag = events[i].data.u64;
      if (tag == kListenTag) {
        AcceptAll();
      } else if (tag != kWakeTag) {
        auto it = connections_.find(tag);
        if (it != connections_.end()) OnReadable(it);
      }
    }
  }
  // Stop accepting at once: new clients get ECONNREFUSED / ENOENT and retry elsewhere.
  close(listen_fd_);
  listen_fd_ = -1;
  struct stat st;
  if (stat(path_.c_str(), &st) == 0 && st.st_ino == socket_inode_) unlink(path_.c_str());
  for (auto& c : connections_) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.second->session->fd(), nullptr);
    for (int fd : c.second->pending_fds) close(fd);
  }
  connections_.clear();  // the sessions live on in sessions_ until torn down
}

void UdsServer::AcceptAll() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        MC_LOG_WARN("accept: %s", std::strerror(errno));
        // Out of descriptors: give the workers a moment to free some rather than spin.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return;
    }
    SetSocketTimeout(fd, SO_SNDTIMEO, kSendTimeoutMs);
    SetSocketTimeout(fd, SO_RCVTIMEO, kRecvTimeoutMs);
    uint64_t id = next_id_++;
    auto conn = std::make_unique<Connection>();
    conn->session = std::make_shared<ClientSession>(fd, id);
    struct epoll_event ev;
    std::memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      MC_LOG_WARN("epoll_ctl: %s", std::strerror(errno));
      continue;  // the session's destructor closes fd
    }
    {
      std::lock_guard<std::mutex> lock(sessions_mu_);
      sessions_[id] = conn->session;
    }
    MC_LOG_DEBUG("connection %llu from pid %d", static_cast<unsigned long long>(id),
                 static_cast<int>(conn->session->peer_pid()));
    connections_[id] = std::move(conn);
  }
}

void UdsServer::OnReadable(ConnectionMap::iterator it) {
  Connection* conn = it->second.get();
  uds::FrameReader::Status status = conn->reader.ReadFrom(conn->session->fd());
  std::vector<int> fds = conn->reader.TakeFds();
  if (!fds.empty()) {
    if (conn->hello_done) {
      for (int fd : fds) close(fd);
      conn->fd_after_hello = true;
    } else {
      conn->pending_fds.insert(conn->pending_fds.end(), fds.begin(), fds.end());
    }
  }
  // Complete frames first, even when the peer already hung up: a client may send its
  // last request and close its write side.
  std::string payload;
  std::string why;
  bool oversized = false;
  while (conn->reader.Next(&payload, &oversized)) {
    if (!OnFrame(conn, payload, &why)) return CloseConnection(it, why, true);
  }
  if (oversized) return CloseConnection(it, "frame length over 64 MiB", true);
  if (status == uds::FrameReader::Status::kClosed) return CloseConnection(it, "peer closed", false);
  if (status == uds::FrameReader::Status::kError) {
    return CloseConnection(it, std::string("read: ") + std::strerror(errno), false);
  }
}

bool UdsServer::OnFrame(Connection* conn, const std::string& payload, std::string* why) {
  // On the stack: most requests are answered inline and never need a shared copy.
  uds::Message message;
  if (!uds::ParseMessage(payload.data(), payload.size(), &message)) {
    *why = "malformed frame";
    return false;
  }
  const std::shared_ptr<ClientSession>& session = conn->session;
  if (conn->fd_after_hello) {
    if (session->Acquire()) {
      store_detail::Reply(session.get(), message.id, store_detail::kInvalid);
      session->Release();  // not closed yet, so never the last one out
    }
    *why = "file descriptor sent after HELLO";
    return false;
  }
  if (!conn->hello_done) {
    if (message.head != static_cast<int64_t>(uds::Op::kHello)) {
      *why = "first frame is not HELLO";
      return false;
    }
    if (!session->Acquire()) return false;
    std::vector<int> fds;
    fds.swap(conn->pending_fds);
    bool ok = service_->Hello(session.get(), message, std::move(fds), why);
    session->Release();
    if (!ok) *why = "HELLO refused: " + *why;
    conn->hello_done = ok;
    return ok;
  }
  if (message.head <= static_cast<int64_t>(uds::Op::kHello) ||
      message.head > static_cast<int64_t>(uds::kMaxOp)) {
    *why = "unknown op " + std::to_string(message.head);
    return false;
  }
  switch (session->AcquireBounded(kMaxInFlight)) {
    case ClientSession::AcquireResult::kClosed:
      return true;  // closed by a worker meanwhile; the loop sees the hang-up next
    case ClientSession::AcquireResult::kTooMany:
      *why = "more than " + std::to_string(kMaxInFlight) + " requests in flight";
      return false;
    case ClientSession::AcquireResult::kAcquired:
      break;
  }
  std::string deferred;
  switch (service_->TryInline(session.get(), message, &deferred)) {
    case StoreService::Inline::kAnswered:
      // Only a failed write can have closed the session while we held it, and then the
      // teardown (master RPCs) is due: never on this thread.
      if (session->Release()) pool_.Submit([this, session] { RunTeardown(session); });
      return true;
    case StoreService::Inline::kDeferred:
      pool_.Submit([this, session, frame = std::move(deferred)] {
        if (!session->closed()) session->SendBytes(frame.data(), frame.size());
        if (session->Release()) RunTeardown(session);
      });
      return true;
    case StoreService::Inline::kNotInline:
      break;
  }
  // Moving keeps the msgpack zone (a heap object) in place, so the parsed arguments stay
  // valid in the copy.
  Dispatch(session, std::make_shared<uds::Message>(std::move(message)));
  return true;
}

void UdsServer::Dispatch(const std::shared_ptr<ClientSession>& session,
                         std::shared_ptr<uds::Message> message) {
  pool_.Submit([this, session, message] {
    if (!session->closed()) {
      std::string why;
      if (!service_->Handle(session.get(), message.get(), &why)) {
        MC_LOG_WARN("connection %llu (pid %d): %s; closing it",
                    static_cast<unsigned long long>(session->id()),
                    static_cast<int>(session->peer_pid()), why.c_str());
        session->Close();
      }
    }
    if (session->Release()) RunTeardown(session);
  });
}

void UdsServer::CloseConnection(ConnectionMap::iterator it, const std::string& why, bool warn) {
  std::shared_ptr<ClientSession> session = it->second->session;
  if (warn) {
    MC_LOG_WARN("connection %llu (pid %d): %s; closing it",
                static_cast<unsigned long long>(session->id()),
                static_cast<int>(session->peer_pid()), why.c_str());
  }
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, session->fd(), nullptr);
  for (int fd : it->second->pending_fds) close(fd);
  connections_.erase(it);
  // The teardown makes master RPCs; keep them off the event loop.
  if (session->Close()) pool_.Submit([this, session] { RunTeardown(session); });
}

void UdsServer::RunTeardown(const std::shared_ptr<ClientSession>& session) {
  service_->Teardown(session.get());
  std::lock_guard<std::mutex> lock(sessions_mu_);
  sessions_.erase(session->id());
  sessions_cv_.notify_all();
}

void UdsServer::Shutdown(int64_t drain_ms) {
  if (!loop_.joinable()) return;
  stopping_ = true;
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    MC_LOG_WARN("eventfd write: %s", std::strerror(errno));
  }
  loop_.join();

  // Let running requests finish; a put that completes now is published normally.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(drain_ms);
  for (;;) {
    bool quiet = true;
    {
      std::lock_guard<std::mutex> lock(sessions_mu_);
      for (const auto& s : sessions_) quiet = quiet && s.second->Quiet();
    }
    if (quiet || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // Close everything: idle sessions are torn down here, busy ones by their last request.
  std::vector<std::shared_ptr<ClientSession>> all;
  {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    for (const auto& s : sessions_) all.push_back(s.second);
  }
  for (const auto& s : all) {
    if (s->Close()) RunTeardown(s);
  }
  all.clear();
  {
    std::unique_lock<std::mutex> lock(sessions_mu_);
    // Requests still running past the drain are bounded by the RPC timeout.
    sessions_cv_.wait_for(lock, std::chrono::milliseconds(drain_ms + 1000),
                          [this] { return sessions_.empty(); });
    if (!sessions_.empty()) {
      MC_LOG_WARN("%zu connections still busy at shutdown", sessions_.size());
    }
  }
  pool_.Stop();
}

}  // namespace mooncake
