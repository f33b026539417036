#include "master/ha/replication.h"

#include "common/base/logging.h"

namespace mooncake {

Replication::Replication(MasterService* service, OpLog* oplog, Snapshotter* snapshotter,
                         ReplicationOptions options)
    : service_(service),
      oplog_(oplog),
      snapshotter_(snapshotter),
      options_(std::move(options)),
      server_(oplog, snapshotter, options_.snapshot_dir) {}

Replication::~Replication() { Stop(); }

void Replication::StopFollower() {
  absl::MutexLock lock(&mu_);
  if (follower_ == nullptr) return;
  follower_->Stop();
  bootstraps_ += follower_->bootstraps();
  applied_ += follower_->records_applied();
  follower_.reset();
}

bool Replication::StartAsLeader(int64_t term, SyncSet::PublishFn publish_sync_set) {
  StopFollower();
  if (!led_) {
    led_ = true;
    // The standby's state is a restore that never finished: finish it now.
    MasterService::RestoreCounts counts = service_->TakeOver();
    MC_LOG_INFO("replication: taking over at seq %llu: %lld objects on %lld segments, their "
                "daemons are expected back",
                static_cast<unsigned long long>(oplog_->last()),
                static_cast<long long>(counts.objects), static_cast<long long>(counts.segments));
  }
  sync_set_ = std::make_unique<SyncSet>(std::move(publish_sync_set),
                                        std::chrono::milliseconds(options_.sync_timeout_ms));
  if (!sync_set_->Start({})) return false;
  service_->AttachSyncSet(sync_set_.get());
  server_.Lead(term, sync_set_.get());
  if (snapshotter_ != nullptr) {
    SyncSet* set = sync_set_.get();
    snapshotter_->SetSkipPeriodic([set] { return set->leading() && !set->members().empty(); });
  }
  MC_LOG_INFO("replication: leader of term %lld, serving the log after seq %llu",
              static_cast<long long>(term), static_cast<unsigned long long>(oplog_->last()));
  return true;
}

ErrorCode Replication::StartAsStandby(const std::string& leader, bool bootstrap_first) {
  const size_t colon = leader.rfind(':');
  int port = 0;
  if (led_ || colon == std::string::npos || colon == 0) return ErrorCode::INVALID_PARAMS;
  try {
    port = std::stoi(leader.substr(colon + 1));
  } catch (const std::exception&) {
    return ErrorCode::INVALID_PARAMS;
  }
  if (port < 1 || port > 65535) return ErrorCode::INVALID_PARAMS;
  Stop();
  LogFollowerOptions follower = options_.follower;
  follower.name = options_.name;
  follower.leader_host = leader.substr(0, colon);
  follower.leader_port = port;
  follower.snapshot_dir = options_.snapshot_dir;
  follower.cluster_key = options_.cluster_key;
  follower.bootstrap_first = bootstrap_first;
  absl::MutexLock lock(&mu_);
  follower_ = std::make_unique<LogFollower>(service_, oplog_, std::move(follower));
  follower_->Start();
  return ErrorCode::OK;
}

void Replication::Stop() {
  StopFollower();
  server_.Stop();
  if (sync_set_ != nullptr) sync_set_->Depose();
}

uint64_t Replication::leader_last_seq() const {
  absl::MutexLock lock(&mu_);
  return follower_ != nullptr ? follower_->leader_last_seq() : oplog_->last();
}

void Replication::FillStats(rpc::MasterStats* stats) const {
  absl::MutexLock lock(&mu_);
  uint64_t bootstraps = bootstraps_, applied = applied_;
  if (follower_ != nullptr) {
    bootstraps += follower_->bootstraps();
    applied += follower_->records_applied();
    const uint64_t leader_last = follower_->leader_last_seq();
    stats->replication_lag =
        leader_last > oplog_->last() ? static_cast<int64_t>(leader_last - oplog_->last()) : 0;
  }
  stats->replication_bootstraps = static_cast<int64_t>(bootstraps);
  stats->replication_applied = static_cast<int64_t>(applied);
  if (sync_set_ != nullptr && sync_set_->leading()) {
    stats->sync_set_size = static_cast<int64_t>(sync_set_->members().size());
  }
}

}  // namespace mooncake
