// The SSD tier of MasterService (docs/ssd.md, "master"): the calls of offload tasks (their
// queues and states: master/ssd_tier/disk_tier.h), the reconciliation of a daemon's SSD, dropped
// disk replicas. Promotion is in master_service_promote.cc, eviction's offloads in
// master_service_evict.cc.
//
// A daemon with an SSD mounts one LOCAL_DISK segment (master/directory/segment.h), which takes no
// allocation and counts for no memory; its replicas (Replica kind kLocalDisk) are listed
// after the memory ones. A daemon's LOCAL_DISK segment outlives the daemon's process:
// replaced at its endpoint or declared dead, the daemon has it detached (not dropped) for
// its grace period, for the restarted process to take back (SegmentRegistry::Mount) and
// reconcile (RegisterDiskReplicas). Promotion (PromoteStart/End) reserves a memory replica
// beside an object that has none, as a drain's move does.
#include <algorithm>

#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "master/service/master_service.h"

namespace mooncake {

namespace {

// A key as logs show it: its user part, at most 64 bytes.
std::string Shown(std::string_view key) {
  std::string_view user = tenant_key::UserKeyOf(key);
  return std::string(user.substr(0, std::min<size_t>(user.size(), 64)));
}

}  // namespace

// ---- the calls -------------------------------------------------------------------------

ErrorCode MasterService::FindOwnDiskSegment(int64_t daemon_id, int64_t segment_id,
                                            std::shared_ptr<Segment>* out) const {
  if (!daemons_.Known(daemon_id)) return ErrorCode::CLIENT_NOT_FOUND;
  uint32_t slot = 0;
  if (!segments_.SlotOf(segment_id, &slot)) return ErrorCode::SEGMENT_NOT_FOUND;
  std::shared_ptr<Segment> segment = segments_.Get(slot);
  if (!segment || !segment->disk()) return ErrorCode::SEGMENT_NOT_FOUND;
  if (segment->info().daemon_id != daemon_id) return ErrorCode::ILLEGAL_CLIENT;
  if (!segment->attached()) return ErrorCode::SEGMENT_NOT_FOUND;
  *out = std::move(segment);
  return ErrorCode::OK;
}

rpc::OffloadTasksResult MasterService::FetchOffloads(int64_t daemon_id, int32_t max_tasks) {
  StateGate::Shared gate(gate_);
  rpc::OffloadTasksResult result;
  result.master_epoch = epoch_;
  // One ms short of a read's lease: see ReturnOffloadLease.
  result.lease_ttl_ms = std::max<int64_t>(1, options_.default_kv_lease_ttl_ms - 1);
  if (max_tasks < 1 || max_tasks > kMaxOffloadBatch) {
    result.code = ToInt(ErrorCode::INVALID_PARAMS);
    return result;
  }
  if (!daemons_.Known(daemon_id)) {
    result.code = ToInt(ErrorCode::CLIENT_NOT_FOUND);
    return result;
  }
  std::shared_ptr<Segment> disk = segments_.DiskSegmentOf(daemon_id);
  if (!disk || !disk->attached() || disk->info().daemon_id != daemon_id) {
    result.code = ToInt(ErrorCode::SEGMENT_NOT_FOUND);
    return result;
  }
  result.code = ToInt(ErrorCode::OK);
  for (const std::string& key : disk_tier_.queues().Pop(daemon_id, static_cast<size_t>(max_tasks))) {
    LockedKey locked(objects_, key);
    auto it = locked.shard.offloads.find(key);
    if (it == locked.shard.offloads.end() || it->second.stage != OffloadState::Stage::kQueued ||
        it->second.daemon != daemon_id) {
      continue;  // stale: the object changed since, and its state with it
    }
    OffloadState& state = it->second;
    ObjectMetadata* meta = locked.object;
    size_t from = meta != nullptr ? ReplicaById(meta->replicas, state.replica_id) : kNoReplica;
    std::shared_ptr<Segment> memory =
        from != kNoReplica ? segments_.Get(meta->replicas[from].segment) : nullptr;
    if (!memory || !meta->complete || !memory->attached() ||
        memory->info().daemon_id != daemon_id) {
      disk_tier_.EndOffload(locked.shard, key, meta, /*failed=*/true);  // its memory went away
      continue;
    }
    const int64_t now = Now();
    state.stage = OffloadState::Stage::kFetched;
    state.prior_ms = meta->time_ms;
    state.granted_ms = std::max(meta->time_ms, now + result.lease_ttl_ms);
    state.due_ms = now + result.lease_ttl_ms + kOffloadReportMarginMs;
    meta->time_ms = state.granted_ms;  // a read lease: nothing frees the bytes meanwhile
    disk_tier_.counters().queued.fetch_sub(1);
    rpc::OffloadTask task;
    task.key = key;
    task.size = static_cast<int64_t>(meta->size);
    task.segment_id = memory->info().segment_id;
    task.offset = static_cast<int64_t>(meta->replicas[from].offset);
    task.checksum = meta->checksum_or_none();
    task.replica_id = state.replica_id;
    task.for_eviction = state.for_eviction;
    result.tasks.push_back(std::move(task));
  }
  return result;
}

std::vector<int32_t> MasterService::ReportOffloads(int64_t daemon_id, int64_t disk_segment_id,
                                                   const std::vector<std::string>& keys,
                                                   const std::vector<int64_t>& replica_ids,
                                                   const std::vector<int32_t>& codes) {
  if (replica_ids.size() != keys.size() || codes.size() != keys.size()) {
    return std::vector<int32_t>(keys.size(), ToInt(ErrorCode::INVALID_PARAMS));
  }
  bool freed = false;
  auto report = [&](size_t k, LockedKey& locked, const Segment& disk) {
    const std::string& key = locked.key;
    Shard& shard = locked.shard;
    auto it = shard.offloads.find(key);
    bool ours = it != shard.offloads.end() &&
                it->second.stage == OffloadState::Stage::kFetched &&
                it->second.daemon == daemon_id && it->second.replica_id == replica_ids[k];
    ObjectMetadata* meta = locked.object;
    if (codes[k] != 0) {
      // Failed: the object keeps its memory replica, and is left alone for a while.
      MC_LOG_WARN("offload of '%s' to daemon %lld failed (%d)", Shown(key).c_str(),
                  static_cast<long long>(daemon_id), codes[k]);
      if (ours) disk_tier_.EndOffload(shard, key, meta, /*failed=*/true);
      return ErrorCode::OK;
    }
    // Every change of the object ended its state, so an open one vouches that the bytes
    // copied under its lease are the object's value.
    if (!ours || meta == nullptr || !meta->complete ||
        ReplicaById(meta->replicas, replica_ids[k]) == kNoReplica) {
      if (ours) disk_tier_.EndOffload(shard, key, meta, /*failed=*/false);  // its replica moved (a drain)
      return ErrorCode::OBJECT_NOT_FOUND;
    }
    const bool for_eviction = it->second.for_eviction;
    disk_tier_.EndOffload(shard, key, meta, /*failed=*/false);
    disk_tier_.Count(*meta, -1);
    size_t had = DiskReplicaIn(meta->replicas, disk.slot());
    if (had == kNoReplica) {
      meta->replicas.push_back(disk_tier_.NewDiskReplica(disk));
    } else {
      meta->replicas[had].round = disk.round();  // just written: vouched for
    }
    ReplicaList memory;
    if (for_eviction) {
      // The eviction it waited for: the object lives on disk only from now on.
      for (size_t i = meta->replicas.size(); i-- > 0;) {
        if (!meta->replicas[i].memory()) continue;
        memory.push_back(meta->replicas[i]);
        meta->replicas.erase(i);
      }
      tenants_.Add(key, 0, -MemoryBytes(meta->size, memory));
      DropPendingMove(shard, key);  // it was moving a memory replica
    }
    disk_tier_.Count(*meta, 1);
    uint64_t seq = LogPublish(key, *meta);
    if (!memory.empty()) {
      // As any eviction's: reused once no lease covers it and the record is on disk.
      int64_t now = Now();
      if (meta->leased(now) || seq > 0) {
        DeferFree(memory, meta->leased(now) ? meta->time_ms : 0, seq);
      } else {
        FreeReplicas(memory);
      }
      freed = true;
    }
    disk_tier_.counters().done.fetch_add(1);
    return ErrorCode::OK;
  };
  return SettleOwnKeys(&MasterService::FindOwnDiskSegment, daemon_id, disk_segment_id, keys,
                       report, [&] {
                         if (freed) ReclaimEvicted();  // a put may be waiting for the room
                       });
}

std::vector<int32_t> MasterService::RegisterDiskReplicas(int64_t daemon_id,
                                                        int64_t disk_segment_id,
                                                        const std::vector<rpc::DiskObject>& objects,
                                                        int64_t round) {
  std::vector<std::string> keys;
  keys.reserve(objects.size());
  for (const rpc::DiskObject& object : objects) keys.push_back(object.key);
  int64_t kept = 0, adopted = 0, refused = 0, replaced = 0;
  // Asked once per batch (the daemon sends a round's batches one after another); a round
  // begun meanwhile only makes the end of this one answer -1010.
  bool in_round = false;
  bool asked = false;
  auto reconcile = [&](size_t k, LockedKey& locked, const Segment& disk) {
    if (!asked) {
      in_round = disk.InRound(round);
      asked = true;
    }
    const rpc::DiskObject& object = objects[k];
    if (object.size <= 0 || static_cast<uint64_t>(object.size) > MOONCAKE_STORE_MAX_VALUE_SIZE ||
        object.checksum > int64_t{0xFFFFFFFF}) {
      return ErrorCode::INVALID_PARAMS;
    }
    ObjectMetadata* meta = locked.object;
    const int64_t checksum = object.checksum < 0 ? kNoChecksum : object.checksum;
    if (meta == nullptr) {
      if (!disk.adopts()) {  // known to this master: removed while the daemon was away
        ++refused;
        return ErrorCode::OBJECT_NOT_FOUND;
      }
      if (log_.Refusing()) return ErrorCode::PERSISTENT_FAIL;
      ObjectMetadata adopt;
      adopt.size = static_cast<uint64_t>(object.size);
      adopt.time_ms = Now();
      adopt.writer = daemon_id;
      adopt.complete = true;
      adopt.set_checksum(checksum);
      adopt.quota_slot = tenants_.QuotaSlot(object.key);
      adopt.replicas.push_back(disk_tier_.NewDiskReplica(disk));
      if (!in_round) adopt.replicas[0].round = 0;  // outside the round: vouched for in none
      meta = locked.shard.objects.Insert(object.key, locked.hash, std::move(adopt));
      object_count_.fetch_add(1);
      tenants_.Add(object.key, 1, 0);  // a disk replica takes no memory
      disk_tier_.Count(*meta, 1);
    } else {
      const bool same_value = meta->complete &&
                              meta->size == static_cast<uint64_t>(object.size) &&
                              meta->checksum_or_none() == checksum;
      size_t in = DiskReplicaIn(meta->replicas, disk.slot());
      if (in != kNoReplica && same_value) {
        // Vouched for: the end of the round keeps it. A stamp is runtime state (not
        // logged), so nothing else changes.
        if (in_round) meta->replicas[in].round = disk.round();
        ++kept;
        return ErrorCode::OK;
      }
      // A known value gains the replica only when the checksums prove it the same bytes
      // (the disk figure was lost: a master restarted without its state, or a log tail).
      const bool gains = in == kNoReplica && same_value && checksum >= 0 && disk.adopts() &&
                         !log_.Refusing();
      if (!gains) {
        // The master's record of it there names another value: it goes, as a drop would.
        if (in != kNoReplica) {
          DropDiskReplica(locked, *meta, in);
          ++replaced;
        }
        ++refused;
        return ErrorCode::OBJECT_NOT_FOUND;
      }
      disk_tier_.Count(*meta, -1);
      Replica added = disk_tier_.NewDiskReplica(disk);
      if (!in_round) added.round = 0;
      meta->replicas.push_back(added);
      disk_tier_.Count(*meta, 1);
    }
    LogPublish(object.key, *meta);
    disk_tier_.counters().adopted.fetch_add(1);
    ++adopted;
    return ErrorCode::OK;
  };
  return SettleOwnKeys(&MasterService::FindOwnDiskSegment, daemon_id, disk_segment_id, keys,
                       reconcile, [&] {
                         MC_LOG_INFO("daemon %lld re-registered %zu disk replicas of segment "
                                     "%lld: %lld kept, %lld adopted, %lld to drop",
                                     static_cast<long long>(daemon_id), objects.size(),
                                     static_cast<long long>(disk_segment_id),
                                     static_cast<long long>(kept),
                                     static_cast<long long>(adopted),
                                     static_cast<long long>(refused));
                         drops_.Record(DropReason::kDiskReconcile, replaced,
                                       "the daemon's SSD holds another value under the key");
                       });
}

ErrorCode MasterService::BeginDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id,
                                                 int64_t round) {
  StateGate::Shared gate(gate_);
  if (round == 0) return ErrorCode::INVALID_PARAMS;
  std::shared_ptr<Segment> disk;
  ErrorCode rc = FindOwnDiskSegment(daemon_id, disk_segment_id, &disk);
  if (rc != ErrorCode::OK) return rc;
  if (disk->BeginRound(round, segments_.NextRound())) {
    MC_LOG_INFO("daemon %lld reconciles LOCAL_DISK segment %lld (%s)",
                static_cast<long long>(daemon_id), static_cast<long long>(disk_segment_id),
                disk->reconciled() ? "its replicas stay listed meanwhile"
                                   : "its replicas not re-registered yet are not listed");
  }
  return ErrorCode::OK;
}

ErrorCode MasterService::EndDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id,
                                               int64_t round) {
  if (round == 0) return ErrorCode::INVALID_PARAMS;
  std::shared_ptr<Segment> disk;
  uint32_t ended = 0;
  {
    StateGate::Shared gate(gate_);
    ErrorCode rc = FindOwnDiskSegment(daemon_id, disk_segment_id, &disk);
    if (rc != ErrorCode::OK) return rc;
    if (log_.Refusing()) return ErrorCode::PERSISTENT_FAIL;  // drops must be logged
    bool current = false;
    if (!disk->EndRound(round, &current, &ended)) {
      return current ? ErrorCode::OK : ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
    }
  }
  // A walk over every object, the gate taken per slice (ScanShard) so that a snapshot
  // never waits for all of it. The segment may be detached or dropped meanwhile: its
  // replicas are then not listed, or dropped with it, whatever this walk does.
  const uint32_t slot = disk->slot();
  int64_t dropped = 0, removed = 0;
  for (size_t s = 0; s < kShardCount; ++s) {
    // A replica created meanwhile carries the round too: only the ones it did not vouch
    // for go, and a slice visited twice finds nothing more. A round begun since (a
    // re-attach: the daemon starts over) stops the drops: what is created in it carries
    // its number, not this one's.
    objects_.Scan(objects_.shard(s), [&](std::string_view key, ObjectMetadata& meta) {
      size_t in = DiskReplicaIn(meta.replicas, slot);
      if (in == kNoReplica || meta.replicas[in].round == ended || !meta.complete ||
          disk->round() != ended) {
        return false;
      }
      ++dropped;
      disk_tier_.Count(meta, -1);
      meta.replicas.erase(in);
      disk_tier_.Count(meta, 1);
      if (!meta.replicas.empty()) {
        LogPublish(key, meta);
        return false;
      }
      ++removed;
      RemoveLogged(objects_.shard(s), key, meta);  // it lived on that disk only
      return true;
    });
  }
  disk->MarkReconciled(round);
  MC_LOG_INFO("daemon %lld reconciled LOCAL_DISK segment %lld: %lld disk replicas it no "
              "longer holds dropped (%lld objects with no replica left removed)",
              static_cast<long long>(daemon_id), static_cast<long long>(disk_segment_id),
              static_cast<long long>(dropped), static_cast<long long>(removed));
  drops_.Record(DropReason::kDiskReconcile, dropped,
                "disk replicas the daemon's SSD no longer holds (reconciliation)");
  return ErrorCode::OK;
}

std::vector<int32_t> MasterService::DropDiskReplicas(int64_t daemon_id, int64_t disk_segment_id,
                                                     const std::vector<std::string>& keys) {
  auto drop = [this](size_t, LockedKey& locked, const Segment& disk) {
    ObjectMetadata* meta = locked.object;
    size_t in = meta != nullptr ? DiskReplicaIn(meta->replicas, disk.slot()) : kNoReplica;
    if (in == kNoReplica) return ErrorCode::OBJECT_NOT_FOUND;
    disk_tier_.counters().dropped.fetch_add(1);
    DropDiskReplica(locked, *meta, in);
    return ErrorCode::OK;
  };
  return SettleOwnKeys(&MasterService::FindOwnDiskSegment, daemon_id, disk_segment_id, keys,
                       drop);
}

void MasterService::DropDiskReplica(LockedKey& locked, ObjectMetadata& meta, size_t in) {
  disk_tier_.Count(meta, -1);
  meta.replicas.erase(in);
  disk_tier_.Count(meta, 1);
  if (meta.replicas.empty()) {
    RemoveLogged(locked.shard, locked.key, meta);  // it lived on that disk only
    locked.Erase();
  } else {
    LogPublish(locked.key, meta);
  }
}

}  // namespace mooncake
