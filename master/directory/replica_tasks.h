// The master's table of copy and move tasks (Mooncake's task manager; docs/master.md, "Copy
// and move tasks"): who asked for which replica to go where, who runs it, and how it ended.
//
// A task is created PENDING for the daemon that holds its source replica (the one that can
// read the bytes without a hop). That daemon fetches it (Take: PROCESSING), copies the
// bytes into targets the master reserved for it, and reports (Finish: SUCCESS or FAILED,
// with a message saying why). A fetch that finds no room for the targets puts the task back
// (Retry) to be tried again after a short pause, at most max_retry_attempts times, as
// Mooncake's client retries NO_AVAILABLE_HANDLE. Time runs on the master's injected clock:
// a task pending longer than pending_timeout, or processing longer than processing_timeout
// since its last change, fails ("pending timeout", "processing timeout"), and so does every
// task of a daemon the master no longer knows. Finished tasks are kept for QUERY_TASK, the
// newest max_finished of them; older ones are forgotten (their ids then answer -704).
//
// Only the bookkeeping lives here: MasterService (master_service_tasks.cc) checks objects
// and segments, reserves and publishes. Nothing here is logged or snapshotted: a restarted
// master or a new leader starts with an empty table (docs/master.md says what that means).
//
// Tenants: a task belongs to the tenant of its stored key; Find answers only that tenant.
//
// Thread-safety: every method may be called from any thread. The lock is a leaf: taken
// under shard locks, never held while taking another.
#ifndef MOONCAKE_MASTER_REPLICA_TASKS_H_
#define MOONCAKE_MASTER_REPLICA_TASKS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/base/error_code.h"

namespace mooncake {

// Mooncake's TaskType and TaskStatus, with their numbers.
enum class TaskType : int32_t { kCopy = 0, kMove = 1 };
enum class TaskStatus : int32_t { kPending = 0, kProcessing = 1, kFailed = 2, kSuccess = 3 };

// Mooncake's UUID: two 64-bit halves, never both 0 for a task.
struct TaskId {
  uint64_t high = 0;
  uint64_t low = 0;
  bool operator==(const TaskId& o) const { return high == o.high && low == o.low; }
  bool operator<(const TaskId& o) const {
    return high != o.high ? high < o.high : low < o.low;
  }
};

struct ReplicaTask {
  TaskId id;
  TaskType type = TaskType::kCopy;
  TaskStatus status = TaskStatus::kPending;
  std::string key;     // stored key (common/base/tenant_key.h): its tenant is the task's
  std::string source;  // name of the segment whose replica is copied
  std::vector<std::string> targets;  // segment names; a move has one
  int64_t daemon = 0;  // runs it: the owner of the source replica's segment
  int64_t created_ms = 0;  // the master's clock
  int64_t updated_ms = 0;
  int64_t created_unix_ms = 0;  // what QUERY_TASK shows
  int64_t updated_unix_ms = 0;
  std::string message;    // why it failed ("" while it runs; Mooncake's words on success)
  uint32_t attempts = 0;  // fetches that found no room for its targets
  int64_t due_ms = 0;     // pending: not handed out before this (a retry's pause)
};

// Mooncake's task-manager flags (master/directory/master_options.h).
struct ReplicaTaskLimits {
  size_t max_finished = 10000;
  size_t max_pending = 10000;
  size_t max_processing = 10000;
  int64_t pending_timeout_ms = 300000;     // 0: none
  int64_t processing_timeout_ms = 300000;  // 0: none
  uint32_t max_retry_attempts = 10;
};

class ReplicaTasks {
 public:
  // A retry waits kRetryPauseMs times its attempt number (Mooncake's client: 50 ms x n).
  static constexpr int64_t kRetryPauseMs = 50;

  explicit ReplicaTasks(ReplicaTaskLimits limits);
  ReplicaTasks(const ReplicaTasks&) = delete;
  ReplicaTasks& operator=(const ReplicaTasks&) = delete;

  // Adds task (its type, key, source, targets and daemon set) PENDING under a fresh id
  // (*id). RESOURCE_LIMIT_EXCEEDED, with nothing added, while max_pending tasks wait.
  ErrorCode Submit(ReplicaTask task, int64_t now_ms, int64_t unix_ms, TaskId* id);
  // Up to max of daemon's pending tasks that are due, oldest first, now PROCESSING
  // (copies), as long as fewer than max_processing tasks run.
  std::vector<ReplicaTask> Take(int64_t daemon, size_t max, int64_t now_ms, int64_t unix_ms);
  // A taken task found no room for its targets: PENDING again, due after a pause, or
  // FAILED ("<why> (max retries reached: N)") once it has been retried max_retry_attempts
  // times. False when it is not PROCESSING any more.
  bool Retry(const TaskId& id, const std::string& why, int64_t now_ms, int64_t unix_ms);
  // Ends a PROCESSING task of daemon: SUCCESS (ok) or FAILED, with message. OK when it
  // was processing; OBJECT_NOT_FOUND when it is not (unknown, or ended already: timed out);
  // ILLEGAL_CLIENT when it is another daemon's.
  ErrorCode Finish(const TaskId& id, int64_t daemon, bool ok, const std::string& message,
                   int64_t now_ms, int64_t unix_ms);
  // The task when it exists and belongs to tenant ("": the default tenant).
  bool Find(const TaskId& id, std::string_view tenant, ReplicaTask* out) const;
  // The task whatever its tenant (the daemon's report names only the id).
  bool Get(const TaskId& id, ReplicaTask* out) const;
  // Upkeep: fails pending tasks past pending_timeout (from creation), processing ones past
  // processing_timeout (from their last change), and any open task whose daemon live()
  // says is gone; forgets the oldest finished tasks beyond max_finished. Returns the
  // processing tasks it failed: their reservations are the caller's to release.
  std::vector<ReplicaTask> Expire(int64_t now_ms, int64_t unix_ms,
                                  const std::function<bool(int64_t)>& live);
  // Forgets every task (a restore that failed half-way, or a standby taking over).
  void Clear();

  struct Counts {
    size_t pending = 0;
    size_t processing = 0;
    size_t finished = 0;
  };
  Counts counts() const;

 private:
  // The task ends with status and message (counts and the history follow).
  void EndLocked(ReplicaTask& task, TaskStatus status, std::string message, int64_t now_ms,
                 int64_t unix_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  TaskId NewIdLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ReplicaTaskLimits limits_;
  mutable absl::Mutex mu_;
  std::map<TaskId, ReplicaTask> tasks_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::deque<TaskId>> pending_ ABSL_GUARDED_BY(mu_);  // by daemon, oldest first
  std::deque<TaskId> finished_ ABSL_GUARDED_BY(mu_);  // oldest first, for pruning
  size_t pending_count_ ABSL_GUARDED_BY(mu_) = 0;
  size_t processing_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_REPLICA_TASKS_H_
