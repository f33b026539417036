// Promotion on hit of MasterService (--promotion_on_hit, docs/ssd.md): the daemon that
// served a read from disk re-creates a memory replica. PromoteStart reserves it beside the
// object (Shard::promotions, as a drain's move), the daemon writes the bytes it read,
// PromoteEnd publishes the replica into the object's list. Any change of the object
// meanwhile (a removal, an eviction, an upsert's end) orphans the promotion, so an end
// either adds the very value it copied or fails cleanly; an abandoned one is freed like an
// abandoned put (DropUnfinished).
#include "common/base/logging.h"
#include "master/service/master_service.h"

namespace mooncake {

namespace {

rpc::PutStartResult PromoteError(ErrorCode code) {
  rpc::PutStartResult r;
  r.code = ToInt(code);
  return r;
}

}  // namespace

void MasterService::DropPendingPromotion(Shard& shard, std::string_view key) {
  if (shard.promotions.empty()) return;
  auto it = shard.promotions.find(std::string(key));
  if (it == shard.promotions.end() || it->second.orphaned) return;
  it->second.orphaned = true;
  tenants_.Add(key, 0, -MemoryBytes(it->second.size, it->second.to));
}

rpc::PutStartResult MasterService::PromoteStart(int64_t writer, const std::string& key,
                                               int64_t disk_replica_id) {
  StateGate::Shared gate(gate_);
  if (!ValidKey(key)) return PromoteError(ErrorCode::INVALID_PARAMS);
  std::string name;
  if (!daemons_.Known(writer) || !daemons_.NameOf(writer, &name)) {
    return PromoteError(ErrorCode::CLIENT_NOT_FOUND);
  }
  if (log_.Refusing()) return PromoteError(ErrorCode::PERSISTENT_FAIL);
  // Open: a memory replica is there or on its way (a put, an upsert, another promotion).
  auto open = [&](LockedKey& locked) {
    const ObjectMetadata& meta = *locked.object;
    return !meta.complete || meta.memory_replicas() > 0 ||
           locked.shard.upserts.count(key) != 0 || locked.shard.promotions.count(key) != 0;
  };
  // The value the reader read: it still has the disk replica the reader was listed.
  auto same_value = [&](const ObjectMetadata& meta) {
    for (size_t i = 0; i < meta.replicas.size(); ++i) {
      const Replica& r = meta.replicas[i];
      if (r.kind == ReplicaKind::kLocalDisk && r.id() == disk_replica_id) return true;
    }
    return false;
  };
  uint64_t size = 0;
  {
    LockedKey locked(objects_, key);
    if (locked.object == nullptr) return PromoteError(ErrorCode::OBJECT_NOT_FOUND);
    if (open(locked)) return PromoteError(ErrorCode::OBJECT_ALREADY_EXISTS);
    if (!same_value(*locked.object)) return PromoteError(ErrorCode::OBJECT_NOT_FOUND);
    size = locked.object->size;
  }
  // As a put's: without the shard lock (it may evict), charged to the key's tenant.
  rpc::ReplicateConfig config;
  config.replica_num = 1;
  config.preferred_segments = {name};
  ReplicaList reserved;
  ErrorCode rc = ReserveCharged(key, size, config, /*writer=*/0, &reserved);
  if (rc != ErrorCode::OK) return PromoteError(rc);
  LockedKey locked(objects_, key);
  ErrorCode lost = locked.object == nullptr || !same_value(*locked.object)
                       ? ErrorCode::OBJECT_NOT_FOUND
                   : locked.object->size != size || open(locked)
                       ? ErrorCode::OBJECT_ALREADY_EXISTS
                       : ErrorCode::OK;
  if (lost != ErrorCode::OK) {  // the object changed while the space was reserved
    FreeReplicas(reserved);
    tenants_.Add(key, 0, -MemoryBytes(size, reserved));
    return PromoteError(lost);
  }
  PendingPromotion& promotion = locked.shard.promotions[key];
  promotion.writer = writer;
  promotion.start_ms = Now();
  promotion.size = size;
  promotion.to.push_back(reserved[0]);
  rpc::PutStartResult result;
  result.code = ToInt(ErrorCode::OK);
  result.master_epoch = epoch_;
  DescribeReplicas(promotion.to, size, /*include_processing=*/true, &result.replicas);
  return result;
}

ErrorCode MasterService::PromoteEnd(int64_t writer, const std::string& key, bool ok) {
  StateGate::Shared gate(gate_);
  if (!ValidKey(key)) return ErrorCode::INVALID_PARAMS;
  LockedKey locked(objects_, key);
  Shard& shard = locked.shard;
  auto it = shard.promotions.find(key);
  if (it == shard.promotions.end()) return ErrorCode::OBJECT_NOT_FOUND;
  PendingPromotion& promotion = it->second;
  if (promotion.writer != writer) return ErrorCode::ILLEGAL_CLIENT;
  ObjectMetadata* meta = locked.object;
  if (promotion.orphaned || !ok || meta == nullptr) {
    // Its writer is done with the range: freed at once. An orphan's charge went with it.
    FreeReplicas(promotion.to);
    if (!promotion.orphaned) tenants_.Add(key, 0, -MemoryBytes(promotion.size, promotion.to));
    ErrorCode rc = promotion.orphaned || meta == nullptr ? ErrorCode::OBJECT_NOT_FOUND
                                                         : ErrorCode::OK;
    shard.promotions.erase(it);
    return rc;
  }
  disk_tier_.Count(*meta, -1);
  Replica published = promotion.to[0];
  published.status = ReplicaStatus::kComplete;
  meta->replicas.push_back(published);
  disk_tier_.Count(*meta, 1);
  shard.promotions.erase(it);
  LogPublish(key, *meta);
  disk_tier_.counters().promotions.fetch_add(1);
  return ErrorCode::OK;
}

}  // namespace mooncake
