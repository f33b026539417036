#include "daemon/cluster/read_cache.h"

#include <algorithm>

namespace mooncake {

ReadCache::ReadCache(bool enabled, size_t max_entries, size_t max_bytes)
    : enabled_(enabled),
      shard_max_entries_(std::max<size_t>(1, max_entries / kShards)),
      shard_max_bytes_(std::max<size_t>(kEntryOverhead, max_bytes / kShards)),
      shards_(new Shard[kShards]),
      epochs_(new std::atomic<uint64_t>[kStripes]) {
  for (size_t i = 0; i < kStripes; ++i) epochs_[i].store(0, std::memory_order_relaxed);
}

ReadCache::Clock::time_point ReadCache::EntryDeadline(Clock::time_point asked_at,
                                                      int64_t lease_ttl_ms) {
  // 90% of the lease, in microseconds so that short test leases keep their precision.
  return asked_at + std::chrono::microseconds(std::max<int64_t>(0, lease_ttl_ms) * 900);
}

void ReadCache::BumpShardLocked(size_t shard) {
  for (size_t stripe = shard; stripe < kStripes; stripe += kShards) {
    epochs_[stripe].fetch_add(1, std::memory_order_release);
  }
}

ReadCache::Ticket ReadCache::Begin(const std::string& key) const {
  if (!enabled_) return 0;
  return epochs_[StripeOf(Hashed(key))].load(std::memory_order_acquire);
}

void ReadCache::Fill(const std::string& key, Ticket ticket, Entry entry) {
  if (!enabled_ || (!entry.where.local() && entry.where.remote == nullptr)) return;
  Clock::time_point now = Clock::now();
  if (entry.deadline <= now) return;
  KeyRef ref = Hashed(key);
  size_t stripe = StripeOf(ref);
  Shard& shard = ShardOf(stripe);
  std::lock_guard<std::mutex> lock(shard.mu);
  // An invalidation ran since the master was asked: its answer may predate a remove or
  // upsert this daemon already acknowledged.
  if (epochs_[stripe].load(std::memory_order_relaxed) != ticket) return;
  // One lookup per fill: room is made first (a fill of a key already cached may then have
  // swept a full shard a little early, which costs nothing but those entries).
  if (shard.map.size() >= shard_max_entries_ ||
      shard.bytes + key.size() + kEntryOverhead > shard_max_bytes_) {
    EvictLocked(shard, now);
  }
  auto [it, inserted] = shard.map.try_emplace(ref, std::move(entry));
  if (!inserted) {
    // Two reads raced: keep the later answer (a write through another daemon may have
    // moved the object in between), which is the one with the later deadline. (entry was
    // not moved from: try_emplace leaves its arguments alone when the key is there.)
    if (entry.deadline > it->second.deadline) it->second = std::move(entry);
    return;
  }
  shard.bytes += key.size() + kEntryOverhead;
}

bool ReadCache::Lookup(const std::string& key, Entry* out) {
  if (!enabled_) return false;
  KeyRef ref = Hashed(key);
  Shard& shard = ShardOf(StripeOf(ref));
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.map.find(ref);
  if (it == shard.map.end()) return false;
  if (it->second.deadline <= Clock::now()) {
    EraseLocked(shard, it);  // expired: the next read asks the master and renews
    return false;
  }
  *out = it->second;
  return true;
}

void ReadCache::Invalidate(const std::string& key) {
  if (!enabled_) return;
  KeyRef ref = Hashed(key);
  size_t stripe = StripeOf(ref);
  Shard& shard = ShardOf(stripe);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.map.find(ref);
  if (it != shard.map.end()) EraseLocked(shard, it);
  epochs_[stripe].fetch_add(1, std::memory_order_release);
}

void ReadCache::ClearForRemount() {
  generation_.fetch_add(1, std::memory_order_acq_rel);
  Clear();
}

void ReadCache::Clear() {
  if (!enabled_) return;
  for (size_t i = 0; i < kShards; ++i) {
    Shard& shard = shards_[i];
    Map dropped;  // freed outside the lock
    {
      std::lock_guard<std::mutex> lock(shard.mu);
      dropped.swap(shard.map);
      shard.bytes = 0;
      BumpShardLocked(i);
    }
  }
}

void ReadCache::DropSegment(int64_t segment_id) {
  if (!enabled_) return;
  for (size_t i = 0; i < kShards; ++i) {
    Shard& shard = shards_[i];
    std::lock_guard<std::mutex> lock(shard.mu);
    // An erase moves no other slot, so the iterator, advanced first, stays valid.
    for (auto it = shard.map.begin(); it != shard.map.end();) {
      auto here = it++;
      if (here->second.where.segment_id == segment_id) EraseLocked(shard, here);
    }
    BumpShardLocked(i);
  }
}

size_t ReadCache::size() const {
  size_t n = 0;
  for (size_t i = 0; i < kShards; ++i) {
    std::lock_guard<std::mutex> lock(shards_[i].mu);
    n += shards_[i].map.size();
  }
  return n;
}

void ReadCache::EraseLocked(Shard& shard, Map::iterator it) {
  shard.bytes -= it->first.key.size() + kEntryOverhead;
  shard.map.erase(it);
}

void ReadCache::EvictLocked(Shard& shard, Clock::time_point now) {
  // Expired entries first; they are useless anyway.
  for (auto it = shard.map.begin(); it != shard.map.end();) {
    auto here = it++;
    if (here->second.deadline <= now) EraseLocked(shard, here);
  }
  // Still full: drop entries in slot order, which is as good as random, down to 7/8 of
  // the share so that the next sweep is at least share/8 fills away (amortized O(1)). One
  // pass: begin() of a table emptied at its front would scan every emptied slot again.
  const size_t entry_target = shard_max_entries_ - shard_max_entries_ / 8;
  const size_t byte_target = shard_max_bytes_ - shard_max_bytes_ / 8;
  for (auto it = shard.map.begin();
       it != shard.map.end() && (shard.map.size() > entry_target || shard.bytes > byte_target);) {
    EraseLocked(shard, it++);
  }
}

}  // namespace mooncake
