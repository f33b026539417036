#include "daemon/server/uds_server.h"

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
#include <memory>
#include <utility>

#include "common/base/error_code.h"
#include "common/base/logging.h"
#include "common/base/path_trust.h"
#include "common/base/socket_timeout.h"
#include "common/uds/uds_ops.h"

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

// Sets *error to "what: <errno text>" and returns false.
bool SystemError(const std::string& what, std::string* error) {
  *error = what + ": " + std::strerror(errno);
  return false;
}

// Checks what is at path: nothing, or a socket file nobody listens on (a daemon died;
// *stale is set), are fine. A live socket or another kind of file: false with *error.
bool CheckSocketPath(const std::string& path, const sockaddr_un& addr, bool* stale,
                     std::string* error) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;
    return SystemError("cannot stat " + path, error);
  }
  if (!S_ISSOCK(st.st_mode)) {
    *error = path + " exists and is not a socket";
    return false;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return SystemError("cannot tell whether " + path + " is in use: socket", error);
  int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  int connect_errno = errno;
  close(fd);
  if (rc == 0) {
    *error = path + " is in use by a running daemon";
    return false;
  }
  // Only a refusal proves nobody listens: anything else, and the file stays.
  if (connect_errno != ECONNREFUSED && connect_errno != ENOENT) {
    *error = "cannot tell whether " + path + " is in use: " + std::strerror(connect_errno);
    return false;
  }
  *stale = connect_errno == ECONNREFUSED;
  return true;
}

// A fresh directory next to the socket that only this user can enter (mkdtemp: 0700),
// where the socket is bound and given its mode, out of everyone else's reach while it
// still has the umask's. Removed, with the name bound in it, on destruction.
class PrivateDir {
 public:
  PrivateDir() = default;
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
  ~PrivateDir() {
    if (path_.empty()) return;
    unlink(socket_path().c_str());
    rmdir(path_.c_str());
  }

  // false with *error when it cannot be made. The name says who left it, should the
  // daemon die before removing it.
  bool Make(const std::filesystem::path& parent, std::string* error) {
    std::string name = (parent / ".mooncaked-XXXXXX").string();
    if (mkdtemp(name.data()) == nullptr) return SystemError("mkdtemp " + name, error);
    path_ = std::move(name);
    return true;
  }
  std::string socket_path() const { return path_ + "/s"; }

 private:
  std::string path_;
};

// The event loop's thread, which must never block: a teardown due there goes to a worker.
thread_local bool t_event_loop = false;

}  // namespace

UdsServer::UdsServer(StoreService* service, size_t worker_threads)
    : UdsServer(service, worker_threads, Limits()) {}

UdsServer::UdsServer(StoreService* service, size_t worker_threads, Limits limits)
    : service_(service),
      limits_(limits),
      loop_spin_(limits.spin_us * 1000),
      workers_(worker_threads, limits.spin_us * 1000) {}

UdsServer::~UdsServer() {
  if (loop_.joinable()) Shutdown(0);
  CloseDescriptors();
}

bool UdsServer::CheckSocketDirectory(const std::string& path, std::string* error) {
  std::string dir, name, why;
  if (!SplitRealDirectory(path, &dir, &name, &why)) {
    *error = "--socket " + path + ": " + why;
    return false;
  }
  why = SocketDirectoryProblem(dir, getegid());
  if (!why.empty()) {
    *error = "--socket " + path + ": " + why;
    return false;
  }
  return true;
}

bool UdsServer::Listen(const std::string& path, unsigned mode, std::string* error) {
  sockaddr_un addr;
  if (!MakeAddress(path, &addr)) {
    *error = "socket path too long: " + path;
    return false;
  }
  if (!CheckSocketDirectory(path, error)) return false;
  // Its directory is not created: a missing one is an error (common/base/process_setup.h).
  bool stale = false;
  if (!CheckSocketPath(path, addr, &stale, error)) return false;
  if (!OpenLoopDescriptors(error) || !ListenPrivately(path, mode, stale, error)) {
    CloseDescriptors();
    *error = "cannot listen on " + path + ": " + *error;
    return false;
  }
  path_ = path;
  return true;
}

bool UdsServer::OpenLoopDescriptors(std::string* error) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return SystemError("epoll_create1", error);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return SystemError("eventfd", error);
  return Watch(wake_fd_, kWakeTag, error);
}

bool UdsServer::ListenPrivately(const std::string& path, unsigned mode, bool replace_stale,
                                std::string* error) {
  PrivateDir private_dir;
  if (!private_dir.Make(std::filesystem::path(path).parent_path(), error)) return false;
  const std::string private_path = private_dir.socket_path();
  sockaddr_un addr;
  if (!MakeAddress(private_path, &addr)) {
    *error = "the temporary name " + private_path + " is too long for a socket";
    return false;
  }
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) return SystemError("socket", error);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return SystemError("bind " + private_path, error);
  }
  if (chmod(private_path.c_str(), mode) != 0) return SystemError("chmod " + private_path, error);
  if (listen(listen_fd_, 512) != 0) return SystemError("listen", error);
  struct stat st;
  if (lstat(private_path.c_str(), &st) != 0) return SystemError("stat " + private_path, error);
  if (!Watch(listen_fd_, kListenTag, error)) return false;
  // The socket appears under its real name only now, complete. link(), unlike rename(),
  // never replaces a file: a daemon that took the name since CheckSocketPath keeps it.
  if (replace_stale && unlink(path.c_str()) != 0 && errno != ENOENT) {
    return SystemError("cannot remove the stale " + path, error);
  }
  if (link(private_path.c_str(), path.c_str()) != 0) {
    if (errno == EEXIST) {
      *error = path + " was created meanwhile, by another daemon starting?";
      return false;
    }
    return SystemError("link " + private_path, error);
  }
  socket_inode_ = st.st_ino;  // Shutdown removes the file only if it is still this one
  socket_group_ = st.st_gid;  // the daemon's, or the directory's when it is set-group-ID
  return true;
}

bool UdsServer::Watch(int fd, uint64_t tag, std::string* error) {
  struct epoll_event ev;
  std::memset(&ev, 0, sizeof(ev));
  ev.events = EPOLLIN;
  ev.data.u64 = tag;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return SystemError("epoll_ctl", error);
  return true;
}

void UdsServer::CloseDescriptors() {
  for (int* fd : {&listen_fd_, &epoll_fd_, &wake_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

void UdsServer::Start() {
  loop_ = std::thread([this] { Loop(); });
}

void UdsServer::Loop() {
  t_event_loop = true;
  struct epoll_event events[64];
  while (!stopping_.load()) {
    int timeout = ExpireHellos();
    // The next frame usually follows within microseconds while a client is busy: polling
    // for it spares the client the wake-up of this thread (common/base/spin_wait.h).
    int n = 0;
    if (!loop_spin_.Spin([&] { return (n = epoll_wait(epoll_fd_, events, 64, 0)) != 0; })) {
      n = epoll_wait(epoll_fd_, events, 64, timeout);
      loop_spin_.Blocked();
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      MC_LOG_ERROR("epoll_wait: %s", std::strerror(errno));
      break;
    }
    for (int i = 0; i < n && !stopping_.load(); ++i) {
      uint64_t tag = events[i].data.u64;
      if (tag == kListenTag) {
        AcceptAll();
      } else if (tag == kWakeTag) {
        ResumePaused();
      } else {
        auto it = incoming_.find(tag);
        if (it != incoming_.end()) OnReadable(it);
      }
    }
  }
  // Stop accepting at once: new clients get ECONNREFUSED / ENOENT and retry elsewhere.
  close(listen_fd_);
  listen_fd_ = -1;
  struct stat st;
  if (stat(path_.c_str(), &st) == 0 && st.st_ino == socket_inode_) unlink(path_.c_str());
  for (auto& c : incoming_) {
    if (c.second->watched) Unwatch(c.second->client->fd());
    for (int fd : c.second->pending_fds) close(fd);
    for (const auto& fd : c.second->file_fds) close(fd.fd);
    if (c.second->claimed_fd >= 0) close(c.second->claimed_fd);
  }
  incoming_.clear();  // the connections live on in open_ until torn down
}

int UdsServer::ExpireHellos() {
  Clock::time_point now = Clock::now();
  while (!hello_deadlines_.empty()) {
    auto [deadline, id] = hello_deadlines_.front();
    auto it = incoming_.find(id);
    if (it == incoming_.end() || it->second->hello_done) {
      hello_deadlines_.pop_front();  // closed, or greeted in time
      continue;
    }
    if (deadline > now) {
      return static_cast<int>(
          std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count());
    }
    hello_deadlines_.pop_front();
    CloseConnection(it, "no HELLO within " + std::to_string(limits_.hello_timeout_ms) + " ms",
                    true);
  }
  return -1;
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
    auto conn = std::make_unique<Incoming>();
    conn->client = std::make_shared<ClientConnection>(
        fd, id, [this](std::shared_ptr<ClientConnection> s) { ScheduleTeardown(std::move(s)); });
    conn->reader.set_max_frame_bytes(uds::kMaxHelloFrameBytes);
    std::string error;
    if (!Watch(fd, id, &error)) {
      MC_LOG_WARN("%s", error.c_str());
      continue;  // the client's destructor closes fd
    }
    {
      std::lock_guard<std::mutex> lock(open_mu_);
      open_[id] = conn->client;
    }
    conn->peer = ReadLocalPeer(fd);
    conn->admission = access_.Check(conn->peer);
    if (conn->admission == LocalAccess::Verdict::kRefused) LogRefusal(*conn);
    MC_LOG_DEBUG("connection %llu from pid %d", static_cast<unsigned long long>(id),
                 static_cast<int>(conn->client->peer_pid()));
    incoming_[id] = std::move(conn);
    hello_deadlines_.emplace_back(
        Clock::now() + std::chrono::milliseconds(limits_.hello_timeout_ms), id);
  }
}

void UdsServer::OnReadable(IncomingMap::iterator it) {
  Incoming* conn = it->second.get();
  uds::FrameReader::Status status = conn->reader.ReadFrom(conn->client->fd());
  // Kept until the frame they came with is parsed: HELLO's pool, or a MOUNT_FILE_SEGMENT's
  // file; with any other frame they are an error.
  for (const uds::FrameReader::ArrivedFd& fd : conn->reader.TakeArrivedFds()) {
    if (conn->hello_done) {
      conn->file_fds.push_back(fd);
    } else {
      conn->pending_fds.push_back(fd.fd);
    }
  }
  // Complete frames first, even when the peer already hung up: a client may send its
  // last request and close its write side. (A read error ends the connection the same way.)
  conn->peer_closed = status == uds::FrameReader::Status::kClosed ||
                      status == uds::FrameReader::Status::kError;
  ServeBuffered(it);
}

bool UdsServer::ServeBuffered(IncomingMap::iterator it) {
  Incoming* conn = it->second.get();
  const char* payload = nullptr;
  size_t length = 0;
  bool oversized = false;
  std::string why;
  uint64_t frame_start = conn->reader.consumed();
  while (!conn->paused && conn->reader.Next(&payload, &length, &oversized)) {
    ClaimFileFd(conn, frame_start, conn->reader.consumed());
    frame_start = conn->reader.consumed();
    if (!OnFrame(conn, payload, length, &why)) {
      CloseConnection(it, why, true);
      return false;
    }
    if (conn->client->PauseInput(limits_.max_in_flight_bytes)) {
      // Until workers have finished enough (RequestResume); the frames stay buffered.
      conn->paused = true;
      if (conn->watched) Unwatch(conn->client->fd());
      conn->watched = false;
    }
  }
  if (conn->paused) return true;
  if (oversized) {
    CloseConnection(it, "frame length over " + std::to_string(conn->hello_done
                                                                   ? uds::kMaxFrameBytes
                                                                   : uds::kMaxHelloFrameBytes) +
                            " bytes",
                    true);
    return false;
  }
  if (conn->peer_closed) {
    CloseConnection(it, "peer closed", false);
    return false;
  }
  conn->reader.Trim();
  return true;
}

void UdsServer::ClaimFileFd(Incoming* conn, uint64_t start, uint64_t end) {
  for (auto it = conn->file_fds.begin(); it != conn->file_fds.end();) {
    if (it->end > end) {  // a later frame's
      ++it;
      continue;
    }
    // Came with this frame (start < fd end <= its end), or with an earlier one that did
    // not take it: either way this frame answers for it, as its own or as an error.
    if (it->end > start && conn->claimed_fd < 0) {
      conn->claimed_fd = it->fd;
    } else {
      close(it->fd);
      conn->fd_after_hello = true;
    }
    it = conn->file_fds.erase(it);
  }
}

bool UdsServer::OnFrame(Incoming* conn, const char* payload, size_t length, std::string* why) {
  // On the stack, its strings in the read buffer: most requests are answered inline and
  // never need a copy of their own.
  uds::Message message;
  if (!uds::ParseMessageInPlace(payload, length, &message, why)) {
    *why = "malformed frame: " + *why;
    return false;
  }
  ClientConnection* client = conn->client.get();
  if (conn->claimed_fd >= 0) {
    if (message.head == static_cast<int64_t>(uds::Op::kMountFileSegment)) {
      client->SetFileFd(conn->claimed_fd);  // the handler takes it
    } else {
      close(conn->claimed_fd);
      conn->fd_after_hello = true;
    }
    conn->claimed_fd = -1;
  }
  if (conn->fd_after_hello) {
    if (ClientConnection::Request request = client->Acquire()) {
      uds::ReplyFrame refusal(message.id, ErrorCode::INVALID_PARAMS, uds::NoReply(),
                              "a file descriptor came with a request after HELLO");
      client->Send(&refusal);
    }
    *why = "file descriptor sent after HELLO";
    return false;
  }
  if (!conn->hello_done) {
    if (conn->admission == LocalAccess::Verdict::kRefused) {
      Refuse(conn, message);
      *why = "not admitted";
      return false;
    }
    if (message.head != static_cast<int64_t>(uds::Op::kHello)) {
      *why = "first frame is not HELLO";
      return false;
    }
    ClientConnection::Request request = client->Acquire();
    if (!request) return false;
    std::vector<int> fds;
    fds.swap(conn->pending_fds);
    bool ok = service_->Hello(client, message, std::move(fds), why);
    if (!ok) {
      *why = "HELLO refused: " + *why;
      LogRefusal(*conn, *why);
      conn->hello_refused = true;
    }
    conn->hello_done = ok;
    if (ok) {
      conn->reader.set_max_frame_bytes(uds::kMaxFrameBytes);
      MC_LOG_INFO("connection %llu admitted (%s): %s",
                  static_cast<unsigned long long>(client->id()),
                  LocalAccess::VerdictName(conn->admission), LocalPeerText(conn->peer).c_str());
    }
    if (ok && client->pool_size() > 0) fences_.Mapped(client->pool_identity(), client->id());
    return ok;
  }
  if (message.head == static_cast<int64_t>(uds::Op::kPoolFence)) {
    return OnPoolFence(conn, message, why);
  }
  if (!uds::IsRequestOp(message.head)) {
    *why = "unknown op " + std::to_string(message.head);
    return false;
  }
  ClientConnection::Request request = client->Acquire(kMaxInFlight);
  if (!request) {
    if (client->closed()) return true;  // by a worker meanwhile; the loop sees the hang-up next
    *why = "more than " + std::to_string(kMaxInFlight) + " requests in flight";
    return false;
  }
  std::string deferred;
  switch (service_->TryInline(client, message, &deferred)) {
    case StoreService::Inline::kAnswered:
      return true;  // if a failed write closed the client, request hands its teardown on
    case StoreService::Inline::kDeferred:
      workers_.Submit([request = std::move(request), frame = std::move(deferred)] {
        ClientConnection* s = request.connection();
        if (!s->closed()) s->SendBytes(frame.data(), frame.size());
      });
      return true;
    case StoreService::Inline::kNotInline:
      break;
  }
  // The worker runs after the read buffer has moved on: it gets a copy of its own.
  Dispatch(std::move(request), std::make_unique<uds::Message>(uds::Detach(message)));
  return true;
}

bool UdsServer::OnPoolFence(Incoming* conn, const uds::Message& message, std::string* why) {
  ClientConnection* client = conn->client.get();
  uds::NoArgs none;
  if (!uds::ParseFields(message.args, &none)) {
    *why = "malformed arguments for POOL_FENCE";
    return false;
  }
  ClientConnection::Request request = client->Acquire(kMaxInFlight);
  if (!request) {
    if (client->closed()) return true;
    *why = "more than " + std::to_string(kMaxInFlight) + " requests in flight";
    return false;
  }
  // Without a pool there is nothing to fence: the answer is due at once.
  if (client->pool_size() > 0 &&
      fences_.Wait(client->pool_identity(), client->id(), message.id, &request)) {
    return true;
  }
  workers_.Submit([request = std::move(request), id = message.id] {
    uds::ReplyFrame reply(id, ErrorCode::OK, uds::NoReply());
    ClientConnection* s = request.connection();
    if (!s->closed()) s->Send(&reply);
  });
  return true;
}

void UdsServer::RequestResume(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(resume_mu_);
    resume_.push_back(id);
  }
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0 && errno != EAGAIN) {
    MC_LOG_WARN("eventfd write: %s", std::strerror(errno));
  }
}

void UdsServer::ResumePaused() {
  uint64_t count;
  if (read(wake_fd_, &count, sizeof(count)) < 0 && errno != EAGAIN) {
    MC_LOG_WARN("eventfd read: %s", std::strerror(errno));
  }
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(resume_mu_);
    ids.swap(resume_);
  }
  for (uint64_t id : ids) {
    auto it = incoming_.find(id);
    if (it == incoming_.end() || !it->second->paused) continue;  // closed, or resumed already
    Incoming* conn = it->second.get();
    conn->paused = false;
    conn->client->ResumeInput();
    if (!ServeBuffered(it) || conn->paused) continue;
    std::string error;
    if (!Watch(conn->client->fd(), id, &error)) {
      CloseConnection(it, error, true);
      continue;
    }
    conn->watched = true;
  }
}

void UdsServer::Dispatch(ClientConnection::Request request, std::unique_ptr<uds::Message> message) {
  request.connection()->ChargeInput(message->bytes);
  workers_.Submit([this, request = std::move(request), message = std::move(message)]() mutable {
    ClientConnection* client = request.connection();
    std::string why;
    if (!client->closed() && !service_->Handle(client, *message, &why)) {
      MC_LOG_WARN("connection %llu (pid %d): %s; closing it",
                  static_cast<unsigned long long>(client->id()),
                  static_cast<int>(client->peer_pid()), why.c_str());
      client->Close();
    }
    size_t bytes = message->bytes;
    message.reset();
    if (client->ReleaseInput(bytes, limits_.max_in_flight_bytes)) RequestResume(client->id());
  });
}

void UdsServer::Refuse(Incoming* conn, const uds::Message& first) {
  ClientConnection* client = conn->client.get();
  if (ClientConnection::Request request = client->Acquire()) {
    // The peer's own credentials and the flags that decide: what its operator needs.
    std::string why =
        conn->peer.uid == LocalPeer::kUnknownUid
            ? std::string("this process's credentials could not be read (SO_PEERCRED)")
            : "uid " + std::to_string(conn->peer.uid) + " gid " +
                  std::to_string(conn->peer.gid) +
                  " is not admitted: mooncaked's --allowed_uids and --allowed_gids (default: "
                  "the socket file's group) say who may connect (docs/security.md)";
    uds::ReplyFrame refusal(first.id, ErrorCode::PERMISSION_DENIED, uds::NoReply(), why);
    // Never blocks the loop: a connection that was sent nothing yet takes a small frame.
    client->TrySend(refusal.data(), refusal.size());
  }
}

void UdsServer::LogRefusal(const Incoming& conn, const std::string& why) {
  uint64_t unlogged = 0;
  if (!refusals_.Allow(Clock::now(), &unlogged)) return;
  std::string more;
  if (unlogged > 0) {
    more = "; " + std::to_string(unlogged) + " more refused since the last such line";
  }
  if (!why.empty()) {
    MC_LOG_WARN("connection %llu (%s): %s; closed%s",
                static_cast<unsigned long long>(conn.client->id()),
                LocalPeerText(conn.peer).c_str(), why.c_str(), more.c_str());
    return;
  }
  MC_LOG_WARN("connection %llu refused: %s is not admitted (--allowed_uids, --allowed_gids; "
              "docs/security.md); answered -1401 and closed%s",
              static_cast<unsigned long long>(conn.client->id()),
              LocalPeerText(conn.peer).c_str(), more.c_str());
}

void UdsServer::CloseConnection(IncomingMap::iterator it, const std::string& why, bool warn) {
  std::shared_ptr<ClientConnection> client = it->second->client;
  if (warn && it->second->admission != LocalAccess::Verdict::kRefused &&
      !it->second->hello_refused) {
    MC_LOG_WARN("connection %llu (pid %d): %s; closing it",
                static_cast<unsigned long long>(client->id()),
                static_cast<int>(client->peer_pid()), why.c_str());
  }
  if (it->second->watched) Unwatch(client->fd());
  for (int fd : it->second->pending_fds) close(fd);
  for (const auto& fd : it->second->file_fds) close(fd.fd);
  if (it->second->claimed_fd >= 0) close(it->second->claimed_fd);
  incoming_.erase(it);
  client->Close();
}

void UdsServer::Unwatch(int fd) {
  // Fails only if fd was never watched; its events would then be ignored anyway (no
  // connection has its tag any more).
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr) != 0) {
    MC_LOG_WARN("epoll_ctl(DEL): %s", std::strerror(errno));
  }
}

void UdsServer::ScheduleTeardown(std::shared_ptr<ClientConnection> client) {
  // The teardown makes master RPCs, which the event loop must not wait for.
  if (t_event_loop) {
    workers_.Submit([this, client = std::move(client)] { RunTeardown(client); });
  } else {
    RunTeardown(client);
  }
}

void UdsServer::RunTeardown(const std::shared_ptr<ClientConnection>& client) {
  service_->Teardown(client.get());
  // The pool is unmapped: nothing of this connection can touch it any more.
  fences_.Unmapped(client->pool_identity(), client->id());
  std::lock_guard<std::mutex> lock(open_mu_);
  open_.erase(client->id());
  open_cv_.notify_all();
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
      std::lock_guard<std::mutex> lock(open_mu_);
      for (const auto& s : open_) quiet = quiet && s.second->Quiet();
    }
    if (quiet || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // Close everything: idle connections are torn down here, busy ones by their last request.
  std::vector<std::shared_ptr<ClientConnection>> all;
  {
    std::lock_guard<std::mutex> lock(open_mu_);
    for (const auto& s : open_) all.push_back(s.second);
  }
  for (const auto& s : all) s->Close();
  all.clear();
  fences_.Abandon();  // closed, all of them: nobody is left to answer
  {
    std::unique_lock<std::mutex> lock(open_mu_);
    // Requests still running past the drain are bounded by the RPC timeout.
    open_cv_.wait_for(lock, std::chrono::milliseconds(drain_ms + 1000),
                          [this] { return open_.empty(); });
    if (!open_.empty()) {
      MC_LOG_WARN("%zu connections still busy at shutdown", open_.size());
    }
  }
  workers_.Stop();
}

}  // namespace mooncake
