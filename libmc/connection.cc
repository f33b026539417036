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
#include "common/spin_wait.h"
#include "libmc/channel.h"

namespace mooncake {
namespace client {

namespace {

// connect() on a Unix socket only blocks while the listener's backlog is full.
constexpr int kConnectTimeoutMs = 500;

std::atomic<uint64_t> g_next_request_id{1};

// A caller reading the socket blocks in recv at most this long before it looks at its
// deadline again (exactly its remaining time when that is shorter; see Channel::Lead).
constexpr int kReadSliceMs = 100;

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
  ErrorCode rc = Dial(!reconnect, &fresh, &hostname);
  std::shared_ptr<Channel> old;  // destroyed outside the lock (joins its background thread)
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) {
    *code = ErrorCode::INVALID_PARAMS;
    return nullptr;
  }
  if (rc != ErrorCode::OK) {
    if (reconnect && !lost_logged_) {
      MC_LOG_WARN("mooncake_store: cannot reconnect to mooncaked at %s (%s)",
                  options_.socket_path.c_str(), ErrorName(rc));
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
  old = std::move(channel_);
  channel_ = fresh;
  hostname_ = std::move(hostname);
  return fresh;
}

ErrorCode Connection::Dial(bool first, std::shared_ptr<Channel>* out, std::string* hostname) {
  struct sockaddr_un addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sun_family = AF_UNIX;
  if (options_.socket_path.empty() || options_.socket_path.size() >= sizeof(addr.sun_path)) {
    return ErrorCode::INVALID_PARAMS;
  }
  std::memcpy(addr.sun_path, options_.socket_path.data(), options_.socket_path.size());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrorCode::RPC_FAIL;
  SetSocketTimeout(fd, SO_SNDTIMEO, std::min(options_.timeout_ms, kConnectTimeoutMs));
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    close(fd);
    return ErrorCode::RPC_FAIL;
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
    if (code == ErrorCode::INVALID_PARAMS) {
      MC_LOG_ERROR("mooncake_store: mooncaked refused the handshake (ABI version %d, "
                   "master \"%s\")", MOONCAKE_STORE_ABI_VERSION,
                   options_.master_address.c_str());
    } else if (code == ErrorCode::PERMISSION_DENIED && first) {
      // The first connect only: Current logs a refused reconnect once, like any other.
      MC_LOG_ERROR("mooncake_store: mooncaked at %s refused this process (uid %u, gid %u, "
                   "tenant \"%s\"): its --allowed_uids and --allowed_gids say who may "
                   "connect, its --tenant_uids who may claim a tenant (docs/security.md)",
                   options_.socket_path.c_str(), static_cast<unsigned>(geteuid()),
                   static_cast<unsigned>(getegid()), options_.tenant.c_str());
    }
    return code;
  }
  uds::HelloReply welcome;
  if (!uds::ParseFields(reply.message.args, &welcome)) {
    MC_LOG_ERROR("mooncake_store: malformed HELLO reply from mooncaked");
    return ErrorCode::INTERNAL_ERROR;
  }
  *hostname = std::move(welcome.hostname);
  if (options_.mount_size > 0) {
    Request mount(uds::Op::kMountSegment, uds::MountSegmentArgs{options_.mount_size});
    Reply mount_reply;
    code = CallOn(channel, mount, &mount_reply, nullptr, -1);
    if (code != ErrorCode::OK) {
      if (first) return code;
      MC_LOG_WARN("mooncake_store: re-mounting the handle's segment after a reconnect "
                  "failed (%s)", ErrorName(code));
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
    return reply->code;
  }
  // On the stack: Channel::Wait forgets p before it returns.
  Pending p;
  p.id = request.id_;
  p.keepalive = std::move(keepalive);
  Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  if (!channel->Send(&p, request.frame_.data(), request.frame_.size(), fd_to_pass)) {
    reply->code = ErrorCode::RPC_FAIL;
    return reply->code;
  }
  reply->code = channel->Wait(&p, deadline, &reply->message);
  return reply->code;
}

ErrorCode Connection::Call(Request& request, Reply* reply, std::shared_ptr<void> keepalive) {
  ErrorCode code = ErrorCode::OK;
  std::shared_ptr<Channel> s = Current(&code);
  if (!s) {
    reply->code = code;
    return code;
  }
  return CallOn(s, request, reply, std::move(keepalive), -1);
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
  return reply->code;
}

}  // namespace client
}  // namespace mooncake
