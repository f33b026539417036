// Daemons and upkeep of MasterService: daemons registering and mounting their segments,
// its own stalls, silent and dead daemons, abandoned puts, deferred frees, stats.
// Object operations are in master_service.cc, eviction in master_service_evict.cc.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/logging.h"
#include "common/tenant_key.h"
#include "master/master_service.h"
#include "master/oplog.h"

namespace mooncake {

namespace {

int64_t ResidentBytes() {
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  int n = std::fscanf(f, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(pages_resident) * sysconf(_SC_PAGESIZE) : 0;
}

}  // namespace

// ---- daemons and segments --------------------------------------------------------------

ErrorCode MasterService::RegisterDaemon(int64_t daemon_id, const std::string& name) {
  StateGate::Shared gate(gate_);
  std::lock_guard<std::mutex> membership(membership_mu_);
  // A new daemon at the endpoint of a known one is that host's daemon restarted: the old
  // one's memory is gone, so drop it now rather than after client_live_ttl (or its grace).
  for (int64_t old : daemons_.TakeReplaced(name, daemon_id)) {
    MC_LOG_WARN("daemon %lld (%s) replaced by daemon %lld", static_cast<long long>(old),
                name.c_str(), static_cast<long long>(daemon_id));
    DeclareDead(old, std::max(options_.daemon_grace_ms, options_.default_kv_lease_ttl_ms));
  }
  bool known = false;
  DaemonRegistry::Absence was = daemons_.Register(daemon_id, name, Now(), &known);
  if (was == DaemonRegistry::Absence::kSilent) {
    MC_LOG_INFO("daemon %lld (%s) is back within its grace period; its segments re-attach "
                "as it mounts them again",
                static_cast<long long>(daemon_id), name.c_str());
  } else if (!known) {
    MC_LOG_INFO("daemon %lld (%s) registered", static_cast<long long>(daemon_id), name.c_str());
  }
  return ErrorCode::OK;
}

rpc::HeartbeatResult MasterService::Heartbeat(int64_t daemon_id) {
  StateGate::Shared gate(gate_);
  rpc::HeartbeatResult r;
  r.master_epoch = epoch_;
  r.code = ToInt(daemons_.Heartbeat(daemon_id, Now()) ? ErrorCode::OK
                                                       : ErrorCode::CLIENT_NOT_FOUND);
  return r;
}

ErrorCode MasterService::MountSegment(const rpc::SegmentInfo& segment) {
  StateGate::Shared gate(gate_);
  std::lock_guard<std::mutex> membership(membership_mu_);
  std::string name;
  if (!daemons_.NameOf(segment.daemon_id, &name) || !daemons_.Known(segment.daemon_id)) {
    return ErrorCode::CLIENT_NOT_FOUND;
  }
  if (LogRefusing()) return ErrorCode::PERSISTENT_FAIL;
  const bool disk = segment.kind == rpc::ReplicaKind::LOCAL_DISK;
  if (segment.lender != 0) {
    // A client's name must not pass for a daemon's: puts, copies and clears address both.
    for (const auto& [id, daemon_name] : daemons_.List()) {
      if (daemon_name != segment.name) continue;
      MC_LOG_WARN("mount of segment %lld by daemon %lld refused: its client names itself %s, "
                  "the name of daemon %lld",
                  static_cast<long long>(segment.segment_id),
                  static_cast<long long>(segment.daemon_id), segment.name.c_str(),
                  static_cast<long long>(id));
      return ErrorCode::SEGMENT_ALREADY_EXISTS;
    }
  }
  SegmentRegistry::MountOutcome outcome;
  // A memory segment dropped past its grace and mounted again by the same process gets
  // back the ranges of its parked objects before anyone can allocate there.
  auto claim = [this, &segment](Segment& fresh) {
    if (!parked_.empty() && !fresh.disk()) ClaimParked(segment, fresh);
  };
  ErrorCode rc = segments_.Mount(segment, /*taker_has_name=*/name == segment.name, &outcome,
                                 claim);
  uint32_t known_slot = 0;
  if (rc == ErrorCode::SEGMENT_ALREADY_EXISTS && segment.lender != 0 &&
      !segments_.SlotOf(segment.segment_id, &known_slot)) {
    MC_LOG_WARN("mount of segment %lld by daemon %lld (process %lld) refused: the name %s is "
                "another client's (another process, or memory lent at another daemon)",
                static_cast<long long>(segment.segment_id),
                static_cast<long long>(segment.daemon_id),
                static_cast<long long>(segment.lender), segment.name.c_str());
  } else if (rc == ErrorCode::SEGMENT_ALREADY_EXISTS) {
    MC_LOG_WARN("mount of %ssegment %lld by daemon %lld (%s) refused: the segment is known "
                "with another owner, name, range or incarnation%s",
                disk ? "LOCAL_DISK " : "", static_cast<long long>(segment.segment_id),
                static_cast<long long>(segment.daemon_id), segment.name.c_str(),
                disk ? ", or the daemon has a LOCAL_DISK segment already" : "");
  }
  if (rc != ErrorCode::OK || outcome == SegmentRegistry::MountOutcome::kAgain) return rc;
  LogMount(segment);
  MC_LOG_INFO("%ssegment %lld of %s (daemon %lld) %s: %lld bytes", disk ? "LOCAL_DISK " : "",
              static_cast<long long>(segment.segment_id), segment.name.c_str(),
              static_cast<long long>(segment.daemon_id),
              outcome == SegmentRegistry::MountOutcome::kReattached ? "re-attached" : "mounted",
              static_cast<long long>(segment.size));
  return rc;
}

ErrorCode MasterService::UnmountSegment(int64_t daemon_id, int64_t segment_id) {
  StateGate::Shared gate(gate_);
  std::lock_guard<std::mutex> membership(membership_mu_);
  std::shared_ptr<Segment> segment;
  ErrorCode rc = segments_.BeginUnmount(daemon_id, segment_id, &segment);
  if (rc != ErrorCode::OK) return rc;
  if (segment->disk()) offload_queues_.Drop(daemon_id);  // its SSD tier is gone
  int64_t dropped = DropSegment(segment);
  MC_LOG_INFO("segment %lld of %s unmounted%s: %lld objects dropped with it",
              static_cast<long long>(segment_id), segment->info().name.c_str(),
              segment->draining() ? " after draining" : "", static_cast<long long>(dropped));
  return ErrorCode::OK;
}

std::vector<rpc::SegmentInfo> MasterService::GetAllSegments() const {
  StateGate::Shared gate(gate_);
  return segments_.List();
}

// ---- upkeep ----------------------------------------------------------------------------

void MasterService::Tick() {
  StateGate::Shared gate(gate_);
  int64_t now = Now();
  ForgiveOwnStall(now);
  CheckLiveness(now);
  DropDetached(now);
  PruneShardRecords(now);
  ReleaseAbandonedPuts(now);
  RunDeferredFrees(now);
  ExpireParked(now);
  ExpireOffloads(now);
  ExpireTasks(now);
  drain_jobs_.Run(now);
  eviction_.QueueEarlyOffloads(now);
  eviction_.EvictAboveWatermark();
  tenants_.Prune();
  // From the end of the round: a round that took long doing its own work (a big eviction)
  // was the master running, and must not pass for a stall, or dead daemons would be
  // forgiven for as long as evictions keep coming.
  last_upkeep_end_ms_ = Now();
}

void MasterService::ForgiveOwnStall(int64_t now) {
  if (last_upkeep_end_ms_ < 0) return;
  int64_t gap = now - last_upkeep_end_ms_;
  if (gap <= 2 * options_.upkeep_interval_ms + MasterOptions::kStallMarginMs) return;
  // Heartbeats that came meanwhile were not answered either (the whole process stood
  // still), so silence over the gap proves nothing.
  int64_t lost = gap - options_.upkeep_interval_ms;
  MC_LOG_WARN("upkeep stalled: %lld ms since its previous round (every %lld ms); the master "
              "itself was not running, so every daemon counts as heard from now and every "
              "grace period is %lld ms longer",
              static_cast<long long>(gap), static_cast<long long>(options_.upkeep_interval_ms),
              static_cast<long long>(lost));
  std::lock_guard<std::mutex> membership(membership_mu_);
  daemons_.ForgiveStall(now, lost);
  segments_.PostponeDetached(lost);
}

void MasterService::CheckLiveness(int64_t now) {
  std::lock_guard<std::mutex> membership(membership_mu_);
  // At least a lease: a reader may have been granted one on a replica there just before
  // the daemon fell silent, and until it runs out the range must not be handed out again.
  int64_t deadline = now + std::max(options_.daemon_grace_ms, options_.default_kv_lease_ttl_ms);
  for (int64_t daemon : daemons_.MarkSilent(now, options_.client_live_ttl_ms, deadline)) {
    std::vector<std::shared_ptr<Segment>> detached = segments_.Detach(daemon, deadline);
    MC_LOG_WARN("daemon %lld silent for %lld ms: its %zu segment(s) detached (their objects "
                "unreadable there) until it comes back, for %lld ms at most",
                static_cast<long long>(daemon),
                static_cast<long long>(options_.client_live_ttl_ms), detached.size(),
                static_cast<long long>(deadline - now));
  }
  for (const auto& [daemon, absence] : daemons_.TakeOverdue(now)) {
    if (absence == DaemonRegistry::Absence::kRestored) {
      MC_LOG_WARN("daemon %lld did not re-attach within %lld ms of the restore",
                  static_cast<long long>(daemon), static_cast<long long>(options_.reattach_grace_ms));
    } else {
      MC_LOG_WARN("daemon %lld did not come back within its grace period",
                  static_cast<long long>(daemon));
    }
    DeclareDead(daemon,
                absence == DaemonRegistry::Absence::kRestored ? options_.reattach_grace_ms
                                                              : deadline - now,
                /*park=*/true);
  }
}

void MasterService::DeclareDead(int64_t daemon_id, int64_t disk_grace_ms, bool park) {
  // It may be alive (stopped, partitioned) and still serve cached reads of untracked
  // objects, which "every daemon" no longer reaches: one lease from now they have ended.
  ExtendUnlisted(Now() + options_.default_kv_lease_ttl_ms);
  auto segments = segments_.SegmentsOf(daemon_id);
  MC_LOG_WARN("daemon %lld is dead: dropping its %zu segment(s) and unfinished puts",
              static_cast<long long>(daemon_id), segments.size());
  offload_queues_.Drop(daemon_id);
  for (const auto& segment : segments) {
    if (segment->disk()) {
      // Its SSD outlives the process: the restarted daemon takes it back (mounting it
      // with its id, name and incarnation) with its replicas.
      segments_.DetachSegment(segment, Now() + disk_grace_ms);
      MC_LOG_WARN("LOCAL_DISK segment %lld of dead daemon %lld detached for %lld ms, for "
                  "its restart to take back", static_cast<long long>(segment->info().segment_id),
                  static_cast<long long>(daemon_id), static_cast<long long>(disk_grace_ms));
      continue;
    }
    segment->StopAllocating();
    int64_t dropped = DropSegment(segment, park);
    MC_LOG_WARN("segment %lld of dead daemon %lld dropped with %lld objects",
                static_cast<long long>(segment->info().segment_id),
                static_cast<long long>(daemon_id), static_cast<long long>(dropped));
  }
  RevokeWriter(daemon_id);
}

void MasterService::PruneShardRecords(int64_t now) {
  // A sixteenth of the shards per tick: each is swept about every 1.6 s, and no tick holds
  // a shard lock for more than one shard's records.
  for (size_t i = 0; i < kShardCount / 16; ++i) {
    Shard& shard = objects_.shard(holder_sweep_next_);
    holder_sweep_next_ = (holder_sweep_next_ + 1) % kShardCount;
    absl::MutexLock lock(&shard.mu);
    if (!shard.holders.empty()) shard.holders.Prune(now);
    // Ended exist leases are otherwise pruned only by later grants in the same shard.
    if (!shard.exist_leases.empty()) shard.exist_leases.Prune(now);
  }
}

void MasterService::DropDetached(int64_t now) {
  if (segments_.detached_count() == 0) return;
  std::lock_guard<std::mutex> membership(membership_mu_);
  for (const std::shared_ptr<Segment>& segment : segments_.DetachedPast(now)) {
    MC_LOG_WARN("segment %lld of %s was not re-attached by its daemon in time: dropping it "
                "with its replicas",
                static_cast<long long>(segment->info().segment_id), segment->info().name.c_str());
    segment->StopAllocating();
    DropSegment(segment, /*park=*/true);
  }
}

int64_t MasterService::DropSegment(const std::shared_ptr<Segment>& segment, bool park) {
  LogUnmount(segment->info().segment_id);
  park = park && options_.parked_segment_ttl_ms > 0 && !segment->disk();
  std::vector<ParkedSegments::Object> parked;
  int64_t dropped = DropSegmentReplicas(segment->slot(), park ? &parked : nullptr);
  segments_.Erase(segment->slot());
  if (park) {
    MC_LOG_WARN("segment %lld of %s dropped: its %zu objects parked for %lld ms, for its "
                "daemon to re-offer if it comes back with its memory",
                static_cast<long long>(segment->info().segment_id),
                segment->info().name.c_str(), parked.size(),
                static_cast<long long>(options_.parked_segment_ttl_ms));
    parked_.Park(segment->info(), std::move(parked), Now() + options_.parked_segment_ttl_ms);
  } else {
    // Ranges reserved for them were in this segment: gone with it, nothing to free.
    size_t n = parked_.DiscardSegment(segment->info().segment_id, nullptr);
    CountDropped(DropReason::kParkedExpired, static_cast<int64_t>(n));
  }
  return dropped;
}

int64_t MasterService::DropSegmentReplicas(uint32_t slot,
                                           std::vector<ParkedSegments::Object>* parked) {
  // The segment's space disappears with it, so its replicas are dropped, not freed (and
  // their bytes no longer count against the value's tenant).
  auto drop_in = [this, slot](std::string_view key, uint64_t size, ReplicaList& replicas) {
    int64_t memory = 0;
    for (size_t i = replicas.size(); i-- > 0;) {
      if (replicas[i].segment != slot) continue;
      memory += replicas[i].kind == ReplicaKind::kMemory;
      replicas.erase(i);
    }
    if (memory > 0) tenants_.Add(key, 0, -memory * static_cast<int64_t>(size));
  };
  int64_t dropped = 0;
  for (size_t s = 0; s < kShardCount; ++s) {
    Shard& shard = objects_.shard(s);
    {
      absl::MutexLock lock(&shard.mu);
      for (auto it = shard.moves.begin(); it != shard.moves.end();) {
        PendingMove& move = it->second;
        if (move.from_slot != slot && !move.Into(slot)) {
          ++it;
          continue;
        }
        // From it: its mover may still be copying into the targets. Into it: gone with it.
        ReplicaList elsewhere;
        for (size_t i = 0; i < move.to.size(); ++i) {
          if (move.to[i].segment != slot) elsewhere.push_back(move.to[i]);
        }
        DeferFree(elsewhere, move.start_ms + options_.put_start_release_timeout_ms);
        it = shard.moves.erase(it);
      }
      for (auto it = shard.promotions.begin(); it != shard.promotions.end();) {
        PendingPromotion& promotion = it->second;
        if (promotion.to[0].segment != slot) {
          ++it;
          continue;
        }
        // Gone with the segment's space, its charge with it.
        if (!promotion.orphaned) tenants_.Add(it->first, 0, -MemoryBytes(promotion.size, promotion.to));
        it = shard.promotions.erase(it);
      }
    }
    objects_.Scan(shard, [&](std::string_view key, ObjectMetadata& meta) {
      bool in_slot = false;
      for (size_t i = 0; i < meta.replicas.size() && !in_slot; ++i) {
        in_slot = meta.replicas[i].segment == slot;
      }
      if (!in_slot) return false;
      bool memory_in_slot = false;  // and where: what a parked object keeps
      uint64_t offset = 0;
      for (size_t i = 0; i < meta.replicas.size(); ++i) {
        if (meta.replicas[i].segment != slot || !meta.replicas[i].memory()) continue;
        memory_in_slot = true;
        offset = meta.replicas[i].offset;
      }
      CountDisk(meta, -1);
      drop_in(key, meta.size, meta.replicas);
      CountDisk(meta, 1);
      if (!meta.replicas.empty()) return false;
      dropped += meta.complete;
      if (parked != nullptr && meta.complete && memory_in_slot) {
        parked->push_back({std::string(key), offset, meta.size, meta.checksum_or_none(),
                           meta.hard_pin});
      }
      ReleaseObject(shard, key, meta);
      return true;
    });
    // Few: one per upsert in flight.
    absl::MutexLock lock(&shard.mu);
    for (auto it = shard.upserts.begin(); it != shard.upserts.end();) {
      drop_in(it->first, it->second.size, it->second.replicas);
      it = it->second.replicas.empty() ? shard.upserts.erase(it) : std::next(it);
    }
  }
  return dropped;
}

void MasterService::RevokeWriter(int64_t writer) {
  DropUnfinished([writer](int64_t w, int64_t) { return w == writer; });
}

void MasterService::ReleaseAbandonedPuts(int64_t now) {
  // A full scan costs a walk over every object, so it runs only while puts are open and
  // at most ten times per release timeout.
  int64_t period = std::max<int64_t>(1000, options_.put_start_release_timeout_ms / 10);
  if (now - last_abandoned_scan_ms_ < period) return;
  last_abandoned_scan_ms_ = now;
  int64_t deadline = now - options_.put_start_release_timeout_ms;
  DropUnfinished([deadline](int64_t, int64_t start_ms) { return start_ms <= deadline; });
}

void MasterService::DropUnfinished(const std::function<bool(int64_t, int64_t)>& match) {
  const int64_t release = options_.put_start_release_timeout_ms;
  for (size_t s = 0; s < kShardCount; ++s) {
    Shard& shard = objects_.shard(s);
    {
      absl::MutexLock lock(&shard.mu);  // few: one per upsert in flight
      for (auto it = shard.upserts.begin(); it != shard.upserts.end();) {
        if (match(it->second.writer, it->second.start_ms)) {
          DeferFree(it->second.replicas, it->second.start_ms + release);
          tenants_.Add(it->first, 0, -MemoryBytes(it->second.size, it->second.replicas));
          it = shard.upserts.erase(it);
        } else {
          ++it;
        }
      }
    }
    {
      absl::MutexLock lock(&shard.mu);  // few: one per move or promotion in flight
      for (auto it = shard.moves.begin(); it != shard.moves.end();) {
        if (match(it->second.mover, it->second.start_ms)) {
          FreeReplicas(it->second.to);
          it = shard.moves.erase(it);
        } else {
          ++it;
        }
      }
      for (auto it = shard.promotions.begin(); it != shard.promotions.end();) {
        PendingPromotion& promotion = it->second;
        if (!match(promotion.writer, promotion.start_ms)) {
          ++it;
          continue;
        }
        // Its writer may still be copying into it: as for an abandoned put.
        DeferFree(promotion.to, promotion.start_ms + release);
        if (!promotion.orphaned) tenants_.Add(it->first, 0, -MemoryBytes(promotion.size, promotion.to));
        it = shard.promotions.erase(it);
      }
    }
    if (processing_count_.load() == 0) continue;
    objects_.Scan(shard, [&](std::string_view key, ObjectMetadata& meta) {
      if (meta.complete || !match(meta.writer, meta.time_ms)) return false;
      std::string_view shown = tenant_key::UserKeyOf(key);
      MC_LOG_WARN("put of '%.*s' by daemon %lld dropped unfinished",
                  static_cast<int>(std::min<size_t>(shown.size(), 64)), shown.data(),
                  static_cast<long long>(meta.writer));
      // Its writer may still be copying into it: as for a put taken over (PutStart).
      DeferFree(meta.replicas, meta.time_ms + release);
      tenants_.Add(key, 0, -MemoryBytes(meta.size, meta.replicas));
      meta.replicas.clear();
      ReleaseObject(shard, key, meta);
      return true;
    });
  }
}

void MasterService::RunDeferredFrees(int64_t now) {
  deferred_.FreeDue(now, oplog_ != nullptr ? oplog_->synced() : 0);
}

void MasterService::ReclaimEvicted() {
  // Sync's failure needs no answer here: what is not on disk stays deferred, and the retry
  // of the reservation fails for want of space. A failing disk is not waited for (this
  // thread holds the state gate).
  if (oplog_ != nullptr && oplog_->healthy()) oplog_->Sync(oplog_->last());
  RunDeferredFrees(Now());
}

rpc::MasterStats MasterService::GetStats() const {
  StateGate::Shared gate(gate_);
  rpc::MasterStats stats;
  stats.objects = object_count_.load();
  stats.segments = static_cast<int64_t>(segments_.count());
  stats.daemons = static_cast<int64_t>(daemons_.count());
  stats.capacity_bytes = static_cast<int64_t>(segments_.capacity());
  stats.used_bytes = static_cast<int64_t>(segments_.used());
  stats.resident_bytes = ResidentBytes();
  stats.evicted_objects = eviction_.evicted_objects();
  stats.master_epoch = epoch_;
  if (oplog_ != nullptr) {
    stats.oplog_sequence = static_cast<int64_t>(oplog_->last());
    stats.oplog_synced = static_cast<int64_t>(oplog_->synced());
  }
  stats.restore_ms = restore_ms_.load();
  stats.restored_objects = restored_objects_.load();
  stats.pending_segments = static_cast<int64_t>(segments_.detached_count());
  stats.eviction = eviction_.counters().Get();
  stats.tenants = tenants_.Stats();
  stats.disk = DiskFigures();
  stats.objects_dropped = DroppedObjects();
  stats.unverified_replicas = UnverifiedReplicas();
  stats.parked_objects = parked_.count();
  stats.parked_adopted = parked_adopted_.load();
  return stats;
}

}  // namespace mooncake
