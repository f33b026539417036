#include "master/ssd_tier/disk_tier.h"

#include <vector>

#include "common/base/logging.h"

namespace mooncake {

// ---- offload states --------------------------------------------------------------------

std::shared_ptr<Segment> DiskTier::OffloadTarget(const ObjectMetadata& meta,
                                                      size_t* replica) const {
  for (size_t i = 0; i < meta.replicas.size(); ++i) {
    const Replica& r = meta.replicas[i];
    if (!r.memory() || r.status != ReplicaStatus::kComplete) continue;
    std::shared_ptr<Segment> memory = segments_.Get(r.segment);
    if (!memory || !memory->attached()) continue;
    std::shared_ptr<Segment> disk = segments_.DiskSegmentOf(memory->info().daemon_id);
    if (disk && disk->attached()) {
      *replica = i;
      return disk;
    }
  }
  return nullptr;
}

DiskTier::QueueOutcome DiskTier::QueueOffload(Shard& shard, std::string_view key,
                                                        ObjectMetadata& meta,
                                                        bool for_eviction) {
  auto pin = [&](OffloadState& state) {
    state.for_eviction = true;
    state.pinned_bytes = meta.size * meta.memory_replicas();
    meta.offload_pinned = true;
    eviction_.AddPendingBytes(static_cast<int64_t>(state.pinned_bytes));
    counters_.evict_offloads.fetch_add(1);
  };
  if (!shard.offloads.empty()) {
    auto it = shard.offloads.find(std::string(key));
    if (it != shard.offloads.end()) {
      OffloadState& state = it->second;
      if (state.stage == OffloadState::Stage::kFailed) return QueueOutcome::kFailedRecently;
      if (!for_eviction || state.for_eviction) return QueueOutcome::kBusy;
      pin(state);  // an offload at put or an early one: the round waits for it
      return QueueOutcome::kQueued;
    }
  }
  size_t from = 0;
  std::shared_ptr<Segment> disk = OffloadTarget(meta, &from);
  if (!disk) return QueueOutcome::kNoTier;
  if (!queues_.Push(disk->info().daemon_id, key)) {
    counters_.dropped_tasks.fetch_add(1);
    return QueueOutcome::kFull;
  }
  OffloadState state;
  state.daemon = disk->info().daemon_id;
  state.replica_id = meta.replicas[from].id();
  state.due_ms = Now() + options_.default_kv_lease_ttl_ms + kOffloadReportMarginMs;
  if (for_eviction) pin(state);
  shard.offloads.emplace(std::string(key), state);
  states_.fetch_add(1);
  counters_.queued.fetch_add(1);
  return QueueOutcome::kQueued;
}

void DiskTier::ReturnOffloadLease(const OffloadState& state, ObjectMetadata& meta) {
  // The lease granted was one ms shorter than a read's, so that any read since (even in
  // the same ms) left a later deadline: an unchanged one means nobody read it since.
  if (state.stage == OffloadState::Stage::kFetched && meta.time_ms == state.granted_ms) {
    meta.time_ms = state.prior_ms;
  }
}

void DiskTier::EndOffload(Shard& shard, std::string_view key, ObjectMetadata* meta,
                               bool failed) {
  if (shard.offloads.empty()) return;
  auto it = shard.offloads.find(std::string(key));
  if (it == shard.offloads.end()) return;
  OffloadState& state = it->second;
  if (state.stage == OffloadState::Stage::kFailed) {
    if (!failed) {  // the object changed or went: its next value may offload at once
      shard.offloads.erase(it);
      states_.fetch_sub(1);
    }
    return;
  }
  if (state.stage == OffloadState::Stage::kQueued) counters_.queued.fetch_sub(1);
  if (state.for_eviction) {
    eviction_.AddPendingBytes(-static_cast<int64_t>(state.pinned_bytes));
    if (meta != nullptr) meta->offload_pinned = false;
  }
  if (meta != nullptr) ReturnOffloadLease(state, *meta);
  if (!failed) {
    shard.offloads.erase(it);
    states_.fetch_sub(1);
    return;
  }
  counters_.failed.fetch_add(1);
  state = OffloadState();
  state.stage = OffloadState::Stage::kFailed;
  state.due_ms = Now() + kOffloadRetryPauseMs;
}

void DiskTier::ExpireOffloads(int64_t now) {
  if (states_.load() == 0) return;
  std::vector<std::string> ended;
  int64_t failed = 0;
  for (size_t s = 0; s < ObjectDirectory::kShardCount; ++s) {
    Shard& shard = directory_.shard(s);
    absl::MutexLock lock(&shard.mu);
    if (shard.offloads.empty()) continue;
    for (auto it = shard.offloads.begin(); it != shard.offloads.end();) {
      OffloadState& state = it->second;
      if (state.stage == OffloadState::Stage::kFailed) {
        if (state.due_ms <= now) {
          it = shard.offloads.erase(it);
          states_.fetch_sub(1);
        } else {
          ++it;
        }
        continue;
      }
      std::shared_ptr<Segment> disk = segments_.DiskSegmentOf(state.daemon);
      if (state.due_ms <= now || !disk || !disk->attached()) ended.push_back(it->first);
      ++it;
    }
    for (const std::string& key : ended) {
      EndOffload(shard, key, shard.objects.Find(key, ObjectTable::Hash(key)), /*failed=*/true);
    }
    failed += static_cast<int64_t>(ended.size());
    ended.clear();
  }
  if (failed > 0) {
    MC_LOG_WARN("%lld offload(s) not reported in time, or their daemon's SSD tier left: "
                "counted as failed, their objects kept in memory", static_cast<long long>(failed));
  }
}

// ---- figures ---------------------------------------------------------------------------

void DiskTier::Count(const ObjectMetadata& meta, int sign) {
  size_t disk = meta.disk_replicas();
  if (disk == 0) return;  // the common object: nothing to count
  counters_.objects.fetch_add(sign);
  counters_.bytes.fetch_add(sign * static_cast<int64_t>(disk * meta.size));
  if (disk == meta.replicas.size()) counters_.disk_only.fetch_add(sign);
}

rpc::DiskStats DiskTier::Figures() const {
  rpc::DiskStats out;
  size_t segments = 0;
  uint64_t capacity = 0;
  segments_.DiskFigures(&segments, &capacity);
  out.segments = static_cast<int64_t>(segments);
  out.capacity_bytes = static_cast<int64_t>(capacity);
  out.objects = counters_.objects.load();
  out.bytes = counters_.bytes.load();
  out.disk_only_objects = counters_.disk_only.load();
  out.offloads_queued = counters_.queued.load();
  out.offloads_done = counters_.done.load();
  out.offloads_failed = counters_.failed.load();
  out.evict_offloads = counters_.evict_offloads.load();
  out.promotions = counters_.promotions.load();
  out.adopted = counters_.adopted.load();
  out.dropped = counters_.dropped.load();
  out.offloads_dropped = counters_.dropped_tasks.load();
  return out;
}

Replica DiskTier::NewDiskReplica(const Segment& disk) {
  Replica r;
  r.segment = disk.slot();
  // Its daemon has just shown it holds it: a reconciliation under way keeps it.
  r.round = disk.round();
  r.alloc_node = NextDiskNode();
  r.kind = ReplicaKind::kLocalDisk;
  r.status = ReplicaStatus::kComplete;
  return r;
}

void DiskTier::Clear() {
  states_ = 0;
  queues_.Clear();
  counters_.objects = counters_.bytes = counters_.disk_only = counters_.queued = 0;
}

}  // namespace mooncake
