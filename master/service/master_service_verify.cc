// Verification of memory replicas the master cannot vouch for, and objects parked when
// their segment was dropped (docs/durability.md, "Verification after restore" and "A
// daemon that returns late").
//
// After a restore (or a standby's takeover) every memory replica is restored unverified
// (Replica::unverified): its range may have been freed and given to another object after
// the restored point, and the master cannot tell. Its daemon, once it has mounted the
// segment again, pages through them (ListUnverified), computes the CRC-32C of each range
// in its own memory and reports (ReportVerified): a good one is verified, a bad one
// dropped, its object with it when it was the last (logged as any drop, counted as
// mooncake_master_objects_dropped_total{reason="restore_checksum"}). An object written
// without a checksum cannot be checked: it is kept, verified, and counted as
// restore_unverifiable -- the price of --checksum=false.
//
// The same two calls adopt parked objects (master/liveness/parked_segments.h): the walk lists them
// after the segment's restored replicas, and a good report re-creates the object with its
// replica there, unless its key was written or removed meanwhile.
#include <algorithm>

#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "master/service/master_service.h"

namespace mooncake {

namespace {

rpc::UnverifiedPage PageError(ErrorCode code) {
  rpc::UnverifiedPage page;
  page.code = ToInt(code);
  page.next_cursor = -1;
  return page;
}

}  // namespace

rpc::UnverifiedPage MasterService::ListUnverified(int64_t daemon_id, int64_t segment_id,
                                                  int64_t cursor, int32_t max_replicas) {
  if (cursor < 0 || max_replicas < 1 || max_replicas > kMaxUnverifiedPage) {
    return PageError(ErrorCode::INVALID_PARAMS);
  }
  StateGate::Shared gate(gate_);
  std::shared_ptr<Segment> segment;
  ErrorCode rc = FindOwnSegment(daemon_id, segment_id, &segment);
  if (rc != ErrorCode::OK) return PageError(rc);
  rpc::UnverifiedPage page;
  page.code = ToInt(ErrorCode::OK);
  const uint32_t slot = segment->slot();
  const size_t max = static_cast<size_t>(max_replicas);
  const int64_t shards = static_cast<int64_t>(kShardCount);
  if (cursor < shards && segment->unverified() > 0) {
    // Whole shards at a time, so a page may pass max by one shard's worth.
    int64_t s = cursor;
    for (; s < shards && page.replicas.size() < max; ++s) {
      absl::MutexLock lock(&objects_.shard(s).mu);
      objects_.shard(s).objects.ForEach([&](std::string_view key, ObjectMetadata& meta) {
        if (!meta.complete) return false;
        for (size_t i = 0; i < meta.replicas.size(); ++i) {
          const Replica& r = meta.replicas[i];
          if (r.segment != slot || !r.memory() || !r.unverified) continue;
          rpc::UnverifiedReplica u;
          u.key.assign(key.data(), key.size());
          u.offset = static_cast<int64_t>(r.offset);
          u.size = static_cast<int64_t>(meta.size);
          u.checksum = meta.checksum_or_none();
          page.replicas.push_back(std::move(u));
        }
        return false;
      });
    }
    // Every way out of the directory lowers the count (ForgetUnverified), yet a whole
    // walk that found none settles it: later re-mounts skip the walk.
    if (cursor == 0 && s == shards && page.replicas.empty()) segment->SetUnverified(0);
    if (s < shards) {
      page.next_cursor = s;
      return page;
    }
    cursor = shards;
  }
  cursor = std::max(cursor, shards);
  int64_t next = parked_.Page(segment_id, slot, cursor - shards, max - std::min(max, page.replicas.size()),
                              &page.replicas);
  page.next_cursor = next < 0 ? -1 : shards + next;
  return page;
}

std::vector<int32_t> MasterService::ReportVerified(
    int64_t daemon_id, int64_t segment_id, const std::vector<rpc::VerifiedReplica>& replicas) {
  std::vector<std::string> keys;
  keys.reserve(replicas.size());
  for (const rpc::VerifiedReplica& r : replicas) keys.push_back(r.key);
  int64_t good = 0, bad = 0, unverifiable = 0, adopted = 0, superseded = 0;
  std::vector<ParkedSegments::Range> to_free;
  auto settle = [&](size_t k, LockedKey& locked, const Segment& segment) {
    const rpc::VerifiedReplica& report = replicas[k];
    if (report.offset < 0) return ErrorCode::INVALID_PARAMS;
    const uint64_t offset = static_cast<uint64_t>(report.offset);
    ObjectMetadata* meta = locked.object;
    if (meta != nullptr && meta->complete) {
      for (size_t i = 0; i < meta->replicas.size(); ++i) {
        Replica& r = meta->replicas[i];
        if (r.segment != segment.slot() || !r.memory() || !r.unverified || r.offset != offset) {
          continue;
        }
        if (!meta->has_checksum || report.ok) {
          segments_.Get(r.segment)->AddUnverified(-1);
          r.unverified = false;
          ++(meta->has_checksum ? good : unverifiable);
          return ErrorCode::OK;
        }
        ++bad;
        DropUnverifiedReplica(locked, *meta, i);
        return ErrorCode::OK;
      }
    }
    ParkedSegments::Object parked;
    uint32_t node = 0;
    if (!parked_.Take(segment_id, segment.slot(), locked.key, offset, &parked, &node)) {
      return ErrorCode::OBJECT_NOT_FOUND;
    }
    const bool sound = report.ok || parked.checksum < 0;
    if (meta != nullptr || !sound || log_.Refusing()) {
      // Written again (or being written) since: the newer state stands. Or bad bytes.
      to_free.push_back({segment.slot(), node});
      ++(meta != nullptr ? superseded : bad);
      return ErrorCode::OK;
    }
    ObjectMetadata adopt;
    adopt.size = parked.size;
    adopt.time_ms = Now();
    adopt.writer = daemon_id;
    adopt.complete = true;
    adopt.unread = true;
    adopt.hard_pin = parked.hard_pin;
    adopt.set_checksum(parked.checksum);
    adopt.quota_slot = tenants_.QuotaSlot(locked.key);
    Replica replica;
    replica.offset = parked.offset;
    replica.segment = segment.slot();
    replica.alloc_node = node;
    replica.kind = ReplicaKind::kMemory;
    replica.status = ReplicaStatus::kComplete;
    adopt.replicas.push_back(replica);
    ObjectMetadata* inserted = locked.shard.objects.Insert(locked.key, locked.hash, std::move(adopt));
    object_count_.fetch_add(1);
    tenants_.Add(locked.key, 1, static_cast<int64_t>(parked.size));
    LogPublish(locked.key, *inserted);
    ++adopted;
    if (parked.checksum < 0) ++unverifiable;
    return ErrorCode::OK;
  };
  std::vector<int32_t> out = SettleOwnKeys(&MasterService::FindOwnSegment, daemon_id, segment_id,
                                           keys, settle);
  for (const ParkedSegments::Range& r : to_free) segments_.Free(r.slot, r.node);
  parked_adopted_.fetch_add(adopted);
  CountDropped(DropReason::kRestoreChecksum, bad);
  CountDropped(DropReason::kRestoreUnverifiable, unverifiable);
  if (bad + adopted + superseded > 0) {
    MC_LOG_INFO("daemon %lld verified %zu replicas of segment %lld: %lld good, %lld bad "
                "(dropped), %lld without a checksum (kept), %lld parked objects adopted, "
                "%lld superseded",
                static_cast<long long>(daemon_id), replicas.size(),
                static_cast<long long>(segment_id), static_cast<long long>(good),
                static_cast<long long>(bad), static_cast<long long>(unverifiable),
                static_cast<long long>(adopted), static_cast<long long>(superseded));
  }
  return out;
}

void MasterService::DropUnverifiedReplica(LockedKey& locked, ObjectMetadata& meta, size_t in) {
  if (meta.replicas.size() == 1) {
    RemoveLogged(locked.shard, locked.key, meta);  // its range freed once that is on disk
    locked.Erase();
    return;
  }
  ReplicaList gone;
  gone.push_back(meta.replicas[in]);
  meta.replicas.erase(in);
  tenants_.Add(locked.key, 0, -static_cast<int64_t>(meta.size));
  // Not the bytes anyone wrote: nothing to keep for readers, only the record to wait for.
  DropPendingMove(locked.shard, locked.key);
  disk_tier_.EndOffload(locked.shard, locked.key, &meta, /*failed=*/false);
  DeferFree(gone, meta.leased(Now()) ? meta.time_ms : 0, LogPublish(locked.key, meta));
}

void MasterService::CountDropped(DropReason reason, int64_t n) {
  switch (reason) {
    case DropReason::kRestoreChecksum:
      drops_.Record(reason, n, "restored replicas whose bytes failed their checksum");
      break;
    case DropReason::kRestoreUnverifiable:
      drops_.Record(reason, n, "restored replicas without a checksum, kept unchecked");
      break;
    case DropReason::kParkedExpired:
      drops_.Record(reason, n, "parked objects whose daemon did not come back in time");
      break;
    default:
      drops_.Record(reason, n, "");
  }
}

void MasterService::DiscardParked(const std::string& key) {
  if (parked_.empty()) return;
  std::vector<ParkedSegments::Range> to_free;
  parked_.Discard(key, &to_free);
  for (const ParkedSegments::Range& r : to_free) segments_.Free(r.slot, r.node);
}

void MasterService::DiscardParkedMatching(const std::string& tenant, const KeyMatch* match) {
  if (parked_.empty()) return;
  std::vector<std::string> keys = parked_.Keys([&](const std::string& key) {
    return tenant_key::TenantOf(key) == tenant &&
           (match == nullptr || (*match)(tenant_key::UserKeyOf(key)));
  });
  for (const std::string& key : keys) {
    StateGate::Shared gate(gate_);
    LockedKey locked(objects_, key);  // serializes with the key's report
    DiscardParked(key);
  }
}

void MasterService::ExpireParked(int64_t now) {
  if (parked_.empty()) return;
  std::vector<ParkedSegments::Range> to_free;
  size_t n = parked_.Expire(now, &to_free);
  for (const ParkedSegments::Range& r : to_free) segments_.Free(r.slot, r.node);
  CountDropped(DropReason::kParkedExpired, static_cast<int64_t>(n));
}

void MasterService::ClaimParked(const rpc::SegmentInfo& info, Segment& segment) {
  int64_t expired = 0;
  if (parked_.Claim(info, segment, Now() + options_.parked_segment_ttl_ms, &expired)) {
    MC_LOG_INFO("segment %lld of daemon %lld is back with its incarnation: its parked objects "
                "are held for its daemon to verify",
                static_cast<long long>(info.segment_id), static_cast<long long>(info.daemon_id));
  }
  CountDropped(DropReason::kParkedExpired, expired);
}

int64_t MasterService::UnverifiedReplicas() const {
  int64_t n = 0;
  for (const std::shared_ptr<Segment>& s : segments_.All()) n += s->unverified();
  return n;
}

std::map<std::string, int64_t> MasterService::DroppedObjects() const {
  std::map<std::string, int64_t> out;
  for (size_t i = 0; i < static_cast<size_t>(DropReason::kCount); ++i) {
    const auto reason = static_cast<DropReason>(i);
    out[ObjectDrops::Name(reason)] = drops_.value(reason);
  }
  return out;
}

}  // namespace mooncake
