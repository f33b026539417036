#include "libmc/connection.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/error_code.h"
#include "common/logging.h"

namespace mooncake {
namespace client {

namespace {

constexpr int kRpcFail = static_cast<int>(ErrorCode::RPC_FAIL);
constexpr int kRpcTimeout = static_cast<int>(ErrorCode::RPC_TIMEOUT);
constexpr int kInvalidParams = static_cast<int>(ErrorCode::INVALID_PARAMS);
constexpr int kInternal = static_cast<int>(ErrorCode::INTERNAL_ERROR);
// connect() on a Unix socket only blocks while the listener's backlog is full.
constexpr int kConnectTimeoutMs = 500;

std::atomic<uint64_t> g_next_request_id{1};

void SetSendTimeout(int fd, int ms) {
  struct timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int ClampCode(int64_t head) {
  if (head > 0 || head < INT_MIN) return kInternal;  // a response code is 0 or negative
  return static_cast<int>(head);
}

}  // namespace

// One request waiting for its response. Guarded by its session's mutex.
struct Pending {
  uint64_t id = 0;
  bool done = false;
  bool abandoned = false;  // the caller timed out; drop the response when it comes
  int code = 0;
  uds::Message message;
  std::shared_ptr<void> keepalive;
  std::condition_variable cv;
};

// One socket from dial to death, with the reader thread that completes its requests.
// A reconnect makes a new Session; an old one lives until the last request using it lets
// go of it.
class Session {
 public:
  explicit Session(int fd) : fd_(fd) { reader_ = std::thread([this] { ReadLoop(); }); }
  ~Session() {
    shutdown(fd_, SHUT_RDWR);
    if (reader_.joinable()) reader_.join();
    close(fd_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  bool IsDown() {
    std::lock_guard<std::mutex> lock(mu_);
    return down_;
  }

  // Marks the session down and fails every pending request with -900 at once; shuts the
  // socket so the reader thread (and the daemon) see the end.
  void Fail(bool deliberate) {
    std::vector<std::shared_ptr<void>> keepalives;  // released after the lock
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!down_ && !deliberate && established_) {
        MC_LOG_WARN("mooncake_store: lost the connection to mooncaked");
      }
      down_ = true;
      for (auto& entry : pending_) {
        Pending* p = entry.second.get();
        keepalives.push_back(std::move(p->keepalive));
        if (p->abandoned) continue;
        p->code = kRpcFail;
        p->done = true;
        p->cv.notify_one();
      }
      pending_.clear();
    }
    shutdown(fd_, SHUT_RDWR);
  }

  // Registers p, then writes the frame. false when the session is already down (p is then
  // not registered); a failed write fails the whole session, p included.
  bool Send(const std::shared_ptr<Pending>& p, const char* frame, size_t length,
            int fd_to_pass) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (down_) return false;
      pending_.emplace(p->id, p);
    }
    bool sent;
    int error = 0;
    {
      std::lock_guard<std::mutex> lock(send_mu_);
      sent = uds::SendFrame(fd_, frame, length, fd_to_pass);
      if (!sent) error = errno;
    }
    if (!sent) {
      // A partial frame may have gone out: the stream is unusable from here on.
      Fail(false);
      if (error == EAGAIN || error == EWOULDBLOCK) {
        std::lock_guard<std::mutex> lock(mu_);
        p->code = kRpcTimeout;
      }
    }
    return true;
  }

  // Waits for p until deadline; returns its code and moves the response into *message.
  int Wait(const std::shared_ptr<Pending>& p, std::chrono::steady_clock::time_point deadline,
           uds::Message* message) {
    std::shared_ptr<void> keepalive;
    std::unique_lock<std::mutex> lock(mu_);
    if (!p->cv.wait_until(lock, deadline, [&] { return p->done; })) {
      p->abandoned = true;
      if (!p->keepalive) pending_.erase(p->id);  // nothing to hold until the late answer
      return kRpcTimeout;
    }
    *message = std::move(p->message);
    keepalive = std::move(p->keepalive);
    return p->code;
  }

  // Called once the handshake succeeded: from then on a lost socket is worth a log line.
  void MarkEstablished() {
    std::lock_guard<std::mutex> lock(mu_);
    established_ = true;
  }

 private:
  void ReadLoop() {
    uds::FrameReader reader;
    std::string payload;
    bool healthy = true;
    while (healthy) {
      uds::FrameReader::Status status = reader.ReadFrom(fd_);
      for (int fd : reader.TakeFds()) close(fd);  // the daemon never sends descriptors
      if (status == uds::FrameReader::Status::kWouldBlock) continue;
      if (status != uds::FrameReader::Status::kOk) break;
      bool oversized = false;
      while (healthy && reader.Next(&payload, &oversized)) healthy = Dispatch(payload);
      if (oversized) {
        MC_LOG_ERROR("mooncake_store: mooncaked sent an oversized frame; disconnecting");
        healthy = false;
      }
    }
    Fail(false);
  }

  bool Dispatch(const std::string& payload) {
    uds::Message message;
    if (!uds::ParseMessage(payload.data(), payload.size(), &message)) {
      MC_LOG_ERROR("mooncake_store: mooncaked sent a malformed frame; disconnecting");
      return false;
    }
    std::shared_ptr<Pending> p;
    std::shared_ptr<void> keepalive;  // released after the lock
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(message.id);
    if (it == pending_.end()) return true;  // an answer nobody waits for any more
    p = std::move(it->second);
    pending_.erase(it);
    keepalive = std::move(p->keepalive);
    if (p->abandoned) return true;
    p->code = ClampCode(message.head);
    p->message = std::move(message);
    p->done = true;
    p->cv.notify_one();
    return true;
  }

  const int fd_;
  std::mutex mu_;  // guards pending_, down_ and every Pending of this session
  std::unordered_map<uint64_t, std::shared_ptr<Pending>> pending_;
  bool down_ = false;
  bool established_ = false;
  std::mutex send_mu_;  // one frame on the wire at a time
  std::thread reader_;
};

Request::Request(uds::Op op, uint32_t arg_count)
    : id_(g_next_request_id.fetch_add(1, std::memory_order_relaxed)),
      op_(op),
      frame_(id_, static_cast<int64_t>(op), arg_count) {}

int TimeoutFromEnvironment() {
  const char* text = std::getenv("MOONCAKE_STORE_TIMEOUT_MS");
  if (text == nullptr || *text == '\0') return 30000;
  char* end = nullptr;
  long long ms = std::strtoll(text, &end, 10);
  if (*end != '\0' || ms <= 0) return 30000;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

Connection::Connection(Options options) : options_(std::move(options)) {}

Connection::~Connection() { Close(); }

int Connection::Open() {
  int code = 0;
  std::shared_ptr<Session> s = Current(&code);
  return s ? 0 : code;
}

void Connection::Close() {
  std::shared_ptr<Session> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    old = std::move(session_);
  }
  if (old) old->Fail(true);
}

int Connection::EnsureUp() {
  int code = 0;
  return Current(&code) ? 0 : code;
}

std::string Connection::hostname() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hostname_;
}

std::shared_ptr<Session> Connection::Current(int* code) {
  auto live = [&]() -> std::shared_ptr<Session> {
    if (closed_) {
      *code = kInvalidParams;  // not connected
      return nullptr;
    }
    if (session_ && !session_->IsDown()) return session_;
    *code = kRpcFail;
    return nullptr;
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<Session> s = live();
    if (s || closed_) return s;
  }
  std::lock_guard<std::mutex> dial_lock(dial_mu_);
  bool reconnect;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<Session> s = live();  // another thread may have reconnected meanwhile
    if (s || closed_) return s;
    reconnect = session_ != nullptr;
  }
  std::shared_ptr<Session> fresh;
  std::string hostname;
  int rc = Dial(!reconnect, &fresh, &hostname);
  std::shared_ptr<Session> old;  // destroyed outside the lock (joins its reader)
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) {
    *code = kInvalidParams;
    return nullptr;
  }
  if (rc != 0) {
    if (reconnect && !lost_logged_) {
      MC_LOG_WARN("mooncake_store: cannot reconnect to mooncaked at %s (code %d)",
                  options_.socket_path.c_str(), rc);
      lost_logged_ = true;
    }
    *code = rc;
    return nullptr;
  }
  if (reconnect) {
    MC_LOG_INFO("mooncake_store: reconnected to mooncaked at %s",
                options_.socket_path.c_str());
  }
  lost_logged_ = false;
  old = std::move(session_);
  session_ = fresh;
  hostname_ = std::move(hostname);
  return fresh;
}

int Connection::Dial(bool first, std::shared_ptr<Session>* out, std::string* hostname) {
  struct sockaddr_un addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sun_family = AF_UNIX;
  if (options_.socket_path.empty() || options_.socket_path.size() >= sizeof(addr.sun_path)) {
    return kInvalidParams;
  }
  std::memcpy(addr.sun_path, options_.socket_path.data(), options_.socket_path.size());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return kRpcFail;
  SetSendTimeout(fd, std::min(options_.timeout_ms, kConnectTimeoutMs));
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    close(fd);
    return kRpcFail;
  }
  SetSendTimeout(fd, options_.timeout_ms);
  auto session = std::make_shared<Session>(fd);

  Request hello(uds::Op::kHello, 4);
  hello.args().pack(static_cast<uint64_t>(MOONCAKE_STORE_ABI_VERSION));
  hello.args().pack(options_.pool_size);
  hello.args().pack(static_cast<uint64_t>(getpid()));
  hello.args().pack(options_.master_address);
  Ticket t = SendOn(session, hello, nullptr, options_.pool_fd);
  Reply reply;
  rc = Wait(t, &reply);
  if (rc != 0) {
    if (rc == kInvalidParams) {
      MC_LOG_ERROR("mooncake_store: mooncaked refused the handshake (ABI version %d, "
                   "master \"%s\")", MOONCAKE_STORE_ABI_VERSION,
                   options_.master_address.c_str());
    }
    return rc;
  }
  *hostname = reply.results().Str();
  if (!reply.results().ok()) {
    MC_LOG_ERROR("mooncake_store: malformed HELLO reply from mooncaked");
    return kInternal;
  }
  if (options_.mount_size > 0) {
    Request mount(uds::Op::kMountSegment, 1);
    mount.args().pack(options_.mount_size);
    Ticket m = SendOn(session, mount, nullptr, -1);
    Reply mount_reply;
    rc = Wait(m, &mount_reply);
    if (rc != 0) {
      if (first) return rc;
      MC_LOG_WARN("mooncake_store: re-mounting the handle's segment after a reconnect "
                  "failed (code %d)", rc);
    }
  }
  session->MarkEstablished();
  *out = std::move(session);
  return 0;
}

Ticket Connection::SendOn(const std::shared_ptr<Session>& session, Request& request,
                          std::shared_ptr<void> keepalive, int fd_to_pass) {
  Ticket t;
  auto p = std::make_shared<Pending>();
  p->id = request.id_;
  p->keepalive = std::move(keepalive);
  t.deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  if (!session->Send(p, request.frame_.data(), request.frame_.size(), fd_to_pass)) {
    t.immediate_code_ = kRpcFail;
    return t;
  }
  t.session_ = session;
  t.pending_ = std::move(p);
  return t;
}

Ticket Connection::Send(Request& request, std::shared_ptr<void> keepalive) {
  int code = 0;
  std::shared_ptr<Session> s = Current(&code);
  if (!s) {
    Ticket t;
    t.immediate_code_ = code;
    return t;
  }
  return SendOn(s, request, std::move(keepalive), -1);
}

int Connection::Wait(Ticket& ticket, Reply* reply) {
  if (!ticket.pending_) {
    reply->code = ticket.immediate_code_ != 0 ? ticket.immediate_code_ : kInternal;
    return reply->code;
  }
  reply->code = ticket.session_->Wait(ticket.pending_, ticket.deadline_, &reply->message);
  ticket.pending_.reset();
  ticket.session_.reset();
  return reply->code;
}

}  // namespace client
}  // namespace mooncake
