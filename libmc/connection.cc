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

#include "common/base/error_code.h"
#include "common/base/logging.h"
#include "common/base/socket_timeout.h"
#include "common/base/spin_wait.h"
#include "common/base/units.h"
#include "libmc/channel.h"
#include "libmc/last_error.h"
#include "libmc/socket_trust.h"

namespace mooncake {
namespace client {

namespace {

// connect() on a Unix socket only blocks while the listener's backlog is full.
constexpr int kConnectTimeoutMs = 500;

std::atomic<uint64_t> g_next_request_id{1};

// A caller reading the socket blocks in recv at most this long before it looks at its
// deadline again (exactly its remaining time when that is shorter; see Channel::Lead).
constexpr int kReadSliceMs = 100;

// Why connect() to the daemon's socket at path failed with errno error, and what to do.
std::string ConnectFailure(const std::string& path, int error) {
  std::string cause = "(connect: " + std::string(std::strerror(error)) + ")";
  switch (error) {
    case ENOENT:
    case ECONNREFUSED:  // a socket file left behind by a daemon that is gone
      return "mooncaked is not running at " + path + " " + cause +
             ": start it (systemctl start mooncaked) or point MOONCAKE_SOCKET / connect()'s "
             "socket_path at its --socket";
    case EACCES:
    case EPERM:
      return "permission denied on mooncaked's socket " + path + " " + cause +
             ": this process (uid " + std::to_string(geteuid()) + ", gid " +
             std::to_string(getegid()) +
             ") needs write access to it and search access to its directories; run it in "
             "the socket's group (mooncaked's --socket_mode 0660) or as a user the operator "
             "admits (docs/security.md)";
    case ENOTDIR:
      return "no mooncaked socket at " + path + " " + cause +
             ": a part of the path is not a directory; point MOONCAKE_SOCKET / connect()'s "
             "socket_path at mooncaked's --socket";
    case EAGAIN:
    case ETIMEDOUT:
      return "mooncaked at " + path + " did not accept the connection within " +
             std::to_string(kConnectTimeoutMs) + " ms " + cause +
             ": its backlog is full (overloaded or stopped); try again";
    default:
      return "cannot connect to mooncaked at " + path + " " + cause;
  }
}

// "(-600 INVALID_PARAMS)"
std::string CodeText(ErrorCode code) {
  return "(" + std::to_string(ToInt(code)) + " " + ErrorName(code) + ")";
}

}  // namespace

uint64_t NextRequestId() { return g_next_request_id.fetch_add(1, std::memory_order_relaxed); }

Ticket::~Ticket() {
  if (pending_) channel_->Abandon(pending_.get());
}

int TimeoutFromEnvironment() {
  const char* text = std::getenv("MOONCAKE_STORE_TIMEOUT_MS");
  if (text == nullptr || *text == '\0') return 30000;
  char* end = nullptr;
  long long ms = std::strtoll(text, &end, 10);
  if (*end != '\0' || ms <= 0) return 30000;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

int64_t SpinMicrosFromEnvironment() {
  const char* text = std::getenv("MOONCAKE_STORE_SPIN_US");
  if (text == nullptr || *text == '\0') return kDefaultSpinMicros;
  int64_t micros = 0;
  if (!ParseSpinMicros(text, &micros)) {
    MC_LOG_WARN("mooncake_store: MOONCAKE_STORE_SPIN_US=%s is not in 0..%lld; using %lld",
                text, static_cast<long long>(kMaxSpinMicros),
                static_cast<long long>(kDefaultSpinMicros));
    return kDefaultSpinMicros;
  }
  return micros;
}

Connection::Connection(Options options) : options_(std::move(options)) {}

Connection::~Connection() { Close(); }

ErrorCode Connection::Open() {
  ErrorCode code = ErrorCode::OK;
  std::shared_ptr<Channel> s = Current(&code);
  return s ? ErrorCode::OK : code;
}

void Connection::Close() {
  std::shared_ptr<Channel> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    old = std::move(channel_);
  }
  if (old) old->Fail(true);
}

ErrorCode Connection::EnsureUp() {
  ErrorCode code = ErrorCode::OK;
  return Current(&code) ? ErrorCode::OK : code;
}

std::string Connection::hostname() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hostname_;
}

std::shared_ptr<Channel> Connection::Current(ErrorCode* code) {
  auto live = [&]() -> std::shared_ptr<Channel> {
    if (closed_) {
      *code = ErrorCode::INVALID_PARAMS;  // not connected
      Explain(*code, "the handle was closed (mooncake_store_close) during the call",
              Blame::kArgument);
      return nullptr;
    }
    if (channel_ && !channel_->IsDown()) return channel_;
    *code = ErrorCode::RPC_FAIL;
    return nullptr;
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<Channel> s = live();
    if (s || closed_) return s;
  }
  std::lock_guard<std::mutex> dial_lock(dial_mu_);
  bool reconnect;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<Channel> s = live();  // another thread may have reconnected meanwhile
    if (s || closed_) return s;
    reconnect = channel_ != nullptr;
  }
  std::shared_ptr<Channel> fresh;
  std::string hostname;
  std::string why;
  ErrorCode rc = Dial(!reconnect, &fresh, &hostname, &why);
  std::shared_ptr<Channel> old;  // destroyed outside the lock (joins its background thread)
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) {
    *code = ErrorCode::INVALID_PARAMS;
    Explain(*code, "the handle was closed (mooncake_store_close) during the call",
            Blame::kArgument);
    return nullptr;
  }
  if (rc != ErrorCode::OK) {
    if (reconnect && !lost_logged_) {
      MC_LOG_WARN("mooncake_store: cannot reconnect: %s", why.c_str());
      lost_logged_ = true;
    }
    Explain(rc, std::move(why));
    *code = rc;
    return nullptr;
  }
  if (reconnect) {
    MC_LOG_INFO("mooncake_store: reconnected to mooncaked at %s",
                options_.socket_path.c_str());
  }
  lost_logged_ = false;
  old = std::move(channel_);
  channel_ = fresh;
  hostname_ = std::move(hostname);
  return fresh;
}

ErrorCode Connection::Dial(bool first, std::shared_ptr<Channel>* out, std::string* hostname,
                           std::string* why) {
  const std::string& path = options_.socket_path;
  struct sockaddr_un addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    *why = "socket path of " + std::to_string(path.size()) +
           " bytes: a Unix socket's path is 1 to " + std::to_string(sizeof(addr.sun_path) - 1) +
           " bytes; use a shorter one (a symlink to the socket's directory works)";
    return ErrorCode::INVALID_PARAMS;
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = "socket(AF_UNIX): " + std::string(std::strerror(errno));
    return ErrorCode::RPC_FAIL;
  }
  SetSocketTimeout(fd, SO_SNDTIMEO, std::min(options_.timeout_ms, kConnectTimeoutMs));
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    *why = ConnectFailure(path, errno);
    close(fd);
    return ErrorCode::RPC_FAIL;
  }
  // Before HELLO, which carries the pool: the socket must be the daemon's, not one an
  // impostor bound in its place (libmc/socket_trust.h).
  ErrorCode trusted = TrustDaemonSocket(fd, path, why);
  if (trusted != ErrorCode::OK) {
    close(fd);
    return trusted;
  }
  SetSocketTimeout(fd, SO_SNDTIMEO, options_.timeout_ms);
  const int slice_ms = std::min(options_.timeout_ms, kReadSliceMs);
  SetSocketTimeout(fd, SO_RCVTIMEO, slice_ms);
  auto channel = std::make_shared<Channel>(fd, slice_ms, options_.spin_us * 1000,
                                           options_.quarantine);

  uds::HelloArgs greeting;
  greeting.abi_version = MOONCAKE_STORE_ABI_VERSION;
  greeting.pool_size = options_.pool_size;
  greeting.pid = static_cast<uint64_t>(getpid());
  greeting.master_address = options_.master_address;
  greeting.tenant = options_.tenant;
  Request hello(uds::Op::kHello, greeting);
  Reply reply;
  ErrorCode code = CallOn(channel, hello, &reply, nullptr, options_.pool_fd);
  if (code != ErrorCode::OK) {
    std::string reason = uds::ReasonOf(reply.message);
    const std::string at = "mooncaked at " + path;
    if (code == ErrorCode::RPC_TIMEOUT) {
      *why = at + " did not answer HELLO within " + std::to_string(options_.timeout_ms) +
             " ms (MOONCAKE_STORE_TIMEOUT_MS): it is overloaded or stopped, or " + path +
             " is not mooncaked's socket";
    } else if (code == ErrorCode::RPC_FAIL) {
      *why = at + " closed the connection before answering HELLO: see its log (is " + path +
             " mooncaked's socket?)";
    } else if (!reason.empty()) {
      *why = at + " refused the handshake " + CodeText(code) + ": " + reason;
    } else if (code == ErrorCode::INVALID_PARAMS) {  // a daemon that gives no reasons
      *why = at + " refused the handshake " + CodeText(code) + ": this library speaks ABI " +
             "version " + std::to_string(MOONCAKE_STORE_ABI_VERSION) +
             (options_.master_address.empty()
                  ? ""
                  : " and names master " + options_.master_address) +
             "; mooncaked's log says which it refused";
    } else if (code == ErrorCode::PERMISSION_DENIED) {
      *why = at + " refused this process " + CodeText(code) + " (uid " +
             std::to_string(geteuid()) + ", gid " + std::to_string(getegid()) + ", tenant \"" +
             options_.tenant + "\"): its --allowed_uids and --allowed_gids say who may " +
             "connect, its --tenant_uids who may claim a tenant (docs/security.md)";
    } else {
      *why = at + " refused the handshake " + CodeText(code);
    }
    return code;
  }
  uds::HelloReply welcome;
  if (!uds::ParseFields(reply.message.args, &welcome)) {
    *why = "mooncaked at " + path + " sent a malformed HELLO reply (is it mooncaked?)";
    return ErrorCode::INTERNAL_ERROR;
  }
  *hostname = std::move(welcome.hostname);
  if (!options_.client_name.empty()) {
    Request name(uds::Op::kSetClientName, uds::ClientNameArgs{options_.client_name});
    Reply name_reply;
    code = CallOn(channel, name, &name_reply, nullptr, -1);
    if (code != ErrorCode::OK) {
      std::string reason = uds::ReasonOf(name_reply.message);
      std::string text = "mooncaked at " + path + " refused the client name " +
                         options_.client_name + " (setup's local_hostname) " + CodeText(code) +
                         (reason.empty() ? "" : ": " + reason);
      if (first) {
        *why = std::move(text);
        return code;
      }
      MC_LOG_WARN("mooncake_store: after a reconnect: %s", text.c_str());
    }
  }
  if (options_.mount_size > 0) {
    Request mount(uds::Op::kMountSegment, uds::MountSegmentArgs{options_.mount_size});
    Reply mount_reply;
    code = CallOn(channel, mount, &mount_reply, nullptr, -1);
    if (code != ErrorCode::OK) {
      std::string reason = uds::ReasonOf(mount_reply.message);
      if (reason.empty() && code == ErrorCode::RESOURCE_LIMIT_EXCEEDED) {
        reason = "over mooncaked's budget for applications' segments: ask for less, or raise "
                 "its --client_segment_budget_per_client and --client_segment_budget";
      } else if (reason.empty()) {
        reason = ErrorText(ToInt(code));
      }
      std::string text = "mooncaked at " + path + " refused to mount the handle's segment of " +
                         FormatSize(options_.mount_size) + " (setup's global_segment_size) " +
                         CodeText(code) + ": " + reason;
      if (first) {
        *why = std::move(text);
        return code;
      }
      MC_LOG_WARN("mooncake_store: after a reconnect: %s", text.c_str());
    }
  }
  channel->MarkEstablished(welcome.daemon_id);
  if (options_.quarantine) {
    if (std::shared_ptr<void> held = options_.quarantine->TakeFor(welcome.daemon_id)) {
      // Not waited for: the answer, whenever it comes, releases the held memory; should
      // this channel die first, the memory goes back to the quarantine with it.
      Request fence(uds::Op::kPoolFence, uds::NoArgs());
      SendOn(channel, fence, std::move(held));
    }
  }
  *out = std::move(channel);
  return ErrorCode::OK;
}

namespace {

// A frame the daemon would refuse as oversized (closing the connection) is not sent.
bool FitsAFrame(size_t frame_bytes) {
  return frame_bytes <= uds::kFrameHeaderBytes + uds::kMaxFrameBytes;
}

}  // namespace

Ticket Connection::SendOn(const std::shared_ptr<Channel>& channel, Request& request,
                          std::shared_ptr<void> keepalive) {
  Ticket t;
  if (!FitsAFrame(request.frame_.size())) {
    t.immediate_code_ = ErrorCode::INVALID_PARAMS;
    Explain(t.immediate_code_, "the request is larger than a frame may be (" +
                                   std::to_string(uds::kMaxFrameBytes) + " bytes)",
            Blame::kArgument);
    return t;
  }
  // On the heap: a ticket moves (into a queue of chunks in flight) while the channel
  // points to its pending request.
  auto p = std::make_shared<Pending>();
  p->id = request.id_;
  p->keepalive = std::move(keepalive);
  t.deadline_ = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  if (!channel->Send(p.get(), request.frame_.data(), request.frame_.size(), -1)) {
    t.immediate_code_ = ErrorCode::RPC_FAIL;
    ExplainFailure(t.immediate_code_, uds::Message());
    return t;
  }
  t.channel_ = channel;
  t.pending_ = std::move(p);
  return t;
}

ErrorCode Connection::CallOn(const std::shared_ptr<Channel>& channel, Request& request,
                             Reply* reply, std::shared_ptr<void> keepalive, int fd_to_pass) {
  if (!FitsAFrame(request.frame_.size())) {
    reply->code = ErrorCode::INVALID_PARAMS;
    Explain(reply->code, "the request is larger than a frame may be (" +
                             std::to_string(uds::kMaxFrameBytes) + " bytes)",
            Blame::kArgument);
    return reply->code;
  }
  // On the stack: Channel::Wait forgets p before it returns.
  Pending p;
  p.id = request.id_;
  p.keepalive = std::move(keepalive);
  Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  if (!channel->Send(&p, request.frame_.data(), request.frame_.size(), fd_to_pass)) {
    reply->code = ErrorCode::RPC_FAIL;
    ExplainFailure(reply->code, reply->message);
    return reply->code;
  }
  reply->code = channel->Wait(&p, deadline, &reply->message);
  if (reply->code != ErrorCode::OK) ExplainFailure(reply->code, reply->message);
  return reply->code;
}

void Connection::ExplainFailure(ErrorCode code, const uds::Message& reply) const {
  if (code == ErrorCode::RPC_TIMEOUT) {
    Explain(code, "mooncaked at " + options_.socket_path + " did not answer within " +
                      std::to_string(options_.timeout_ms) +
                      " ms (MOONCAKE_STORE_TIMEOUT_MS): it is overloaded or stopped");
  } else if (code == ErrorCode::RPC_FAIL) {
    Explain(code, "lost the connection to mooncaked at " + options_.socket_path +
                      " (it exited or restarted); the next call reconnects");
  } else {
    std::string reason = uds::ReasonOf(reply);
    if (!reason.empty()) Explain(code, std::move(reason));
  }
}

ErrorCode Connection::Call(Request& request, Reply* reply, std::shared_ptr<void> keepalive,
                           int fd_to_pass) {
  ErrorCode code = ErrorCode::OK;
  std::shared_ptr<Channel> s = Current(&code);
  if (!s) {
    reply->code = code;
    return code;
  }
  return CallOn(s, request, reply, std::move(keepalive), fd_to_pass);
}

Ticket Connection::Send(Request& request, std::shared_ptr<void> keepalive) {
  ErrorCode code = ErrorCode::OK;
  std::shared_ptr<Channel> s = Current(&code);
  if (!s) {
    Ticket t;
    t.immediate_code_ = code;
    return t;
  }
  return SendOn(s, request, std::move(keepalive));
}

ErrorCode Connection::Wait(Ticket& ticket, Reply* reply) {
  if (!ticket.pending_) {
    reply->code = ticket.immediate_code_ != ErrorCode::OK ? ticket.immediate_code_
                                                          : ErrorCode::INTERNAL_ERROR;
    return reply->code;
  }
  reply->code = ticket.channel_->Wait(ticket.pending_.get(), ticket.deadline_, &reply->message);
  ticket.pending_.reset();
  ticket.channel_.reset();
  if (reply->code != ErrorCode::OK) ExplainFailure(reply->code, reply->message);
  return reply->code;
}

}  // namespace client
}  // namespace mooncake
