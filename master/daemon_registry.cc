#include "master/daemon_registry.h"

namespace mooncake {

bool DaemonRegistry::Register(int64_t daemon_id, const std::string& name, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = daemons_.try_emplace(daemon_id, Daemon{name, now_ms});
  it->second = Daemon{name, now_ms};
  return inserted;
}

bool DaemonRegistry::Heartbeat(int64_t daemon_id, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = daemons_.find(daemon_id);
  if (it == daemons_.end()) return false;
  it->second.last_seen_ms = now_ms;
  return true;
}

bool DaemonRegistry::Known(int64_t daemon_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return daemons_.count(daemon_id) != 0;
}

std::vector<int64_t> DaemonRegistry::TakeReplaced(const std::string& name,
                                                  int64_t new_daemon_id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> replaced;
  for (auto it = daemons_.begin(); it != daemons_.end();) {
    if (it->first != new_daemon_id && it->second.name == name) {
      replaced.push_back(it->first);
      it = daemons_.erase(it);
    } else {
      ++it;
    }
  }
  return replaced;
}

std::vector<int64_t> DaemonRegistry::TakeExpired(int64_t now_ms, int64_t ttl_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> expired;
  for (auto it = daemons_.begin(); it != daemons_.end();) {
    if (it->second.last_seen_ms + ttl_ms < now_ms) {
      expired.push_back(it->first);
      it = daemons_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

size_t DaemonRegistry::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return daemons_.size();
}

}  // namespace mooncake
