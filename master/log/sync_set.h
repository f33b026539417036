// What a strict acknowledgement waits for when standbys follow the log (docs/ha.md,
// "What an acknowledgement means"). The rule:
//
//   In strict mode a reply that depends on a log record (every reply MasterService::Sync
//   precedes) is sent as OK only once the record is fdatasync'ed in the leader's own log
//   AND every standby of the sync set has reported, on a pull, that it is durable in its
//   own log (durable_seq >= the record's seq). A sync-set standby that has not done so
//   within ha_sync_timeout of the wait's start is first removed from the sync set as
//   published (publish_sync_set, which writes etcd only while we still lead), and only
//   then no longer waited for. Should publishing fail (we no longer lead), the wait answers
//   NOT_LEADER and the reply is not an acknowledgement. A standby is added back once it
//   has caught up (durable_seq == the leader's last seq at one of its pulls): added here
//   first, then published, so that the published set never names a standby the leader
//   does not wait for. Only a sync-set member may take over, so the next leader holds every
//   record that was acknowledged. An empty sync set waits for nothing but the local disk.
//
// Relaxed mode waits for nothing (MasterService::Sync returns at once): a failover may
// lose what the standbys had not pulled yet, at most the replication lag.
//
// Threads: Wait on request threads (Thrift I/O threads, after the handler's change, with
// no lock of the service held), Report on the threads serving FollowLog. publish_sync_set
// is called with no lock of ours held but publish_mu_, one call at a time, in the order
// the sets were decided. Lock order: publish_mu_ -> mu_.
#ifndef MOONCAKE_MASTER_SYNC_SET_H_
#define MOONCAKE_MASTER_SYNC_SET_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/base/error_code.h"

namespace mooncake {

class SyncSet {
 public:
  // Writes the sync set where the next leader's campaign reads it
  // (LeaderElection::PublishSyncSet); false when we no longer lead.
  using PublishFn = std::function<bool(const std::vector<std::string>&)>;

  SyncSet(PublishFn publish, std::chrono::milliseconds timeout);
  SyncSet(const SyncSet&) = delete;
  SyncSet& operator=(const SyncSet&) = delete;

  // Publishes the initial set (normally empty: standbys join as they catch up) before any
  // acknowledgement depends on it. False when publishing failed (no longer leading).
  bool Start(const std::vector<std::string>& initial);

  // Blocks until every member has seq durable, dropping the laggards as above; OK, or
  // NOT_LEADER (publishing failed, or Depose ran). Never longer than about the timeout
  // plus one publish. Lock-free when every member is already past seq.
  ErrorCode Wait(uint64_t seq);

  // A standby's pull: it has durable_seq on disk; the leader's log ends at leader_last.
  // Wakes the waiters; adds the standby when it is not a member and has caught up.
  void Report(const std::string& standby, uint64_t durable_seq, uint64_t leader_last);

  // We no longer lead: every wait answers NOT_LEADER from now on.
  void Depose();

  std::vector<std::string> members() const;
  bool leading() const { return leading_.load(); }

 private:
  // The lowest durable seq of the members (max when there are none), 0 once not leading:
  // the wait's lock-free test. mu_ held.
  void UpdateFloorLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes the members as they are now (publish_mu_ held, mu_ not).
  bool PublishMembers();

  const PublishFn publish_;
  const std::chrono::milliseconds timeout_;

  absl::Mutex publish_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  absl::CondVar cv_;          // a report arrived, or the members changed
  std::map<std::string, uint64_t> members_ ABSL_GUARDED_BY(mu_);  // name -> its durable seq
  std::atomic<uint64_t> floor_{0};
  std::atomic<bool> leading_{false};
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_SYNC_SET_H_
