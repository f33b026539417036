// What this master is now in its cluster (docs/ha.md, "Roles, fencing and failover"):
//
//   STANDBY  follows the leader's log; serves nothing to clients (they hear -1600
//            NOT_LEADER), answers GetRole and the replication calls.
//   LEADER   serves, for as long as its lease holds (LeaseCheck: the election's local
//            deadline, read without a lock right before each reply leaves).
//   DEPOSED  lost its lease: serves nothing, for good. The process then exits with status 3
//            (master/ha/ha_master.h) and comes back, restarted by its supervisor, as a standby.
//
// Transitions: start -> STANDBY (--enable_ha) or LEADER of term 0 for as long as it runs
// (no HA: Solo()); STANDBY -> LEADER (elected; master/ha/ha_master.cc takes over first);
// LEADER -> DEPOSED (the lease lost, or seen run out right before a reply). Each one
// is logged once, with the term and the operation log's sequence.
//
// Thread roles: the election's and the follower's threads change the role; every
// connection's I/O thread reads it on each call. Serving() and LeaseHeld() take no lock
// (an atomic and the election's lock-free deadline); the leader's name sits under mu_,
// which only GetRole and the transitions take (a leaf lock).
#ifndef MOONCAKE_MASTER_MASTER_ROLE_H_
#define MOONCAKE_MASTER_MASTER_ROLE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"

namespace mooncake {

class RoleMachine {
 public:
  enum class Role : int { kLeader = 0, kStandby = 1, kDeposed = 2 };
  // True while the leader's lease still holds now (LeaderElection::Leading on the clock
  // the election keeps its deadline by): lock-free, asked before every reply.
  using LeaseCheck = std::function<bool()>;
  // The last operation-log record in this master's state, for the log lines and GetRole.
  using AppliedSeq = std::function<uint64_t()>;

  // A master without HA: LEADER of term 0, no lease.
  static std::unique_ptr<RoleMachine> Solo(AppliedSeq applied);
  // A master with --enable_ha, named by its rpc address: STANDBY, no leader known yet.
  // on_deposed runs once, on the thread that deposed it, after the role changed.
  static std::unique_ptr<RoleMachine> Standby(std::string self, AppliedSeq applied,
                                              std::function<void()> on_deposed);

  Role role() const { return role_.load(std::memory_order_acquire); }
  int64_t term() const { return term_.load(std::memory_order_acquire); }
  const std::string& self() const { return self_; }
  std::string leader() const;
  uint64_t applied_seq() const { return applied_(); }

  // Client calls may be served now: LEADER (whose lease the caller checks at reply time).
  bool Serving() const { return role() == Role::kLeader; }
  // LEADER and its lease still holds now: the reply may leave. Deposes it when not (the
  // lease ran out while nothing else noticed yet: a paused process).
  bool LeaseHeld();

  // A standby learnt who leads (from the election's watch): for GetRole and the refusals.
  void SawLeader(const std::string& leader, int64_t term);
  // STANDBY -> LEADER of term, with its lease. The caller has taken over first
  // (MasterService::TakeOver): the first call served sees the new state.
  void BecomeLeader(int64_t term, LeaseCheck lease);
  // LEADER -> DEPOSED (why: for the log line). False when it was not the leader.
  bool Depose(const char* why);

  // Called after each change (a leader seen, this master elected or deposed), on the
  // thread that made it, with no lock held; it may read role(), leader() and term(). Set
  // once, before the election starts (master/server/master_readiness.h tells systemd).
  void SetObserver(std::function<void()> observer) { observer_ = std::move(observer); }

  static const char* Name(Role role);

 private:
  RoleMachine(Role role, std::string self, AppliedSeq applied, std::function<void()> on_deposed);

  const std::string self_;
  const AppliedSeq applied_;
  const std::function<void()> on_deposed_;
  std::function<void()> observer_;  // set before any transition
  std::atomic<Role> role_;
  std::atomic<int64_t> term_{0};
  // Set once by BecomeLeader before role_ turns LEADER (release), read after (acquire).
  LeaseCheck lease_;
  mutable absl::Mutex mu_;
  std::string leader_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_MASTER_ROLE_H_
