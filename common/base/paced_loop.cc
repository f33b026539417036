#include "common/base/paced_loop.h"

#include <utility>

namespace mooncake {

void PacedLoop::Start(Round round, std::function<void()> last) {
  round_ = std::move(round);
  last_ = std::move(last);
  thread_ = std::thread([this] { Run(); });
}

bool PacedLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (!thread_.joinable()) return false;
  thread_.join();
  return true;
}

void PacedLoop::Run() {
  {
    absl::MutexLock lock(&mu_);
    while (!stop_) {
      mu_.Unlock();
      std::chrono::milliseconds wait = round_();
      mu_.Lock();
      const absl::Time deadline = absl::Now() + absl::FromChrono(wait);
      while (!stop_ && !cv_.WaitWithDeadline(&mu_, deadline)) {
      }
    }
  }
  if (last_) last_();
}

}  // namespace mooncake
