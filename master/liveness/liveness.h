// Who is live: daemons registering, mounting and unmounting their segments, falling silent
// and coming back, or declared dead; the segments they leave behind. This class owns the
// rules and the lock that serializes every change of membership (without it a daemon
// re-attaching a segment could race its drop); the tables are DaemonRegistry's and
// SegmentRegistry's, and what a dropped segment means for the objects in it is the
// master's, asked through Objects.
//
// A daemon silent for client_live_ttl is not dropped at once: its segments are detached
// (as after a restore: their replicas are not listed, so reads go to other replicas or
// answer -703, and nothing new is placed there) and it is expected back within
// daemon_grace (at least one read lease). When it registers again and mounts the same
// segments with the same incarnation, they re-attach with every object in place; when it
// does not, it is declared dead at the deadline (its segments dropped with their replicas,
// its unfinished puts revoked). A new daemon at its endpoint replaces it at once. Silence
// is only counted over time the master itself ran: when upkeep finds a gap between two of
// its rounds longer than 2 × upkeep_interval + kStallMarginMs (the master was stopped,
// swapped out or starved), every registered daemon counts as heard from now, and every
// deadline of a daemon or segment expected back moves later by the time lost.
//
// Thread roles: Register, Mount and Unmount from request handlers; the rest from the
// upkeep, one round at a time. Every call comes with the state gate held shared by the
// caller; mu_ comes right after it in the lock order (master/service/master_service.h).
#ifndef MOONCAKE_MASTER_LIVENESS_H_
#define MOONCAKE_MASTER_LIVENESS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/base/error_code.h"
#include "master/log/change_log.h"
#include "master/liveness/daemon_registry.h"
#include "master/directory/master_options.h"
#include "master/directory/object_drops.h"
#include "master/ssd_tier/offload_queues.h"
#include "master/liveness/parked_segments.h"
#include "master/directory/segment_registry.h"
#include "master_types.h"

namespace mooncake {

class Liveness {
 public:
  // What losing a segment or a daemon means for the objects: the master's.
  class Objects {
   public:
    virtual ~Objects() = default;
    // Drops every replica in the segment (objects left with none go, unlogged: the caller
    // logged the unmount) and every pending move from or into it; the number of objects
    // that went. parked (when given) gets the complete objects that went.
    virtual int64_t DropSegmentReplicas(uint32_t slot,
                                        std::vector<ParkedSegments::Object>* parked) = 0;
    // Drops the writer's unfinished puts and upserts.
    virtual void RevokeWriter(int64_t writer) = 0;
    // Until until_ms a daemon the registry no longer lists may cache an untracked object.
    virtual void ExtendUnlisted(int64_t until_ms) = 0;
    // On a memory segment mounted new, under the registry's lock: the objects parked under
    // its id are claimed when its identity is the dropped one's, else discarded.
    virtual void ClaimParked(const rpc::SegmentInfo& info, Segment& segment) = 0;
    virtual void CountDropped(DropReason reason, int64_t n) = 0;
  };

  // All of them outlive this.
  Liveness(const MasterOptions& options, DaemonRegistry& daemons, SegmentRegistry& segments,
           ChangeLog& log, ParkedSegments& parked, OffloadQueues& offload_queues,
           Objects& objects)
      : options_(options), daemons_(daemons), segments_(segments), log_(log), parked_(parked),
        offload_queues_(offload_queues), objects_(objects) {}
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  // MasterService::RegisterDaemon, MountSegment and UnmountSegment.
  ErrorCode Register(int64_t daemon_id, const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  ErrorCode Mount(const rpc::SegmentInfo& segment) ABSL_LOCKS_EXCLUDED(mu_);
  ErrorCode Unmount(int64_t daemon_id, int64_t segment_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Upkeep, in this order, then EndRound.
  // A gap since the previous round longer than 2 × upkeep_interval + kStallMarginMs is the
  // master's own stall: the daemons' clocks restart.
  void ForgiveOwnStall(int64_t now) ABSL_LOCKS_EXCLUDED(mu_);
  // Detaches daemons silent past the TTL; declares dead those expected back too long.
  void CheckLiveness(int64_t now) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops every segment detached past its deadline (its daemon never came back, or came
  // back and could not prove the segment was its own).
  void DropDetached(int64_t now) ABSL_LOCKS_EXCLUDED(mu_);
  // From the end of the round: a round that took long doing its own work (a big
  // eviction) was the master running, and must not pass for a stall, or dead daemons
  // would be forgiven for as long as evictions keep coming.
  void EndRound(int64_t now) { last_round_end_ms_ = now; }

 private:
  int64_t Now() const { return options_.now_ms(); }
  // Drops the daemon's memory segments with their replicas, and revokes its unfinished
  // puts (their space is freed only put_start_release_timeout after each started: a daemon
  // declared dead may only be stopped, and write on when it resumes). Its LOCAL_DISK
  // segment is detached for disk_grace_ms instead (the SSD outlives the process: its
  // restart takes it back), and its offload queue dropped. park: as DropSegment's (the
  // grace ran out; not when a new daemon replaced it).
  void DeclareDead(int64_t daemon_id, int64_t disk_grace_ms, bool park = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops one segment with its replicas (the unmount logged first). The number of objects
  // that went with it. park: its daemon did not come back in time, and may still hold
  // their bytes: the objects that went are parked for parked_segment_ttl, unless that is
  // 0. Otherwise a set parked under its id is discarded.
  int64_t DropSegment(const std::shared_ptr<Segment>& segment, bool park = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const MasterOptions& options_;
  DaemonRegistry& daemons_;
  SegmentRegistry& segments_;
  ChangeLog& log_;
  ParkedSegments& parked_;
  OffloadQueues& offload_queues_;
  Objects& objects_;

  absl::Mutex mu_;  // membership: registering, mounting, unmounting, detaching, declaring dead
  int64_t last_round_end_ms_ = -1;  // only touched by the upkeep; -1 before its first round
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_LIVENESS_H_
