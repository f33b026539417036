// Drain jobs (Mooncake's CreateDrainJob, QueryDrainJob, CancelDrainJob and
// QuerySegmentStatus; an operator starts them on the admin HTTP: master/server/master_admin.h):
// every object with a replica in the named segments is moved out by move tasks (at most
// max_concurrency at once; into target_segments, the least used first, or any segment when
// none is named), and the segments take no new allocation (DRAINING, then DRAINED once
// empty, until their owners unmount them). A unit (a key and a segment) whose move fails
// kMaxUnitRetries times is given up; a job whose remaining units are all given up fails,
// and its segments take allocations again. Objects leased, hard-pinned, being written or
// moving already wait (blocked). Kept in memory only.
//
// A job holds its segments (Segment::Hold: no new allocation, so puts that prefer them go
// elsewhere) and, at every upkeep round, settles the moves that ended, then either ends
// (nothing left in its segments: SUCCEEDED; only units it gave up on: FAILED, the holds
// released) or plans new moves up to its concurrency. Planning walks every object a slice
// of a shard at a time, and creates the tasks (through Mover: the master's move tasks,
// master/directory/replica_tasks.h) after the walk, with no shard lock held.
//
// Thread roles: the admin HTTP creates, queries and cancels; the upkeep runs the jobs (Run,
// one thread at a time). Every call but Query comes with the state gate held shared by the
// caller. mu_ guards the table and is a leaf; each job's own lock is taken after it is let
// go, and is held by Run across the job's round (which takes shard locks and the tasks').
#ifndef MOONCAKE_MASTER_DRAIN_JOBS_H_
#define MOONCAKE_MASTER_DRAIN_JOBS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/base/error_code.h"
#include "master/directory/master_options.h"
#include "master/directory/object_directory.h"
#include "master/directory/replica_tasks.h"
#include "master/directory/segment_registry.h"
#include "master_types.h"

namespace mooncake {

class DrainJobs {
 public:
  // What a job asks of the master: segments by name, and move tasks.
  class Mover {
   public:
    virtual ~Mover() = default;
    // The attached memory segments named name (none: the name is unknown here).
    virtual std::vector<std::shared_ptr<Segment>> SegmentsNamed(const std::string& name) const = 0;
    // A name a task may target: -600 unknown, -1010 none of its segments takes allocation.
    virtual ErrorCode CheckTarget(const std::string& name) const = 0;
    // MasterService::CreateMoveTask, under the state gate held by the caller.
    virtual rpc::TaskResult CreateMoveTaskLocked(const std::string& key, const std::string& source,
                                                 const std::string& target) = 0;
  };

  enum class Status : int32_t { kCreated = 0, kPlanning, kRunning, kSucceeded, kFailed, kCanceled };
  struct View {
    TaskId id;
    Status status = Status::kCreated;
    int64_t created_unix_ms = 0;
    int64_t updated_unix_ms = 0;
    std::vector<std::string> segments;
    uint64_t succeeded_units = 0, failed_units = 0, blocked_units = 0, active_units = 0;
    uint64_t migrated_bytes = 0;
    std::string message;
  };
  static constexpr int kMaxUnitRetries = 3;
  static constexpr size_t kMaxJobs = 1000;  // the oldest ended ones go beyond it

  // All of them outlive this.
  DrainJobs(const MasterOptions& options, ObjectDirectory& directory, SegmentRegistry& segments,
            const ReplicaTasks& tasks, Mover& mover)
      : options_(options), directory_(directory), segments_(segments), tasks_(tasks),
        mover_(mover) {}
  DrainJobs(const DrainJobs&) = delete;
  DrainJobs& operator=(const DrainJobs&) = delete;

  // -600 no segment, a name twice, max_concurrency 0, or a target that is also drained;
  // -101 a name no memory segment carries; -1010 a segment not taking allocations (drained
  // or draining already, detached), or a target that does not.
  ErrorCode Create(const std::vector<std::string>& segments,
                   const std::vector<std::string>& targets, uint32_t max_concurrency,
                   TaskId* id) ABSL_LOCKS_EXCLUDED(mu_);
  // -704 unknown job.
  ErrorCode Query(const TaskId& id, View* out) const ABSL_LOCKS_EXCLUDED(mu_);
  // -704 unknown; -1010 ended, or moves running (as Mooncake's).
  ErrorCode Cancel(const TaskId& id) ABSL_LOCKS_EXCLUDED(mu_);
  // Mooncake's SegmentStatus of a name: 1 OK, 2 DRAINING, 3 DRAINED; -101 unknown name.
  ErrorCode SegmentStatusOf(const std::string& name, int32_t* status) const;
  // Upkeep: each running job settles its ended moves, ends when nothing is left, and
  // starts new moves up to its concurrency.
  void Run(int64_t now) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // What is set at creation is constant; the rest changes under mu (the upkeep's round, the
  // queries, a cancel).
  struct Job {
    absl::Mutex mu;
    TaskId id;
    std::vector<std::string> segments;
    std::vector<std::string> targets;
    uint32_t max_concurrency = 1;
    int64_t created_unix_ms = 0;
    Status status ABSL_GUARDED_BY(mu) = Status::kCreated;
    int64_t updated_unix_ms ABSL_GUARDED_BY(mu) = 0;
    std::string message ABSL_GUARDED_BY(mu);
    uint64_t succeeded ABSL_GUARDED_BY(mu) = 0, failed ABSL_GUARDED_BY(mu) = 0,
        blocked ABSL_GUARDED_BY(mu) = 0, migrated ABSL_GUARDED_BY(mu) = 0;
    struct Active {
      TaskId task;
      std::string unit;  // stored key, NUL, source segment name
      uint64_t bytes = 0;
    };
    std::vector<Active> active ABSL_GUARDED_BY(mu);
    std::set<std::string> completed ABSL_GUARDED_BY(mu), given_up ABSL_GUARDED_BY(mu);
    std::unordered_map<std::string, int> retries ABSL_GUARDED_BY(mu);

    bool ended() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return status == Status::kSucceeded || status == Status::kFailed ||
             status == Status::kCanceled;
    }
  };
  std::shared_ptr<Job> Find(const TaskId& id) const ABSL_LOCKS_EXCLUDED(mu_);
  // A job's round, under its lock.
  void Refresh(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(job.mu);
  bool MaybeFinish(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(job.mu);
  void Schedule(Job& job, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(job.mu);
  // Holds (hold) or releases every memory segment named name.
  void HoldSegments(const std::string& name, bool hold);

  const MasterOptions& options_;
  ObjectDirectory& directory_;
  SegmentRegistry& segments_;
  const ReplicaTasks& tasks_;
  Mover& mover_;

  mutable absl::Mutex mu_;
  std::map<TaskId, std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_DRAIN_JOBS_H_
