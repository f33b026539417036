#include "libmc/channel.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/base/error_code.h"
#include "common/base/logging.h"

namespace mooncake {
namespace client {

namespace {

// How long the reader role must lie unused before the background thread takes it: long
// enough that a thread calling in a loop never meets the background thread (every meeting
// costs a wake-up), short enough that a daemon that died between calls is noticed before
// the next call, which then redials at once instead of writing into a dead socket.
constexpr auto kIdleGrace = std::chrono::milliseconds(5);

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "a futex word must be a plain 32-bit integer");

// Sleeps while *word is 0, until deadline at the latest. steady_clock is CLOCK_MONOTONIC,
// the clock of an absolute FUTEX_WAIT_BITSET timeout. Returns early on a spurious wake-up
// or a signal: callers look again either way.
void SleepOn(std::atomic<uint32_t>* word, Clock::time_point deadline) {
  auto since_epoch = deadline.time_since_epoch();
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  struct timespec at;
  at.tv_sec = static_cast<time_t>(seconds.count());
  at.tv_nsec = static_cast<long>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - seconds).count());
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_BITSET_PRIVATE, 0u, &at,
          nullptr, FUTEX_BITSET_MATCH_ANY);
}

void WakeUp(std::atomic<uint32_t>* word) {
  if (word != nullptr) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr,
            nullptr, 0);
  }
}

}  // namespace

namespace {

// The pidfd of the process at the other end of a Unix socket, or -1.
int PeerPidfd(int fd) {
  struct ucred cred;
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
  return PoolQuarantine::OpenPidfd(cred.pid);
}

}  // namespace

Channel::Channel(int fd, int read_slice_ms, int64_t spin_ns,
                 std::shared_ptr<PoolQuarantine> quarantine)
    : fd_(fd),
      read_slice_ms_(read_slice_ms),
      quarantine_(std::move(quarantine)),
      daemon_pidfd_(quarantine_ ? PeerPidfd(fd) : -1),
      free_since_(Clock::now()),
      spin_(spin_ns) {
  background_ = std::thread([this] { BackgroundLoop(); });
}

Channel::~Channel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  background_cv_.notify_all();
  shutdown(fd_, SHUT_RDWR);  // ends the background thread's poll
  if (background_.joinable()) background_.join();
  close(fd_);
  if (daemon_pidfd_ >= 0) close(daemon_pidfd_);
}

void Channel::Fail(bool deliberate) {
  {
    // The quarantine and the pool are called under the lock: they never call back into
    // the channel, so there is no lock order to respect.
    std::lock_guard<std::mutex> lock(mu_);
    if (!down_.load(std::memory_order_relaxed) && !deliberate && established_) {
      MC_LOG_WARN("mooncake_store: lost the connection to mooncaked");
    }
    down_.store(true, std::memory_order_release);
    // The daemon may still be running these requests, reading and writing what they named.
    bool in_flight = head_ != nullptr || !abandoned_.empty();
    std::vector<std::shared_ptr<void>> pinned;
    for (auto& a : abandoned_) pinned.push_back(std::move(a.second));
    for (Pending* p = head_; p != nullptr; p = p->next) {
      if (p->keepalive) pinned.push_back(std::move(p->keepalive));
    }
    abandoned_.clear();
    // Only requests after HELLO name pool memory (HELLO and MOUNT_SEGMENT do not).
    if (in_flight && established_ && quarantine_) {
      quarantine_->Hold(daemon_id_, daemon_pidfd_, std::move(pinned));
    }
    pinned.clear();  // without a pool nothing could be written: released here
    for (Pending* p = head_; p != nullptr;) {
      Pending* next = p->next;
      p->linked = false;
      p->prev = p->next = nullptr;
      p->code = ErrorCode::RPC_FAIL;
      p->done = true;
      p->signal.store(1, std::memory_order_release);
      WakeUp(&p->signal);  // under the lock (a rare path): p cannot be gone yet
      p = next;
    }
    head_ = tail_ = nullptr;
  }
  background_cv_.notify_all();
  shutdown(fd_, SHUT_RDWR);
}

bool Channel::Send(Pending* p, const char* frame, size_t length, int fd_to_pass) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (down_.load(std::memory_order_relaxed)) return false;
    Link(p);
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
      p->code = ErrorCode::RPC_TIMEOUT;
    }
  }
  return true;
}

ErrorCode Channel::Wait(Pending* p, Clock::time_point deadline, uds::Message* message) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    Clock::time_point now = p->done ? Clock::time_point() : Clock::now();
    const bool late = !p->done && now >= deadline;
    // A role handed to us must be passed on even when we no longer need it.
    if (p->lead || (!p->done && !late && TryTakeRole())) {
      p->lead = false;
      if (!p->done && !late) {
        lock.unlock();
        Lead(p, deadline, now);
        lock.lock();
      }
      if (std::atomic<uint32_t>* next = ReleaseRole()) {
        lock.unlock();
        WakeUp(next);
        lock.lock();
      }
      continue;
    }
    if (p->done) {
      *message = std::move(p->message);
      return p->code;
    }
    if (late) {
      Forget(p);
      return ErrorCode::RPC_TIMEOUT;
    }
    p->sleeping = true;
    p->signal.store(0, std::memory_order_relaxed);  // set again by whoever wakes us
    lock.unlock();
    SleepOn(&p->signal, deadline);
    lock.lock();
    p->sleeping = false;
  }
}

void Channel::Abandon(Pending* p) {
  std::lock_guard<std::mutex> lock(mu_);
  Forget(p);
}

void Channel::MarkEstablished(uint64_t daemon_id) {
  std::lock_guard<std::mutex> lock(mu_);
  established_ = true;
  daemon_id_ = daemon_id;
}

void Channel::Lead(Pending* self, Clock::time_point deadline, Clock::time_point now) {
  try {
    for (;; now = Clock::now()) {
      Outcome outcome = DispatchBuffered(self);
      if (outcome == Outcome::kMine) return;
      if (outcome == Outcome::kBroken) break;
      if (now >= deadline) return;
      // A blocking recv returns after read_slice_ms_ at the latest (SO_RCVTIMEO); when
      // less time is left, wait exactly that long for data first.
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
      if (left < read_slice_ms_) {
        struct pollfd pfd = {fd_, POLLIN, 0};
        int n = poll(&pfd, 1, static_cast<int>(left));
        if (n == 0 || (n < 0 && errno == EINTR)) continue;  // the loop re-checks the time
        if (n < 0) break;
      }
      // The reply is usually tens of microseconds away: polling for it spares the daemon
      // the wake-up of this thread (common/base/spin_wait.h). A miss blocks in recv below.
      bool spun = spin_.SpinReadable(fd_);
      uds::FrameReader::Status status = frames_.ReadFrom(fd_);
      if (!spun) spin_.Blocked();
      for (int fd : frames_.TakeFds()) close(fd);  // the daemon never sends descriptors
      if (status == uds::FrameReader::Status::kWouldBlock) continue;  // a slice passed
      if (status != uds::FrameReader::Status::kOk) break;
    }
  } catch (...) {  // out of memory while parsing: the stream's state is unknown
  }
  Fail(false);  // every pending request, self included, is done (-900) from here on
}

Channel::Outcome Channel::DispatchBuffered(Pending* self) {
  Outcome result = Outcome::kOther;
  bool oversized = false;
  const char* payload = nullptr;
  size_t length = 0;
  // Every complete frame is dispatched, also after self's: others should not wait for
  // the next holder of the role.
  while (frames_.Next(&payload, &length, &oversized)) {
    Outcome outcome = Dispatch(payload, length, self);
    if (outcome == Outcome::kBroken) return outcome;
    if (outcome == Outcome::kMine) result = outcome;
  }
  if (oversized) {
    MC_LOG_ERROR("mooncake_store: mooncaked sent an oversized frame; disconnecting");
    return Outcome::kBroken;
  }
  return result;
}

Channel::Outcome Channel::Dispatch(const char* payload, size_t length, Pending* self) {
  uds::Message message;  // parsed before taking the lock
  std::string why;
  if (!uds::ParseMessage(payload, length, &message, &why)) {
    MC_LOG_ERROR("mooncake_store: mooncaked sent a malformed frame (%s); disconnecting",
                 why.c_str());
    return Outcome::kBroken;
  }
  std::shared_ptr<void> keepalive;  // of an abandoned request: released after the lock
  std::atomic<uint32_t>* to_wake = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Pending* p = Find(message.id);
    if (p == nullptr) {  // an answer nobody waits for any more
      if (!abandoned_.empty()) {
        auto it = abandoned_.find(message.id);
        if (it != abandoned_.end()) {
          keepalive = std::move(it->second);
          abandoned_.erase(it);
        }
      }
      return Outcome::kOther;
    }
    // p->keepalive stays with p: the caller's own thread releases it when its call
    // returns, so a staging block is back in the pool before the call that used it ends.
    Unlink(p);
    p->code = FromWire(message.head);  // a code the table lacks is INTERNAL_ERROR
    p->message = std::move(message);
    p->done = true;
    if (p == self) return Outcome::kMine;
    if (p->sleeping) {
      p->signal.store(1, std::memory_order_release);
      to_wake = &p->signal;
    }
  }
  WakeUp(to_wake);  // p may be gone by now: see Pending::signal
  return Outcome::kOther;
}

void Channel::BackgroundLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  try {
    while (!stop_ && !down_.load(std::memory_order_relaxed)) {
      if (role_ != Role::kFree) {
        // A caller reads (and sees an end itself); look again later. A timed wait, not a
        // notification, so that releasing the role costs callers nothing.
        background_cv_.wait_for(lock, kIdleGrace);
        continue;
      }
      Clock::time_point ready = free_since_ + kIdleGrace;
      if (Clock::now() < ready) {
        background_cv_.wait_until(lock, ready);
        continue;
      }
      role_ = Role::kBackground;
      background_polling_ = true;  // a caller may take the role from us until we read
      lock.unlock();
      // Complete frames are never left buffered by a holder, so waiting for the socket is
      // enough. A partial frame may be; its rest makes the socket readable.
      struct pollfd pfd = {fd_, POLLIN, 0};
      int n = poll(&pfd, 1, -1);
      int poll_error = n < 0 ? errno : 0;
      lock.lock();
      if (stop_) break;  // the destructor shut the socket: no end worth a log line
      if (role_ != Role::kBackground || !background_polling_) continue;  // taken from us
      background_polling_ = false;
      if (n < 0 && poll_error == EINTR) {
        role_ = Role::kFree;  // free_since_ is old: the next round takes it again
        continue;
      }
      lock.unlock();
      bool healthy = n > 0;
      if (healthy) {
        uds::FrameReader::Status status = frames_.ReadFrom(fd_);
        for (int fd : frames_.TakeFds()) close(fd);
        healthy = status == uds::FrameReader::Status::kOk ||
                  status == uds::FrameReader::Status::kWouldBlock;
        if (healthy) healthy = DispatchBuffered(nullptr) != Outcome::kBroken;
      }
      if (!healthy) Fail(false);
      lock.lock();
      std::atomic<uint32_t>* next = ReleaseRole();  // to a caller that fell asleep meanwhile
      if (role_ == Role::kFree) free_since_ = Clock::time_point();  // ours again at once
      if (next != nullptr) {
        lock.unlock();
        WakeUp(next);
        lock.lock();
      }
    }
  } catch (...) {  // out of memory: give up the socket rather than leave it unread
    if (!lock.owns_lock()) lock.lock();
    if (role_ == Role::kBackground) role_ = Role::kFree;
    lock.unlock();
    Fail(false);
  }
}

bool Channel::TryTakeRole() {
  if (role_ == Role::kFree || (role_ == Role::kBackground && background_polling_)) {
    role_ = Role::kCaller;
    background_polling_ = false;
    return true;
  }
  return false;
}

std::atomic<uint32_t>* Channel::ReleaseRole() {
  // Hand the role to a caller asleep on a request still unanswered: it reads its own
  // reply without a further hop. Sleepers exist only while the role is held (they took it
  // otherwise), so none is ever left asleep with nobody reading.
  if (!down_.load(std::memory_order_relaxed)) {
    for (Pending* q = head_; q != nullptr; q = q->next) {
      if (q->sleeping && !q->done && !q->lead) {
        q->lead = true;
        role_ = Role::kCaller;
        q->signal.store(1, std::memory_order_release);
        return &q->signal;
      }
    }
  }
  role_ = Role::kFree;
  free_since_ = Clock::now();
  return nullptr;
}

void Channel::Link(Pending* p) {
  p->prev = tail_;
  p->next = nullptr;
  if (tail_ != nullptr) {
    tail_->next = p;
  } else {
    head_ = p;
  }
  tail_ = p;
  p->linked = true;
}

void Channel::Unlink(Pending* p) {
  if (p->prev != nullptr) {
    p->prev->next = p->next;
  } else {
    head_ = p->next;
  }
  if (p->next != nullptr) {
    p->next->prev = p->prev;
  } else {
    tail_ = p->prev;
  }
  p->prev = p->next = nullptr;
  p->linked = false;
}

Pending* Channel::Find(uint64_t id) {
  // Oldest first: answers mostly come in the order of the requests. The list is as long
  // as the requests in flight, i.e. short.
  for (Pending* p = head_; p != nullptr; p = p->next) {
    if (p->id == id) return p;
  }
  return nullptr;
}

void Channel::Forget(Pending* p) {
  if (!p->linked) return;  // answered or failed already
  Unlink(p);
  try {
    // Zero copy: the request named the application's own pool memory, which must not be
    // handed out again (freed by the application meanwhile) before the daemon is done.
    if (!p->keepalive && quarantine_ && established_) p->keepalive = quarantine_->PinAllocations();
    if (!p->keepalive) return;  // nothing to hold until the late answer
    abandoned_.emplace(p->id, std::move(p->keepalive));
  } catch (...) {
    // Out of memory: the block is given back early, the lesser evil than a leak that
    // would stall every later transfer.
    p->keepalive.reset();
  }
}

}  // namespace client
}  // namespace mooncake
