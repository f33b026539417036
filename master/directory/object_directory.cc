#include "master/directory/object_directory.h"

#include <algorithm>

namespace mooncake {

bool PendingMove::Into(uint32_t slot) const {
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i].segment == slot) return true;
  }
  return false;
}

ObjectDirectory::ObjectDirectory(StateGate& gate, int64_t max_cache_holders)
    : gate_(gate), shards_(new Shard[kShardCount]) {
  // Each shard gets its share of the master-wide bound (keys hash evenly), and room for at
  // least one object's records.
  size_t per_shard = std::max<size_t>(CacheHolderTable::kMaxPerObject,
                                      static_cast<size_t>(max_cache_holders) / kShardCount);
  if (max_cache_holders == 0) per_shard = 0;
  for (size_t s = 0; s < kShardCount; ++s) shards_[s].holders.set_max_records(per_shard);
}

void ObjectDirectory::Scan(Shard& shard, const Visit& visit,
                           const std::function<void()>& between,
                           const std::function<void()>& restarted) {
  size_t cursor = 0;
  uint64_t layout = 0;
  for (bool done = false; !done;) {
    {
      StateGate::Shared gate(gate_);
      absl::MutexLock lock(&shard.mu);
      if (cursor > 0 && shard.objects.layout() != layout) {
        cursor = 0;
        if (restarted) restarted();
      }
      layout = shard.objects.layout();
      done = shard.objects.Walk(&cursor, kScanSlice, visit);
    }
    if (between) between();
  }
}

void ObjectDirectory::Clear() {
  for (size_t s = 0; s < kShardCount; ++s) {
    Shard& shard = shards_[s];
    absl::MutexLock lock(&shard.mu);
    shard.objects.ForEach([](std::string_view, ObjectMetadata&) { return true; });
    shard.upserts.clear();
    shard.moves.clear();
    shard.offloads.clear();
    shard.promotions.clear();
    shard.holders.Clear();
    shard.exist_leases.Clear();
  }
}

size_t ObjectDirectory::cache_holder_records() const {
  size_t n = 0;
  for (size_t s = 0; s < kShardCount; ++s) {
    absl::MutexLock lock(&shards_[s].mu);
    n += shards_[s].holders.records();
  }
  return n;
}

LockedKey::LockedKey(ObjectDirectory& directory, const std::string& key)
    : key(key), hash(ObjectTable::Hash(key)), shard(directory.ShardOf(hash)), lock_(&shard.mu) {
  object = shard.objects.Find(key, hash);
}

}  // namespace mooncake
