// Short, bounded spinning before a thread blocks on something that is about to happen
// (a reply, a frame, a job).
//
// Why it pays here: on a virtual machine whose idle vCPUs halt (Firecracker, no
// halt-polling), waking a thread that sleeps on an idle vCPU costs the waker an IPI
// (~15-30 us of its own CPU) and the wakee as much again in latency. A 4 KiB put crossed
// ~7 such hand-offs (client -> daemon loop -> worker -> master -> ...); polling for a few
// tens of microseconds instead of sleeping took put p50 from 90 to 31 us and a first get
// from 80 to 24 us. A thread that is polling needs no wake-up at all.
//
// What it costs: the CPU of the spinner while it polls. It is bounded three ways:
//  - a budget per wait (--spin_us in the daemon, MOONCAKE_STORE_SPIN_US in libmc;
//    0 = never spin), after which the caller blocks as it always did;
//  - AdaptiveSpin backs off: each spin that ends without the event halves the budget of
//    the next one (down to nothing), so an idle daemon or a client waiting on long
//    requests burns ~nothing; a wait that ends soon enough restores it (see below);
//  - SpinnerLimit caps how many threads of a pool spin at once: two vCPUs with three
//    spinners starve the one thread doing the work.
// Between polls the spinner calls sched_yield(), so a runnable thread on the same vCPU --
// often the one that will produce the event -- gets the CPU at once. A pure pause loop
// made three spinners on two vCPUs starve it (put p50 172 us); 2, 8 or 64 pauses before
// the first yield measured no better than none, and 64 much worse (put p50 110 against
// 40 us; docs/architecture.md).
//
// Spinning only ever delays blocking: every caller still blocks afterwards, on the same
// primitive with the same wake-up as without spinning, so spinning can never lose a
// wake-up; it only makes some unnecessary.
//
// Thread roles: SpinUntil / SpinUntilReadable are free functions, safe from any thread.
// An AdaptiveSpin belongs to one waiting role (one thread at a time: a loop thread, a
// worker, a connection's reader); its state is plain (not synchronised). A SpinnerLimit
// is shared by the threads of one pool (atomic).
#ifndef MOONCAKE_COMMON_SPIN_WAIT_H_
#define MOONCAKE_COMMON_SPIN_WAIT_H_

#include <sched.h>

#include <atomic>
#include <cstdint>

#include "common/base/monotonic_clock.h"

namespace mooncake {

// The default budget of one wait, in microseconds (the daemon's --spin_us and libmc's
// MOONCAKE_STORE_SPIN_US). Measured on 2 vCPUs: see docs/architecture.md.
constexpr int64_t kDefaultSpinMicros = 200;
// The largest budget accepted: spinning longer than a wake-up costs never pays.
constexpr int64_t kMaxSpinMicros = 10000;

// Polls ready() until it returns true (-> true) or budget_ns has passed (-> false).
// budget_ns <= 0: returns false without calling ready(). ready() must be cheap and
// side-effect free apart from what the caller wants done on success.
template <class Ready>
bool SpinUntil(Ready&& ready, int64_t budget_ns) {
  if (budget_ns <= 0) return false;
  const int64_t deadline = MonotonicNanos() + budget_ns;
  for (;;) {
    if (ready()) return true;
    if (MonotonicNanos() >= deadline) return false;
    sched_yield();  // the thread we wait for may need this vCPU
  }
}

// Spins until fd is readable (or has an error or hang-up: whatever a blocking read would
// return for), at most budget_ns. Uses poll(2) with a zero timeout.
bool SpinUntilReadable(int fd, int64_t budget_ns);

// The budget of one waiting role, adapted to how long its waits turn out to be, like an
// adaptive mutex: a spin that ends with the event (a hit) keeps the full budget; a wait
// that had to block and lasted more than kNearMissFactor full budgets (a miss: an idle
// peer, a slow master) halves the next budget, down to zero. A wait that blocked but
// ended sooner (a near miss) restores the full budget: such waits are those of a busy
// pipeline whose other stages wait too, and when every stage spins through them the
// waits shrink below the budget (a put's stages each see ~60-150 us while all sleep;
// halving on those kept put p50 at ~110 us where spinning through them gives ~30 us).
// So that a role backed off to zero notices waits that became short even when the
// wake-up's latency is part of them, every kProbeEvery-th wait at zero also spins with
// the full budget once.
//
// Use, per wait:
//   if (!spin.Spin(ready)) { block(); spin.Blocked(); }
class AdaptiveSpin {
 public:
  static constexpr unsigned kProbeEvery = 32;
  static constexpr int64_t kNearMissFactor = 8;
  // Budgets below this are not worth a clock read: they count as zero.
  static constexpr int64_t kMinBudgetNanos = 1000;

  explicit AdaptiveSpin(int64_t max_budget_ns);

  // Spins with the current budget; true if ready() became true (a hit: the budget is
  // restored; ready at the first poll is no wait and changes nothing). On false the
  // caller blocks and then calls Blocked().
  template <class Ready>
  bool Spin(Ready&& ready) {
    if (max_budget_ns_ == 0) return false;
    if (ready()) return true;  // no wait at all: says nothing about waits
    wait_start_ns_ = MonotonicNanos();
    const int64_t budget = NextBudget();
    if (budget > 0 && SpinUntil(ready, budget)) {
      budget_ns_ = max_budget_ns_;
      return true;
    }
    return false;
  }
  // Spins until fd is readable, as Spin().
  bool SpinReadable(int fd);
  // After the blocking wait that followed a false Spin() returned: adapts the budget.
  void Blocked();

  int64_t budget_ns() const { return budget_ns_; }
  int64_t max_budget_ns() const { return max_budget_ns_; }

 private:
  int64_t NextBudget();

  const int64_t max_budget_ns_;
  int64_t budget_ns_;
  int64_t wait_start_ns_ = 0;  // when the current wait began
  unsigned waits_at_zero_ = 0;
};

// At most `limit` threads of a pool spinning at once; the others block at once.
class SpinnerLimit {
 public:
  explicit SpinnerLimit(int limit) : limit_(limit) {}
  // True: the caller may spin and must call Leave() when it stops.
  bool TryEnter() {
    int n = spinning_.load(std::memory_order_relaxed);
    while (n < limit_) {
      if (spinning_.compare_exchange_weak(n, n + 1)) return true;
    }
    return false;
  }
  void Leave() { spinning_.fetch_sub(1); }
  // How many spin now (a snapshot).
  int spinning() const { return spinning_.load(); }

 private:
  const int limit_;
  std::atomic<int> spinning_{0};
};

// Parses a spin budget in microseconds ("0" .. kMaxSpinMicros); false on anything else.
bool ParseSpinMicros(const char* text, int64_t* micros);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_SPIN_WAIT_H_
