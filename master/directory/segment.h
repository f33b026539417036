// A memory segment a daemon lends to the cluster, as the master sees it: who owns it, how
// to reach it, and which ranges inside it are taken.
//
// A segment restored from a snapshot starts detached: its replicas are known but its daemon
// has not yet proven it is still alive with the same memory (by mounting it again with the
// same identity, see SegmentRegistry::Mount). A segment whose daemon fell silent is
// detached the same way. Until it is attached again nothing is allocated in it and readers
// are not sent to it; past its detach deadline the master drops it with its replicas.
//
// A segment being drained (its owner moves its objects out before unmounting it, see
// MasterService::DrainSegment) takes no new allocation, but stays readable until unmounted.
//
// A LOCAL_DISK segment (SegmentInfo.kind, docs/ssd.md) is a daemon's SSD tier: it is
// attached and detached like a memory segment, but its allocator is empty (capacity 0, so
// it adds nothing to the pool's capacity or usage and no Allocate succeeds in it) and its
// replicas are objects the daemon's own index locates.
//
// Reconciliation of a LOCAL_DISK segment (docs/ssd.md, "Reconciliation"): the master's list
// of a disk segment's replicas may name objects its SSD lost (a relaxed-mode crash, a
// restore to an older point, buckets evicted after it). So each (re-)attach starts a
// round, and in a round the daemon vouches for what its SSD holds: every disk replica it
// registers, and every one it creates (an offload's report, an adoption), carries the
// round's number (Replica::round). When the daemon says it has registered everything
// (MasterService::EndDiskReconciliation), every replica not vouched for goes. Until then a
// re-attached segment is unreconciled, and its replicas not vouched for are neither listed
// nor counted as readable. A round is named by the daemon (a token it draws) so that a
// round's end never applies to another round: one begun after a master restart or a
// re-attach, or by a later registration of the same daemon.
#ifndef MOONCAKE_MASTER_SEGMENT_H_
#define MOONCAKE_MASTER_SEGMENT_H_

#include <atomic>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "common/base/offset_allocator.h"
#include "master_types.h"

namespace mooncake {

class Segment {
 public:
  Segment(uint32_t slot, rpc::SegmentInfo info, uint64_t alignment, bool attached = true);
  // The same segment described anew (its daemon re-attached with other endpoints), taking
  // over the ranges of the one it replaces.
  Segment(uint32_t slot, rpc::SegmentInfo info, Segment& replaced);

  uint32_t slot() const { return slot_; }
  // Immutable after mount; safe to read without a lock.
  const rpc::SegmentInfo& info() const { return info_; }

  // Reserves size bytes; false when no free range fits, or the segment is detached or
  // being unmounted.
  bool Allocate(uint64_t size, uint64_t* offset, uint32_t* node);
  void Free(uint32_t node);
  // Takes exactly [offset, offset + size): the range of a restored replica. False when
  // it is outside the segment or overlaps one already taken.
  bool Reserve(uint64_t offset, uint64_t size, uint32_t* node);
  // After this no Allocate succeeds; the unmount then drops every replica in it.
  void StopAllocating();
  // Stops allocating for good (a re-attach does not resume it): the segment is leaving.
  void MarkDraining();
  // An operator's drain job (master_service_drain_jobs.cc) holds it: no new allocation
  // either, but it stays (DRAINED once empty) until its owner unmounts it, and Release
  // (the job canceled or failed) lets allocation resume unless its owner drains it too.
  void Hold();
  void Release();
  bool held() const { return held_.load(std::memory_order_acquire); }
  // Its owner drains it (MarkDraining): it is leaving.
  bool leaving() const { return draining_.load(std::memory_order_acquire); }
  // Takes no allocation for good or for a job: neither a placement nor a task's target.
  bool draining() const {
    return draining_.load(std::memory_order_acquire) || held_.load(std::memory_order_acquire);
  }
  // Set once every reservation made before MarkDraining is recorded where a drain's walk
  // sees it (MasterService::DrainSegment).
  void MarkDrainSettled() { drain_settled_.store(true, std::memory_order_release); }
  bool drain_settled() const { return drain_settled_.load(std::memory_order_acquire); }
  // Memory an application's connection lent, which leaves with it (SegmentInfo).
  bool lent() const { return info_.lent_by_client; }
  // A daemon's SSD tier (see above).
  bool disk() const { return info_.kind == rpc::ReplicaKind::LOCAL_DISK; }
  // A LOCAL_DISK segment this master saw mounted new and never detached since: every disk
  // replica it ever had was registered with this master, so an object the master does not
  // know is one it never had (RegisterDiskReplicas adopts it), not one removed meanwhile.
  bool adopts() const { return adopts_.load(std::memory_order_acquire); }

  bool attached() const { return attached_.load(std::memory_order_acquire); }
  // Its daemon mounted it again: allocation and reads resume; a LOCAL_DISK one starts
  // round (a number SegmentRegistry draws, never 0) unreconciled.
  void Attach(uint32_t round);
  // Its daemon fell silent (or a restore made it): until it is attached again by
  // deadline_ms, nothing is allocated in it and it is not read. SegmentRegistry keeps the
  // count of detached segments, so only it calls these.
  void Detach(int64_t deadline_ms);
  // While detached: when the master drops it if its daemon has not re-attached it.
  int64_t detach_deadline_ms() const { return detach_deadline_ms_.load(); }
  void set_detach_deadline_ms(int64_t deadline_ms) { detach_deadline_ms_.store(deadline_ms); }

  // Memory replicas in it restored unverified (Replica::unverified) and not yet checked
  // by its daemon: ListUnverified walks the objects only while this is above 0.
  int64_t unverified() const { return unverified_.load(std::memory_order_acquire); }
  void AddUnverified(int64_t n) { unverified_.fetch_add(n, std::memory_order_acq_rel); }
  void SetUnverified(int64_t n) { unverified_.store(n, std::memory_order_release); }
  // ---- reconciliation (LOCAL_DISK; see above) ----
  // The current round: what a replica created now is stamped with.
  uint32_t round() const { return round_.load(std::memory_order_acquire); }
  // Whether a disk replica stamped replica_round may be listed: the segment is reconciled,
  // or its daemon vouched for it in the current round.
  bool Vouches(uint32_t replica_round) const {
    return reconciled_.load(std::memory_order_acquire) ||
           replica_round == round_.load(std::memory_order_acquire);
  }
  bool reconciled() const { return reconciled_.load(std::memory_order_acquire); }
  // The daemon's round named token (never 0) begins, numbered round: from now on only
  // what it vouches for is kept at the end. False, and nothing changes, when token's round
  // is already the current one (a repeated begin).
  bool BeginRound(int64_t token, uint32_t round);
  // The daemon's token names the current round.
  bool InRound(int64_t token) const;
  // Ends token's round: true the first time, with *ended its number (the caller then
  // drops the replicas stamped otherwise, as long as round() is still *ended, and calls
  // MarkReconciled), false when it had ended already (a repeat) or token is not the
  // current round's (then *current is false).
  bool EndRound(int64_t token, bool* current, uint32_t* ended);
  // Every replica token's round did not vouch for is gone: all are listed again, unless
  // another round has begun meanwhile.
  void MarkReconciled(int64_t token);

  // Without the lock: the allocator's capacity is fixed at construction (the analysis
  // cannot know that one field of a guarded object never changes).
  uint64_t capacity() const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Without the lock: every put asks (MasterService checks the high watermark).
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  double free_ratio() const;

 private:
  const uint32_t slot_;
  const rpc::SegmentInfo info_;
  mutable absl::Mutex mu_;
  OffsetAllocator allocator_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> used_{0};  // allocator_.used(), stored under mu_ after each change
  bool allocating_ ABSL_GUARDED_BY(mu_) = true;  // false once an unmount has begun
  std::atomic<bool> attached_;
  std::atomic<int64_t> detach_deadline_ms_{0};
  std::atomic<bool> draining_{false};  // changed under mu_
  std::atomic<bool> held_{false};      // changed under mu_
  std::atomic<bool> drain_settled_{false};
  std::atomic<bool> adopts_{false};
  std::atomic<int64_t> unverified_{0};
  // Reconciliation: round_ and reconciled_ are read lock-free, changed under mu_ with
  // token_ and round_ended_.
  std::atomic<uint32_t> round_{0};
  std::atomic<bool> reconciled_;
  int64_t token_ ABSL_GUARDED_BY(mu_) = 0;  // the daemon's name for round_, 0: none yet
  bool round_ended_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_SEGMENT_H_
