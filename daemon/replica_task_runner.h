// Runs the copy and move tasks the master assigns to this daemon (Mooncake's client-side
// task executor; docs/master.md, "Copy and move tasks"). The master assigns a task to the
// daemon holding its source replica, so the bytes are always read from this daemon's own
// memory.
//
// One thread. A round: FetchReplicaTasks (up to kMaxTasks; the master reserved each task's
// targets); for each task the source range is checked against the segment it names (one of
// ours: Membership::Find), then copied into every target by the put path's own transfer
// code (ReplicaIO::ResolveAll + WriteAll: a memcpy into a segment of this daemon, a
// transfer-engine WRITE into another daemon's), all tasks of the round in parallel; then
// CompleteReplicaTasks reports each outcome (0, or why the copy failed), and the master
// publishes or frees. A report the master could not be sent is tried again before anything
// new is fetched.
//
// Pacing: the next round follows kBusy after one that ran tasks; after an empty one the
// pause starts at kIdle and doubles up to kIdleMax (Mooncake's clients poll every second),
// so that an idle cluster costs the master little and a task waits a second at most. A
// master that does not know us (-103) is registered with again.
//
// Thread roles: Start/Stop from main; the loop on its own thread. Stop returns once the
// round in progress has ended (its report included).
#ifndef MOONCAKE_DAEMON_REPLICA_TASK_RUNNER_H_
#define MOONCAKE_DAEMON_REPLICA_TASK_RUNNER_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/base/paced_loop.h"
#include "daemon/master_link/master_client.h"
#include "daemon/cluster/membership.h"
#include "daemon/replicas/replica_io.h"

namespace mooncake {

class ReplicaTaskRunner {
 public:
  static constexpr int32_t kMaxTasks = 64;
  static constexpr std::chrono::milliseconds kBusy{2};
  static constexpr std::chrono::milliseconds kIdle{100};
  static constexpr std::chrono::milliseconds kIdleMax{1000};
  // A task's copy, from the fetch; its targets stay reserved far longer (the master's
  // processing timeout).
  static constexpr std::chrono::seconds kCopyBudget{60};

  struct Stats {
    uint64_t done = 0;    // tasks copied and published
    uint64_t failed = 0;  // tasks whose copy failed, or that the master refused at the report
  };

  ReplicaTaskRunner(MasterClient* master, Membership* membership, ReplicaIO* io)
      : master_(master), membership_(membership), io_(io) {}
  ~ReplicaTaskRunner();  // Stop()
  ReplicaTaskRunner(const ReplicaTaskRunner&) = delete;
  ReplicaTaskRunner& operator=(const ReplicaTaskRunner&) = delete;

  void Start();
  void Stop();
  Stats stats() const;

 private:
  // One fetch and its work; how long to wait before the next round.
  std::chrono::milliseconds RunRound();
  // Copies every task of batch; outcomes[i] for batch.tasks[i].
  void CopyAll(const rpc::ReplicaTasksResult& batch,
               std::vector<rpc::ReplicaTaskOutcome>* outcomes);
  // Sends unsent_; false (kept) when the master could not be told.
  bool Report();

  MasterClient* const master_;
  Membership* const membership_;
  ReplicaIO* const io_;

  std::vector<rpc::ReplicaTaskOutcome> unsent_;  // loop thread only
  std::chrono::milliseconds idle_{kIdle};        // loop thread only: the next empty pause

  mutable std::mutex mu_;
  Stats stats_;  // guarded by mu_
  PacedLoop loop_;  // last: stopped (by ~PacedLoop) before the members its rounds use go
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_REPLICA_TASK_RUNNER_H_
