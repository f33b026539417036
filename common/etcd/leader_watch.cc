#include "common/etcd/leader_watch.h"

#include <chrono>

namespace mooncake {

std::string HaKeyPrefix(const std::string& cluster_id) { return "/mooncake/" + cluster_id + "/"; }
std::string LeaderKey(const std::string& cluster_id) { return HaKeyPrefix(cluster_id) + "leader"; }
std::string SyncSetKey(const std::string& cluster_id) { return HaKeyPrefix(cluster_id) + "sync"; }
std::string StandbyKey(const std::string& cluster_id, const std::string& name) {
  return HaKeyPrefix(cluster_id) + "standbys/" + name;
}

ErrorCode ReadLeader(EtcdClient* etcd, const std::string& cluster_id, LeaderInfo* out) {
  EtcdClient::KeyValue kv;
  bool found = false;
  ErrorCode rc = etcd->Get(LeaderKey(cluster_id), &kv, &found);
  if (rc != ErrorCode::OK) return rc;
  *out = found ? LeaderInfo{kv.value, kv.create_revision} : LeaderInfo{};
  return ErrorCode::OK;
}

LeaderWatcher::LeaderWatcher(EtcdClient* etcd, std::string cluster_id, int64_t poll_interval_ms,
                             std::function<void(const LeaderInfo&)> on_change)
    : etcd_(etcd),
      cluster_id_(std::move(cluster_id)),
      poll_interval_ms_(poll_interval_ms > 0 ? poll_interval_ms : 1),
      on_change_(std::move(on_change)) {}

LeaderWatcher::~LeaderWatcher() { Stop(); }

void LeaderWatcher::Start() {
  absl::MutexLock lock(&mu_);
  if (running_) return;
  running_ = true;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void LeaderWatcher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!running_) return;
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
  absl::MutexLock lock(&mu_);
  running_ = false;
  refresh_done_ = refresh_asked_;  // nobody waits for a thread that is gone
  cv_.SignalAll();
}

LeaderInfo LeaderWatcher::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

ErrorCode LeaderWatcher::Refresh(LeaderInfo* out) {
  {
    absl::MutexLock lock(&mu_);
    if (running_ && !stop_) {
      uint64_t ticket = ++refresh_asked_;
      cv_.SignalAll();
      while (refresh_done_ < ticket) cv_.Wait(&mu_);
      *out = current_;
      return last_poll_;
    }
  }
  bool changed = false;
  LeaderInfo now;
  ErrorCode rc = Poll(&changed, &now);
  if (rc == ErrorCode::OK) *out = now;
  return rc;
}

ErrorCode LeaderWatcher::Poll(bool* changed, LeaderInfo* now) {
  LeaderInfo read;
  ErrorCode rc = ReadLeader(etcd_, cluster_id_, &read);
  absl::MutexLock lock(&mu_);
  last_poll_ = rc;
  if (rc != ErrorCode::OK) {
    *now = current_;
    return rc;
  }
  *changed = read != current_;
  current_ = read;
  *now = read;
  return rc;
}

void LeaderWatcher::Run() {
  for (;;) {
    uint64_t answering;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      answering = refresh_asked_;  // a Refresh asked before this read is answered by it
    }
    bool changed = false;
    LeaderInfo now;
    Poll(&changed, &now);
    if (changed && on_change_) on_change_(now);
    absl::MutexLock lock(&mu_);
    if (answering > refresh_done_) refresh_done_ = answering;
    cv_.SignalAll();
    const absl::Time deadline = absl::Now() + absl::Milliseconds(poll_interval_ms_);
    while (!stop_ && refresh_asked_ <= refresh_done_ && !cv_.WaitWithDeadline(&mu_, deadline)) {
    }
  }
}

}  // namespace mooncake
