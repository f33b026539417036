#include "master/directory/replica_tasks.h"

#include <algorithm>

#include "common/base/tenant_key.h"

namespace mooncake {

ReplicaTasks::ReplicaTasks(ReplicaTaskLimits limits)
    : limits_(limits), rng_(std::random_device{}()) {}

TaskId ReplicaTasks::NewIdLocked() {
  // Random, as Mooncake's UUIDs are: an id tells nothing of other tasks, and one that a
  // restarted master hands out again meets nobody still asking about the old one.
  for (;;) {
    TaskId id{rng_(), rng_()};
    if ((id.high != 0 || id.low != 0) && tasks_.count(id) == 0) return id;
  }
}

ErrorCode ReplicaTasks::Submit(ReplicaTask task, int64_t now_ms, int64_t unix_ms, TaskId* id) {
  absl::MutexLock lock(&mu_);
  if (pending_count_ >= limits_.max_pending) return ErrorCode::RESOURCE_LIMIT_EXCEEDED;
  task.id = NewIdLocked();
  task.status = TaskStatus::kPending;
  task.created_ms = task.updated_ms = task.due_ms = now_ms;
  task.created_unix_ms = task.updated_unix_ms = unix_ms;
  task.message.clear();
  task.attempts = 0;
  *id = task.id;
  pending_[task.daemon].push_back(task.id);
  ++pending_count_;
  tasks_.emplace(task.id, std::move(task));
  return ErrorCode::OK;
}

std::vector<ReplicaTask> ReplicaTasks::Take(int64_t daemon, size_t max, int64_t now_ms,
                                            int64_t unix_ms) {
  std::vector<ReplicaTask> out;
  absl::MutexLock lock(&mu_);
  auto queue = pending_.find(daemon);
  if (queue == pending_.end()) return out;
  std::deque<TaskId>& ids = queue->second;
  std::deque<TaskId> later;  // pending but not due yet: they keep their place
  while (!ids.empty() && out.size() < max && processing_count_ < limits_.max_processing) {
    TaskId id = ids.front();
    ids.pop_front();
    auto it = tasks_.find(id);
    if (it == tasks_.end() || it->second.status != TaskStatus::kPending) continue;
    ReplicaTask& task = it->second;
    if (task.due_ms > now_ms) {
      later.push_back(id);
      continue;
    }
    task.status = TaskStatus::kProcessing;
    task.updated_ms = now_ms;
    task.updated_unix_ms = unix_ms;
    --pending_count_;
    ++processing_count_;
    out.push_back(task);
  }
  ids.insert(ids.begin(), later.begin(), later.end());
  if (ids.empty()) pending_.erase(queue);
  return out;
}

bool ReplicaTasks::Retry(const TaskId& id, const std::string& why, int64_t now_ms,
                         int64_t unix_ms) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end() || it->second.status != TaskStatus::kProcessing) return false;
  ReplicaTask& task = it->second;
  if (task.attempts >= limits_.max_retry_attempts) {
    EndLocked(task, TaskStatus::kFailed,
              why + " (max retries reached: " + std::to_string(limits_.max_retry_attempts) + ")",
              now_ms, unix_ms);
    return true;
  }
  ++task.attempts;
  task.status = TaskStatus::kPending;
  task.updated_ms = now_ms;
  task.updated_unix_ms = unix_ms;
  task.due_ms = now_ms + kRetryPauseMs * task.attempts;
  --processing_count_;
  ++pending_count_;
  pending_[task.daemon].push_back(id);
  return true;
}

ErrorCode ReplicaTasks::Finish(const TaskId& id, int64_t daemon, bool ok,
                               const std::string& message, int64_t now_ms, int64_t unix_ms) {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return ErrorCode::OBJECT_NOT_FOUND;
  ReplicaTask& task = it->second;
  if (task.daemon != daemon) return ErrorCode::ILLEGAL_CLIENT;
  if (task.status != TaskStatus::kProcessing) return ErrorCode::OBJECT_NOT_FOUND;
  EndLocked(task, ok ? TaskStatus::kSuccess : TaskStatus::kFailed, message, now_ms, unix_ms);
  return ErrorCode::OK;
}

void ReplicaTasks::EndLocked(ReplicaTask& task, TaskStatus status, std::string message,
                             int64_t now_ms, int64_t unix_ms) {
  if (task.status == TaskStatus::kPending) --pending_count_;
  if (task.status == TaskStatus::kProcessing) --processing_count_;
  task.status = status;
  task.message = std::move(message);
  task.updated_ms = now_ms;
  task.updated_unix_ms = unix_ms;
  finished_.push_back(task.id);
  // A pending task's id stays in its daemon's queue; Take skips ids that are not pending.
  while (finished_.size() > limits_.max_finished) {
    tasks_.erase(finished_.front());
    finished_.pop_front();
  }
}

bool ReplicaTasks::Find(const TaskId& id, std::string_view tenant, ReplicaTask* out) const {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end() || tenant_key::TenantOf(it->second.key) != tenant) return false;
  *out = it->second;
  return true;
}

bool ReplicaTasks::Get(const TaskId& id, ReplicaTask* out) const {
  absl::MutexLock lock(&mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return false;
  *out = it->second;
  return true;
}

std::vector<ReplicaTask> ReplicaTasks::Expire(int64_t now_ms, int64_t unix_ms,
                                              const std::function<bool(int64_t)>& live) {
  std::vector<ReplicaTask> failed_processing;
  absl::MutexLock lock(&mu_);
  if (pending_count_ == 0 && processing_count_ == 0) return failed_processing;
  std::vector<TaskId> open;
  for (const auto& [id, task] : tasks_) {
    if (task.status == TaskStatus::kPending || task.status == TaskStatus::kProcessing) {
      open.push_back(id);
    }
  }
  std::map<int64_t, bool> alive;  // live() once per daemon
  for (const TaskId& id : open) {
    ReplicaTask& task = tasks_.at(id);
    auto known = alive.find(task.daemon);
    if (known == alive.end()) known = alive.emplace(task.daemon, live(task.daemon)).first;
    const char* why = nullptr;
    if (!known->second) {
      why = "its daemon left (declared dead, or replaced by a restart)";
    } else if (task.status == TaskStatus::kPending && limits_.pending_timeout_ms > 0 &&
               now_ms - task.created_ms > limits_.pending_timeout_ms) {
      why = "pending timeout";
    } else if (task.status == TaskStatus::kProcessing && limits_.processing_timeout_ms > 0 &&
               now_ms - task.updated_ms > limits_.processing_timeout_ms) {
      why = "processing timeout";
    }
    if (why == nullptr) continue;
    if (task.status == TaskStatus::kProcessing) failed_processing.push_back(task);
    EndLocked(task, TaskStatus::kFailed, why, now_ms, unix_ms);
  }
  // The queues keep only ids still pending (a daemon that left never takes its own).
  for (auto q = pending_.begin(); q != pending_.end();) {
    std::deque<TaskId>& ids = q->second;
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [this](const TaskId& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                               auto it = tasks_.find(id);
                               return it == tasks_.end() ||
                                      it->second.status != TaskStatus::kPending;
                             }),
              ids.end());
    q = ids.empty() ? pending_.erase(q) : std::next(q);
  }
  return failed_processing;
}

void ReplicaTasks::Clear() {
  absl::MutexLock lock(&mu_);
  tasks_.clear();
  pending_.clear();
  finished_.clear();
  pending_count_ = processing_count_ = 0;
}

ReplicaTasks::Counts ReplicaTasks::counts() const {
  absl::MutexLock lock(&mu_);
  Counts c;
  c.pending = pending_count_;
  c.processing = processing_count_;
  c.finished = finished_.size();
  return c;
}

}  // namespace mooncake
