// Large local copies shared between the calling thread and one helper thread.
//
// Why: one thread's memcpy from memory that is not in its cache is bound by how many
// cache misses it keeps in flight, not by the memory's bandwidth. On the hosts we measured
// (a 2-vCPU VM) one thread copies 1 MiB from a cold source in ~97 us, two threads each
// copying half in ~48 us. A get of a large value, or a batch of many small ones, spends
// most of its daemon time in that copy.
//
// How: Copy() cuts the pieces into groups of about kGroupBytes (a big piece is split, small
// ones are grouped), publishes them, and then both the caller and the helper take groups
// off one atomic counter until none is left; Copy returns once every group is copied, the
// helper's last one included. The caller never waits for the helper to start: a helper
// that is asleep or busy elsewhere simply takes no group, and the caller copies them all
// (never slower than copying alone, but for the wake-up it may have sent).
//
// After each copy it was posted, the helper polls for the next one for spin_ns
// (sched_yield between polls, common/base/spin_wait.h), then sleeps on a condition variable, so
// an idle daemon does not spin. A copy of at least wake_bytes wakes a sleeping helper (a
// wake-up costs the waker tens of us on a VM, worth it only for big copies); a smaller one
// gets help only from a helper that is still polling.
//
// Measured (2-vCPU VM, 1 MiB from a cold source into a warm destination): ~97 us alone,
// ~48 us with an awake helper on the other vCPU. Inside the daemon on that VM the other
// vCPU was mostly busy and the helper a net loss, so mooncaked starts it only when asked
// (--copy_helper_min, docs/daemon.md).
//
// Thread-safety: Copy may be called from any thread. One copy at a time is shared: a
// caller that finds the helper taken copies alone. Copy never takes a lock a caller may
// hold; the helper takes none while copying.
#ifndef MOONCAKE_DAEMON_PARALLEL_COPY_H_
#define MOONCAKE_DAEMON_PARALLEL_COPY_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace mooncake {

class ParallelCopy {
 public:
  struct Piece {
    char* dest;
    const char* src;
    size_t length;
  };

  static constexpr size_t kGroupBytes = 64u << 10;
  static constexpr size_t kDefaultMinBytes = 256u << 10;
  static constexpr size_t kDefaultWakeBytes = 512u << 10;
  static constexpr int64_t kDefaultSpinNs = 200 * 1000;

  // min_bytes: copies smaller in all stay on the caller; 0 disables the helper (no
  // thread is started and every copy is the caller's).
  explicit ParallelCopy(size_t min_bytes = kDefaultMinBytes,
                        size_t wake_bytes = kDefaultWakeBytes,
                        int64_t spin_ns = kDefaultSpinNs);
  ~ParallelCopy();  // stops and joins the helper
  ParallelCopy(const ParallelCopy&) = delete;
  ParallelCopy& operator=(const ParallelCopy&) = delete;

  // Copies every piece (memcpy semantics: no piece may overlap another or itself).
  void Copy(const Piece* pieces, size_t count);
  void Copy(const std::vector<Piece>& pieces) { Copy(pieces.data(), pieces.size()); }

  // Bytes the helper copied since the start (tests, metrics).
  uint64_t helper_bytes() const { return helper_bytes_.load(std::memory_order_relaxed); }

 private:
  // Copies groups off next_ until none is left; the bytes copied.
  size_t RunGroups();
  void HelperLoop();

  const size_t min_bytes_;
  const size_t wake_bytes_;
  const int64_t spin_ns_;

  std::mutex slot_mu_;  // held by the caller whose copy is shared (try_lock only)
  // The shared copy: written under slot_mu_ before open_ is set, read by the helper
  // only while it is inside (helper_in_) and open_ is set.
  std::vector<Piece> parts_;
  std::vector<size_t> group_end_;  // parts_ index one past each group's last part
  std::atomic<bool> open_{false};
  std::atomic<size_t> next_group_{0};
  std::atomic<int> helper_in_{0};
  std::atomic<uint64_t> posted_{0};  // bumped once per shared copy

  std::mutex sleep_mu_;
  std::condition_variable wake_;
  std::atomic<bool> sleeping_{false};  // written under sleep_mu_
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> helper_bytes_{0};
  std::thread helper_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_PARALLEL_COPY_H_
