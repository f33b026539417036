// Where the master leader is, for every process that talks to the master (the daemon's
// daemon/master_link/master_client.h, benchmarks, tools): a fixed "host:port", or the value of the
// leader key in etcd (docs/ha.md, "Daemons"), `/mooncake/<cluster_id>/leader`, whose value
// is the leader's rpc address "host:port" and whose create_revision is the leader's term.
//
// Through etcd the locator re-reads the key when asked (Refresh: a connection failed, a
// master answered NOT_LEADER, a connection reported a higher term than the key's) and
// every watch interval (StartWatch), so that a change is noticed while the process is idle
// too: both through common/etcd/leader_watch.h's LeaderWatcher, whose one thread does every
// read (concurrent Refresh calls share one). Each change of leader (another address, or
// the same one under a new term) is logged once ("master leader is now X (term T)") and
// reported to the change callback. A key found absent (an election in progress) makes the leader unknown
// until it is back; etcd unreachable keeps the last leader read (the masters may well be
// fine: their own leases are what decides).
//
// Terms: highest_term() is the highest term this process knows, from the key and from
// what masters said of themselves (ObserveTerm). A reply that comes from a connection of
// a lower term is stale: a deposed leader's.
//
// Thread roles: any thread calls Current/Refresh/ObserveTerm; the watcher's thread reads.
// Lock order: apply_mu_ (applies what a read found, and runs the change callback) -> mu_
// (the state). The callback runs on the watcher's thread or a Refresh caller's; it must
// not call Refresh (it may call Current), nor block.
// Input policy: the key's value is a peer's input; one that is not host:port is taken as
// "no leader" and logged once (while it stays the same).
#ifndef MOONCAKE_COMMON_MASTER_LOCATOR_H_
#define MOONCAKE_COMMON_MASTER_LOCATOR_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/base/error_code.h"
#include "common/base/master_address.h"

namespace mooncake {

class EtcdClient;
class LeaderWatcher;
struct LeaderInfo;

struct MasterLeader {
  std::string host;
  int port = 0;       // 0: no leader known
  int64_t term = 0;   // the key's create_revision; 0 for a fixed address
  bool known() const { return port > 0; }
  std::string name() const { return host + ":" + std::to_string(port); }
  bool same_as(const MasterLeader& o) const {
    return host == o.host && port == o.port && term == o.term;
  }
};

class MasterLocator {
 public:
  // Called after each change of leader, with the new one (maybe unknown).
  using ChangeCallback = std::function<void(const MasterLeader&)>;

  // A fixed master: Current() is always host:port (term 0); Refresh does nothing.
  static std::unique_ptr<MasterLocator> Fixed(const std::string& host, int port);
  // The leader key of cluster_id through etcd at endpoints; each etcd request bounded by
  // timeout_ms, the key re-read every poll_interval_ms once watched. Reads the key once
  // before returning (an unreachable etcd is not an error: the leader is unknown until a
  // later read). INVALID_PARAMS for malformed endpoints.
  static constexpr int64_t kPollIntervalMs = 500;
  static ErrorCode ViaEtcd(const std::string& endpoints, const std::string& cluster_id,
                           int64_t timeout_ms, int64_t poll_interval_ms,
                           std::unique_ptr<MasterLocator>* out);
  ~MasterLocator();  // stops the watch
  MasterLocator(const MasterLocator&) = delete;
  MasterLocator& operator=(const MasterLocator&) = delete;

  bool via_etcd() const { return etcd_ != nullptr; }
  // "etcd://...(cluster C)" or "host:port", for log lines.
  const std::string& description() const { return description_; }

  MasterLeader Current() const;
  int64_t highest_term() const;

  // Re-reads the leader key now (concurrent callers share a read; up to the etcd
  // timeout). Returns the leader after it.
  MasterLeader Refresh();
  // A master said it leads under term: the highest known term rises to it; a term above
  // the key's means the key read is older than that election: re-read it.
  void ObserveTerm(int64_t term);

  // Set once, before StartWatch and before any other thread uses the locator.
  void SetChangeCallback(ChangeCallback callback) { on_change_ = std::move(callback); }
  // Re-reads every poll interval until destruction (nothing for a fixed master).
  void StartWatch();

 private:
  MasterLocator();
  // Takes what a read of the key found: logs and reports a change.
  void Apply(const LeaderInfo& read);

  std::unique_ptr<EtcdClient> etcd_;  // null: fixed
  std::string key_;
  std::string description_;
  ChangeCallback on_change_;

  std::mutex apply_mu_;
  bool read_failing_ = false;  // guarded by apply_mu_: logged once
  std::string bad_value_;      // the malformed value last logged; guarded by apply_mu_

  mutable std::mutex mu_;
  MasterLeader leader_;       // guarded by mu_
  int64_t highest_term_ = 0;  // guarded by mu_

  // Last: destroyed first, its thread stopped before the rest goes.
  std::unique_ptr<LeaderWatcher> watcher_;
};

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_MASTER_LOCATOR_H_
