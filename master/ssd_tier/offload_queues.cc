#include "master/ssd_tier/offload_queues.h"

#include <algorithm>

namespace mooncake {

bool OffloadQueues::Push(int64_t daemon_id, std::string_view key) {
  absl::MutexLock lock(&mu_);
  std::deque<std::string>& queue = queues_[daemon_id];
  if (queue.size() >= kMaxPerDaemon) return false;
  queue.emplace_back(key);
  return true;
}

std::vector<std::string> OffloadQueues::Pop(int64_t daemon_id, size_t max) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  auto it = queues_.find(daemon_id);
  if (it == queues_.end()) return out;
  std::deque<std::string>& queue = it->second;
  size_t n = std::min(max, queue.size());
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(std::move(queue.front()));
    queue.pop_front();
  }
  if (queue.empty()) queues_.erase(it);
  return out;
}

void OffloadQueues::Drop(int64_t daemon_id) {
  absl::MutexLock lock(&mu_);
  queues_.erase(daemon_id);
}

void OffloadQueues::Clear() {
  absl::MutexLock lock(&mu_);
  queues_.clear();
}

}  // namespace mooncake
