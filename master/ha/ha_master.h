// A master with --enable_ha (docs/ha.md, "Roles, fencing and failover"): the election
// (master/ha/leader_election.h), the replication (master/ha/replication.h: the follower as a
// standby, the log server and the sync set as the leader) and the role
// (master/ha/master_role.h) wired together.
//
// Life of a master:
//   start      its own snapshot and log restored (master/snapshot/durability.h), STANDBY. It
//              watches the leader key and follows whoever leads (a master whose log
//              differs from the leader's history is told to bootstrap from its snapshot).
//   elected    the follower stopped and every record it received made durable; then
//              MasterService::TakeOver (segments detached until their daemons re-mount,
//              caches fenced for one lease, a new master_epoch); the log continues after
//              the last seq; the log server and the sync set start (empty: standbys join
//              as they catch up); then LEADER, and client calls are served.
//   lease lost DEPOSED at once: every call refused, every strict wait answers -1600, the
//              log server stops. The process then exits with status 3 (must_restart()),
//              and its supervisor (deploy/mooncake-master.service: Restart=on-failure)
//              starts it again: a standby, which restores its own directory and follows the new
//              leader (the follower's prev_crc check bootstraps it if its log holds records
//              the new leader never had). Not in process: a deposed leader's state may hold
//              changes nobody acknowledged, and starting over is the one way that is
//              obviously clean.
//   SIGTERM    a leader resigns (its key deleted: a standby takes over at once, not after
//              the lease); a standby stops following.
//
// The campaign rule (may_campaign): a standby may campaign when it is in the sync set, or
// when the sync set is empty and it has applied everything the last leader sent it (its
// applied seq is the leader's last seq at its last pull). See docs/ha.md for which
// acknowledged records survive which failures under it.
//
// Thread roles: the election's thread runs the takeover and the campaign predicate; the
// watcher's thread (re)starts following when the leader changes; any thread may depose
// (the election on losing the lease, an I/O thread seeing the lease run out at reply
// time), which must not block: it only refuses, stops the log server and the strict
// waits, and wakes main. mu_ makes the election's and the watcher's threads (and
// Shutdown) one owner of Replication at a time; the deposing thread takes no lock (it
// runs only once leading, when no follower exists, and Replication::Stop then only ends
// the serving and the waits). Lock order: mu_ -> (Replication's, the service's locks).
#ifndef MOONCAKE_MASTER_HA_MASTER_H_
#define MOONCAKE_MASTER_HA_MASTER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/auth/cluster_key.h"
#include "common/etcd/etcd_client.h"
#include "common/etcd/leader_watch.h"
#include "master/snapshot/durability.h"
#include "master/ha/leader_election.h"
#include "master/directory/master_options.h"
#include "master/ha/master_role.h"
#include "master/service/master_service.h"
#include "master/ha/replication.h"

namespace mooncake {

class HaMaster {
 public:
  // name: this master's rpc address "host:port". service and durability (with a log)
  // outlive the object. on_deposed: called once, from any thread, must not block (main
  // wakes up and exits with status 3). Null with *error when etcd's endpoints are refused.
  static std::unique_ptr<HaMaster> Create(const MasterOptions& options, std::string name,
                                          MasterService* service, Durability* durability,
                                          std::shared_ptr<const ClusterKey> cluster_key,
                                          std::function<void()> on_deposed,
                                          std::string* error);
  ~HaMaster();  // Shutdown()
  HaMaster(const HaMaster&) = delete;
  HaMaster& operator=(const HaMaster&) = delete;

  RoleMachine* role() { return role_.get(); }
  Replication* replication() { return replication_.get(); }

  // Campaigns and follows; once the server is about to serve.
  void Start();
  // SIGTERM: a leader resigns (its key deleted, so a standby takes over at once); then
  // everything stops. Idempotent.
  void Shutdown();
  // Lost its lease (not resigned at shutdown), or could not take over: main exits with
  // status 3, for its supervisor to start it again as a standby.
  bool must_restart() const { return restart_.load(); }

 private:
  HaMaster(const MasterOptions& options, std::string name, MasterService* service,
           Durability* durability, std::shared_ptr<const ClusterKey> cluster_key);

  // The election's callbacks (its thread).
  bool MayCampaign();
  void TakeOver(int64_t term);
  // The watcher's callback: follow the new leader.
  void LeaderChanged(const LeaderInfo& leader);
  // Any thread, once, after the role turned DEPOSED: stops acknowledging and serving the
  // log, then tells main (unless shutting down).
  void Deposed();

  const MasterOptions options_;
  const std::string name_;
  MasterService* const service_;
  Durability* const durability_;
  const std::shared_ptr<const ClusterKey> cluster_key_;
  std::function<void()> on_deposed_;

  std::unique_ptr<EtcdClient> etcd_;
  std::unique_ptr<LeaderElection> election_;
  std::unique_ptr<LeaderWatcher> watcher_;
  std::unique_ptr<RoleMachine> role_;
  std::unique_ptr<Replication> replication_;

  absl::Mutex mu_;
  std::string following_ ABSL_GUARDED_BY(mu_);  // the leader followed ("" none yet)
  bool taken_over_ ABSL_GUARDED_BY(mu_) = false;  // leading, or stopping: nobody is followed again
  std::atomic<bool> shut_down_{false};
  std::atomic<bool> restart_{false};
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_HA_MASTER_H_
