// Replication as the master's owner drives it (docs/ha.md, "Replication"): one object per
// master with HA, told its role by the election (master/ha/ha_master.h drives it; tests
// call it directly). The pieces: master/ha/log_server.h (the leader answering pulls),
// master/ha/log_follower.h (the standby's thread), master/log/sync_set.h (what a strict
// acknowledgement waits for; the rule is stated there).
//
//   standby  StartAsStandby("host:port"): follows that leader; the service is kept in the
//            restore's state (Durability::Open with HA restores without finishing).
//            Calls from clients are the owner's to refuse (NOT_LEADER).
//   leader   StartAsLeader(term, publish_sync_set): stops following, finishes the restore
//            on the state followed so far (allocators rebuilt, every segment detached until
//            its daemon re-mounts, as after a restart), publishes an empty sync set (false
//            when that fails: we do not lead), attaches the sync set to the service's Sync
//            and serves FollowLog / FetchSnapshot in this term. Periodic snapshots are
//            skipped while the sync set has a member (the standbys take them); on-demand
//            ones (bootstraps, the admin RPC) still run. A master leads at most once per
//            process: StartAsStandby after it is refused.
//   Stop     stops either: the follower's thread, or the serving (pulls answer NOT_LEADER)
//            and every pending or later strict wait (NOT_LEADER).
//
// Thread-safety: the Start/Stop calls from one owner thread; the getters and the RPC entry
// points from any thread.
#ifndef MOONCAKE_MASTER_REPLICATION_H_
#define MOONCAKE_MASTER_REPLICATION_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "MasterService.h"
#include "absl/synchronization/mutex.h"
#include "master/ha/log_follower.h"
#include "master/ha/log_server.h"
#include "master/service/master_service.h"
#include "master/log/oplog.h"
#include "master/snapshot/snapshotter.h"
#include "master/log/sync_set.h"

namespace mooncake {

struct ReplicationOptions {
  std::string name;  // this master's rpc address "host:port" (what standbys are known by)
  std::string snapshot_dir;
  std::shared_ptr<const ClusterKey> cluster_key;  // null: none
  int64_t sync_timeout_ms = 1000;                 // --ha_sync_timeout
  LogFollowerOptions follower;  // tuning; name, leader, dir and key are filled in by Start
};

class Replication {
 public:
  // oplog: started, with a tail (OpLogOptions::tail_bytes); snapshotter may be null (no
  // bootstraps served). Not owned; they outlive this object.
  Replication(MasterService* service, OpLog* oplog, Snapshotter* snapshotter,
              ReplicationOptions options);
  ~Replication();  // Stop()
  Replication(const Replication&) = delete;
  Replication& operator=(const Replication&) = delete;

  bool StartAsLeader(int64_t term, SyncSet::PublishFn publish_sync_set);
  // leader: "host:port". bootstrap_first: start with a snapshot (a standby with no state
  // of its own; otherwise it continues after its own log and the leader tells it when it
  // must bootstrap). INVALID_PARAMS for an address that does not parse, or after leading.
  ErrorCode StartAsStandby(const std::string& leader, bool bootstrap_first);
  void Stop();

  // The last record in this master's state (the campaign predicate's "has everything it
  // was sent": applied_seq() == leader_last_seq()).
  uint64_t applied_seq() const { return oplog_->last(); }
  uint64_t leader_last_seq() const;
  bool leading() const { return sync_set_ != nullptr && sync_set_->leading(); }
  // The follower while a standby, else null (tests pause it; the owner's thread only:
  // the one that also replaces it, under mu_, so its own read needs no lock, which the
  // analysis cannot know).
  LogFollower* follower() ABSL_NO_THREAD_SAFETY_ANALYSIS { return follower_.get(); }
  SyncSet* sync_set() { return sync_set_.get(); }
  LogServer* server() { return &server_; }

  // Appends this master's replication figures (MasterStats 18..21).
  void FillStats(rpc::MasterStats* stats) const;

 private:
  void StopFollower();

  MasterService* const service_;
  OpLog* const oplog_;
  Snapshotter* const snapshotter_;
  const ReplicationOptions options_;
  LogServer server_;

  mutable absl::Mutex mu_;  // follower_, against the getters' threads
  std::unique_ptr<LogFollower> follower_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SyncSet> sync_set_;  // once leading; kept until destruction (waiters)
  bool led_ = false;
  // What the last follower counted (the figures survive its Stop).
  uint64_t bootstraps_ = 0;
  uint64_t applied_ = 0;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_REPLICATION_H_
