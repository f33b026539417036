// Takes the master's snapshots, on its own thread: periodically, and when asked (the
// Snapshot admin RPC, which returns once the snapshot has forked: the RPC server runs
// handlers on its I/O threads, and one waiting for a whole snapshot would hold up every
// connection its thread serves; LastSnapshot then tells how it ended).
//
// One snapshot: the snapshot thread takes the state gate exclusively (request handlers
// finish what they are doing and new ones wait), notes the operation log's last sequence
// and fork()s; the gate is released as soon as fork returns, so that pause is all the
// requests see. The child, holding a copy-on-write image of memory frozen at that instant,
// encodes every non-empty shard (master/snapshot/snapshot_codec.h), writes the payloads, manifest,
// descriptor and latest pointer (master/snapshot/snapshot_format.h) and reports over a pipe. The
// parent never blocks a request on it: it waits on its own thread, kills a child that
// overruns child_timeout and removes its partial directory. After a published snapshot
// it deletes snapshots beyond the retention count and the log records every remaining
// snapshot holds.
//
// Costs to know: while a child runs, every page the parent changes is copied, so memory
// can grow up to the size of the directory in the worst case; and fork() itself copies the
// page tables, a pause that grows with the master's memory (durability_bench measures it;
// bench/README.md).
//
// Thread-safety: every method may be called from any thread; one snapshot runs at a time.
#ifndef MOONCAKE_MASTER_SNAPSHOTTER_H_
#define MOONCAKE_MASTER_SNAPSHOTTER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/base/error_code.h"
#include "master/service/master_service.h"
#include "master/log/oplog.h"
#include "master/snapshot/snapshot_store.h"

namespace mooncake {

struct SnapshotterOptions {
  std::string dir;
  int64_t interval_ms = 600000;
  size_t retention_count = 2;
  int64_t child_timeout_ms = 300000;
  // The sequence snapshots record when there is no log (or before it appended anything):
  // what the restore replayed up to.
  uint64_t base_sequence = 0;
};

// What one snapshot did, or has done so far.
struct SnapshotOutcome {
  ErrorCode code = ErrorCode::OK;
  std::string error;  // why, when code is not OK
  bool running = false;  // forked, still being written (bytes, objects, duration unknown)
  std::string name;      // empty: there is none (Last before the first one ended)
  uint64_t sequence = 0;
  int64_t pause_us = 0;     // the gate held exclusively, fork included
  int64_t duration_ms = 0;  // fork to published
  int64_t bytes = 0;
  int64_t objects = 0;
};

class Snapshotter {
 public:
  // oplog may be null (--oplog_mode disabled).
  Snapshotter(MasterService* service, OpLog* oplog, SnapshotterOptions options);
  ~Snapshotter();  // Stop()
  Snapshotter(const Snapshotter&) = delete;
  Snapshotter& operator=(const Snapshotter&) = delete;

  // Starts the snapshot thread (one snapshot every interval, the first one interval from
  // now, and one whenever Request asks).
  void Start();
  // Stops it; a running child is killed and its directory removed.
  void Stop();
  // A periodic snapshot is skipped while skip() is true (a leader whose standbys take
  // them, master/ha/replication.h); requested ones are not. Any time, from any thread.
  void SetSkipPeriodic(std::function<bool()> skip);

  // Asks the snapshot thread for a snapshot now, or joins the one running, and returns
  // once it has forked: running, with its name, sequence and pause. A snapshot that failed
  // before it could fork is returned with its failure. Needs Start.
  SnapshotOutcome Request();
  // How the newest snapshot that ended, ended.
  SnapshotOutcome Last() const;
  // Takes one on the calling thread, start to end (the snapshot thread's work; tests).
  SnapshotOutcome Take();

  // The sequence of the newest snapshot published by this process (0: none yet).
  uint64_t last_sequence() const { return last_sequence_.load(); }

 private:
  // One snapshot, start to end (Take records its outcome).
  SnapshotOutcome Run();
  // Right after the fork: what Request answers.
  void Forked(const SnapshotOutcome& so_far);
  // In the child, first: closes what it inherited but the report pipe, and makes sure it
  // dies with the master.
  static void LetGoOfTheParent(pid_t parent, int report_fd);
  // Runs in the child; returns its exit status. Writes "<bytes> <objects>" or the error
  // to report_fd.
  int RunChild(uint64_t sequence, int64_t created_ms, int report_fd);
  // Waits for the child, at most until the timeout; fills outcome from its report.
  void AwaitChild(pid_t pid, int report_fd, const std::string& path, SnapshotOutcome* outcome);
  void Loop();

  MasterService* const service_;
  OpLog* const oplog_;
  const SnapshotterOptions options_;
  SnapshotStore store_;

  absl::Mutex take_mu_;  // one snapshot at a time
  std::atomic<uint64_t> last_sequence_{0};
  std::atomic<pid_t> child_{0};  // the running child, for Stop

  mutable absl::Mutex mu_;
  absl::CondVar loop_cv_;   // wakes the snapshot thread: a request, stopping
  absl::CondVar state_cv_;  // a snapshot forked or ended
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  std::function<bool()> skip_periodic_ ABSL_GUARDED_BY(mu_);
  SnapshotOutcome current_ ABSL_GUARDED_BY(mu_);  // the running one (running set)
  SnapshotOutcome last_ ABSL_GUARDED_BY(mu_);  // the newest that ended
  uint64_t forks_ ABSL_GUARDED_BY(mu_) = 0;  // snapshots that got as far as fork
  uint64_t ends_ ABSL_GUARDED_BY(mu_) = 0;  // snapshots that ended, however
  std::thread loop_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_SNAPSHOTTER_H_
