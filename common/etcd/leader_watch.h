// Who leads a cluster of masters (docs/ha.md), as etcd says: the keys of the election, one
// read of the leader key, and LeaderWatcher, which follows it for whoever must find the
// leader (daemons, standbys, tools). The election itself is master/ha/leader_election.h.
//
// Keys, under /mooncake/<cluster_id>/:
//   leader          the leader's name ("host:port" of its rpc address), bound to its lease,
//                   created only if absent; its create_revision is the leader's term
//   sync            comma-separated names of the standbys of the sync set, written by the
//                   leader only while it holds `leader`
//   standbys/<name> a standby's presence, bound to its own lease (optional)
#ifndef MOONCAKE_COMMON_LEADER_WATCH_H_
#define MOONCAKE_COMMON_LEADER_WATCH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/base/error_code.h"
#include "common/etcd/etcd_client.h"

namespace mooncake {

std::string HaKeyPrefix(const std::string& cluster_id);  // "/mooncake/<cluster_id>/"
std::string LeaderKey(const std::string& cluster_id);
std::string SyncSetKey(const std::string& cluster_id);
std::string StandbyKey(const std::string& cluster_id, const std::string& name);

// A leader as etcd names it. term 0 (and name "") when there is none: the key is absent.
// Terms grow with every election (they are etcd revisions), so of two answers the one with
// the higher term is the newer.
struct LeaderInfo {
  std::string name;
  int64_t term = 0;
  bool known() const { return term > 0; }
  bool operator==(const LeaderInfo& o) const { return name == o.name && term == o.term; }
  bool operator!=(const LeaderInfo& o) const { return !(*this == o); }
};

// Reads the leader key once: OK with *out (term 0: no leader now), or the client's error.
ErrorCode ReadLeader(EtcdClient* etcd, const std::string& cluster_id, LeaderInfo* out);

// Follows the leader key by polling it every poll_interval_ms on a thread of its own, and
// calls on_change(leader) each time what it reads differs from the previous read (a new
// leader, or none: term 0). A failed read changes nothing (the last answer stands) and is
// retried at the next poll.
//
// Thread roles: one watcher thread polls and runs on_change, with no lock held (on_change
// may call Current, but not Refresh or Stop, which wait for that thread); any thread may
// call Current and Refresh. Lock order: mu_ only (never held across an etcd call or the
// callback).
class LeaderWatcher {
 public:
  // etcd must outlive the watcher. on_change may be empty.
  LeaderWatcher(EtcdClient* etcd, std::string cluster_id, int64_t poll_interval_ms,
                std::function<void(const LeaderInfo&)> on_change);
  ~LeaderWatcher();  // Stop()
  LeaderWatcher(const LeaderWatcher&) = delete;
  LeaderWatcher& operator=(const LeaderWatcher&) = delete;

  // Starts the thread; its first read is at once.
  void Start();
  // Stops and joins the thread (it may be in an etcd call: up to the client's timeout).
  void Stop();

  // The last leader read (term 0 before the first successful read, or when there is none).
  LeaderInfo Current() const;
  // Reads the key now rather than at the next poll, for a caller that was just told "not
  // the leader" or lost its connection: the watcher thread reads it (and runs on_change
  // when it changed) while the caller waits up to the client's timeout. OK with *out; the
  // read's error otherwise. Without a running thread it reads on the calling thread, and
  // on_change is not called.
  ErrorCode Refresh(LeaderInfo* out);

 private:
  void Run();
  // One read; when it changed the current leader, *changed and the value to report.
  ErrorCode Poll(bool* changed, LeaderInfo* now);

  EtcdClient* const etcd_;
  const std::string cluster_id_;
  const int64_t poll_interval_ms_;
  const std::function<void(const LeaderInfo&)> on_change_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  LeaderInfo current_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t refresh_asked_ ABSL_GUARDED_BY(mu_) = 0;  // Refresh calls so far
  uint64_t refresh_done_ ABSL_GUARDED_BY(mu_) = 0;  // of them, how many a poll has answered
  ErrorCode last_poll_ ABSL_GUARDED_BY(mu_) = ErrorCode::OK;
  std::thread thread_;
};

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_LEADER_WATCH_H_
