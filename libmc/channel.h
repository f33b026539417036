// One socket to mooncaked from dial to death, shared by every thread of a handle.
//
// Replies are read with a leader/follower scheme, because a thread hop per request (a
// reader thread woken by the reply, then waking the caller) cost more than the daemon's
// own work on a small machine. At most one thread at a time holds the *reader role* and
// reads the socket: a caller waiting for its reply takes the role when it is free and
// reads frames itself, completing other callers' requests on the way, until its own reply
// arrives; then it hands the role to a caller still asleep (who then reads its own reply
// without a further hop), or leaves it free. A lone caller thus sends, reads and returns
// on its own thread. Callers that find the role taken sleep on a futex word of their own
// (Pending::signal) until the holder completes their request or hands them the role.
//
// A background thread takes the role once it has been free for a short grace period
// (kIdleGrace in channel.cc): it notices a dead daemon while no call is waiting (so the
// next call redials instead of writing into a dead socket) and consumes late replies of
// requests that timed out, releasing what they kept alive. While it merely waits for the
// socket to become readable (poll), a caller may take the role from it; once it reads, it
// completes requests like any holder, then hands the role on.
//
// Every wait is bounded: sleepers wait until their deadline; a reading caller blocks in
// recv at most a slice (SO_RCVTIMEO, set by the dialer) or exactly its remaining time.
//
// What a request keeps alive (its keepalive: the staging block the daemon reads or writes)
// is never given back while the daemon may still touch it: on an answer, yes; on a
// timeout it waits for the late answer; when the channel dies it goes, with the
// application's allocations live at that moment, to the handle's PoolQuarantine, which
// gives it back once the daemon has provably finished (libmc/pool_quarantine.h).
#ifndef MOONCAKE_LIBMC_CHANNEL_H_
#define MOONCAKE_LIBMC_CHANNEL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "common/base/error_code.h"
#include "common/base/spin_wait.h"
#include "common/uds/uds_protocol.h"
#include "libmc/pool_quarantine.h"

namespace mooncake {
namespace client {

using Clock = std::chrono::steady_clock;

// One request waiting for its response. Every field but signal is guarded by the
// channel's mutex. It may live on the caller's stack: the channel forgets it before Wait
// returns (or, for a request never waited for, in Abandon), so nothing points to it
// afterwards.
struct Pending {
  uint64_t id = 0;
  bool done = false;
  bool linked = false;    // in the channel's in-flight list
  bool sleeping = false;  // its caller sleeps on signal and could take the reader role
  bool lead = false;      // the reader role was handed to its caller while it slept
  ErrorCode code = ErrorCode::OK;
  uds::Message message;
  std::shared_ptr<void> keepalive;  // released by the caller once its call returns
  // The futex word its caller sleeps on: set to 1 (under the mutex) when it should look
  // again, then woken after the mutex is released, so that the woken caller does not
  // run into a mutex still held (a condition variable would have to be notified under
  // the mutex, as the Pending may be gone as soon as the mutex is free). A wake that
  // comes after the Pending is gone hits at most some other futex at that address, and
  // every futex user tolerates spurious wake-ups.
  std::atomic<uint32_t> signal{0};
  Pending* prev = nullptr;  // the in-flight list, oldest first
  Pending* next = nullptr;
};

class Channel {
 public:
  // Takes fd (a connected socket with SO_RCVTIMEO set to read_slice_ms). The reader spins
  // up to spin_ns (adaptive, common/base/spin_wait.h; 0 = never) for a reply before it blocks
  // in recv. quarantine (may be null: no pool) receives what requests in flight pinned
  // when the channel dies.
  Channel(int fd, int read_slice_ms, int64_t spin_ns,
          std::shared_ptr<PoolQuarantine> quarantine);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Lock-free: asked on every request by Connection::Current.
  bool IsDown() const { return down_.load(std::memory_order_acquire); }

  // Marks the channel down and fails every pending request with -900 at once; shuts the
  // socket so the reader (and the daemon) see the end. deliberate: no log line. What the
  // requests in flight pinned goes to the quarantine, not back to the pool.
  void Fail(bool deliberate);

  // Registers p, then writes the frame. false when the channel is already down (p is
  // then not registered); a failed write fails the whole channel, p included.
  bool Send(Pending* p, const char* frame, size_t length, int fd_to_pass);

  // Waits for p until deadline, reading the socket itself when the reader role is free;
  // returns p's code and moves the response into *message. On return p is no longer
  // known to the channel (a late answer to a timed-out request is dropped, its keepalive
  // kept until then).
  ErrorCode Wait(Pending* p, Clock::time_point deadline, uds::Message* message);

  // Forgets p without waiting for it (a ticket dropped unwaited), as a timeout would.
  void Abandon(Pending* p);

  // Called once the handshake succeeded (with the daemon's id from HELLO): from then on a
  // lost socket is worth a log line, and quarantines what its requests pinned.
  void MarkEstablished(uint64_t daemon_id);

 private:
  enum class Role { kFree, kCaller, kBackground };
  enum class Outcome { kOther, kMine, kBroken };

  void BackgroundLoop();
  // Holding the role: reads until self is done, the deadline passes or the socket fails.
  // now: the time the caller just read (each clock read costs ~50 ns here).
  void Lead(Pending* self, Clock::time_point deadline, Clock::time_point now);
  // Cuts and dispatches every complete buffered frame; kMine when one completed self,
  // kBroken when the stream is unusable.
  Outcome DispatchBuffered(Pending* self);
  Outcome Dispatch(const char* payload, size_t length, Pending* self);

  // The rest need mu_ held.
  bool TryTakeRole();
  // Hands the role on; returns the futex word to wake once mu_ is released (or null).
  std::atomic<uint32_t>* ReleaseRole();
  void Link(Pending* p);
  void Unlink(Pending* p);
  Pending* Find(uint64_t id);
  void Forget(Pending* p);  // unlink; its keepalive waits in abandoned_ for the answer

  const int fd_;
  const int read_slice_ms_;
  const std::shared_ptr<PoolQuarantine> quarantine_;
  const int daemon_pidfd_;  // the peer's process (SO_PEERCRED at dial), -1 if unknown
  std::mutex mu_;  // guards everything below but the reader state, and every Pending
  std::atomic<bool> down_{false};
  bool established_ = false;
  uint64_t daemon_id_ = 0;
  bool stop_ = false;
  Pending* head_ = nullptr;
  Pending* tail_ = nullptr;
  // Requests whose caller gave up: their keepalive until the answer (or the end) comes;
  // for one without, the application's allocations pinned (it may name any of them).
  std::unordered_map<uint64_t, std::shared_ptr<void>> abandoned_;
  Role role_ = Role::kFree;
  bool background_polling_ = false;  // the background thread holds the role but only polls
  Clock::time_point free_since_{};
  std::condition_variable background_cv_;
  std::mutex send_mu_;  // one frame on the wire at a time

  // Reader state: touched only by the holder of the reader role (handed over under mu_).
  uds::FrameReader frames_;
  AdaptiveSpin spin_;  // the reader's wait for the next bytes

  std::thread background_;  // last: started once everything above exists
};

}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_CHANNEL_H_
