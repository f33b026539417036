#include "master/log/sync_set.h"

#include <limits>

#include "absl/strings/str_join.h"
#include "common/base/logging.h"
#include <algorithm>

namespace mooncake {

namespace {

std::string Join(const std::vector<std::string>& names) {
  return names.empty() ? "(empty)" : absl::StrJoin(names, ",");
}

}  // namespace

SyncSet::SyncSet(PublishFn publish, std::chrono::milliseconds timeout)
    : publish_(std::move(publish)), timeout_(timeout) {}

bool SyncSet::Start(const std::vector<std::string>& initial) {
  absl::MutexLock publishing(&publish_mu_);
  {
    absl::MutexLock lock(&mu_);
    members_.clear();
    for (const std::string& name : initial) members_[name] = 0;
    leading_ = true;
    UpdateFloorLocked();
  }
  if (PublishMembers()) return true;
  Depose();
  return false;
}

void SyncSet::UpdateFloorLocked() {
  uint64_t floor = std::numeric_limits<uint64_t>::max();
  for (const auto& [name, durable] : members_) floor = std::min(floor, durable);
  floor_.store(leading_.load() ? floor : 0);
}

bool SyncSet::PublishMembers() {
  std::vector<std::string> names = members();
  const bool ok = publish_(names);
  if (ok) {
    MC_LOG_INFO("replication: sync set is now %s", Join(names).c_str());
  } else {
    MC_LOG_WARN("replication: cannot publish the sync set %s: no longer the leader",
                Join(names).c_str());
  }
  return ok;
}

ErrorCode SyncSet::Wait(uint64_t seq) {
  if (seq <= floor_.load(std::memory_order_acquire)) return ErrorCode::OK;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  absl::MutexLock lock(&mu_);
  for (;;) {
    if (!leading_) return ErrorCode::NOT_LEADER;
    if (seq <= floor_.load()) return ErrorCode::OK;
    const auto left = deadline - std::chrono::steady_clock::now();
    if (!cv_.WaitWithTimeout(&mu_, absl::FromChrono(left))) continue;
    if (seq <= floor_.load() || !leading_) continue;
    // Past the timeout: the members still behind seq go, published first.
    mu_.Unlock();
    {
      absl::MutexLock publishing(&publish_mu_);
      std::vector<std::string> laggards;
      {
        absl::MutexLock inner(&mu_);
        for (const auto& [name, durable] : members_) {
          if (durable < seq) laggards.push_back(name);
        }
      }
      if (!laggards.empty() && leading_) {
        std::vector<std::string> kept;
        for (const std::string& name : members()) {
          if (std::find(laggards.begin(), laggards.end(), name) == laggards.end()) {
            kept.push_back(name);
          }
        }
        MC_LOG_WARN("replication: standby(s) %s did not confirm seq %llu within %lld ms: "
                    "dropping them from the sync set",
                    Join(laggards).c_str(), static_cast<unsigned long long>(seq),
                    static_cast<long long>(timeout_.count()));
        const bool ok = publish_(kept);
        absl::MutexLock inner(&mu_);
        if (ok) {
          for (const std::string& name : laggards) members_.erase(name);
          MC_LOG_INFO("replication: sync set is now %s", Join(kept).c_str());
        } else {
          MC_LOG_WARN("replication: cannot publish the sync set %s: no longer the leader",
                      Join(kept).c_str());
          leading_ = false;
        }
        UpdateFloorLocked();
      }
    }
    cv_.SignalAll();
    mu_.Lock();
  }
}

void SyncSet::Report(const std::string& standby, uint64_t durable_seq, uint64_t leader_last) {
  bool join = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = members_.find(standby);
    if (it != members_.end()) {
      if (durable_seq > it->second) {
        it->second = durable_seq;
        UpdateFloorLocked();
        cv_.SignalAll();
      }
      return;
    }
    join = leading_ && durable_seq >= leader_last;
  }
  if (!join) return;
  // Waited for first, published second: the published set never names a standby the
  // leader does not wait for.
  absl::MutexLock publishing(&publish_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (!leading_ || members_.count(standby) != 0) return;
    members_[standby] = durable_seq;
    UpdateFloorLocked();
  }
  MC_LOG_INFO("replication: standby %s caught up at seq %llu: joins the sync set",
              standby.c_str(), static_cast<unsigned long long>(durable_seq));
  if (!PublishMembers()) Depose();
}

void SyncSet::Depose() {
  absl::MutexLock lock(&mu_);
  leading_ = false;
  UpdateFloorLocked();
  cv_.SignalAll();
}

std::vector<std::string> SyncSet::members() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [name, durable] : members_) out.push_back(name);
  return out;
}

}  // namespace mooncake
