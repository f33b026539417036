// Daemons and upkeep of MasterService: the calls of daemons and their segments (the rules
// of who is live: master/liveness/liveness.h), what a dropped segment or a dead writer means for
// the objects, the upkeep's round, abandoned puts, deferred frees, stats.
// Object operations are in master_service.cc, eviction's rounds in master/eviction/eviction_rounds.h.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "master/service/master_service.h"
#include "master/log/oplog.h"

namespace mooncake {

namespace {

int64_t ResidentBytes() {
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  int n = std::fscanf(f, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(pages_resident) * sysconf(_SC_PAGESIZE) : 0;
}

}  // namespace

// ---- daemons and segments --------------------------------------------------------------

ErrorCode MasterService::RegisterDaemon(int64_t daemon_id, const std::string& name) {
  StateGate::Shared gate(gate_);
  return liveness_.Register(daemon_id, name);
}

rpc::HeartbeatResult MasterService::Heartbeat(int64_t daemon_id) {
  StateGate::Shared gate(gate_);
  rpc::HeartbeatResult r;
  r.master_epoch = epoch_;
  r.code = ToInt(daemons_.Heartbeat(daemon_id, Now()) ? ErrorCode::OK
                                                       : ErrorCode::CLIENT_NOT_FOUND);
  return r;
}

ErrorCode MasterService::MountSegment(const rpc::SegmentInfo& segment) {
  StateGate::Shared gate(gate_);
  return liveness_.Mount(segment);
}

ErrorCode MasterService::UnmountSegment(int64_t daemon_id, int64_t segment_id) {
  StateGate::Shared gate(gate_);
  return liveness_.Unmount(daemon_id, segment_id);
}

std::vector<rpc::SegmentInfo> MasterService::GetAllSegments() const {
  StateGate::Shared gate(gate_);
  return segments_.List();
}

// ---- upkeep ----------------------------------------------------------------------------

void MasterService::Tick() {
  StateGate::Shared gate(gate_);
  int64_t now = Now();
  liveness_.ForgiveOwnStall(now);
  liveness_.CheckLiveness(now);
  liveness_.DropDetached(now);
  PruneShardRecords(now);
  ReleaseAbandonedPuts(now);
  RunDeferredFrees(now);
  ExpireParked(now);
  disk_tier_.ExpireOffloads(now);
  ExpireTasks(now);
  drain_jobs_.Run(now);
  eviction_.QueueEarlyOffloads(now);
  eviction_.EvictAboveWatermark();
  tenants_.Prune();
  // From the end of the round: a round that took long doing its own work (a big eviction)
  // was the master running, and must not pass for a stall, or dead daemons would be
  // forgiven for as long as evictions keep coming.
  liveness_.EndRound(Now());
}

void MasterService::PruneShardRecords(int64_t now) {
  // A sixteenth of the shards per tick: each is swept about every 1.6 s, and no tick holds
  // a shard lock for more than one shard's records.
  for (size_t i = 0; i < kShardCount / 16; ++i) {
    Shard& shard = objects_.shard(holder_sweep_next_);
    holder_sweep_next_ = (holder_sweep_next_ + 1) % kShardCount;
    absl::MutexLock lock(&shard.mu);
    if (!shard.holders.empty()) shard.holders.Prune(now);
    // Ended exist leases are otherwise pruned only by later grants in the same shard.
    if (!shard.exist_leases.empty()) shard.exist_leases.Prune(now);
  }
}

int64_t MasterService::DropSegmentReplicas(uint32_t slot,
                                           std::vector<ParkedSegments::Object>* parked) {
  // The segment's space disappears with it, so its replicas are dropped, not freed (and
  // their bytes no longer count against the value's tenant).
  auto drop_in = [this, slot](std::string_view key, uint64_t size, ReplicaList& replicas) {
    int64_t memory = 0;
    for (size_t i = replicas.size(); i-- > 0;) {
      if (replicas[i].segment != slot) continue;
      memory += replicas[i].kind == ReplicaKind::kMemory;
      replicas.erase(i);
    }
    if (memory > 0) tenants_.Add(key, 0, -memory * static_cast<int64_t>(size));
  };
  int64_t dropped = 0;
  for (size_t s = 0; s < kShardCount; ++s) {
    Shard& shard = objects_.shard(s);
    {
      absl::MutexLock lock(&shard.mu);
      for (auto it = shard.moves.begin(); it != shard.moves.end();) {
        PendingMove& move = it->second;
        if (move.from_slot != slot && !move.Into(slot)) {
          ++it;
          continue;
        }
        // From it: its mover may still be copying into the targets. Into it: gone with it.
        ReplicaList elsewhere;
        for (size_t i = 0; i < move.to.size(); ++i) {
          if (move.to[i].segment != slot) elsewhere.push_back(move.to[i]);
        }
        DeferFree(elsewhere, move.start_ms + options_.put_start_release_timeout_ms);
        it = shard.moves.erase(it);
      }
      for (auto it = shard.promotions.begin(); it != shard.promotions.end();) {
        PendingPromotion& promotion = it->second;
        if (promotion.to[0].segment != slot) {
          ++it;
          continue;
        }
        // Gone with the segment's space, its charge with it.
        if (!promotion.orphaned) tenants_.Add(it->first, 0, -MemoryBytes(promotion.size, promotion.to));
        it = shard.promotions.erase(it);
      }
    }
    objects_.Scan(shard, [&](std::string_view key, ObjectMetadata& meta) {
      bool in_slot = false;
      for (size_t i = 0; i < meta.replicas.size() && !in_slot; ++i) {
        in_slot = meta.replicas[i].segment == slot;
      }
      if (!in_slot) return false;
      bool memory_in_slot = false;  // and where: what a parked object keeps
      uint64_t offset = 0;
      for (size_t i = 0; i < meta.replicas.size(); ++i) {
        if (meta.replicas[i].segment != slot || !meta.replicas[i].memory()) continue;
        memory_in_slot = true;
        offset = meta.replicas[i].offset;
      }
      disk_tier_.Count(meta, -1);
      drop_in(key, meta.size, meta.replicas);
      disk_tier_.Count(meta, 1);
      if (!meta.replicas.empty()) return false;
      dropped += meta.complete;
      if (parked != nullptr && meta.complete && memory_in_slot) {
        parked->push_back({std::string(key), offset, meta.size, meta.checksum_or_none(),
                           meta.hard_pin});
      }
      ReleaseObject(shard, key, meta);
      return true;
    });
    // Few: one per upsert in flight.
    absl::MutexLock lock(&shard.mu);
    for (auto it = shard.upserts.begin(); it != shard.upserts.end();) {
      drop_in(it->first, it->second.size, it->second.replicas);
      it = it->second.replicas.empty() ? shard.upserts.erase(it) : std::next(it);
    }
  }
  return dropped;
}

void MasterService::RevokeWriter(int64_t writer) {
  DropUnfinished([writer](int64_t w, int64_t) { return w == writer; });
}

void MasterService::ReleaseAbandonedPuts(int64_t now) {
  // A full scan costs a walk over every object, so it runs only while puts are open and
  // at most ten times per release timeout.
  int64_t period = std::max<int64_t>(1000, options_.put_start_release_timeout_ms / 10);
  if (now - last_abandoned_scan_ms_ < period) return;
  last_abandoned_scan_ms_ = now;
  int64_t deadline = now - options_.put_start_release_timeout_ms;
  DropUnfinished([deadline](int64_t, int64_t start_ms) { return start_ms <= deadline; });
}

void MasterService::DropUnfinished(const std::function<bool(int64_t, int64_t)>& match) {
  const int64_t release = options_.put_start_release_timeout_ms;
  for (size_t s = 0; s < kShardCount; ++s) {
    Shard& shard = objects_.shard(s);
    {
      absl::MutexLock lock(&shard.mu);  // few: one per upsert in flight
      for (auto it = shard.upserts.begin(); it != shard.upserts.end();) {
        if (match(it->second.writer, it->second.start_ms)) {
          DeferFree(it->second.replicas, it->second.start_ms + release);
          tenants_.Add(it->first, 0, -MemoryBytes(it->second.size, it->second.replicas));
          it = shard.upserts.erase(it);
        } else {
          ++it;
        }
      }
    }
    {
      absl::MutexLock lock(&shard.mu);  // few: one per move or promotion in flight
      for (auto it = shard.moves.begin(); it != shard.moves.end();) {
        if (match(it->second.mover, it->second.start_ms)) {
          FreeReplicas(it->second.to);
          it = shard.moves.erase(it);
        } else {
          ++it;
        }
      }
      for (auto it = shard.promotions.begin(); it != shard.promotions.end();) {
        PendingPromotion& promotion = it->second;
        if (!match(promotion.writer, promotion.start_ms)) {
          ++it;
          continue;
        }
        // Its writer may still be copying into it: as for an abandoned put.
        DeferFree(promotion.to, promotion.start_ms + release);
        if (!promotion.orphaned) tenants_.Add(it->first, 0, -MemoryBytes(promotion.size, promotion.to));
        it = shard.promotions.erase(it);
      }
    }
    if (processing_count_.load() == 0) continue;
    objects_.Scan(shard, [&](std::string_view key, ObjectMetadata& meta) {
      if (meta.complete || !match(meta.writer, meta.time_ms)) return false;
      std::string_view shown = tenant_key::UserKeyOf(key);
      MC_LOG_WARN("put of '%.*s' by daemon %lld dropped unfinished",
                  static_cast<int>(std::min<size_t>(shown.size(), 64)), shown.data(),
                  static_cast<long long>(meta.writer));
      // Its writer may still be copying into it: as for a put taken over (PutStart).
      DeferFree(meta.replicas, meta.time_ms + release);
      tenants_.Add(key, 0, -MemoryBytes(meta.size, meta.replicas));
      meta.replicas.clear();
      ReleaseObject(shard, key, meta);
      return true;
    });
  }
}

void MasterService::RunDeferredFrees(int64_t now) {
  deferred_.FreeDue(now, log_.synced());
}

void MasterService::ReclaimEvicted() {
  // Sync's failure needs no answer here: what is not on disk stays deferred, and the retry
  // of the reservation fails for want of space. A failing disk is not waited for (this
  // thread holds the state gate).
  log_.Flush();
  RunDeferredFrees(Now());
}

rpc::MasterStats MasterService::GetStats() const {
  StateGate::Shared gate(gate_);
  rpc::MasterStats stats;
  stats.objects = object_count_.load();
  stats.segments = static_cast<int64_t>(segments_.count());
  stats.daemons = static_cast<int64_t>(daemons_.count());
  stats.capacity_bytes = static_cast<int64_t>(segments_.capacity());
  stats.used_bytes = static_cast<int64_t>(segments_.used());
  stats.resident_bytes = ResidentBytes();
  stats.evicted_objects = eviction_.evicted_objects();
  stats.master_epoch = epoch_;
  log_.Figures(&stats.oplog_sequence, &stats.oplog_synced);
  stats.restore_ms = restore_ms_.load();
  stats.restored_objects = restored_objects_.load();
  stats.pending_segments = static_cast<int64_t>(segments_.detached_count());
  stats.eviction = eviction_.counters().Get();
  stats.tenants = tenants_.Stats();
  stats.disk = disk_tier_.Figures();
  stats.objects_dropped = DroppedObjects();
  stats.unverified_replicas = UnverifiedReplicas();
  stats.parked_objects = parked_.count();
  stats.parked_adopted = parked_adopted_.load();
  return stats;
}

}  // namespace mooncake
