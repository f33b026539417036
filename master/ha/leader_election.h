// One master's part in the election of its cluster's leader through etcd (docs/ha.md,
// "etcd and the election"). The keys are those of common/etcd/leader_watch.h.
//
// Campaign: while no one leads (the leader key is absent) and may_campaign() allows it,
// grant a lease of ttl and create the leader key bound to it, only if absent (a
// transaction). The winner's term is the key's create_revision: it grows with every
// election. Leading: renew every ttl/3 -- keep the lease alive, then read the key: a
// renewal counts only when the key is still ours (someone may delete it). The leader's LOCAL DEADLINE is the send
// time of the last successful renewal (at first, of the grant) + ttl - margin; etcd counts
// its ttl from when it received that request, which is later, so past the local deadline
// etcd may already have let the key go -- the leader then is no longer leader, whatever
// etcd says or has not said yet (a paused process, a lost network). The margin,
// max(20% of ttl, 250 ms) but at most half the ttl, covers the two clocks' drift and the
// time between Leading() and the reply it allowed leaving the host.
//
// Losing the lease (etcd says it is gone, the key is not ours any more, or the local
// deadline passed without a renewal) calls on_deposed() once; the object then does not campaign again unless the
// owner calls Campaign(). After a loss it deletes the key if still held and revokes the
// lease, best effort, so that another master takes over without waiting for etcd's expiry.
//
// Thread roles: one election thread (Start) reads the key, campaigns, renews, and runs
// every callback (may_campaign, on_elected, on_deposed) with no lock held, so a callback
// may call any method but Stop. While on_elected runs (a takeover may take seconds on a
// large directory), a pump thread of its own keeps renewing the lease; a loss it sees is
// acted on (on_deposed) once on_elected has returned, never during it. Any thread may call the rest; Leading() is lock-free (one
// atomic load) for the reply-time check of every answer. Lock order: mu_ only, never held
// across an etcd call or a callback.
//
// The EtcdClient's timeout should be well below the ttl (ttl/4, say): a renewal that hangs
// holds the thread, and on_deposed fires only once the call returns (Leading() turns false
// at the deadline regardless).
#ifndef MOONCAKE_MASTER_LEADER_ELECTION_H_
#define MOONCAKE_MASTER_LEADER_ELECTION_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/base/error_code.h"
#include "common/etcd/etcd_client.h"
#include "common/etcd/leader_watch.h"

namespace mooncake {

class LeaderElection {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    std::string name;        // this master's rpc address, "host:port": the key's value
    std::string cluster_id;  // names the election (ValidName)
    int64_t ttl_ms = 2000;   // the lease; etcd's are whole seconds (rounded up), >= 1 s
  };

  // etcd must outlive the object.
  LeaderElection(EtcdClient* etcd, Options options);
  ~LeaderElection();  // Stop()
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // Set before Start. may_campaign unset: always allowed.
  void set_may_campaign(std::function<bool()> fn) { may_campaign_ = std::move(fn); }
  void set_on_elected(std::function<void(int64_t term)> fn) { on_elected_ = std::move(fn); }
  void set_on_deposed(std::function<void()> fn) { on_deposed_ = std::move(fn); }

  // Starts the election thread, campaigning.
  void Start();
  // Stops and joins the thread (up to the client's timeout if it is in a call). A leader
  // stops leading at once but tells etcd nothing: the key stays until the lease expires,
  // as after a crash. For a clean handover call Resign first. on_deposed is not called.
  void Stop();
  // Gives up leadership at once (Leading() false before this returns), then deletes the
  // key while it is still ours and revokes the lease, so another master takes over without
  // waiting for the lease to expire. Does not call on_deposed; the object then waits for
  // Campaign(). OK also when not leading; otherwise the etcd call's error (the lease then
  // expires on its own).
  ErrorCode Resign();
  // After a loss or Resign: campaign again (a no-op while campaigning or leading).
  void Campaign();

  // True while this master leads and now is before its local deadline. Lock-free.
  bool Leading(Clock::time_point now = Clock::now()) const {
    int64_t deadline = deadline_ns_.load(std::memory_order_acquire);
    return deadline != 0 && now.time_since_epoch().count() < deadline;
  }
  // The term of the current leadership, or of the last one (0 before any).
  int64_t term() const;
  // The leader as last read from etcd (this master itself while it leads; term 0: none).
  LeaderInfo Current() const;

  // The leader writes the sync set (the standbys that may take over) with PutIfHeld: true
  // once written while this master still held its key in this term; false when it no
  // longer leads, a name is empty or holds a comma, or etcd did not answer (logged): the
  // sync set in etcd is then unchanged.
  bool PublishSyncSet(const std::vector<std::string>& names);
  // The sync set as etcd has it now (empty when never written or written empty).
  ErrorCode ReadSyncSet(std::vector<std::string>* names);

  // Test hooks: the election thread stops at its next step (renewing nothing, campaigning
  // for nothing) until thawed, as if the process were paused; Leading() keeps following
  // the clock.
  void FreezeForTest();
  void ThawForTest();

  // max(20% of ttl, 250 ms), at most half the ttl.
  static int64_t MarginMs(int64_t ttl_ms);

 private:
  enum class Phase { kCandidate, kLeader, kIdle };  // idle: deposed or resigned

  void Run();
  void StepCandidate();
  void StepLeader();
  void StepIdle();
  // One renewal of lease (term): kept alive and the key found still ours. kLost with
  // *reason when etcd says the lease or the key is gone; kFailed when etcd did not answer
  // (the deadline stays where it was).
  enum class Renewal { kRenewed, kFailed, kLost };
  Renewal Renew(int64_t lease, int64_t term, const char** reason);
  // When the next renewal is due (the deadline included).
  Clock::time_point NextRenewalLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The pump: renews lease until *done (on_elected returned) or a stop, a loss (recorded
  // in lost_reason_) or the deadline.
  void RenewWhile(const std::atomic<bool>* done, int64_t lease, int64_t term);
  // Ends the leadership of lease (if still the current one) and calls on_deposed.
  void Depose(int64_t lease, const char* reason);
  // Deletes the key if still held in term and revokes lease; best effort.
  ErrorCode Release(int64_t term, int64_t lease);
  // Waits on cv_ until `until`, a stop, a freeze or a change of phase.
  void WaitUntil(Clock::time_point until, Phase phase) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ErrorCode ReadLeaderKey(LeaderInfo* out);

  EtcdClient* const etcd_;
  const Options options_;
  const std::string key_;
  const int64_t ttl_ms_;      // as granted: whole seconds
  const int64_t margin_ms_;
  std::function<bool()> may_campaign_;
  std::function<void(int64_t)> on_elected_;
  std::function<void()> on_deposed_;

  // The local deadline in steady-clock nanoseconds; 0 while not leading.
  std::atomic<int64_t> deadline_ns_{0};

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kCandidate;
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;  // the leadership's lease
  int64_t term_ ABSL_GUARDED_BY(mu_) = 0;
  Clock::time_point last_renewal_ ABSL_GUARDED_BY(mu_);  // send time of the last success
  bool renewal_failed_ ABSL_GUARDED_BY(mu_) = false;  // the last renewal did not answer
  const char* lost_reason_ ABSL_GUARDED_BY(mu_) = nullptr;  // a loss the pump saw, not acted on yet
  LeaderInfo current_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool frozen_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_LEADER_ELECTION_H_
