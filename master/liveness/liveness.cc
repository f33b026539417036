#include "master/liveness/liveness.h"

#include <algorithm>

#include "common/base/logging.h"

namespace mooncake {

ErrorCode Liveness::Register(int64_t daemon_id, const std::string& name) {
  absl::MutexLock membership(&mu_);
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

ErrorCode Liveness::Mount(const rpc::SegmentInfo& segment) {
  absl::MutexLock membership(&mu_);
  std::string name;
  if (!daemons_.NameOf(segment.daemon_id, &name) || !daemons_.Known(segment.daemon_id)) {
    return ErrorCode::CLIENT_NOT_FOUND;
  }
  if (log_.Refusing()) return ErrorCode::PERSISTENT_FAIL;
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
    if (!parked_.empty() && !fresh.disk()) objects_.ClaimParked(segment, fresh);
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
  log_.Mount(segment);
  MC_LOG_INFO("%ssegment %lld of %s (daemon %lld) %s: %lld bytes", disk ? "LOCAL_DISK " : "",
              static_cast<long long>(segment.segment_id), segment.name.c_str(),
              static_cast<long long>(segment.daemon_id),
              outcome == SegmentRegistry::MountOutcome::kReattached ? "re-attached" : "mounted",
              static_cast<long long>(segment.size));
  return rc;
}

ErrorCode Liveness::Unmount(int64_t daemon_id, int64_t segment_id) {
  absl::MutexLock membership(&mu_);
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

void Liveness::ForgiveOwnStall(int64_t now) {
  if (last_round_end_ms_ < 0) return;
  int64_t gap = now - last_round_end_ms_;
  if (gap <= 2 * options_.upkeep_interval_ms + MasterOptions::kStallMarginMs) return;
  // Heartbeats that came meanwhile were not answered either (the whole process stood
  // still), so silence over the gap proves nothing.
  int64_t lost = gap - options_.upkeep_interval_ms;
  MC_LOG_WARN("upkeep stalled: %lld ms since its previous round (every %lld ms); the master "
              "itself was not running, so every daemon counts as heard from now and every "
              "grace period is %lld ms longer",
              static_cast<long long>(gap), static_cast<long long>(options_.upkeep_interval_ms),
              static_cast<long long>(lost));
  absl::MutexLock membership(&mu_);
  daemons_.ForgiveStall(now, lost);
  segments_.PostponeDetached(lost);
}

void Liveness::CheckLiveness(int64_t now) {
  absl::MutexLock membership(&mu_);
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

void Liveness::DeclareDead(int64_t daemon_id, int64_t disk_grace_ms, bool park) {
  // It may be alive (stopped, partitioned) and still serve cached reads of untracked
  // objects, which "every daemon" no longer reaches: one lease from now they have ended.
  objects_.ExtendUnlisted(Now() + options_.default_kv_lease_ttl_ms);
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
  objects_.RevokeWriter(daemon_id);
}

void Liveness::DropDetached(int64_t now) {
  if (segments_.detached_count() == 0) return;
  absl::MutexLock membership(&mu_);
  for (const std::shared_ptr<Segment>& segment : segments_.DetachedPast(now)) {
    MC_LOG_WARN("segment %lld of %s was not re-attached by its daemon in time: dropping it "
                "with its replicas",
                static_cast<long long>(segment->info().segment_id), segment->info().name.c_str());
    segment->StopAllocating();
    DropSegment(segment, /*park=*/true);
  }
}

int64_t Liveness::DropSegment(const std::shared_ptr<Segment>& segment, bool park) {
  log_.Unmount(segment->info().segment_id);
  park = park && options_.parked_segment_ttl_ms > 0 && !segment->disk();
  std::vector<ParkedSegments::Object> parked;
  int64_t dropped = objects_.DropSegmentReplicas(segment->slot(), park ? &parked : nullptr);
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
    objects_.CountDropped(DropReason::kParkedExpired, static_cast<int64_t>(n));
  }
  return dropped;
}

}  // namespace mooncake
