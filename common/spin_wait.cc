#include "common/base/spin_wait.h"

#include <poll.h>

#include <cerrno>
#include <cstdlib>

namespace mooncake {

bool SpinUntilReadable(int fd, int64_t budget_ns) {
  return SpinUntil(
      [fd] {
        struct pollfd p = {fd, POLLIN, 0};
        return poll(&p, 1, 0) != 0;  // ready, or an error a read will report
      },
      budget_ns);
}

AdaptiveSpin::AdaptiveSpin(int64_t max_budget_ns)
    : max_budget_ns_(max_budget_ns > 0 ? max_budget_ns : 0), budget_ns_(max_budget_ns_) {}

int64_t AdaptiveSpin::NextBudget() {
  if (budget_ns_ >= kMinBudgetNanos) return budget_ns_;
  // Backed off: probe with the full budget now and then.
  if (++waits_at_zero_ % kProbeEvery == 0) return max_budget_ns_;
  return 0;
}

bool AdaptiveSpin::SpinReadable(int fd) {
  return Spin([fd] {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) != 0;
  });
}

void AdaptiveSpin::Blocked() {
  if (max_budget_ns_ == 0) return;
  if (MonotonicNanos() - wait_start_ns_ <= kNearMissFactor * max_budget_ns_) {
    budget_ns_ = max_budget_ns_;  // a near miss
    return;
  }
  budget_ns_ /= 2;
  if (budget_ns_ < kMinBudgetNanos) budget_ns_ = 0;
}

bool ParseSpinMicros(const char* text, int64_t* micros) {
  // Digits only: strtoll alone would take a sign and leading blanks.
  if (text == nullptr || *text < '0' || *text > '9') return false;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < 0 || value > kMaxSpinMicros) return false;
  *micros = value;
  return true;
}

}  // namespace mooncake
