// Removal by pattern and the clearing of replicas (Mooncake's BatchReplicaClear); the
// rules of each call are in master_service.h.
//
// A clear is a removal that may keep part of the object. Clearing every replica is a
// Remove without force (logged as [2, key]); clearing those on one segment name keeps
// the object with what is left and logs it as its new state ([1, object], as a drain's
// commit or an eviction to disk does), or removes it when nothing is left. Either way the
// freed ranges are reused only once the record is on disk, so a restored master or a
// standby never finds a replica pointing at bytes that became another object's. The
// records reach the disk with the log's next flush (no fsync on the caller's thread), and
// the upkeep frees the ranges after it.
#include <algorithm>

#include <re2/re2.h>

#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "master/service/master_service.h"

namespace mooncake {

std::vector<int32_t> MasterService::BatchReplicaClear(const std::vector<std::string>& keys,
                                                      const std::string& segment_name,
                                                      CacheHolderSet* holders) {
  std::vector<int32_t> codes(keys.size(), ToInt(ErrorCode::INVALID_PARAMS));
  if (segment_name.size() > kMaxClearSegmentName) {
    MC_LOG_WARN("BatchReplicaClear refused: a segment name of %zu bytes (at most %zu)",
                segment_name.size(), kMaxClearSegmentName);
    return codes;
  }
  CacheHolderSet ignored;
  if (holders == nullptr) holders = &ignored;
  StateGate::Shared gate(gate_);
  for (size_t i = 0; i < keys.size(); ++i) {
    codes[i] = ToInt(ClearOne(keys[i], segment_name, static_cast<int32_t>(i), holders));
  }
  return codes;
}

ErrorCode MasterService::ClearOne(const std::string& key, const std::string& segment_name,
                                  int32_t key_index, CacheHolderSet* holders) {
  if (!ValidKey(key)) return ErrorCode::INVALID_PARAMS;
  LockedKey locked(objects_, key);
  ObjectMetadata* meta = locked.object;
  if (meta == nullptr) return ErrorCode::OBJECT_NOT_FOUND;
  if (!meta->complete) return ErrorCode::REPLICA_IS_NOT_READY;
  const int64_t now = Now();
  if (meta->leased(now)) return ErrorCode::OBJECT_HAS_LEASE;
  // A put just published is in use by its writer for one lease, as Mooncake's test of
  // clear expects (its master grants a put no lease, docs/mooncake-api.md, "leases").
  if (meta->unread && meta->time_ms + options_.default_kv_lease_ttl_ms > now) {
    return ErrorCode::OBJECT_HAS_LEASE;
  }
  if (meta->hard_pin) return ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;

  // The replicas to clear: all, or those in segments of that name.
  ReplicaList cleared;
  std::vector<size_t> which;
  for (size_t r = 0; r < meta->replicas.size(); ++r) {
    bool match = segment_name.empty();
    if (!match) {
      std::shared_ptr<Segment> segment = segments_.Get(meta->replicas[r].segment);
      match = segment && segment->info().name == segment_name;
    }
    if (match) which.push_back(r);
  }
  if (which.empty()) return ErrorCode::SEGMENT_NOT_FOUND;

  TakeHolders(locked.shard, *meta, now, key_index, holders);
  if (which.size() == meta->replicas.size()) {
    RemoveLogged(locked.shard, key, *meta);
    locked.Erase();
    return ErrorCode::OK;
  }
  disk_tier_.Count(*meta, -1);
  for (size_t k = which.size(); k-- > 0;) {  // from the back: erase moves the last one in
    cleared.push_back(meta->replicas[which[k]]);
    meta->replicas.erase(which[k]);
  }
  disk_tier_.Count(*meta, 1);
  tenants_.Add(key, 0, -MemoryBytes(meta->size, cleared));
  // A move or an offload may be copying one of the cleared replicas: both end here.
  DropPendingMove(locked.shard, key);
  disk_tier_.EndOffload(locked.shard, key, meta, /*failed=*/false);
  uint64_t seq = LogPublish(key, *meta);
  if (seq > 0) {
    DeferFree(cleared, 0, seq);
  } else {
    FreeReplicas(cleared);  // no log to wait for, and no lease runs
  }
  MC_LOG_DEBUG("BatchReplicaClear: '%.64s' lost %zu of its replicas on %s",
               std::string(tenant_key::UserKeyOf(key)).c_str(), which.size(),
               segment_name.c_str());
  return ErrorCode::OK;
}

// ---- removal by pattern ----------------------------------------------------------------

int64_t MasterService::RemoveByRegex(const std::string& pattern, bool force,
                                     CacheHolderSet* holders, const std::string& tenant) {
  if (!tenant_key::ValidTenantOrDefault(tenant)) {
    MC_LOG_WARN("RemoveByRegex refused: a malformed tenant id of %zu bytes", tenant.size());
    return ToInt(ErrorCode::INVALID_PARAMS);
  }
  std::string error;
  std::unique_ptr<RE2> re = CompileKeyPattern(pattern, &error);
  if (!re) {
    MC_LOG_WARN("RemoveByRegex refused: %s", error.c_str());
    return ToInt(ErrorCode::INVALID_PARAMS);
  }
  KeyMatch match = [&re](std::string_view key) { return RE2::PartialMatch(key, *re); };
  return RemoveMatching(force, tenant, &match, holders);
}

int64_t MasterService::RemoveAll(bool force, CacheHolderSet* holders, const std::string& tenant) {
  if (!tenant_key::ValidTenantOrDefault(tenant)) {
    MC_LOG_WARN("RemoveAll refused: a malformed tenant id of %zu bytes", tenant.size());
    return ToInt(ErrorCode::INVALID_PARAMS);
  }
  return RemoveMatching(force, tenant, nullptr, holders);
}

int64_t MasterService::RemoveMatching(bool force, const std::string& tenant, const KeyMatch* match,
                                      CacheHolderSet* holders) {
  CacheHolderSet ignored;
  if (holders == nullptr) holders = &ignored;
  auto theirs = [&tenant](std::string_view key) { return tenant_key::TenantOf(key) == tenant; };
  int64_t removed = 0;
  for (size_t s = 0; s < kShardCount; ++s) {
    Shard& shard = objects_.shard(s);
    if (match == nullptr) {
      objects_.Scan(shard, [&](std::string_view key, ObjectMetadata& meta) {
        if (!theirs(key) || !Removable(meta, force)) return false;
        TakeHolders(shard, meta, Now(), -1, holders);  // the writer forgets everything
        RemoveLogged(shard, key, meta);
        ++removed;
        return true;
      });
      continue;
    }
    // A slice's candidates are copied out under the lock; the pattern runs on them with no
    // lock held; the matches are removed under the lock again, if still removable.
    std::vector<std::string> keys;
    auto collect = [&](std::string_view key, ObjectMetadata& meta) {
      if (theirs(key) && Removable(meta, force)) keys.emplace_back(key);
      return false;
    };
    auto remove_matches = [&] {
      keys.erase(std::remove_if(keys.begin(), keys.end(),
                                [match](const std::string& key) {
                                  return !(*match)(tenant_key::UserKeyOf(key));
                                }),
                 keys.end());
      if (keys.empty()) return;
      StateGate::Shared gate(gate_);
      absl::MutexLock lock(&shard.mu);
      for (const std::string& key : keys) {
        uint64_t hash = ObjectTable::Hash(key);
        ObjectMetadata* meta = shard.objects.Find(key, hash);
        if (meta == nullptr || !Removable(*meta, force)) continue;  // changed meanwhile
        TakeHolders(shard, *meta, Now(), -1, holders);
        RemoveLogged(shard, key, *meta);
        shard.objects.Erase(key, hash);
        ++removed;
      }
      keys.clear();
    };
    objects_.Scan(shard, collect, remove_matches);
  }
  DiscardParkedMatching(tenant, match);
  return removed;
}

}  // namespace mooncake
