// At most one log line a second for a kind of event that a peer can cause at will (refused
// connections, refused calls), so that a flood cannot fill the disk; the line that is
// written can say how many were passed over since the previous one.
//
// Thread safety: any thread may call Due at once (lock-free).
#ifndef MOONCAKE_COMMON_LOG_THROTTLE_H_
#define MOONCAKE_COMMON_LOG_THROTTLE_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace mooncake {

class LogThrottle {
 public:
  // True when a line is due now (none in the past second); then *passed_over, when given,
  // is how many calls were not due since the last line that was.
  bool Due(uint64_t* passed_over = nullptr) {
    int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
    int64_t next = next_ns_.load(std::memory_order_relaxed);
    if (now < next || !next_ns_.compare_exchange_strong(next, now + kIntervalNs)) {
      passed_over_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    uint64_t skipped = passed_over_.exchange(0, std::memory_order_relaxed);
    if (passed_over != nullptr) *passed_over = skipped;
    return true;
  }

 private:
  static constexpr int64_t kIntervalNs = 1000 * 1000 * 1000;
  std::atomic<int64_t> next_ns_{0};
  std::atomic<uint64_t> passed_over_{0};
};

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_LOG_THROTTLE_H_
