#include "master/liveness/daemon_registry.h"

namespace mooncake {

DaemonRegistry::Absence DaemonRegistry::Register(int64_t daemon_id, const std::string& name,
                                                 int64_t now_ms, bool* known) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = daemons_.try_emplace(daemon_id);
  Absence was = it->second.absence;
  *known = !inserted && was == Absence::kNone;
  it->second = Daemon{name, now_ms, 0, Absence::kNone};
  return was;
}

void DaemonRegistry::ExpectBack(int64_t daemon_id, const std::string& name, int64_t deadline_ms) {
  absl::MutexLock lock(&mu_);
  daemons_.try_emplace(daemon_id, Daemon{name, 0, deadline_ms, Absence::kRestored});
}

bool DaemonRegistry::Heartbeat(int64_t daemon_id, int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  auto it = daemons_.find(daemon_id);
  if (it == daemons_.end() || it->second.absence != Absence::kNone) return false;
  it->second.last_seen_ms = now_ms;
  return true;
}

bool DaemonRegistry::Known(int64_t daemon_id) const {
  absl::MutexLock lock(&mu_);
  auto it = daemons_.find(daemon_id);
  return it != daemons_.end() && it->second.absence == Absence::kNone;
}

std::vector<int64_t> DaemonRegistry::TakeReplaced(const std::string& name,
                                                  int64_t new_daemon_id) {
  absl::MutexLock lock(&mu_);
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

std::vector<int64_t> DaemonRegistry::MarkSilent(int64_t now_ms, int64_t ttl_ms,
                                                int64_t deadline_ms) {
  absl::MutexLock lock(&mu_);
  std::vector<int64_t> silent;
  for (auto& [id, d] : daemons_) {
    if (d.absence != Absence::kNone || d.last_seen_ms + ttl_ms >= now_ms) continue;
    d.absence = Absence::kSilent;
    d.expected_until_ms = deadline_ms;
    silent.push_back(id);
  }
  return silent;
}

std::vector<std::pair<int64_t, DaemonRegistry::Absence>> DaemonRegistry::TakeOverdue(
    int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<int64_t, Absence>> overdue;
  for (auto it = daemons_.begin(); it != daemons_.end();) {
    const Daemon& d = it->second;
    if (d.absence != Absence::kNone && d.expected_until_ms < now_ms) {
      overdue.emplace_back(it->first, d.absence);
      it = daemons_.erase(it);
    } else {
      ++it;
    }
  }
  return overdue;
}

void DaemonRegistry::ForgiveStall(int64_t now_ms, int64_t lost_ms) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, d] : daemons_) {
    if (d.absence == Absence::kNone) {
      d.last_seen_ms = now_ms;
    } else {
      d.expected_until_ms += lost_ms;
    }
  }
}

bool DaemonRegistry::NameOf(int64_t daemon_id, std::string* name) const {
  absl::MutexLock lock(&mu_);
  auto it = daemons_.find(daemon_id);
  if (it == daemons_.end()) return false;
  *name = it->second.name;
  return true;
}

std::vector<std::pair<int64_t, std::string>> DaemonRegistry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<int64_t, std::string>> out;
  out.reserve(daemons_.size());
  for (const auto& d : daemons_) out.emplace_back(d.first, d.second.name);
  return out;
}

size_t DaemonRegistry::count() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& d : daemons_) n += d.second.absence == Absence::kNone;
  return n;
}

size_t DaemonRegistry::expected_count() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& d : daemons_) n += d.second.absence != Absence::kNone;
  return n;
}

}  // namespace mooncake
