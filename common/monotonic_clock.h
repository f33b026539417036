// CLOCK_MONOTONIC in nanoseconds: the one clock reading of metrics (Histogram::ObserveSince)
// and of spinning (common/base/spin_wait.h). Inline, since spinners read it between polls; it
// is a vDSO call, no system call.
#ifndef MOONCAKE_COMMON_MONOTONIC_CLOCK_H_
#define MOONCAKE_COMMON_MONOTONIC_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace mooncake {

inline int64_t MonotonicNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_MONOTONIC_CLOCK_H_
