// The epoch of the master this daemon's segments are mounted at, and the gate every
// access to them under a grant of some master passes: reads under its lease, writes under
// its reservation.
//
// Why. A master restart may restore the directory (docs/durability.md) but never the
// puts that were being written: their ranges are free again in the restored allocator.
// A writer still streaming bytes into such a range under the old master's reservation
// would overwrite whatever the new master places there. So an owner that re-registers
// first moves its epoch (from then on a write or read under another master's grant is
// refused: -707), then waits for the writes it had already admitted, and only then mounts
// its segments again, which is what lets the new master hand out their ranges. Reads
// admitted earlier need no waiting: a read that overlapped the re-registration is
// discarded by its reader (daemon/cluster/read_cache.h, the remount generation).
//
// Hot path: two atomic operations per write, no lock. Enter increments the count and then
// reads the epoch; Advance stores the epoch and then reads the count; with both sequentially
// consistent, a write either sees the new epoch and backs out, or is counted and waited for.
//
// Thread-safety: every method may be called from any thread; Advance from one at a time
// (Membership's re-registration is serialized).
#ifndef MOONCAKE_DAEMON_EPOCH_GATE_H_
#define MOONCAKE_DAEMON_EPOCH_GATE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace mooncake {

class EpochGate {
 public:
  // -1 while unknown (every checked access is refused then).
  int64_t epoch() const { return epoch_.load(); }
  // Without waiting: the epoch learnt when registering, of the master we registered at.
  void Set(int64_t epoch) { epoch_.store(epoch); }

  // True when a grant of the master of grant_epoch (0: unchecked) may be used on our
  // segments now.
  bool Accepts(int64_t grant_epoch) const { return grant_epoch == 0 || grant_epoch == epoch(); }

  // A write into our segments under a reservation of the master of grant_epoch: false
  // (refused) when that is not the master our segments are mounted at; otherwise admitted
  // until Leave.
  bool EnterWrite(int64_t grant_epoch) {
    writes_.fetch_add(1);
    if (Accepts(grant_epoch)) return true;
    writes_.fetch_sub(1);
    return false;
  }
  void LeaveWrite() { writes_.fetch_sub(1); }

  // Moves to epoch, then waits until every write admitted before has finished, or
  // max_wait has passed (a peer stalled mid-WRITE: its socket's timeout ends it soon).
  // False when it gave up waiting.
  bool Advance(int64_t epoch, std::chrono::milliseconds max_wait) {
    epoch_.store(epoch);
    auto until = std::chrono::steady_clock::now() + max_wait;
    while (writes_.load() != 0) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  // An admitted write, for as long as this lives; admitted() false when it was refused.
  class Write {
   public:
    Write(EpochGate* gate, int64_t grant_epoch)
        : gate_(gate != nullptr && gate->EnterWrite(grant_epoch) ? gate : nullptr),
          refused_(gate != nullptr && gate_ == nullptr) {}
    ~Write() {
      if (gate_ != nullptr) gate_->LeaveWrite();
    }
    Write(const Write&) = delete;
    Write& operator=(const Write&) = delete;
    bool admitted() const { return !refused_; }

   private:
    EpochGate* const gate_;
    const bool refused_;
  };

 private:
  std::atomic<int64_t> epoch_{-1};
  std::atomic<int64_t> writes_{0};
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_EPOCH_GATE_H_
