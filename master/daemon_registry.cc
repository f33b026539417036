#include "master/daemon_registry.h"

namespace mooncake {

bool DaemonRegistry::Register(int64_t daemon_id, const std::string& name, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = daemons_.try_emplace(daemon_id, Daemon{name, now_ms, 0});
  bool was_expected = it->second.expected_until_ms > 0;
  it->second = Daemon{name, now_ms, 0};
  return inserted || was_expected;
}

void DaemonRegistry::ExpectBack(int64_t daemon_id, const std::string& name, int64_t deadline_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  daemons_.try_emplace(daemon_id, Daemon{name, 0, deadline_ms});
}

bool DaemonRegistry::Heartbeat(int64_t daemon_id, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = daemons_.find(daemon_id);
  if (it == daemons_.end() || it->second.expected_until_ms > 0) return false;
  it->second.last_seen_ms = now_ms;
  return true;
}

bool DaemonRegistry::Known(int64_t daemon_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = daemons_.find(daemon_id);
  return it != daemons_.end() && it->second.expected_until_ms == 0;
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

std::vector<int64_t> DaemonRegistry::TakeExpired(int64_t now_ms, int64_t ttl_ms,
                                                 std::vector<int64_t>* late) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> expired;
  for (auto it = daemons_.begin(); it != daemons_.end();) {
    const Daemon& d = it->second;
    bool expected = d.expected_until_ms > 0;
    if (expected ? d.expected_until_ms < now_ms : d.last_seen_ms + ttl_ms < now_ms) {
      expired.push_back(it->first);
      if (expected && late != nullptr) late->push_back(it->first);
      it = daemons_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

bool DaemonRegistry::NameOf(int64_t daemon_id, std::string* name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = daemons_.find(daemon_id);
  if (it == daemons_.end()) return false;
  *name = it->second.name;
  return true;
}

std::vector<std::pair<int64_t, std::string>> DaemonRegistry::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<int64_t, std::string>> out;
  out.reserve(daemons_.size());
  for (const auto& d : daemons_) out.emplace_back(d.first, d.second.name);
  return out;
}

size_t DaemonRegistry::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& d : daemons_) n += d.second.expected_until_ms == 0;
  return n;
}

size_t DaemonRegistry::expected_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& d : daemons_) n += d.second.expected_until_ms > 0;
  return n;
}

}  // namespace mooncake
