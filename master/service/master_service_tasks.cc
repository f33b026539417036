// Copy and move tasks of MasterService (Mooncake's CreateCopyTask, CreateMoveTask,
// QueryTask, FetchTasks and MarkTaskToComplete; docs/master.md, "Copy and move tasks").
// The table is master/directory/replica_tasks.h; the rules of each call, common/master_link/master.thrift's.
//
// A task runs on the daemon holding its source replica, as Mooncake's runs on the client
// whose segment holds it. Its fetch reserves the targets beside the object (a PendingMove,
// as a drain's move: no eviction, free space only) and hands the daemon the source's place
// and the targets; the daemon copies the bytes (a memcpy into its own segments, a transfer
// into another daemon's) and reports. The report publishes: a copy's targets join the
// object's replicas, a move's target takes the source's place and the source is freed once
// no read lease covers it (as an upsert's old value). Both are logged as the object's new
// state, so a restored master finds the replicas where they are. Any change of the object
// in between orphans the reservation, and the report then fails the task and frees it.
#include <random>

#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "master/service/master_service.h"

namespace mooncake {

namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

rpc::TaskResult TaskError(ErrorCode code) {
  rpc::TaskResult r;
  r.code = ToInt(code);
  return r;
}

rpc::TaskResult TaskCreated(const TaskId& id) {
  rpc::TaskResult r;
  r.code = ToInt(ErrorCode::OK);
  r.id_high = static_cast<int64_t>(id.high);
  r.id_low = static_cast<int64_t>(id.low);
  return r;
}

TaskId IdOf(int64_t high, int64_t low) {
  return TaskId{static_cast<uint64_t>(high), static_cast<uint64_t>(low)};
}

// "NAME (code): why", as a task's message says a failure.
std::string Why(ErrorCode code, const std::string& why) {
  return std::string(ErrorName(code)) + " (" + std::to_string(ToInt(code)) + "): " + why;
}

// Mooncake's message for a task that ended well.
constexpr char kDone[] = "Task completed successfully";

}  // namespace

std::vector<std::shared_ptr<Segment>> MasterService::SegmentsNamed(const std::string& name) const {
  std::vector<std::shared_ptr<Segment>> out;
  for (std::shared_ptr<Segment>& s : segments_.All()) {
    if (!s->disk() && s->info().name == name) out.push_back(std::move(s));
  }
  return out;
}

ErrorCode MasterService::CheckTarget(const std::string& name) const {
  std::vector<std::shared_ptr<Segment>> named = SegmentsNamed(name);
  if (named.empty()) return ErrorCode::INVALID_PARAMS;  // Mooncake: target_segment_not_mounted
  for (const auto& s : named) {
    if (s->attached() && !s->draining()) return ErrorCode::OK;
  }
  return ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;  // not allocatable
}

rpc::TaskResult MasterService::CreateCopyTask(const std::string& key,
                                              const std::vector<std::string>& targets) {
  StateGate::Shared gate(gate_);
  if (!ValidKey(key) || targets.empty() || targets.size() > kMaxReplicaNum) {
    return TaskError(ErrorCode::INVALID_PARAMS);
  }
  ReplicaTask task;
  task.type = TaskType::kCopy;
  task.key = key;
  for (const std::string& t : targets) {  // a name twice is copied to once
    if (std::find(task.targets.begin(), task.targets.end(), t) == task.targets.end()) {
      task.targets.push_back(t);
    }
  }
  {
    LockedKey locked(objects_, key);
    if (locked.object == nullptr) return TaskError(ErrorCode::OBJECT_NOT_FOUND);
    if (!locked.object->complete) return TaskError(ErrorCode::REPLICA_IS_NOT_READY);
    for (const std::string& t : task.targets) {
      ErrorCode rc = CheckTarget(t);
      if (rc != ErrorCode::OK) {
        MC_LOG_WARN("CreateCopyTask of '%.64s' refused: target %s %s",
                    std::string(tenant_key::UserKeyOf(key)).c_str(), t.c_str(),
                    rc == ErrorCode::INVALID_PARAMS ? "names no segment"
                                                    : "takes no allocation now");
        return TaskError(rc);
      }
    }
    // The source: a memory replica on an attached segment, at random (Mooncake's choice).
    std::vector<std::shared_ptr<Segment>> sources;
    const ReplicaList& replicas = locked.object->replicas;
    for (size_t i = 0; i < replicas.size(); ++i) {
      if (!replicas[i].memory()) continue;
      std::shared_ptr<Segment> s = segments_.Get(replicas[i].segment);
      if (s && s->attached()) sources.push_back(std::move(s));
    }
    if (sources.empty()) return TaskError(ErrorCode::REPLICA_IS_NOT_READY);
    thread_local std::minstd_rand rng{std::random_device{}()};
    const Segment& source = *sources[rng() % sources.size()];
    task.source = source.info().name;
    task.daemon = source.info().daemon_id;
  }
  TaskId id;
  ErrorCode rc = tasks_.Submit(std::move(task), Now(), options_.unix_ms(), &id);
  if (rc != ErrorCode::OK) return TaskError(rc);
  return TaskCreated(id);
}

rpc::TaskResult MasterService::CreateMoveTask(const std::string& key, const std::string& source,
                                              const std::string& target) {
  StateGate::Shared gate(gate_);
  return CreateMoveTaskLocked(key, source, target);
}

rpc::TaskResult MasterService::CreateMoveTaskLocked(const std::string& key,
                                                    const std::string& source,
                                                    const std::string& target) {
  if (!ValidKey(key)) return TaskError(ErrorCode::INVALID_PARAMS);
  ReplicaTask task;
  task.type = TaskType::kMove;
  task.key = key;
  task.source = source;
  task.targets.push_back(target);
  {
    // Mooncake's order of checks: the object, then the names.
    LockedKey locked(objects_, key);
    if (locked.object == nullptr) return TaskError(ErrorCode::OBJECT_NOT_FOUND);
    if (source == target) return TaskError(ErrorCode::INVALID_PARAMS);
    ErrorCode rc = CheckTarget(target);
    if (rc != ErrorCode::OK) return TaskError(rc);
    if (!locked.object->complete) return TaskError(ErrorCode::REPLICA_IS_NOT_READY);
    const ReplicaList& replicas = locked.object->replicas;
    for (size_t i = 0; i < replicas.size() && task.daemon == 0; ++i) {
      if (!replicas[i].memory()) continue;
      std::shared_ptr<Segment> s = segments_.Get(replicas[i].segment);
      if (s && s->attached() && s->info().name == source) task.daemon = s->info().daemon_id;
    }
    if (task.daemon == 0) return TaskError(ErrorCode::INVALID_PARAMS);  // no replica there
  }
  TaskId id;
  ErrorCode rc = tasks_.Submit(std::move(task), Now(), options_.unix_ms(), &id);
  if (rc != ErrorCode::OK) return TaskError(rc);
  return TaskCreated(id);
}

rpc::QueryTaskResult MasterService::QueryTask(int64_t id_high, int64_t id_low,
                                              const std::string& tenant) {
  rpc::QueryTaskResult result;
  ReplicaTask task;
  if (!tenant_key::ValidTenantOrDefault(tenant)) {
    result.code = ToInt(ErrorCode::INVALID_PARAMS);
  } else if (!tasks_.Find(IdOf(id_high, id_low), tenant, &task)) {
    result.code = ToInt(ErrorCode::OBJECT_NOT_FOUND);
  } else {
    result.code = ToInt(ErrorCode::OK);
    rpc::TaskInfo& info = result.task;
    info.id_high = id_high;
    info.id_low = id_low;
    info.type = static_cast<int32_t>(task.type);
    info.status = static_cast<int32_t>(task.status);
    info.created_unix_ms = task.created_unix_ms;
    info.updated_unix_ms = task.updated_unix_ms;
    info.assigned_daemon = task.daemon;
    info.message = task.message;
  }
  return result;
}

rpc::ReplicaTasksResult MasterService::FetchReplicaTasks(int64_t daemon_id, int32_t max_tasks) {
  StateGate::Shared gate(gate_);
  rpc::ReplicaTasksResult result;
  result.master_epoch = epoch_;
  if (max_tasks < 1 || max_tasks > kMaxTaskBatch) {
    result.code = ToInt(ErrorCode::INVALID_PARAMS);
    return result;
  }
  if (!daemons_.Known(daemon_id)) {
    result.code = ToInt(ErrorCode::CLIENT_NOT_FOUND);
    return result;
  }
  result.code = ToInt(ErrorCode::OK);
  for (const ReplicaTask& task :
       tasks_.Take(daemon_id, static_cast<size_t>(max_tasks), Now(), options_.unix_ms())) {
    StartTask(task, daemon_id, &result);
  }
  return result;
}

void MasterService::StartTask(const ReplicaTask& task, int64_t daemon_id,
                              rpc::ReplicaTasksResult* out) {
  const int64_t now = Now();
  const int64_t unix_now = options_.unix_ms();
  auto fail = [&](ErrorCode code, const std::string& why) {
    tasks_.Finish(task.id, daemon_id, false, Why(code, why), now, unix_now);
  };
  LockedKey locked(objects_, task.key);
  ObjectMetadata* meta = locked.object;
  if (meta == nullptr || !meta->complete) {
    fail(ErrorCode::OBJECT_NOT_FOUND, "the object went (or is being rewritten) before the task ran");
    return;
  }
  Shard& shard = locked.shard;
  if (!shard.moves.empty() && shard.moves.count(task.key) != 0) {
    // A drain's move or another task of the key: Mooncake fails it at once
    // (OBJECT_HAS_REPLICATION_TASK); here it waits for that one to end, as a task whose
    // targets are full waits for room.
    tasks_.Retry(task.id, "another copy or move of the key was under way", now, unix_now);
    return;
  }
  size_t src = kNone;
  std::shared_ptr<Segment> source;
  std::vector<std::string> held;  // names holding a memory replica already
  for (size_t i = 0; i < meta->replicas.size(); ++i) {
    if (!meta->replicas[i].memory()) continue;
    std::shared_ptr<Segment> s = segments_.Get(meta->replicas[i].segment);
    if (!s) continue;
    held.push_back(s->info().name);
    if (src == kNone && s->attached() && s->info().daemon_id == daemon_id &&
        s->info().name == task.source) {
      src = i;
      source = std::move(s);
    }
  }
  if (src == kNone) {
    fail(ErrorCode::SEGMENT_NOT_FOUND,
         "the object has no replica in " + task.source + " on the task's daemon any more");
    return;
  }
  auto holds = [&](const std::string& name) {
    return std::find(held.begin(), held.end(), name) != held.end();
  };
  std::vector<std::string> wanted;
  for (const std::string& t : task.targets) {
    if (!holds(t)) wanted.push_back(t);
  }
  if (wanted.empty()) {
    if (task.type == TaskType::kMove) {
      // The target holds a replica already: the move only drops the source, as Mooncake's
      // MoveEnd does then. Freed once no lease covers it and the record is on disk.
      ReplicaList freed;
      freed.push_back(meta->replicas[src]);
      disk_tier_.Count(*meta, -1);
      meta->replicas.erase(src);
      disk_tier_.Count(*meta, 1);
      tenants_.Add(task.key, 0, -MemoryBytes(meta->size, freed));
      disk_tier_.EndOffload(shard, task.key, meta, /*failed=*/false);
      DeferFree(freed, std::max(now, meta->time_ms), LogPublish(task.key, *meta));
    }
    tasks_.Finish(task.id, daemon_id, true, kDone, now, unix_now);
    return;
  }
  if (meta->replicas.size() + wanted.size() > kMaxReplicaNum) {
    fail(ErrorCode::INVALID_PARAMS, "the object would have more than 64 replicas");
    return;
  }
  // Each target: a range in one of the segments of its name (any that has room). Under the
  // shard lock, which comes before the segments in the lock order; free space only.
  PendingMove move;
  move.mover = daemon_id;
  move.start_ms = now;
  move.from_slot = meta->replicas[src].segment;
  move.from_node = meta->replicas[src].alloc_node;
  move.keep_source = task.type == TaskType::kCopy;
  move.task = task.id;
  for (const std::string& t : wanted) {
    bool placed = false, allocatable = false, known = false;
    for (const std::shared_ptr<Segment>& s : SegmentsNamed(t)) {
      known = true;
      if (!s->attached() || s->draining()) continue;
      allocatable = true;
      Replica r;
      if (s->Allocate(meta->size, &r.offset, &r.alloc_node)) {
        r.segment = s->slot();
        move.to.push_back(r);
        placed = true;
        break;
      }
    }
    if (placed) continue;
    FreeReplicas(move.to);
    if (!known) {
      fail(ErrorCode::SEGMENT_NOT_FOUND, "target " + t + " left before the task ran");
    } else if (!allocatable) {
      tasks_.Retry(task.id, Why(ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS,
                                "target " + t + " takes no allocation (draining or detached)"),
                   now, unix_now);
    } else {
      tasks_.Retry(task.id, Why(ErrorCode::NO_AVAILABLE_HANDLE, "no room in target " + t),
                   now, unix_now);
    }
    return;
  }
  rpc::ReplicaTaskAssignment assignment;
  assignment.id_high = static_cast<int64_t>(task.id.high);
  assignment.id_low = static_cast<int64_t>(task.id.low);
  assignment.type = static_cast<int32_t>(task.type);
  assignment.key = task.key;
  assignment.size = static_cast<int64_t>(meta->size);
  assignment.source_segment_id = source->info().segment_id;
  assignment.source_offset = static_cast<int64_t>(meta->replicas[src].offset);
  DescribeReplicas(move.to, meta->size, /*include_processing=*/true, &assignment.targets);
  out->tasks.push_back(std::move(assignment));
  shard.moves.emplace(task.key, std::move(move));
}

std::vector<int32_t> MasterService::CompleteReplicaTasks(
    int64_t daemon_id, const std::vector<rpc::ReplicaTaskOutcome>& outcomes) {
  StateGate::Shared gate(gate_);
  std::vector<int32_t> codes(outcomes.size(), ToInt(ErrorCode::CLIENT_NOT_FOUND));
  if (!daemons_.Known(daemon_id)) return codes;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    ReplicaTask task;
    if (!tasks_.Get(IdOf(outcomes[i].id_high, outcomes[i].id_low), &task)) {
      codes[i] = ToInt(ErrorCode::OBJECT_NOT_FOUND);
      continue;
    }
    if (task.daemon != daemon_id) {
      codes[i] = ToInt(ErrorCode::ILLEGAL_CLIENT);
      continue;
    }
    LockedKey locked(objects_, task.key);
    codes[i] = ToInt(SettleTask(locked, task, daemon_id, outcomes[i].code));
  }
  return codes;
}

ErrorCode MasterService::SettleTask(LockedKey& locked, const ReplicaTask& task, int64_t daemon_id,
                                    int32_t code) {
  const int64_t now = Now();
  const int64_t unix_now = options_.unix_ms();
  Shard& shard = locked.shard;
  auto it = shard.moves.find(task.key);
  if (it == shard.moves.end() || !(it->second.task == task.id) ||
      it->second.mover != daemon_id) {
    // Dropped with a segment it read from or wrote into (or never reserved).
    tasks_.Finish(task.id, daemon_id, false,
                  Why(ErrorCode::SEGMENT_NOT_FOUND, "a segment of the copy left meanwhile"), now,
                  unix_now);
    return ErrorCode::OBJECT_NOT_FOUND;
  }
  PendingMove& move = it->second;
  auto release = [&] {
    FreeReplicas(move.to);  // its daemon is done with them
    shard.moves.erase(it);
  };
  if (code != 0) {
    ErrorCode why = FromWire(code);
    release();
    tasks_.Finish(task.id, daemon_id, false, Why(why, "the copy failed on its daemon"), now,
                  unix_now);
    return ErrorCode::OK;
  }
  ObjectMetadata* meta = locked.object;
  size_t in = kNone;
  for (size_t r = 0; meta != nullptr && r < meta->replicas.size(); ++r) {
    if (meta->replicas[r].segment == move.from_slot &&
        meta->replicas[r].alloc_node == move.from_node) {
      in = r;
    }
  }
  if (move.orphaned || in == kNone) {
    release();
    tasks_.Finish(task.id, daemon_id, false,
                  Why(ErrorCode::OBJECT_NOT_FOUND, "the object changed or went during the copy"),
                  now, unix_now);
    return ErrorCode::OBJECT_NOT_FOUND;
  }
  // A copy's new replicas count against the tenant from now on; a move swaps one.
  const int64_t bytes = move.keep_source ? MemoryBytes(meta->size, move.to) : 0;
  if (bytes > 0 && !tenants_.TryCharge(task.key, static_cast<uint64_t>(bytes))) {
    release();
    tasks_.Finish(task.id, daemon_id, false,
                  Why(ErrorCode::QUOTA_EXCEEDED, "the copies would take the tenant over its "
                                                 "quota (--tenant_quota)"),
                  now, unix_now);
    return ErrorCode::OK;
  }
  ErrorCode finished = tasks_.Finish(task.id, daemon_id, true, kDone, now, unix_now);
  if (finished != ErrorCode::OK) {  // timed out meanwhile: it failed, so nothing is published
    if (bytes > 0) tenants_.Add(task.key, 0, -bytes);
    release();
    return finished;
  }
  disk_tier_.Count(*meta, -1);
  if (move.keep_source) {
    for (size_t r = 0; r < move.to.size(); ++r) {
      Replica added = move.to[r];
      added.status = ReplicaStatus::kComplete;
      meta->replicas.push_back(added);
    }
    disk_tier_.Count(*meta, 1);
    LogPublish(task.key, *meta);
  } else {
    // As a drain's commit: leased readers may still read the source, and until the record
    // is on disk a restart would bring the old place back.
    ReplicaList freed;
    freed.push_back(meta->replicas[in]);
    meta->replicas[in] = move.to[0];
    meta->replicas[in].status = ReplicaStatus::kComplete;
    disk_tier_.Count(*meta, 1);
    disk_tier_.EndOffload(shard, task.key, meta, /*failed=*/false);
    DeferFree(freed, std::max(now, meta->time_ms), LogPublish(task.key, *meta));
  }
  shard.moves.erase(it);
  return ErrorCode::OK;
}

void MasterService::ExpireTasks(int64_t now) {
  std::vector<ReplicaTask> failed = tasks_.Expire(
      now, options_.unix_ms(), [this](int64_t daemon) { return daemons_.Known(daemon); });
  for (const ReplicaTask& task : failed) {
    // Its daemon may still be copying into the targets: they are freed at its report, or
    // once it must have given up (put_start_release_timeout, as an abandoned drain's move).
    LockedKey locked(objects_, task.key);
    auto it = locked.shard.moves.find(task.key);
    if (it != locked.shard.moves.end() && it->second.task == task.id) {
      it->second.orphaned = true;
    }
  }
}

// ---- drain jobs (master/drains/drain_jobs.h) ----

ErrorCode MasterService::CreateDrainJob(const std::vector<std::string>& segments,
                                        const std::vector<std::string>& targets,
                                        uint32_t max_concurrency, TaskId* id) {
  StateGate::Shared gate(gate_);
  return drain_jobs_.Create(segments, targets, max_concurrency, id);
}

ErrorCode MasterService::QueryDrainJob(const TaskId& id, DrainJobView* out) const {
  return drain_jobs_.Query(id, out);
}

ErrorCode MasterService::CancelDrainJob(const TaskId& id) {
  StateGate::Shared gate(gate_);
  return drain_jobs_.Cancel(id);
}

ErrorCode MasterService::SegmentStatusOf(const std::string& name, int32_t* status) const {
  StateGate::Shared gate(gate_);
  return drain_jobs_.SegmentStatusOf(name, status);
}

}  // namespace mooncake
