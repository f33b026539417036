// Pool memory the daemon may still write although the calls that named it have returned:
// the staging blocks (and other keepalives) of the requests that were in flight on a
// connection when it was lost, and every application allocation live at that moment.
// None of it goes back to the pool before the daemon can provably no longer touch it.
//
// Why: when the connection dies while the daemon is copying into a staging block (a get
// whose replica is still arriving), the calls fail at once with -900 and drop their
// blocks; a reconnect, or the next call, could be handed the same memory while the old
// copy still lands in it. The daemon keeps running a lost connection's requests to their
// end and unmaps the pool only then.
//
// When the memory comes back (whichever is first):
//  - the same daemon process answers POOL_FENCE on a later connection with this pool
//    (Connection sends it after every HELLO while something is held here): it answers once
//    every earlier connection of the pool has been torn down (daemon/service/pool_fences.h);
//  - that daemon process has exited (the pidfd taken when the lost connection was dialed
//    becomes readable): a dead process writes nothing. This also covers a restart, where
//    the new daemon knows nothing of the old one's requests.
// The alternatives were worse: a fresh pool per connection would break the promise that
// pool pointers survive a reconnect (docs/libmc.md); never reusing the blocks would leak
// pool memory at every lost connection; a timer would only guess.
//
// Without a pidfd (pidfd_open unavailable, or the daemon's pid not visible from here) only
// the fence brings memory back. The whole quarantine is released when the handle is
// destroyed: libmc then never reuses the pool.
//
// Thread-safe. Hold may be called with a channel's lock held (it only takes this
// object's and the pool's); held memory is released outside this object's lock.
#ifndef MOONCAKE_LIBMC_POOL_QUARANTINE_H_
#define MOONCAKE_LIBMC_POOL_QUARANTINE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "libmc/pool.h"

namespace mooncake {
namespace client {

class PoolQuarantine {
 public:
  explicit PoolQuarantine(std::shared_ptr<Pool> pool);  // pool may be null (no pool)
  ~PoolQuarantine();
  PoolQuarantine(const PoolQuarantine&) = delete;
  PoolQuarantine& operator=(const PoolQuarantine&) = delete;

  // A connection to daemon_id (whose process is daemon_pidfd, -1 when unknown; duplicated,
  // not taken) was lost with requests in flight; pinned are their keepalives.
  void Hold(uint64_t daemon_id, int daemon_pidfd, std::vector<std::shared_ptr<void>> pinned);
  // Everything held for daemon_id, as one keepalive for the POOL_FENCE sent to it (the
  // memory comes back when the answer does); nullptr when nothing is held for it.
  std::shared_ptr<void> TakeFor(uint64_t daemon_id);
  // For timed-out requests, whose late answer releases it: the application's allocations
  // live now, pinned (see Pool::PinAllocations); nullptr without a pool.
  std::shared_ptr<void> PinAllocations();
  // Losses whose memory is still held (for tests and logs).
  size_t held() const;

  // pidfd_open(pid) with close-on-exec, or -1.
  static int OpenPidfd(int pid);

 private:
  struct Loss {
    ~Loss();  // closes pidfd; releasing pinned gives the memory back
    uint64_t seq = 0;  // tells losses apart for the watcher
    uint64_t daemon_id = 0;
    int pidfd = -1;  // owned
    std::vector<std::shared_ptr<void>> pinned;
  };
  using Losses = std::vector<std::unique_ptr<Loss>>;
  // Watches the pidfds of held losses, releasing those whose daemon exited.
  void WatchLoop();
  void Wake();

  const std::shared_ptr<Pool> pool_;
  mutable std::mutex mu_;
  Losses held_;             // guarded by mu_
  uint64_t next_seq_ = 1;   // guarded by mu_
  bool stopping_ = false;   // guarded by mu_
  int wake_fd_ = -1;                         // eventfd: held_ changed, or stop
  std::thread watcher_;                      // started by the first Hold with a pidfd
};

}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_POOL_QUARANTINE_H_
