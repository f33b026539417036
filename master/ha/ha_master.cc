#include "master/ha/ha_master.h"

#include <algorithm>

#include "common/base/logging.h"

namespace mooncake {

namespace {

// How often a standby reads the leader key to learn whom to follow (the election reads it
// on its own to campaign).
constexpr int64_t kLeaderPollMs = 100;

}  // namespace

std::unique_ptr<HaMaster> HaMaster::Create(const MasterOptions& options, std::string name,
                                           MasterService* service, Durability* durability,
                                           std::shared_ptr<const ClusterKey> cluster_key,
                                           std::function<void()> on_deposed,
                                           std::string* error) {
  std::unique_ptr<HaMaster> ha(new HaMaster(options, std::move(name), service, durability,
                                            std::move(cluster_key)));
  ha->on_deposed_ = std::move(on_deposed);
  // Each etcd call well inside the lease: a renewal that hangs must not outlast it.
  int64_t etcd_timeout_ms = std::max<int64_t>(200, options.ha_lease_ttl_ms / 4);
  if (EtcdClient::Create(options.etcd_endpoints, etcd_timeout_ms, &ha->etcd_) != ErrorCode::OK) {
    *error = "--etcd_endpoints: not a list of host:port: " + options.etcd_endpoints;
    return nullptr;
  }
  LeaderElection::Options election;
  election.name = ha->name_;
  election.cluster_id = options.cluster_id;
  election.ttl_ms = options.ha_lease_ttl_ms;
  ha->election_ = std::make_unique<LeaderElection>(ha->etcd_.get(), election);
  HaMaster* self = ha.get();
  ha->election_->set_may_campaign([self] { return self->MayCampaign(); });
  ha->election_->set_on_elected([self](int64_t term) { self->TakeOver(term); });
  ha->election_->set_on_deposed(
      [self] { self->role_->Depose("its etcd lease is lost (not renewed in time, or gone)"); });
  ha->watcher_ = std::make_unique<LeaderWatcher>(
      ha->etcd_.get(), options.cluster_id, kLeaderPollMs,
      [self](const LeaderInfo& leader) { self->LeaderChanged(leader); });
  return ha;
}

HaMaster::HaMaster(const MasterOptions& options, std::string name, MasterService* service,
                   Durability* durability, std::shared_ptr<const ClusterKey> cluster_key)
    : options_(options),
      name_(std::move(name)),
      service_(service),
      durability_(durability),
      cluster_key_(std::move(cluster_key)),
      role_(RoleMachine::Standby(
          name_, [durability] { return durability->oplog()->last(); },
          [this] { Deposed(); })) {
  ReplicationOptions replication;
  replication.name = name_;
  replication.snapshot_dir = options.snapshot_dir;
  replication.cluster_key = cluster_key_;
  replication.sync_timeout_ms = options.ha_sync_timeout_ms;
  // Bounded well inside the lease, so that a takeover never waits long for the follower
  // to let go of a leader that stopped answering.
  replication.follower.rpc_timeout_ms = std::max<int64_t>(200, options.ha_lease_ttl_ms / 4);
  replication_ = std::make_unique<Replication>(service, durability->oplog(),
                                               durability->snapshotter(), replication);
}

HaMaster::~HaMaster() { Shutdown(); }

void HaMaster::Start() {
  watcher_->Start();
  election_->Start();
}

void HaMaster::Shutdown() {
  if (shut_down_.exchange(true)) return;
  if (role_->Depose("resigning: the master is shutting down")) {
    // Leading() turns false before the key goes: nothing is acknowledged after it.
    ErrorCode resigned = election_->Resign();
    if (resigned != ErrorCode::OK) {
      MC_LOG_WARN("cannot delete the leader key (%s): a standby takes over once the lease "
                  "expires", ErrorName(resigned));
    }
  }
  watcher_->Stop();
  {
    absl::MutexLock lock(&mu_);
    taken_over_ = true;  // nobody is followed again
    replication_->Stop();
  }
  election_->Stop();
}

bool HaMaster::MayCampaign() {
  std::vector<std::string> sync;
  if (election_->ReadSyncSet(&sync) != ErrorCode::OK) return false;
  if (std::find(sync.begin(), sync.end(), name_) != sync.end()) return true;
  if (!sync.empty()) return false;
  absl::MutexLock lock(&mu_);
  return replication_->applied_seq() >= replication_->leader_last_seq();
}

void HaMaster::TakeOver(int64_t term) {
  absl::MutexLock lock(&mu_);
  if (taken_over_) return;  // shutting down
  taken_over_ = true;
  // Stops following: every record received is applied (the follower applies before it
  // reads more); each must be durable before the log continues after it.
  replication_->Stop();
  OpLog* log = durability_->oplog();
  uint64_t last = log->last();
  ErrorCode synced = log->Sync(last);
  if (synced != ErrorCode::OK) {
    MC_LOG_ERROR("takeover refused: the operation log cannot sync through seq %llu (%s)",
                 static_cast<unsigned long long>(last), ErrorName(synced));
    election_->Resign();
    restart_ = true;
    on_deposed_();  // exits 3: a supervisor restarts it, a healthier standby leads
    return;
  }
  // MasterService::TakeOver (a new epoch, segments detached), the sync set published
  // empty, the log served in this term.
  if (!replication_->StartAsLeader(term, [this](const std::vector<std::string>& names) {
        return election_->PublishSyncSet(names);
      })) {
    MC_LOG_WARN("takeover (term %lld) abandoned: the sync set cannot be published (the lease "
                "is gone already)",
                static_cast<long long>(term));
    return;  // the election deposes us, and on_deposed follows
  }
  role_->BecomeLeader(term, [this] { return election_->Leading(); });
}

void HaMaster::LeaderChanged(const LeaderInfo& leader) {
  role_->SawLeader(leader.name, leader.term);
  absl::MutexLock lock(&mu_);
  if (taken_over_ || !leader.known() || leader.name == name_ || leader.name == following_) {
    return;
  }
  ErrorCode started = replication_->StartAsStandby(leader.name, /*bootstrap_first=*/false);
  if (started != ErrorCode::OK) {
    MC_LOG_WARN("the leader key names %s, not host:port: not following it", leader.name.c_str());
    return;
  }
  following_ = leader.name;
  MC_LOG_INFO("role: standby %s following %s (term %lld) from seq %llu", name_.c_str(),
              leader.name.c_str(), static_cast<long long>(leader.term),
              static_cast<unsigned long long>(replication_->applied_seq()));
}

void HaMaster::Deposed() {
  // As leader no follower runs: this only ends the serving and the waits, at once.
  replication_->Stop();
  if (shut_down_.load()) return;
  restart_ = true;
  on_deposed_();
}

}  // namespace mooncake
