// PROTOTYPE
#ifndef MOONCAKE_COMMON_SPIN_WAIT_H_
#define MOONCAKE_COMMON_SPIN_WAIT_H_
#include <poll.h>
#include <sched.h>
#include <time.h>
#include <cstdint>
#include <cstdlib>
namespace mooncake {
inline int64_t SpinNowNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
inline int64_t SpinBudgetNanos() {
  static int64_t budget = [] {
    const char* v = std::getenv("MC_SPIN_US");
    return (v ? std::atoll(v) : 50) * 1000;
  }();
  return budget;
}
template <class Ready>
bool SpinUntil(Ready&& ready, int64_t budget_ns) {
  if (budget_ns <= 0) return false;
  const int64_t deadline = SpinNowNanos() + budget_ns;
  for (unsigned i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 7) == 7 && SpinNowNanos() >= deadline) return false;
    sched_yield();
  }
}
inline bool SpinUntilReadable(int fd, int64_t budget_ns) {
  return SpinUntil([fd] {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) != 0;
  }, budget_ns);
}
}  // namespace mooncake
#endif
