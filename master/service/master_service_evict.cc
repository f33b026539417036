// Eviction's side of MasterService: what one object's eviction does (its tier, freeing or
// offloading it), for the rounds master/eviction/eviction_rounds.h runs, and the put's reservation
// that asks for them.
#include <algorithm>
#include <chrono>

#include "common/base/logging.h"
#include "master/service/master_service.h"

namespace mooncake {

EvictionTier MasterService::TierOf(const Shard& shard, const ObjectMetadata& meta,
                                   int64_t now) const {
  if (!meta.complete || meta.hard_pin || meta.leased(now)) return EvictionTier::kNever;
  // On disk only, it takes no memory; pinned, its offload is on the way.
  if (meta.offload_pinned || meta.memory_replicas() == 0) return EvictionTier::kNever;
  // Its daemon is expected back (a restore, a takeover, a silent daemon): the room it takes
  // cannot be placed in until then, so evicting it frees nothing a put can use, and loses an
  // object that would have come back with its segment.
  if (segments_.detached_count() > 0 && OnDetachedSegment(meta.replicas)) {
    return EvictionTier::kNever;
  }
  if (meta.exist_hit && shard.exist_leases.Live(&meta, now)) return EvictionTier::kNever;
  const bool soft_pinned = meta.soft_pinned(now);
  if (soft_pinned && !options_.allow_evict_soft_pinned_objects) return EvictionTier::kNever;
  if (tenants_.Sheltered(meta.quota_slot)) {
    return soft_pinned ? EvictionTier::kShelteredSoftPinned : EvictionTier::kSheltered;
  }
  return soft_pinned ? EvictionTier::kSoftPinned : EvictionTier::kPlain;
}

ErrorCode MasterService::Reserve(uint64_t size, const rpc::ReplicateConfig& config,
                                 int64_t writer, ReplicaList* out) {
  // An upper bound: fewer replicas than asked may be placed.
  const uint64_t need = size * static_cast<uint64_t>(config.replica_num);
  // Evict before passing the watermark, so that usage stays at or under it for as long as
  // anything can be evicted; when nothing can, the put takes the room above it.
  if (eviction_.PastWatermark(need)) eviction_.MakeRoom(need, /*no_space=*/false);
  if (TryReserve(size, config, writer, out)) return ErrorCode::OK;
  if (eviction_.MakeRoom(need, /*no_space=*/true) && TryReserve(size, config, writer, out)) {
    return ErrorCode::OK;
  }
  eviction_.counters().NoSpace();
  return ErrorCode::NO_AVAILABLE_HANDLE;
}

uint64_t MasterService::Evict(uint64_t target_bytes) {
  StateGate::Shared gate(gate_);
  return eviction_.Evict(target_bytes);
}

uint64_t MasterService::EvictOne(Shard& shard, std::string_view key, ObjectMetadata& meta,
                                 uint64_t* queued, bool* erase) {
  const uint64_t memory_bytes = meta.size * meta.memory_replicas();
  bool on_disk = false;
  for (size_t i = 0; i < meta.replicas.size() && !on_disk; ++i) {
    std::shared_ptr<Segment> segment =
        meta.replicas[i].memory() ? nullptr : segments_.Get(meta.replicas[i].segment);
    on_disk = segment && Listable(meta.replicas[i], *segment);  // not one in doubt
  }
  if (on_disk) {
    // Readable from disk: only its memory goes (logged: reused once on disk).
    disk_tier_.Count(meta, -1);
    ReplicaList memory;
    for (size_t i = meta.replicas.size(); i-- > 0;) {
      if (!meta.replicas[i].memory()) continue;
      memory.push_back(meta.replicas[i]);
      meta.replicas.erase(i);
    }
    disk_tier_.Count(meta, 1);
    tenants_.Add(key, 0, -MemoryBytes(meta.size, memory));
    DropPendingMove(shard, key);
    disk_tier_.EndOffload(shard, key, &meta, /*failed=*/false);  // an early one: no longer needed
    uint64_t seq = LogPublish(key, meta);
    if (seq > 0) {
      DeferFree(memory, 0, seq);
    } else {
      FreeReplicas(memory);  // no log: nothing to wait for (a candidate has no lease)
    }
    return memory_bytes;
  }
  if (options_.offload_on_evict) {
    switch (disk_tier_.QueueOffload(shard, key, meta, /*for_eviction=*/true)) {
      case DiskTier::QueueOutcome::kQueued:
        *queued += memory_bytes;
        return 0;
      case DiskTier::QueueOutcome::kBusy:
        return 0;  // an eviction's offload of it is open already
      case DiskTier::QueueOutcome::kFull:
      case DiskTier::QueueOutcome::kFailedRecently:
        // Its offload cannot proceed: it stays in memory, unless the operator said not to.
        if (!options_.allow_evict_without_offload) return 0;
        break;
      case DiskTier::QueueOutcome::kNoTier:
        break;  // no SSD on its daemon: evicted as ever
    }
  }
  // Every replica at once: an object is never left listing a range that was freed.
  RemoveLogged(shard, key, meta);
  *erase = true;
  return memory_bytes;
}

bool MasterService::QueueEarlyOffload(Shard& shard, std::string_view key, ObjectMetadata& meta) {
  return disk_tier_.QueueOffload(shard, key, meta, /*for_eviction=*/false) ==
         DiskTier::QueueOutcome::kQueued;
}

}  // namespace mooncake
