#include "libmc/connection.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/error_code.h"
#include "common/logging.h"
#include "common/socket_timeout.h"
#include "libmc/session.h"

namespace mooncake {
namespace client {

namespace {

constexpr int kRpcFail = static_cast<int>(ErrorCode::RPC_FAIL);
constexpr int kInvalidParams = static_cast<int>(ErrorCode::INVALID_PARAMS);
constexpr int kInternal = static_cast<int>(ErrorCode::INTERNAL_ERROR);
// connect() on a Unix socket only blocks while the listener's backlog is full.
constexpr int kConnectTimeoutMs = 500;

std::atomic<uint64_t> g_next_request_id{1};

// A caller reading the socket blocks in recv at most this long before it looks at its
// deadline again (exactly its remaining time when that is shorter; see Session::Lead).
constexpr int kReadSliceMs = 100;

}  // namespace

Request::Request(uds::Op op, uint32_t arg_count)
    : id_(g_next_request_id.fetch_add(1, std::memory_order_relaxed)),
      op_(op),
      frame_(id_, static_cast<int64_t>(op), arg_count) {}

Ticket::~Ticket() {
  if (pending_) session_->Abandon(pending_.get());
}

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
  std::shared_ptr<Session> old;  // destroyed outside the lock (joins its background thread)
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
  SetSocketTimeout(fd, SO_SNDTIMEO, std::min(options_.timeout_ms, kConnectTimeoutMs));
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    close(fd);
    return kRpcFail;
  }
  SetSocketTimeout(fd, SO_SNDTIMEO, options_.timeout_ms);
  const int slice_ms = std::min(options_.timeout_ms, kReadSliceMs);
  SetSocketTimeout(fd, SO_RCVTIMEO, slice_ms);
  auto session = std::make_shared<Session>(fd, slice_ms);

  Request hello(uds::Op::kHello, 4);
  hello.args().pack(static_cast<uint64_t>(MOONCAKE_STORE_ABI_VERSION));
  hello.args().pack(options_.pool_size);
  hello.args().pack(static_cast<uint64_t>(getpid()));
  hello.args().pack(options_.master_address);
  Reply reply;
  rc = CallOn(session, hello, &reply, nullptr, options_.pool_fd);
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
    Reply mount_reply;
    rc = CallOn(session, mount, &mount_reply, nullptr, -1);
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
                          std::shared_ptr<void> keepalive) {
  Ticket t;
  // On the heap: a ticket moves (into a queue of chunks in flight) while the session
  // points to its pending request.
  auto p = std::make_shared<Pending>();
  p->id = request.id_;
  p->keepalive = std::move(keepalive);
  t.deadline_ = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  if (!session->Send(p.get(), request.frame_.data(), request.frame_.size(), -1)) {
    t.immediate_code_ = kRpcFail;
    return t;
  }
  t.session_ = session;
  t.pending_ = std::move(p);
  return t;
}

int Connection::CallOn(const std::shared_ptr<Session>& session, Request& request,
                       Reply* reply, std::shared_ptr<void> keepalive, int fd_to_pass) {
  // On the stack: Session::Wait forgets p before it returns.
  Pending p;
  p.id = request.id_;
  p.keepalive = std::move(keepalive);
  Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  if (!session->Send(&p, request.frame_.data(), request.frame_.size(), fd_to_pass)) {
    reply->code = kRpcFail;
    return reply->code;
  }
  reply->code = session->Wait(&p, deadline, &reply->message);
  return reply->code;
}

int Connection::Call(Request& request, Reply* reply, std::shared_ptr<void> keepalive) {
  int code = 0;
  std::shared_ptr<Session> s = Current(&code);
  if (!s) {
    reply->code = code;
    return code;
  }
  return CallOn(s, request, reply, std::move(keepalive), -1);
}

Ticket Connection::Send(Request& request, std::shared_ptr<void> keepalive) {
  int code = 0;
  std::shared_ptr<Session> s = Current(&code);
  if (!s) {
    Ticket t;
    t.immediate_code_ = code;
    return t;
  }
  return SendOn(s, request, std::move(keepalive));
}

int Connection::Wait(Ticket& ticket, Reply* reply) {
  if (!ticket.pending_) {
    reply->code = ticket.immediate_code_ != 0 ? ticket.immediate_code_ : kInternal;
    return reply->code;
  }
  reply->code = ticket.session_->Wait(ticket.pending_.get(), ticket.deadline_, &reply->message);
  ticket.pending_.reset();
  ticket.session_.reset();
  return reply->code;
}

}  // namespace client
}  // namespace mooncake
