#include "master/drains/drain_jobs.h"

#include <algorithm>
#include <random>
#include <set>
#include <unordered_map>

#include "common/base/logging.h"

namespace mooncake {

namespace {

std::string UnitOf(std::string_view key, const std::string& segment) {
  std::string unit(key);
  unit.push_back('\0');  // keys have no NUL
  unit += segment;
  return unit;
}

}  // namespace

void DrainJobs::HoldSegments(const std::string& name, bool hold) {
  for (const std::shared_ptr<Segment>& s : mover_.SegmentsNamed(name)) {
    if (hold) {
      s->Hold();
    } else {
      s->Release();
    }
  }
}

ErrorCode DrainJobs::Create(const std::vector<std::string>& segments,
                            const std::vector<std::string>& targets, uint32_t max_concurrency,
                            TaskId* id) {
  if (segments.empty() || max_concurrency == 0) return ErrorCode::INVALID_PARAMS;
  std::set<std::string> unique(segments.begin(), segments.end());
  if (unique.size() != segments.size()) return ErrorCode::INVALID_PARAMS;
  for (const std::string& name : segments) {
    std::vector<std::shared_ptr<Segment>> named = mover_.SegmentsNamed(name);
    if (named.empty()) return ErrorCode::SEGMENT_NOT_FOUND;
    for (const auto& s : named) {
      if (!s->attached() || s->draining()) return ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
    }
  }
  for (const std::string& name : targets) {
    if (unique.count(name) != 0) return ErrorCode::INVALID_PARAMS;
    ErrorCode rc = mover_.CheckTarget(name);
    if (rc == ErrorCode::INVALID_PARAMS) return ErrorCode::SEGMENT_NOT_FOUND;
    if (rc != ErrorCode::OK) return rc;
  }
  auto job = std::make_shared<Job>();
  job->segments = segments;
  job->targets = targets;
  job->max_concurrency = max_concurrency;
  job->created_unix_ms = options_.unix_ms();
  {
    absl::MutexLock job_lock(&job->mu);  // not shared yet: for the analysis
    job->updated_unix_ms = job->created_unix_ms;
    job->message = "Drain job created";
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  absl::MutexLock lock(&mu_);
  do {
    job->id = TaskId{rng(), rng()};
  } while ((job->id.high == 0 && job->id.low == 0) || jobs_.count(job->id) != 0);
  for (const std::string& name : segments) HoldSegments(name, true);
  *id = job->id;
  jobs_.emplace(job->id, job);
  // Ended jobs beyond the bound go, the oldest first.
  while (jobs_.size() > kMaxJobs) {
    auto oldest = jobs_.end();
    int64_t oldest_ms = 0;
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
      absl::MutexLock job_lock(&it->second->mu);
      if (it->second->ended() &&
          (oldest == jobs_.end() || it->second->updated_unix_ms < oldest_ms)) {
        oldest = it;
        oldest_ms = it->second->updated_unix_ms;
      }
    }
    if (oldest == jobs_.end()) break;
    jobs_.erase(oldest);
  }
  MC_LOG_INFO("drain job %llu-%llu created for %zu segment names",
              static_cast<unsigned long long>(id->high), static_cast<unsigned long long>(id->low),
              segments.size());
  return ErrorCode::OK;
}

std::shared_ptr<DrainJobs::Job> DrainJobs::Find(const TaskId& id) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second;
}

ErrorCode DrainJobs::Query(const TaskId& id, View* out) const {
  std::shared_ptr<Job> job = Find(id);
  if (job == nullptr) return ErrorCode::OBJECT_NOT_FOUND;
  absl::MutexLock lock(&job->mu);
  out->id = job->id;
  out->status = job->status;
  out->created_unix_ms = job->created_unix_ms;
  out->updated_unix_ms = job->updated_unix_ms;
  out->segments = job->segments;
  out->succeeded_units = job->succeeded;
  out->failed_units = job->failed;
  out->blocked_units = job->blocked;
  out->active_units = job->active.size();
  out->migrated_bytes = job->migrated;
  out->message = job->message;
  return ErrorCode::OK;
}

ErrorCode DrainJobs::Cancel(const TaskId& id) {
  std::shared_ptr<Job> job = Find(id);
  if (job == nullptr) return ErrorCode::OBJECT_NOT_FOUND;
  absl::MutexLock lock(&job->mu);
  if (job->ended() || !job->active.empty()) return ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
  job->status = Status::kCanceled;
  job->updated_unix_ms = options_.unix_ms();
  job->message = "Drain job canceled";
  for (const std::string& name : job->segments) HoldSegments(name, false);
  return ErrorCode::OK;
}

ErrorCode DrainJobs::SegmentStatusOf(const std::string& name, int32_t* status) const {
  std::vector<std::shared_ptr<Segment>> named = mover_.SegmentsNamed(name);
  if (named.empty()) return ErrorCode::SEGMENT_NOT_FOUND;
  bool draining = false, empty = true;
  for (const auto& s : named) {
    draining = draining || s->draining();
    empty = empty && s->used() == 0;
  }
  *status = !draining ? 1 : (empty ? 3 : 2);  // Mooncake's OK, DRAINING, DRAINED
  return ErrorCode::OK;
}

void DrainJobs::Run(int64_t now) {
  std::vector<std::shared_ptr<Job>> running;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, job] : jobs_) running.push_back(job);
  }
  for (const std::shared_ptr<Job>& job : running) {
    absl::MutexLock lock(&job->mu);
    if (job->ended()) continue;
    Refresh(*job);
    if (MaybeFinish(*job)) continue;
    Schedule(*job, now);
  }
}

void DrainJobs::Refresh(Job& job) {
  std::vector<Job::Active> still;
  for (Job::Active& a : job.active) {
    ReplicaTask task;
    bool known = tasks_.Get(a.task, &task);
    if (known && (task.status == TaskStatus::kPending || task.status == TaskStatus::kProcessing)) {
      still.push_back(std::move(a));
      continue;
    }
    if (known && task.status == TaskStatus::kSuccess) {
      ++job.succeeded;
      job.migrated += a.bytes;
      job.completed.insert(a.unit);
      continue;
    }
    ++job.failed;
    if (!known || ++job.retries[a.unit] >= kMaxUnitRetries) job.given_up.insert(a.unit);
  }
  job.active = std::move(still);
}

bool DrainJobs::MaybeFinish(Job& job) {
  if (!job.active.empty()) return false;
  std::set<std::string> names(job.segments.begin(), job.segments.end());
  std::vector<std::string> remaining;
  for (size_t s = 0; s < ObjectDirectory::kShardCount; ++s) {
    std::vector<std::string> in_shard;  // a shard walked again starts its list over
    directory_.Scan(
        directory_.shard(s),
        [&](std::string_view key, ObjectMetadata& meta) {
          for (size_t r = 0; r < meta.replicas.size(); ++r) {
            std::shared_ptr<Segment> seg = segments_.Get(meta.replicas[r].segment);
            if (seg && meta.replicas[r].memory() && names.count(seg->info().name) != 0) {
              in_shard.push_back(UnitOf(key, seg->info().name));
            }
          }
          return false;
        },
        nullptr, [&] { in_shard.clear(); });
    remaining.insert(remaining.end(), in_shard.begin(), in_shard.end());
  }
  const int64_t unix_now = options_.unix_ms();
  if (remaining.empty()) {
    job.status = Status::kSucceeded;
    job.updated_unix_ms = unix_now;
    job.message = "Drain job finished successfully";
    MC_LOG_INFO("drain job %llu-%llu succeeded: %llu objects moved",
                static_cast<unsigned long long>(job.id.high),
                static_cast<unsigned long long>(job.id.low),
                static_cast<unsigned long long>(job.succeeded));
    return true;
  }
  for (const std::string& unit : remaining) {
    if (job.given_up.count(unit) == 0) return false;
  }
  job.status = Status::kFailed;
  job.updated_unix_ms = unix_now;
  job.message = "Drain job failed: unrecoverable units remain";
  for (const std::string& name : job.segments) HoldSegments(name, false);
  MC_LOG_WARN("drain job %llu-%llu failed: %zu objects could not be moved",
              static_cast<unsigned long long>(job.id.high),
              static_cast<unsigned long long>(job.id.low), remaining.size());
  return true;
}

void DrainJobs::Schedule(Job& job, int64_t now) {
  if (job.status == Status::kCreated) job.status = Status::kPlanning;
  const size_t slots = job.max_concurrency > job.active.size()
                           ? job.max_concurrency - job.active.size()
                           : 0;
  // The targets and how full each is: the emptiest first.
  std::vector<std::string> candidates = job.targets;
  if (candidates.empty()) {
    for (const std::shared_ptr<Segment>& s : segments_.All()) {
      if (!s->disk() && std::find(candidates.begin(), candidates.end(), s->info().name) ==
                            candidates.end()) {
        candidates.push_back(s->info().name);
      }
    }
  }
  std::set<std::string> drained(job.segments.begin(), job.segments.end());
  std::vector<std::pair<double, std::string>> targets;
  for (const std::string& name : candidates) {
    if (drained.count(name) != 0 || mover_.CheckTarget(name) != ErrorCode::OK) continue;
    uint64_t used = 0, capacity = 0;
    for (const auto& s : mover_.SegmentsNamed(name)) {
      used += s->used();
      capacity += s->capacity();
    }
    if (capacity > 0) targets.emplace_back(static_cast<double>(used) / capacity, name);
  }
  std::sort(targets.begin(), targets.end());
  struct Plan {
    std::string key, source, target, unit;
    uint64_t bytes;
  };
  std::vector<Plan> plans;
  std::set<std::string> active_units;
  for (const Job::Active& a : job.active) active_units.insert(a.unit);
  uint64_t blocked = 0;
  for (size_t s = 0; s < ObjectDirectory::kShardCount && slots > 0; ++s) {
    Shard& shard = directory_.shard(s);
    // The visitor runs within this call, job.mu still held; the analysis does not follow
    // a lambda into Scan.
    auto visit = [&](std::string_view key, ObjectMetadata& meta) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      std::vector<std::string> held;
      std::string source;
      for (size_t r = 0; r < meta.replicas.size(); ++r) {
        std::shared_ptr<Segment> seg = segments_.Get(meta.replicas[r].segment);
        if (!seg || !meta.replicas[r].memory()) continue;
        held.push_back(seg->info().name);
        if (source.empty() && drained.count(seg->info().name) != 0) source = seg->info().name;
      }
      if (source.empty()) return false;
      std::string unit = UnitOf(key, source);
      if (job.completed.count(unit) != 0 || job.given_up.count(unit) != 0 ||
          active_units.count(unit) != 0) {
        return false;
      }
      if (!meta.complete || meta.hard_pin || meta.leased(now) ||
          (!shard.moves.empty() && shard.moves.count(std::string(key)) != 0)) {
        ++blocked;
        return false;
      }
      const std::string* target = nullptr;
      for (const auto& [ratio, name] : targets) {
        if (std::find(held.begin(), held.end(), name) == held.end()) {
          target = &name;
          break;
        }
      }
      if (target == nullptr) {
        ++blocked;
      } else if (plans.size() < slots) {
        plans.push_back({std::string(key), source, *target, unit, meta.size});
        active_units.insert(unit);  // a rescanned slice must not plan it twice
      }
      return false;
    };
    directory_.Scan(shard, visit);
  }
  for (const Plan& plan : plans) {
    rpc::TaskResult created = mover_.CreateMoveTaskLocked(plan.key, plan.source, plan.target);
    ErrorCode code = FromWire(created.code);
    if (code == ErrorCode::OK) {
      job.active.push_back({TaskId{static_cast<uint64_t>(created.id_high),
                                   static_cast<uint64_t>(created.id_low)},
                            plan.unit, plan.bytes});
    } else if (code == ErrorCode::NO_AVAILABLE_HANDLE || code == ErrorCode::RESOURCE_LIMIT_EXCEEDED ||
               code == ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS) {
      ++blocked;
    } else {
      ++job.failed;
      if (++job.retries[plan.unit] >= kMaxUnitRetries) job.given_up.insert(plan.unit);
    }
  }
  job.blocked = blocked;
  job.status = Status::kRunning;
  job.updated_unix_ms = options_.unix_ms();
  job.message = "Drain job running";
}

}  // namespace mooncake
