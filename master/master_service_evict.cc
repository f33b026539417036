// Eviction of MasterService: making room for puts, the upkeep's rounds past the high
// watermark, and the rounds themselves (victims chosen as master/eviction.h describes).
#include <algorithm>
#include <chrono>

#include "common/base/logging.h"
#include "master/master_service.h"

namespace mooncake {

namespace {

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

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

bool MasterService::PastWatermark(uint64_t need) const {
  uint64_t used = 0, capacity = 0;
  segments_.Usage(&used, &capacity);
  return static_cast<double>(used + need) >
         options_.eviction_high_watermark_ratio * static_cast<double>(capacity);
}

ErrorCode MasterService::Reserve(uint64_t size, const rpc::ReplicateConfig& config,
                                 int64_t writer, ReplicaList* out) {
  // An upper bound: fewer replicas than asked may be placed.
  const uint64_t need = size * static_cast<uint64_t>(config.replica_num);
  // Evict before passing the watermark, so that usage stays at or under it for as long as
  // anything can be evicted; when nothing can, the put takes the room above it.
  if (PastWatermark(need)) MakeRoom(need, /*no_space=*/false);
  if (TryReserve(size, config, writer, out)) return ErrorCode::OK;
  if (MakeRoom(need, /*no_space=*/true) && TryReserve(size, config, writer, out)) {
    return ErrorCode::OK;
  }
  eviction_.NoSpace();
  return ErrorCode::NO_AVAILABLE_HANDLE;
}

bool MasterService::MakeRoom(uint64_t need, bool no_space) {
  const int64_t rounds_seen = eviction_.rounds();
  std::lock_guard<std::mutex> evicting(evict_mu_);
  // Many puts find the pool full at once; the first one's round serves them all.
  if (eviction_.rounds() != rounds_seen) return true;
  if (!no_space && !PastWatermark(need)) return true;
  if (Now() < evict_paused_until_ms_) return false;
  double goal = std::max(0.0, options_.eviction_high_watermark_ratio - options_.eviction_ratio) *
                static_cast<double>(segments_.capacity());
  double over = static_cast<double>(segments_.used() + need) - goal;
  uint64_t target = over > 0 ? static_cast<uint64_t>(over) : 0;
  if (no_space) target = std::max(target, need);
  uint64_t freed = RunEvictionRound(target, /*by_put=*/true);
  // Under evict_mu_, so that the puts waiting for it find the room really there.
  if (freed > 0) ReclaimEvicted();
  return freed > 0;
}

void MasterService::EvictAboveWatermark() {
  double capacity = static_cast<double>(segments_.capacity());
  double used = static_cast<double>(segments_.used());
  if (capacity <= 0 || used <= options_.eviction_high_watermark_ratio * capacity) return;
  std::lock_guard<std::mutex> evicting(evict_mu_);
  if (Now() < evict_paused_until_ms_) return;
  double goal = std::max(0.0, options_.eviction_high_watermark_ratio - options_.eviction_ratio) *
                capacity;
  used = static_cast<double>(segments_.used());  // a put's round may have run meanwhile
  if (used > goal) RunEvictionRound(static_cast<uint64_t>(used - goal), /*by_put=*/false);
}

uint64_t MasterService::Evict(uint64_t target_bytes) {
  StateGate::Shared gate(gate_);
  std::lock_guard<std::mutex> evicting(evict_mu_);
  return RunEvictionRound(target_bytes, /*by_put=*/false);
}

uint64_t MasterService::RunEvictionRound(uint64_t target, bool by_put) {
  if (target == 0) return 0;
  // Memory already pinned for eviction's offloads will be freed by their reports: what a
  // round queues counts towards its target, and so do the tasks still open. When those
  // cover it there is no round (the puts retrying meanwhile would each run one).
  uint64_t queued = options_.offload_on_evict
                        ? static_cast<uint64_t>(std::max<int64_t>(0, evict_pending_bytes_.load()))
                        : 0;
  if (queued >= target) return 0;
  const int64_t started_us = SteadyMicros();
  const int64_t now = Now();
  const bool soft_too = options_.allow_evict_soft_pinned_objects;
  SampleForEviction(now);
  // The exposed tiers first; the sheltered ones (tenants within their quota) only once a
  // walk that took every exposed candidate fell short, or once as many bytes went as the
  // exposed tenants hold (so that a pool of sheltered objects costs no walk for nothing).
  // In each, the planned walk; when it falls short (the sample misjudged, or leases were
  // granted since), one planned for four times as much; then any candidate of those tiers.
  uint64_t freed = 0;
  int64_t evicted = 0;
  int walks = 0;
  const bool shares = tenants_.has_quotas();
  const struct {
    EvictionTierSet tiers;
    uint64_t cap;  // the most this phase can take
  } phases[] = {{ExposedTiers(soft_too), shares ? tenants_.ExposedBytes() : UINT64_MAX},
                {shares ? ShelteredTiers(soft_too) : EvictionTierSet{0}, UINT64_MAX}};
  for (const auto& phase : phases) {
    uint64_t taken = 0;  // freed and queued by this phase
    int planned = 0;
    for (uint64_t want = target - freed - queued;
         phase.tiers != 0 && freed + queued < target && taken < phase.cap; want *= 4) {
      EvictionThresholds take = planned < 2
                                    ? planner_.Plan(want, object_count_.load(), phase.tiers)
                                    : EvictionThresholds::All(phase.tiers);
      const uint64_t before = freed + queued;
      freed += EvictionWalk(take, std::min(target - freed - queued, phase.cap - taken), now,
                            &evicted, &queued);
      taken += freed + queued - before;
      ++planned;
      ++walks;
      if (take.TakesAll(phase.tiers)) break;
    }
  }
  evicted_count_.fetch_add(evicted);
  if (freed + queued < target) evict_paused_until_ms_ = Now() + kShortRoundPauseMs;
  const int64_t elapsed_us = SteadyMicros() - started_us;
  const uint64_t used = segments_.used();
  eviction_.Round(by_put, target, freed, elapsed_us, static_cast<int64_t>(used));
  MC_LOG_INFO("eviction round (%s): %llu of %llu bytes freed (%llu more by offloads open), "
              "%lld objects, %d walk(s), %lld us; %llu of %llu bytes in use",
              by_put ? "put" : "upkeep", static_cast<unsigned long long>(freed),
              static_cast<unsigned long long>(target), static_cast<unsigned long long>(queued),
              static_cast<long long>(evicted), walks,
              static_cast<long long>(elapsed_us), static_cast<unsigned long long>(used),
              static_cast<unsigned long long>(segments_.capacity()));
  return freed;
}

void MasterService::SampleForEviction(int64_t now) {
  planner_.Clear();
  for (size_t s = 0; s < kShardCount; ++s) {
    Shard& shard = shards_[s];
    std::lock_guard<std::mutex> lock(shard.mu);
    const size_t slots = shard.objects.slot_count();
    if (shard.objects.empty() || slots == 0) continue;
    const size_t window = std::min(slots, EvictionPlanner::kSampleSlots);
    size_t cursor = window == slots ? 0 : evict_rng_() % slots;
    auto add = [&](std::string_view, ObjectMetadata& meta) {
      planner_.Add(TierOf(shard, meta, now), meta.time_ms, meta.size * meta.memory_replicas());
      return false;
    };
    const size_t start = cursor;
    shard.objects.Walk(&cursor, window, add);
    const size_t seen = cursor - start;
    if (seen < window) {  // the window runs past the table's end: the rest from its start
      cursor = 0;
      shard.objects.Walk(&cursor, window - seen, add);
    }
  }
}

uint64_t MasterService::EvictionWalk(const EvictionThresholds& take, uint64_t budget,
                                     int64_t now, int64_t* evicted, uint64_t* queued) {
  uint64_t freed = 0;
  uint64_t queued_here = 0;
  size_t visited = 0;
  std::vector<std::string> group_rest;  // the rest of the groups of grouped objects taken
  for (; visited < kShardCount && freed + queued_here < budget; ++visited) {
    Shard& shard = shards_[(evict_next_shard_ + visited) % kShardCount];
    ScanShard(shard, [&](std::string_view key, ObjectMetadata& meta) {
      if (freed + queued_here >= budget || !take.Takes(TierOf(shard, meta, now), meta.time_ms)) {
        return false;
      }
      // Listed before it goes: an object erased has left its group.
      std::vector<std::string> rest;
      if (meta.grouped) rest = groups_.OthersOf(key);
      bool erase = false;
      const uint64_t queued_before = queued_here;
      const uint64_t bytes = EvictOne(shard, key, meta, &queued_here, &erase);
      freed += bytes;
      *evicted += erase;
      if (bytes > 0 || queued_here > queued_before) {
        group_rest.insert(group_rest.end(), rest.begin(), rest.end());
      }
      return erase;
    });
    if (!group_rest.empty()) {
      // A group goes together (Mooncake's group eviction), its members in other shards
      // each under their own lock, once this shard's is let go.
      freed += EvictRestOfGroup(group_rest, take, now, evicted, &queued_here);
      group_rest.clear();
    }
  }
  evict_next_shard_ = (evict_next_shard_ + visited) % kShardCount;
  *queued += queued_here;
  return freed;
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
    CountDisk(meta, -1);
    ReplicaList memory;
    for (size_t i = meta.replicas.size(); i-- > 0;) {
      if (!meta.replicas[i].memory()) continue;
      memory.push_back(meta.replicas[i]);
      meta.replicas.erase(i);
    }
    CountDisk(meta, 1);
    tenants_.Add(key, 0, -MemoryBytes(meta.size, memory));
    DropPendingMove(shard, key);
    EndOffload(shard, key, &meta, /*failed=*/false);  // an early one: no longer needed
    uint64_t seq = LogPublish(key, meta);
    if (seq > 0) {
      DeferFree(memory, 0, seq);
    } else {
      FreeReplicas(memory);  // no log: nothing to wait for (a candidate has no lease)
    }
    return memory_bytes;
  }
  if (options_.offload_on_evict) {
    switch (QueueOffload(shard, key, meta, /*for_eviction=*/true)) {
      case QueueOutcome::kQueued:
        *queued += memory_bytes;
        return 0;
      case QueueOutcome::kBusy:
        return 0;  // an eviction's offload of it is open already
      case QueueOutcome::kFull:
      case QueueOutcome::kFailedRecently:
        // Its offload cannot proceed: it stays in memory, unless the operator said not to.
        if (!options_.allow_evict_without_offload) return 0;
        break;
      case QueueOutcome::kNoTier:
        break;  // no SSD on its daemon: evicted as ever
    }
  }
  // Every replica at once: an object is never left listing a range that was freed.
  RemoveLogged(shard, key, meta);
  *erase = true;
  return memory_bytes;
}

void MasterService::QueueEarlyOffloads(int64_t now) {
  if (!options_.offload_on_evict || now - last_early_offload_ms_ < kEarlyOffloadPeriodMs) return;
  uint64_t used = 0, capacity = 0;
  segments_.Usage(&used, &capacity);
  const double low = std::max(0.0, options_.eviction_high_watermark_ratio -
                                       options_.eviction_ratio) * static_cast<double>(capacity);
  if (capacity == 0 || static_cast<double>(used) <= low) return;
  last_early_offload_ms_ = now;
  // The round that comes past the high watermark frees down to low: about that much plus
  // one round, of the oldest candidates, should be on disk by then.
  const uint64_t target = static_cast<uint64_t>(
      static_cast<double>(used) - low + options_.eviction_ratio * static_cast<double>(capacity));
  std::lock_guard<std::mutex> evicting(evict_mu_);
  SampleForEviction(now);
  // All tiers in one plan, in their order: what it offloads is what the round will take.
  const bool soft_too = options_.allow_evict_soft_pinned_objects;
  EvictionThresholds take = planner_.Plan(target, object_count_.load(),
                                          ExposedTiers(soft_too) | ShelteredTiers(soft_too));
  uint64_t covered = 0;
  int64_t queued = 0;
  for (size_t visited = 0; visited < kShardCount && covered < target; ++visited) {
    Shard& shard = shards_[(evict_next_shard_ + visited) % kShardCount];
    ScanShard(shard, [&](std::string_view key, ObjectMetadata& meta) {
      if (covered >= target || !take.Takes(TierOf(shard, meta, now), meta.time_ms)) return false;
      // Those on disk already, or whose daemon has no SSD, need nothing now.
      covered += meta.size * meta.memory_replicas();
      if (meta.disk_replicas() == 0 &&
          QueueOffload(shard, key, meta, /*for_eviction=*/false) == QueueOutcome::kQueued) {
        ++queued;
      }
      return false;
    });
  }
  if (queued > 0) {
    MC_LOG_INFO("%lld early offload(s) queued: usage %llu of %llu bytes is past high - "
                "eviction_ratio", static_cast<long long>(queued),
                static_cast<unsigned long long>(used), static_cast<unsigned long long>(capacity));
  }
}

}  // namespace mooncake
