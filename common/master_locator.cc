#include "common/master_link/master_locator.h"

#include "common/etcd/etcd_client.h"
#include "common/etcd/leader_watch.h"
#include "common/base/logging.h"

namespace mooncake {

MasterLocator::MasterLocator() = default;

std::unique_ptr<MasterLocator> MasterLocator::Fixed(const std::string& host, int port) {
  std::unique_ptr<MasterLocator> locator(new MasterLocator());
  locator->leader_.host = host;
  locator->leader_.port = port;
  locator->description_ = locator->leader_.name();
  return locator;
}

ErrorCode MasterLocator::ViaEtcd(const std::string& endpoints, const std::string& cluster_id,
                                 int64_t timeout_ms, int64_t poll_interval_ms,
                                 std::unique_ptr<MasterLocator>* out) {
  std::unique_ptr<MasterLocator> locator(new MasterLocator());
  ErrorCode code = EtcdClient::Create(endpoints, timeout_ms, &locator->etcd_);
  if (code != ErrorCode::OK) return code;
  locator->key_ = LeaderKey(cluster_id);
  locator->description_ = "etcd://" + endpoints + " (cluster " + cluster_id + ")";
  MasterLocator* self = locator.get();
  locator->watcher_ = std::make_unique<LeaderWatcher>(
      locator->etcd_.get(), cluster_id, poll_interval_ms, [self](const LeaderInfo& read) { self->Apply(read); });
  locator->Refresh();  // on this thread: the watcher has not started
  *out = std::move(locator);
  return ErrorCode::OK;
}

MasterLocator::~MasterLocator() { watcher_.reset(); }

MasterLeader MasterLocator::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leader_;
}

int64_t MasterLocator::highest_term() const {
  std::lock_guard<std::mutex> lock(mu_);
  return highest_term_;
}

MasterLeader MasterLocator::Refresh() {
  if (watcher_ != nullptr) {
    LeaderInfo read;
    ErrorCode code = watcher_->Refresh(&read);
    if (code == ErrorCode::OK) {
      Apply(read);  // the watcher's thread may have applied it already: then a no-op
    } else {
      // The masters' leases decide who leads, not our view of etcd: keep the last leader.
      std::lock_guard<std::mutex> lock(apply_mu_);
      if (!read_failing_) {
        MC_LOG_WARN("cannot read the master leader key %s from etcd: %s; keeping the last "
                    "leader known", key_.c_str(), ErrorName(code));
      }
      read_failing_ = true;
    }
  }
  return Current();
}

void MasterLocator::ObserveTerm(int64_t term) {
  bool newer_than_key = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (term > highest_term_) highest_term_ = term;
    newer_than_key = watcher_ != nullptr && term > leader_.term;
  }
  if (newer_than_key) Refresh();
}

void MasterLocator::Apply(const LeaderInfo& read) {
  std::lock_guard<std::mutex> apply_lock(apply_mu_);
  if (read_failing_) MC_LOG_INFO("etcd answers again (leader key %s)", key_.c_str());
  read_failing_ = false;
  MasterLeader next;
  if (read.known() && !SplitHostPort(read.name, &next.host, &next.port)) {
    if (read.name != bad_value_) {
      MC_LOG_WARN("the master leader key %s holds '%s', not host:port: no leader known",
                  key_.c_str(), read.name.substr(0, 256).c_str());
      bad_value_ = read.name;
    }
    next = MasterLeader{};
  }
  if (next.known()) next.term = read.term;
  MasterLeader before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    before = leader_;
    leader_ = next;
    if (next.term > highest_term_) highest_term_ = next.term;
  }
  if (before.same_as(next)) return;
  if (next.known()) {
    MC_LOG_INFO("master leader is now %s (term %lld)", next.name().c_str(),
                static_cast<long long>(next.term));
  } else if (!read.known()) {
    MC_LOG_WARN("no master leader: %s is absent in etcd (an election is under way)",
                key_.c_str());
  }
  if (on_change_) on_change_(next);
}

void MasterLocator::StartWatch() {
  if (watcher_ != nullptr) watcher_->Start();
}

}  // namespace mooncake
