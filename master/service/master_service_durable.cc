// Durability of MasterService: appending changes to the operation log, exporting the state
// for a snapshot, and loading it back at a restore.
//
// Durability (docs/durability.md): with an operation log attached, every change a client
// may be told about is appended under the shard lock that made it, so the log's order is
// the order changes happened in (master/log/state_records.h spells the records). Space freed
// by a logged change (a remove, an eviction, the old value of an upsert) is reused only
// once that record is on disk: were it reused earlier, a crash could restore the old object
// pointing at bytes that have since become another's. A restored master starts from a
// snapshot plus the log (master/snapshot/state_restore.h) with every segment detached until its
// daemon re-attaches (master/directory/segment.h).
#include <algorithm>

#include "common/base/logging.h"
#include "master/service/master_service.h"
#include "master/log/oplog.h"
#include "master/log/sync_set.h"

namespace mooncake {

// ---- the log ---------------------------------------------------------------------------

int64_t MasterService::SoftPinUntilUnixMs(const ObjectMetadata& meta) const {
  int64_t now = Now();
  if (!meta.soft_pinned(now)) return 0;
  return std::max<int64_t>(1, options_.unix_ms() + (meta.soft_pin_ms - now));
}

ErrorCode MasterService::Sync() { return log_.Sync(); }

// ---- snapshot export -------------------------------------------------------------------

std::vector<SegmentRecord> MasterService::ExportSegments() const {
  StateGate::Shared gate(gate_);
  std::vector<SegmentRecord> out;
  for (const std::shared_ptr<Segment>& s : segments_.All()) out.push_back(ChangeLog::ToRecord(s->info()));
  return out;
}

bool MasterService::ExportObjects(
    const std::function<bool(size_t, const std::string&, uint32_t)>& emit) {
  StateGate::Shared gate(gate_);
  std::string bytes;
  ReplicaRecord replicas[kMaxReplicaNum];
  for (size_t s = 0; s < kShardCount; ++s) {
    Shard& shard = objects_.shard(s);
    absl::MutexLock lock(&shard.mu);
    uint32_t count = 0;
    shard.objects.ForEach([&](std::string_view, ObjectMetadata& meta) {
      count += meta.complete;
      return false;
    });
    if (count == 0) continue;
    bytes.clear();
    AppendArrayHeader(&bytes, count);
    shard.objects.ForEach([&](std::string_view key, ObjectMetadata& meta) {
      if (!meta.complete) return false;
      size_t n = log_.Describe(meta.replicas, replicas);
      AppendObject(&bytes, key, meta.size, meta.checksum_or_none(), meta.hard_pin, replicas, n,
                   SoftPinUntilUnixMs(meta), GroupForLog(key, meta));
      return false;
    });
    if (!emit(s, bytes, count)) return false;
  }
  return true;
}

// ---- restore ---------------------------------------------------------------------------

void MasterService::RestoreSegment(const SegmentRecord& segment) {
  segments_.Restore(ChangeLog::ToInfo(segment));
}

void MasterService::RestoreObject(ObjectRecord&& object) {
  ObjectMetadata meta;
  bool valid = ValidKey(object.key) && object.size > 0 &&
               object.size <= MOONCAKE_STORE_MAX_VALUE_SIZE &&
               object.checksum <= int64_t{0xFFFFFFFF} &&
               object.replicas.size() <= kMaxReplicaNum;
  if (valid) {
    meta.size = object.size;
    meta.time_ms = Now();  // no lease, and eviction age counts from the restore
    meta.complete = true;
    meta.hard_pin = object.hard_pin;
    meta.set_checksum(object.checksum);
    meta.quota_slot = tenants_.QuotaSlot(object.key);  // of this master's --tenant_quota
    // The deadline stays where it was (a past one: no pin), on this master's clock.
    int64_t left = object.soft_pin_until_unix_ms - options_.unix_ms();
    meta.soft_pin_ms = object.soft_pin_until_unix_ms > 0 && left > 0 ? meta.time_ms + left : 0;
    for (const ReplicaRecord& r : object.replicas) {
      Replica replica;
      if (r.kind > static_cast<uint8_t>(ReplicaKind::kLocalDisk) ||
          !segments_.SlotOf(r.segment_id, &replica.segment)) {
        ++restore_counts_.dropped_replicas;
        continue;
      }
      replica.offset = r.offset;
      replica.alloc_node = OffsetAllocator::kNoNode;  // FinishRestore reserves its range
      replica.kind = static_cast<ReplicaKind>(r.kind);
      replica.status = ReplicaStatus::kComplete;
      meta.replicas.push_back(replica);
    }
  }
  if (meta.replicas.empty()) {
    // Nothing left to read it from: whatever the key held before is gone too.
    ++restore_counts_.dropped_objects;
    if (ValidKey(object.key)) EraseRestored(object.key);
    return;
  }
  LockedKey locked(objects_, object.key);
  if (locked.object != nullptr) {
    LeaveGroup(object.key, *locked.object);  // the record says which group it is in now
    *locked.object = std::move(meta);
  } else {
    locked.object = locked.shard.objects.Insert(object.key, locked.hash, std::move(meta));
    object_count_.fetch_add(1);
  }
  // A group id this version would refuse at a put is no group.
  if (GroupTable::ValidGroup(object.group)) JoinGroup(object.key, *locked.object, &object.group);
}

void MasterService::EraseRestored(const std::string& key) {
  LockedKey locked(objects_, key);
  if (locked.object == nullptr) return;
  LeaveGroup(key, *locked.object);
  locked.Erase();
  object_count_.fetch_sub(1);
}

bool MasterService::ApplyLogRecord(std::string_view payload) {
  LogRecord record;
  if (!DecodeLogRecord(payload, &record)) return false;
  switch (record.op) {
    case LogOp::kPublish:
      RestoreObject(std::move(record.object));
      break;
    case LogOp::kRemove:
      if (ValidKey(record.key)) EraseRestored(record.key);
      break;
    case LogOp::kMount:
      segments_.Restore(ChangeLog::ToInfo(record.segment));
      break;
    case LogOp::kUnmount: {
      uint32_t slot;
      if (segments_.SlotOf(record.segment_id, &slot)) {
        DropSegmentReplicas(slot);
        segments_.Erase(slot);
      }
      break;
    }
  }
  return true;
}

MasterService::RestoreCounts MasterService::FinishRestore() {
  // A segment's allocator is rebuilt from its replicas' ranges, in address order (which
  // makes each reservation O(1)). One that overlaps a range already taken, or lies outside
  // its segment, cannot be trusted: its replica goes.
  struct Range {
    uint32_t slot;
    uint64_t offset;
    uint64_t size;
    Replica* replica;
  };
  std::vector<Range> ranges;
  ranges.reserve(static_cast<size_t>(object_count_.load()));
  for (size_t s = 0; s < kShardCount; ++s) {
    absl::MutexLock lock(&objects_.shard(s).mu);
    objects_.shard(s).objects.ForEach([&](std::string_view, ObjectMetadata& meta) {
      for (size_t i = 0; i < meta.replicas.size(); ++i) {
        Replica& r = meta.replicas[i];
        if (r.memory()) {
          ranges.push_back({r.segment, r.offset, meta.size, &r});
          continue;
        }
        // A disk replica holds no range; one in a memory segment cannot be valid.
        std::shared_ptr<Segment> in = segments_.Get(r.segment);
        r.alloc_node = disk_tier_.NextDiskNode();
        if (!in || !in->disk()) r.status = ReplicaStatus::kFailed;
      }
      return false;
    });
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.slot != b.slot ? a.slot < b.slot : a.offset < b.offset;
  });
  std::shared_ptr<Segment> segment;
  for (const Range& range : ranges) {
    if (!segment || segment->slot() != range.slot) segment = segments_.Get(range.slot);
    uint32_t node = OffsetAllocator::kNoNode;
    // (A LOCAL_DISK segment's empty allocator refuses every range: a memory replica there
    // cannot be valid either.)
    if (segment && segment->Reserve(range.offset, range.size, &node)) {
      range.replica->alloc_node = node;
      // Freed and given to another object after the restored point, perhaps: its daemon
      // checks it (master_service_verify.cc).
      range.replica->unverified = true;
    } else {
      range.replica->status = ReplicaStatus::kFailed;
    }
  }
  // Each tenant's figures are counted again from what is left (master/directory/tenant_usage.h).
  tenants_.ClearUsage();
  disk_tier_.counters().objects = disk_tier_.counters().bytes = disk_tier_.counters().disk_only = 0;
  std::unordered_map<uint32_t, int64_t> unverified;  // by slot
  for (size_t s = 0; s < kShardCount; ++s) {
    absl::MutexLock lock(&objects_.shard(s).mu);
    objects_.shard(s).objects.ForEach([&](std::string_view key, ObjectMetadata& meta) {
      for (size_t i = meta.replicas.size(); i-- > 0;) {
        if (meta.replicas[i].status != ReplicaStatus::kFailed) continue;
        meta.replicas.erase(i);
        ++restore_counts_.dropped_replicas;
      }
      if (!meta.replicas.empty()) {
        for (size_t i = 0; i < meta.replicas.size(); ++i) {
          unverified[meta.replicas[i].segment] += meta.replicas[i].unverified;
        }
        tenants_.Add(key, 1, MemoryBytes(meta.size, meta.replicas));
        disk_tier_.Count(meta, 1);
        return false;
      }
      ++restore_counts_.dropped_objects;
      object_count_.fetch_sub(1);
      LeaveGroup(key, meta);
      return true;
    });
  }
  std::vector<std::shared_ptr<Segment>> all = segments_.All();
  // Leases are not logged: the previous master's grants are unknown, and the caches they
  // filled outlive them by no more than one lease (DescribeHolders).
  restore_fence_ms_ = Now() + options_.default_kv_lease_ttl_ms;
  int64_t deadline = Now() + options_.reattach_grace_ms;
  for (const std::shared_ptr<Segment>& s : all) {
    auto n = unverified.find(s->slot());
    s->SetUnverified(n == unverified.end() ? 0 : n->second);
    s->set_detach_deadline_ms(deadline);  // restored detached: dropped then if not back
    daemons_.ExpectBack(s->info().daemon_id, s->info().name, deadline);
  }
  restore_counts_.objects = object_count_.load();
  restore_counts_.segments = static_cast<int64_t>(all.size());
  return restore_counts_;
}

MasterService::RestoreCounts MasterService::TakeOver() {
  StateGate::Exclusive gate(gate_);  // waits out a standby's own snapshot forking
  // Fresh allocators: the records a standby applied name ranges, not allocator nodes, and
  // FinishRestore reserves every range anew.
  for (const std::shared_ptr<Segment>& s : segments_.All()) segments_.Restore(s->info());
  restore_counts_ = RestoreCounts();
  RestoreCounts counts = FinishRestore();
  epoch_ = NewEpoch();
  return counts;
}

void MasterService::ClearState() {
  objects_.Clear();
  segments_.Clear();
  tasks_.Clear();
  deferred_.Clear();
  groups_.Clear();
  object_count_ = 0;
  processing_count_ = 0;
  eviction_.ClearPendingBytes();
  disk_tier_.Clear();
  tenants_.ClearUsage();
  restore_counts_ = RestoreCounts();
  parked_.Clear();
}

}  // namespace mooncake
