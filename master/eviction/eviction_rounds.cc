#include "master/eviction/eviction_rounds.h"

#include <algorithm>
#include <chrono>

#include "common/base/logging.h"

namespace mooncake {

namespace {

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool EvictionRounds::PastWatermark(uint64_t need) const {
  uint64_t used = 0, capacity = 0;
  segments_.Usage(&used, &capacity);
  return static_cast<double>(used + need) >
         options_.eviction_high_watermark_ratio * static_cast<double>(capacity);
}

bool EvictionRounds::MakeRoom(uint64_t need, bool no_space) {
  const int64_t rounds_seen = counters_.rounds();
  absl::MutexLock evicting(&mu_);
  // Many puts find the pool full at once; the first one's round serves them all.
  if (counters_.rounds() != rounds_seen) return true;
  if (!no_space && !PastWatermark(need)) return true;
  if (Now() < paused_until_ms_) return false;
  double goal = std::max(0.0, options_.eviction_high_watermark_ratio - options_.eviction_ratio) *
                static_cast<double>(segments_.capacity());
  double over = static_cast<double>(segments_.used() + need) - goal;
  uint64_t target = over > 0 ? static_cast<uint64_t>(over) : 0;
  if (no_space) target = std::max(target, need);
  uint64_t freed = RunRound(target, /*by_put=*/true);
  // Under mu_, so that the puts waiting for it find the room really there.
  if (freed > 0) objects_.ReclaimEvicted();
  return freed > 0;
}

void EvictionRounds::EvictAboveWatermark() {
  double capacity = static_cast<double>(segments_.capacity());
  double used = static_cast<double>(segments_.used());
  if (capacity <= 0 || used <= options_.eviction_high_watermark_ratio * capacity) return;
  absl::MutexLock evicting(&mu_);
  if (Now() < paused_until_ms_) return;
  double goal = std::max(0.0, options_.eviction_high_watermark_ratio - options_.eviction_ratio) *
                capacity;
  used = static_cast<double>(segments_.used());  // a put's round may have run meanwhile
  if (used > goal) RunRound(static_cast<uint64_t>(used - goal), /*by_put=*/false);
}

uint64_t EvictionRounds::Evict(uint64_t target) {
  absl::MutexLock evicting(&mu_);
  return RunRound(target, /*by_put=*/false);
}

uint64_t EvictionRounds::RunRound(uint64_t target, bool by_put) {
  if (target == 0) return 0;
  // Memory already pinned for eviction's offloads will be freed by their reports: what a
  // round queues counts towards its target, and so do the tasks still open. When those
  // cover it there is no round (the puts retrying meanwhile would each run one).
  uint64_t queued = options_.offload_on_evict
                        ? static_cast<uint64_t>(std::max<int64_t>(0, pending_bytes_.load()))
                        : 0;
  if (queued >= target) return 0;
  const int64_t started_us = SteadyMicros();
  const int64_t now = Now();
  const bool soft_too = options_.allow_evict_soft_pinned_objects;
  Sample(now);
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
                                    ? planner_.Plan(want, objects_.ObjectCount(), phase.tiers)
                                    : EvictionThresholds::All(phase.tiers);
      const uint64_t before = freed + queued;
      freed += Walk(take, std::min(target - freed - queued, phase.cap - taken), now, &evicted,
                    &queued);
      taken += freed + queued - before;
      ++planned;
      ++walks;
      if (take.TakesAll(phase.tiers)) break;
    }
  }
  evicted_.fetch_add(evicted);
  if (freed + queued < target) paused_until_ms_ = Now() + kShortRoundPauseMs;
  const int64_t elapsed_us = SteadyMicros() - started_us;
  const uint64_t used = segments_.used();
  counters_.Round(by_put, target, freed, elapsed_us, static_cast<int64_t>(used));
  MC_LOG_INFO("eviction round (%s): %llu of %llu bytes freed (%llu more by offloads open), "
              "%lld objects, %d walk(s), %lld us; %llu of %llu bytes in use",
              by_put ? "put" : "upkeep", static_cast<unsigned long long>(freed),
              static_cast<unsigned long long>(target), static_cast<unsigned long long>(queued),
              static_cast<long long>(evicted), walks,
              static_cast<long long>(elapsed_us), static_cast<unsigned long long>(used),
              static_cast<unsigned long long>(segments_.capacity()));
  return freed;
}

void EvictionRounds::Sample(int64_t now) {
  planner_.Clear();
  for (size_t s = 0; s < ObjectDirectory::kShardCount; ++s) {
    Shard& shard = directory_.shard(s);
    absl::MutexLock lock(&shard.mu);
    const size_t slots = shard.objects.slot_count();
    if (shard.objects.empty() || slots == 0) continue;
    const size_t window = std::min(slots, EvictionPlanner::kSampleSlots);
    size_t cursor = window == slots ? 0 : rng_() % slots;
    // Runs within the walks below, mu_ still held; the analysis does not follow a lambda.
    auto add = [&](std::string_view, ObjectMetadata& meta) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      planner_.Add(objects_.TierOf(shard, meta, now), meta.time_ms,
                   meta.size * meta.memory_replicas());
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

uint64_t EvictionRounds::Walk(const EvictionThresholds& take, uint64_t budget, int64_t now,
                              int64_t* evicted, uint64_t* queued) {
  uint64_t freed = 0;
  uint64_t queued_here = 0;
  size_t visited = 0;
  std::vector<std::string> group_rest;  // the rest of the groups of grouped objects taken
  for (; visited < ObjectDirectory::kShardCount && freed + queued_here < budget; ++visited) {
    Shard& shard = directory_.shard((next_shard_ + visited) % ObjectDirectory::kShardCount);
    directory_.Scan(shard, [&](std::string_view key, ObjectMetadata& meta) {
      if (freed + queued_here >= budget ||
          !take.Takes(objects_.TierOf(shard, meta, now), meta.time_ms)) {
        return false;
      }
      // Listed before it goes: an object erased has left its group.
      std::vector<std::string> rest;
      if (meta.grouped) rest = groups_.OthersOf(key);
      bool erase = false;
      const uint64_t queued_before = queued_here;
      const uint64_t bytes = objects_.EvictOne(shard, key, meta, &queued_here, &erase);
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
      freed += objects_.EvictRestOfGroup(group_rest, take, now, evicted, &queued_here);
      group_rest.clear();
    }
  }
  next_shard_ = (next_shard_ + visited) % ObjectDirectory::kShardCount;
  *queued += queued_here;
  return freed;
}

void EvictionRounds::QueueEarlyOffloads(int64_t now) {
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
  absl::MutexLock evicting(&mu_);
  Sample(now);
  // All tiers in one plan, in their order: what it offloads is what the round will take.
  const bool soft_too = options_.allow_evict_soft_pinned_objects;
  EvictionThresholds take = planner_.Plan(target, objects_.ObjectCount(),
                                          ExposedTiers(soft_too) | ShelteredTiers(soft_too));
  uint64_t covered = 0;
  int64_t queued = 0;
  for (size_t visited = 0; visited < ObjectDirectory::kShardCount && covered < target; ++visited) {
    Shard& shard = directory_.shard((next_shard_ + visited) % ObjectDirectory::kShardCount);
    directory_.Scan(shard, [&](std::string_view key, ObjectMetadata& meta) {
      if (covered >= target || !take.Takes(objects_.TierOf(shard, meta, now), meta.time_ms)) {
        return false;
      }
      // Those on disk already, or whose daemon has no SSD, need nothing now.
      covered += meta.size * meta.memory_replicas();
      if (meta.disk_replicas() == 0 && objects_.QueueEarlyOffload(shard, key, meta)) ++queued;
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
