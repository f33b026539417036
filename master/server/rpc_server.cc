#include "master/server/rpc_server.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>
#include <thrift/transport/TTransportException.h>

#include "absl/synchronization/mutex.h"
#include "common/auth/host_address.h"
#include "common/base/log_throttle.h"
#include "common/base/logging.h"
#include "common/base/spin_wait.h"

namespace mooncake {

using apache::thrift::protocol::TProtocol;
using apache::thrift::transport::TMemoryBuffer;
using apache::thrift::transport::TTransportException;

namespace {

constexpr size_t kInitialBufferBytes = 16 << 10;
// Above this a buffer is given back once its call is done (TNonblockingServer's idle
// buffer limit).
constexpr size_t kIdleBufferBytes = 1 << 20;
constexpr int kMaxEvents = 64;

// Closures the server decides: of connections not admitted (what a peer without the key
// can cause at will), and of admitted ones; each at most one line a second.
LogThrottle g_unadmitted_log;
LogThrottle g_admitted_log;
LogThrottle g_accept_log;

// The clock of deadlines and idleness: read after every recv, so the cheap one (a few
// milliseconds coarse, which a timeout of seconds does not notice).
int64_t CoarseNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// The frame being read, as the protocol's transport: reads come from the connection's
// buffer, in place. A read past the frame's end throws (END_OF_FILE): the call was cut.
class FrameInput : public apache::thrift::transport::TVirtualTransport<
                       FrameInput, apache::thrift::transport::TBufferBase> {
 public:
  void Reset(uint8_t* frame, uint32_t bytes) {
    setReadBuffer(frame, bytes);
    setWriteBuffer(nullptr, 0);
    // A list or a string cannot claim more than the frame holds (the protocol checks
    // claims against what remains of the message before it allocates).
    resetConsumedMessageSize();
    if (static_cast<int64_t>(bytes) < getMaxMessageSize()) resetConsumedMessageSize(bytes);
  }
  // TVirtualTransport's own readAll would hide TBufferBase's fast one.
  uint32_t readAll(uint8_t* buf, uint32_t len) { return TBufferBase::readAll(buf, len); }

 protected:
  uint32_t readSlow(uint8_t* buf, uint32_t len) override {
    const uint32_t have = static_cast<uint32_t>(rBound_ - rBase_);
    const uint32_t n = std::min(have, len);
    std::memcpy(buf, rBase_, n);
    rBase_ += n;
    return n;
  }
  void writeSlow(const uint8_t*, uint32_t) override {
    throw TTransportException(TTransportException::NOT_OPEN, "a call's input is read-only");
  }
  const uint8_t* borrowSlow(uint8_t*, uint32_t*) override { return nullptr; }
};

void PutBigEndian32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

uint32_t GetBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

}  // namespace

struct RpcServer::Connection {
  std::shared_ptr<apache::thrift::transport::TSocket> socket;  // owns the fd
  int fd = -1;
  std::shared_ptr<apache::thrift::TProcessor> processor;
  RpcAdmission* admission = nullptr;  // the processor's; null: admitted at connect
  RpcConnections::Entry* entry = nullptr;
  uint64_t id = 0;  // entry's, kept: the entry goes first at Close
  bool admitted = false;
  std::shared_ptr<FrameInput> input = std::make_shared<FrameInput>();
  std::shared_ptr<TMemoryBuffer> output = std::make_shared<TMemoryBuffer>();
  std::shared_ptr<TProtocol> input_protocol;
  std::shared_ptr<TProtocol> output_protocol;
  // What was read: [0, read_bytes) of read_buffer, of read_capacity.
  std::unique_ptr<uint8_t[]> read_buffer;
  size_t read_capacity = 0;
  size_t read_bytes = 0;
  // The reply being written: [write_offset, write_bytes) of output's buffer.
  const uint8_t* write_data = nullptr;
  size_t write_offset = 0;
  size_t write_bytes = 0;
  bool writing = false;
};

// One I/O thread: an epoll set of its connections and of its wake-up eventfd.
class RpcServer::IoThread {
 public:
  IoThread(RpcServer* server, size_t index)
      : server_(server), index_(index), spin_(server->options_.spin_ns) {}
  ~IoThread() {
    CloseFd(&epoll_);
    CloseFd(&wake_);
  }

  bool Open(std::string* error) {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_ < 0 || wake_ < 0) {
      *error = std::string("cannot make an I/O thread's epoll set: ") + strerror(errno);
      return false;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;  // the wake-up
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev) != 0) {
      *error = std::string("cannot watch an I/O thread's eventfd: ") + strerror(errno);
      return false;
    }
    return true;
  }

  void Start() { thread_ = std::thread([this] { Run(); }); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

  // Any thread: this thread serves c from now on (or closes it when stopping).
  void Adopt(std::unique_ptr<Connection> c) {
    {
      absl::MutexLock lock(&mu_);
      adopted_.push_back(std::move(c));
    }
    Wake();
  }
  // Any thread: the connection id, if this thread still has it, is to be closed (the
  // server counted and logged why).
  void Doom(uint64_t id) {
    {
      absl::MutexLock lock(&mu_);
      doomed_.push_back(id);
    }
    Wake();
  }
  void Wake() {
    uint64_t one = 1;
    ssize_t ignored = write(wake_, &one, sizeof(one));
    (void)ignored;
  }

 private:
  void Run();
  // Waits for events, at most timeout_ms (-1: no limit): polls first (spin, when its
  // budget and the spinner limit allow), then blocks.
  int Wait(epoll_event* events, int timeout_ms);
  // The connections handed over and those to close, from other threads.
  void TakeQueues();
  // Serves c from now on: its place in the epoll set.
  void AddConnection(std::unique_ptr<Connection> c);
  void Close(Connection* c);
  // Closes the connections past their handshake deadline or their idle timeout.
  void Sweep(int64_t now_ns);
  // The connection's processor says it is admitted now.
  void Admit(Connection* c);
  // The connection's events; false when it was closed.
  bool OnEvents(Connection* c, uint32_t events);
  bool OnReadable(Connection* c);
  bool OnWritable(Connection* c);
  // Runs every whole frame in the buffer, until one's reply waits for the socket; false:
  // close the connection.
  bool RunFrames(Connection* c);
  bool RunCall(Connection* c, uint8_t* frame, uint32_t bytes);
  // Sends what remains of the reply; false: close.
  bool Send(Connection* c);
  void Watch(Connection* c, uint32_t events);
  // Makes room for the rest of the frame being read, growing with what arrived.
  void MakeRoom(Connection* c);

  RpcServer* const server_;
  const size_t index_;
  AdaptiveSpin spin_;
  int epoll_ = -1;
  int wake_ = -1;
  std::thread thread_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> adopted_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> doomed_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;  // this thread's
  int64_t next_sweep_ns_ = 0;
};

void RpcServer::IoThread::Run() {
  const std::string name = "mc-rpc-" + std::to_string(index_);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  epoll_event events[kMaxEvents];
  const int64_t sweep_ns = server_->SweepIntervalMs() * 1000000;
  while (!server_->stopping_.load(std::memory_order_acquire)) {
    // Deadlines are looked at every sweep_ns while there are connections; an idle thread
    // sleeps until something happens.
    int timeout_ms = -1;
    if (!connections_.empty()) {
      const int64_t now = CoarseNanos();
      if (now >= next_sweep_ns_) {
        Sweep(now);
        next_sweep_ns_ = now + sweep_ns;
      }
      timeout_ms = static_cast<int>((next_sweep_ns_ - now) / 1000000) + 1;
    }
    const int n = Wait(events, timeout_ms);
    if (n < 0) {
      if (errno != EINTR) MC_LOG_ERROR("rpc server: epoll_wait: %s", strerror(errno));
      continue;
    }
    bool woken = false;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.ptr == nullptr) {
        uint64_t count = 0;
        ssize_t ignored = read(wake_, &count, sizeof(count));
        (void)ignored;
        woken = true;
        continue;
      }
      OnEvents(static_cast<Connection*>(events[i].data.ptr), events[i].events);
    }
    // After the batch: a connection closed by the queues may have events later in it.
    if (woken) TakeQueues();
  }
  TakeQueues();  // closes what came after the last look
  while (!connections_.empty()) Close(connections_.begin()->second.get());
}

int RpcServer::IoThread::Wait(epoll_event* events, int timeout_ms) {
  // The wait follows activity (an idle thread is asleep below, not here): the next call
  // of a busy daemon usually comes within microseconds.
  int n = 0;
  if (spin_.max_budget_ns() > 0 && server_->spinners_.TryEnter()) {
    const bool hit =
        spin_.Spin([&] { return (n = epoll_wait(epoll_, events, kMaxEvents, 0)) != 0; });
    server_->spinners_.Leave();
    if (hit) return n;
    n = epoll_wait(epoll_, events, kMaxEvents, timeout_ms);
    spin_.Blocked();
    return n;
  }
  return epoll_wait(epoll_, events, kMaxEvents, timeout_ms);
}

void RpcServer::IoThread::TakeQueues() {
  std::vector<std::unique_ptr<Connection>> adopted;
  std::vector<uint64_t> doomed;
  {
    absl::MutexLock lock(&mu_);
    adopted.swap(adopted_);
    doomed.swap(doomed_);
  }
  // Adopted first: a connection may be doomed before this thread has seen it.
  for (auto& c : adopted) AddConnection(std::move(c));
  for (uint64_t id : doomed) {
    auto c = connections_.find(id);
    if (c != connections_.end()) Close(c->second.get());
  }
}

void RpcServer::IoThread::AddConnection(std::unique_ptr<Connection> c) {
  if (server_->stopping_.load(std::memory_order_acquire)) {
    server_->connections_.Remove(c->entry);
    return;  // c's socket closes the fd
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = c.get();
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
    MC_LOG_WARN("rpc server: cannot watch a new connection: %s", strerror(errno));
    server_->connections_.Remove(c->entry);
    return;
  }
  const uint64_t id = c->id;
  connections_.emplace(id, std::move(c));
}

void RpcServer::IoThread::Close(Connection* c) {
  epoll_ctl(epoll_, EPOLL_CTL_DEL, c->fd, nullptr);
  server_->connections_.Remove(c->entry);
  connections_.erase(c->id);  // the TSocket closes the fd
}

void RpcServer::IoThread::Sweep(int64_t now_ns) {
  const RpcServerOptions& o = server_->options_;
  const int64_t handshake_ns = o.handshake_timeout_ms * 1000000;
  const int64_t idle_ns = o.idle_timeout_ms * 1000000;
  std::vector<Connection*> expired;
  for (auto& [id, owned] : connections_) {
    Connection* c = owned.get();
    if (!c->admitted) {
      if (now_ns - c->entry->accepted_ns >= handshake_ns) {
        server_->Closed(RpcClosure::kHandshakeTimeout, c->entry->peer, false,
                        "not admitted within " + std::to_string(o.handshake_timeout_ms) +
                            " ms of its accept");
        expired.push_back(c);
      }
      continue;
    }
    if (idle_ns <= 0 ||
        now_ns - c->entry->last_active_ns.load(std::memory_order_relaxed) < idle_ns) {
      continue;
    }
    // A call that arrived since the events were read is activity: it is served next.
    int unread = 0;
    if (ioctl(c->fd, FIONREAD, &unread) == 0 && unread > 0) {
      RpcConnections::Touch(c->entry, now_ns);
      continue;
    }
    server_->Closed(RpcClosure::kIdle, c->entry->peer, true,
                    "idle for " + std::to_string(o.idle_timeout_ms / 1000) +
                        " s (--rpc_idle_timeout_sec)");
    expired.push_back(c);
  }
  for (Connection* c : expired) Close(c);
}

void RpcServer::IoThread::Admit(Connection* c) {
  c->admitted = true;
  std::vector<RpcConnections::Victim> victims;
  server_->connections_.Admit(c->entry, CoarseNanos(), &victims);
  server_->CloseVictims(victims);
}

bool RpcServer::IoThread::OnEvents(Connection* c, uint32_t events) {
  if (events & EPOLLOUT) {
    if (!OnWritable(c)) {
      Close(c);
      return false;
    }
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    if (c->writing && !(events & (EPOLLHUP | EPOLLERR))) return true;
    if (!OnReadable(c)) {
      Close(c);
      return false;
    }
  }
  return true;
}

void RpcServer::IoThread::MakeRoom(Connection* c) {
  // Before admission the first buffer holds one frame of the most such a connection may
  // send.
  const size_t first =
      c->admitted ? kInitialBufferBytes
                  : std::min(kInitialBufferBytes,
                             size_t{4} + server_->options_.unadmitted_max_frame_bytes);
  size_t want = std::max(c->read_capacity * 2, first);
  if (c->read_bytes >= 4) {
    // Never more than the frame needs (the frame's length was checked by RunFrames).
    want = std::min(want, size_t{4} + GetBigEndian32(c->read_buffer.get()));
  }
  if (want <= c->read_capacity) return;
  std::unique_ptr<uint8_t[]> bigger(new uint8_t[want]);
  if (c->read_bytes > 0) std::memcpy(bigger.get(), c->read_buffer.get(), c->read_bytes);
  c->read_buffer = std::move(bigger);
  c->read_capacity = want;
}

bool RpcServer::IoThread::OnReadable(Connection* c) {
  for (;;) {
    if (c->read_bytes == c->read_capacity) MakeRoom(c);
    const size_t room = c->read_capacity - c->read_bytes;
    const ssize_t got = recv(c->fd, c->read_buffer.get() + c->read_bytes, room, 0);
    if (got == 0) {
      if (c->read_bytes > 0) {
        MC_LOG_DEBUG("rpc server: a peer closed with %zu bytes of a frame unread",
                     c->read_bytes);
      }
      return false;
    }
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      MC_LOG_DEBUG("rpc server: recv: %s", strerror(errno));
      return false;
    }
    RpcConnections::Touch(c->entry, CoarseNanos());
    c->read_bytes += static_cast<size_t>(got);
    if (!RunFrames(c)) return false;
    // Drained: a shorter read than the room means nothing more is waiting (epoll says
    // when more comes); a reply that waits for the socket holds the next frames back.
    if (static_cast<size_t>(got) < room || c->writing) return true;
  }
}

bool RpcServer::IoThread::RunFrames(Connection* c) {
  const RpcServerOptions& o = server_->options_;
  size_t offset = 0;
  bool ok = true;
  while (!c->writing && c->read_bytes - offset >= 4) {
    uint8_t* head = c->read_buffer.get() + offset;
    const uint32_t bytes = GetBigEndian32(head);
    // Checked again for every frame: a connection admitted by the frame before may send
    // a big one right behind it.
    const uint32_t limit = c->admitted ? o.max_frame_bytes : o.unadmitted_max_frame_bytes;
    if (bytes == 0 || bytes > limit) {
      server_->Closed(c->admitted ? RpcClosure::kFrameLimit : RpcClosure::kFrameBeforeAdmission,
                      c->entry->peer, c->admitted,
                      "a frame of " + std::to_string(bytes) + " bytes (the limit is " +
                          std::to_string(limit) +
                          (c->admitted ? ")" : " before the connection is admitted)"));
      ok = false;
      break;
    }
    if (c->read_bytes - offset - 4 < bytes) break;  // the rest is to come
    offset += 4 + size_t{bytes};
    if (!RunCall(c, head + 4, bytes)) {
      ok = false;
      break;
    }
  }
  if (!ok) return false;
  if (offset > 0) {
    c->read_bytes -= offset;
    if (c->read_bytes > 0) {
      std::memmove(c->read_buffer.get(), c->read_buffer.get() + offset, c->read_bytes);
    }
    if (c->read_capacity > kIdleBufferBytes && c->read_bytes <= kInitialBufferBytes) {
      std::unique_ptr<uint8_t[]> smaller(new uint8_t[kInitialBufferBytes]);
      if (c->read_bytes > 0) std::memcpy(smaller.get(), c->read_buffer.get(), c->read_bytes);
      c->read_buffer = std::move(smaller);
      c->read_capacity = kInitialBufferBytes;
    }
  }
  return true;
}

bool RpcServer::IoThread::RunCall(Connection* c, uint8_t* frame, uint32_t bytes) {
  c->input->Reset(frame, bytes);
  c->output->resetBuffer();
  c->output->getWritePtr(4);
  c->output->wroteBytes(4);  // the frame's length, filled in below
  try {
    // False: a message that is no call (a reply, an exception), as TNonblockingServer
    // took it: the connection closes.
    if (!c->processor->process(c->input_protocol, c->output_protocol, nullptr)) {
      MC_LOG_DEBUG("rpc server: a message from %s that is no call closed its connection",
                   c->entry->peer.c_str());
      return false;
    }
  } catch (const std::exception& e) {
    MC_LOG_DEBUG("rpc server: a call from %s closed its connection: %s",
                 c->entry->peer.c_str(), e.what());
    return false;
  }
  if (!c->admitted && c->admission->admitted()) Admit(c);
  uint8_t* reply = nullptr;
  uint32_t reply_bytes = 0;
  c->output->getBuffer(&reply, &reply_bytes);
  if (reply_bytes <= 4) return true;  // a oneway call
  PutBigEndian32(reply, reply_bytes - 4);
  c->write_data = reply;
  c->write_offset = 0;
  c->write_bytes = reply_bytes;
  return Send(c);
}

bool RpcServer::IoThread::Send(Connection* c) {
  while (c->write_offset < c->write_bytes) {
    const ssize_t sent = send(c->fd, c->write_data + c->write_offset,
                              c->write_bytes - c->write_offset, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!c->writing) Watch(c, EPOLLOUT);
        c->writing = true;
        return true;
      }
      MC_LOG_DEBUG("rpc server: send: %s", strerror(errno));
      return false;
    }
    c->write_offset += static_cast<size_t>(sent);
  }
  if (c->writing) {
    Watch(c, EPOLLIN);
    c->writing = false;
  }
  if (c->output->getBufferSize() > kIdleBufferBytes) {
    c->output = std::make_shared<TMemoryBuffer>();
    c->output_protocol = server_->protocols_->getProtocol(c->output);
  }
  return true;
}

bool RpcServer::IoThread::OnWritable(Connection* c) {
  if (!c->writing) return true;
  RpcConnections::Touch(c->entry, CoarseNanos());  // the peer is reading its reply
  if (!Send(c)) return false;
  // Frames that came while the reply waited are in the buffer already.
  return c->writing || RunFrames(c);
}

void RpcServer::IoThread::Watch(Connection* c, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = c;
  epoll_ctl(epoll_, EPOLL_CTL_MOD, c->fd, &ev);
}

RpcServer::RpcServer(std::shared_ptr<apache::thrift::TProcessorFactory> processors,
                     std::shared_ptr<apache::thrift::protocol::TProtocolFactory> protocols,
                     RpcServerOptions options)
    : processors_(std::move(processors)),
      protocols_(std::move(protocols)),
      options_(std::move(options)),
      spinners_(std::max(1, options_.max_spinning)),
      connections_(options_.limits) {}

RpcServer::~RpcServer() {
  Stop();
  for (auto& t : io_threads_) t->Join();
  CloseFd(&listen_fd_);
  CloseFd(&accept_epoll_);
  CloseFd(&stop_event_);
}

bool RpcServer::Listen(std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_ADDRCONFIG;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options_.port);
  const int rc = getaddrinfo(options_.address.empty() ? nullptr : options_.address.c_str(),
                             port.c_str(), &hints, &found);
  if (rc != 0) {
    *error = "cannot resolve " + options_.address + ": " + gai_strerror(rc);
    return false;
  }
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
      why = strerror(errno);
      close(fd);
      continue;
    }
    listen_fd_ = fd;
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0) {
    *error = "cannot listen on " + options_.address + ":" + port + ": " + why;
    return false;
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
  port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  accept_epoll_ = epoll_create1(EPOLL_CLOEXEC);
  stop_event_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (accept_epoll_ < 0 || stop_event_ < 0) {
    *error = std::string("cannot make the acceptor's epoll set: ") + strerror(errno);
    return false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(accept_epoll_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = stop_event_;
  epoll_ctl(accept_epoll_, EPOLL_CTL_ADD, stop_event_, &ev);
  const size_t threads = std::max<size_t>(1, options_.io_threads);
  for (size_t i = 0; i < threads; ++i) {
    io_threads_.push_back(std::make_unique<IoThread>(this, i));
    if (!io_threads_.back()->Open(error)) return false;
  }
  return true;
}

void RpcServer::Serve() {
  for (auto& t : io_threads_) t->Start();
  epoll_event events[2];
  while (!stopping_.load(std::memory_order_acquire)) {
    const int n = epoll_wait(accept_epoll_, events, 2, -1);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == listen_fd_) AcceptAll();
    }
  }
  for (auto& t : io_threads_) t->Join();
}

void RpcServer::AcceptAll() {
  for (;;) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      const int error = errno;
      uint64_t unlogged = 0;
      if (g_accept_log.Due(&unlogged)) {
        MC_LOG_WARN("rpc server: accept: %s (%llu more not logged)", strerror(error),
                    static_cast<unsigned long long>(unlogged));
      }
      if (error == EMFILE || error == ENFILE) FreeDescriptor();
      // The pending connection stays readable; give the I/O threads time to close what
      // they were told to rather than spin on it.
      usleep(10 * 1000);
      return;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Adopt(fd, address);
  }
}

void RpcServer::Adopt(int fd, const sockaddr_storage& address) {
  auto c = std::make_unique<Connection>();
  c->fd = fd;
  c->socket = std::make_shared<apache::thrift::transport::TSocket>(fd);
  c->input_protocol = protocols_->getProtocol(c->input);
  c->output_protocol = protocols_->getProtocol(c->output);
  try {
    apache::thrift::TConnectionInfo info;
    info.input = c->input_protocol;
    info.output = c->output_protocol;
    info.transport = c->socket;
    c->processor = processors_->getProcessor(info);
  } catch (const std::exception& e) {
    MC_LOG_WARN("rpc server: no processor for a new connection: %s", e.what());
    return;  // c's socket closes the fd
  }
  c->admission = dynamic_cast<RpcAdmission*>(c->processor.get());
  c->admitted = c->admission == nullptr || c->admission->admitted();
  const auto* peer = reinterpret_cast<const sockaddr*>(&address);
  const size_t owner = next_thread_;
  next_thread_ = (next_thread_ + 1) % io_threads_.size();
  std::vector<RpcConnections::Victim> victims;
  c->entry = connections_.Add(FormatIp(peer), FormatAddress(peer), owner, c->admitted,
                              CoarseNanos(), &victims);
  c->id = c->entry->id;
  io_threads_[owner]->Adopt(std::move(c));
  CloseVictims(victims);
}

void RpcServer::FreeDescriptor() {
  RpcConnections::Victim victim;
  if (connections_.PickAny(RpcClosure::kDescriptors, &victim)) CloseVictims({victim});
}

void RpcServer::CloseVictims(const std::vector<RpcConnections::Victim>& victims) {
  const RpcConnections::Limits& limits = connections_.limits();
  for (const RpcConnections::Victim& v : victims) {
    std::string detail;
    switch (v.why) {
      case RpcClosure::kSourceCap:
        detail = "the oldest of its address's connections not admitted, past " +
                 std::to_string(limits.max_unadmitted_per_source);
        break;
      case RpcClosure::kUnadmittedCap:
        detail = "the oldest connection not admitted, past " +
                 std::to_string(limits.max_unadmitted);
        break;
      case RpcClosure::kAdmittedCap:
        detail = "idle the longest, past " + std::to_string(limits.max_admitted) +
                 " admitted connections (--rpc_max_connections)";
        break;
      case RpcClosure::kDescriptors:
        detail = "out of descriptors at accept (raise the limit: ulimit -n, LimitNOFILE=)";
        break;
      default:
        detail = RpcClosureName(v.why);
        break;
    }
    Closed(v.why, v.peer, v.admitted, detail);
    io_threads_[v.owner]->Doom(v.id);
  }
}

void RpcServer::Closed(RpcClosure why, const std::string& peer, bool admitted,
                       const std::string& detail) {
  closed_[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  uint64_t unlogged = 0;
  if (!(admitted ? g_admitted_log : g_unadmitted_log).Due(&unlogged)) return;
  const std::string more =
      unlogged == 0 ? ""
                    : " (and " + std::to_string(unlogged) + " more such closures not logged)";
  if (admitted && why != RpcClosure::kFrameLimit) {
    MC_LOG_INFO("rpc server: closed %s: %s%s", peer.c_str(), detail.c_str(), more.c_str());
  } else {
    MC_LOG_WARN("rpc server: closed %s%s: %s%s", peer.c_str(),
                admitted ? "" : " (not admitted)", detail.c_str(), more.c_str());
  }
}

int64_t RpcServer::SweepIntervalMs() const {
  int64_t shortest = options_.handshake_timeout_ms;
  if (options_.idle_timeout_ms > 0) shortest = std::min(shortest, options_.idle_timeout_ms);
  return std::clamp<int64_t>(shortest / 4, 10, 1000);
}

void RpcServer::Stop() {
  if (stopping_.exchange(true, std::memory_order_acq_rel)) return;
  if (stop_event_ >= 0) {
    uint64_t one = 1;
    ssize_t ignored = write(stop_event_, &one, sizeof(one));
    (void)ignored;
  }
  for (auto& t : io_threads_) t->Wake();
}

}  // namespace mooncake
