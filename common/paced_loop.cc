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
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return false;
  thread_.join();
  return true;
}

void PacedLoop::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    std::chrono::milliseconds wait = round_();
    lock.lock();
    cv_.wait_for(lock, wait, [this] { return stop_; });
  }
  lock.unlock();
  if (last_) last_();
}

}  // namespace mooncake
