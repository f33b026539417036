// Clearing replicas (Mooncake's BatchReplicaClear): the rules are in master_service.h.
//
// A clear is a removal that may keep part of the object. Clearing every replica is a
// Remove without force (logged as [2, key]); clearing those on one segment name keeps
// the object with what is left and logs it as its new state ([1, object], as a drain's
// commit or an eviction to disk does), or removes it when nothing is left. Either way the
// freed ranges are reused only once the record is on disk, so a restored master or a
// standby never finds a replica pointing at bytes that became another object's. The
// records reach the disk with the log's next flush (no fsync on the caller's thread), and
// the upkeep frees the ranges after it.
#include "common/logging.h"
#include "common/tenant_key.h"
#include "master/master_service.h"

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
  CountDisk(*meta, -1);
  for (size_t k = which.size(); k-- > 0;) {  // from the back: erase moves the last one in
    cleared.push_back(meta->replicas[which[k]]);
    meta->replicas.erase(which[k]);
  }
  CountDisk(*meta, 1);
  tenants_.Add(key, 0, -MemoryBytes(meta->size, cleared));
  // A move or an offload may be copying one of the cleared replicas: both end here.
  DropPendingMove(locked.shard, key);
  EndOffload(locked.shard, key, meta, /*failed=*/false);
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

}  // namespace mooncake
