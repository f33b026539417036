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
  std::lock_guard<std::mutex> lock(mu_);
  if (running_) return;
  running_ = true;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void LeaderWatcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return;
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  running_ = false;
  refresh_done_ = refresh_asked_;  // nobody waits for a thread that is gone
  cv_.notify_all();
}

LeaderInfo LeaderWatcher::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

ErrorCode LeaderWatcher::Refresh(LeaderInfo* out) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!running_ || stop_) {
    lock.unlock();
    bool changed = false;
    LeaderInfo now;
    ErrorCode rc = Poll(&changed, &now);
    if (rc == ErrorCode::OK) *out = now;
    return rc;
  }
  uint64_t ticket = ++refresh_asked_;
  cv_.notify_all();
  cv_.wait(lock, [&] { return refresh_done_ >= ticket; });
  *out = current_;
  return last_poll_;
}

ErrorCode LeaderWatcher::Poll(bool* changed, LeaderInfo* now) {
  LeaderInfo read;
  ErrorCode rc = ReadLeader(etcd_, cluster_id_, &read);
  std::lock_guard<std::mutex> lock(mu_);
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
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      answering = refresh_asked_;  // a Refresh asked before this read is answered by it
    }
    bool changed = false;
    LeaderInfo now;
    Poll(&changed, &now);
    if (changed && on_change_) on_change_(now);
    std::unique_lock<std::mutex> lock(mu_);
    if (answering > refresh_done_) refresh_done_ = answering;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::milliseconds(poll_interval_ms_),
                 [&] { return stop_ || refresh_asked_ > refresh_done_; });
  }
}

}  // namespace mooncake
