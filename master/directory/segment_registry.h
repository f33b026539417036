// Every mounted segment in the cluster, and the placement of new replicas across them.
//
// Placement policy. Segments come in two kinds: a daemon's own (--global_segment_size),
// which lives as long as the daemon, and memory an application's connection lent
// (SegmentInfo.lent_by_client: setup with a segment size), which leaves when that client
// disconnects. An object put there must be moved out when it leaves (draining, see
// MasterService::DrainSegment) or is lost with it, so lent memory is the last resort:
//   1. segments named in preferred, in the order given (for each name, a daemon's own
//      memory before memory lent under it): the caller's explicit wish. A daemon's "host:port"
//      names its own memory and memory lent at it by clients that named none; a client that
//      named itself (SegmentInfo.lender: Mooncake's local_hostname) names its lent memory;
//   1b. the writing daemon's segments (its own, then memory lent at it), when the put asks
//      for it (prefer_alloc_in_same_node) or the strategy is local_first: the first replica
//      then lands on the writer's host, further ones still go to other daemons;
//   2. the other daemons' own segments, in the strategy's order (random or free ratio; the
//      random order reproducible with a placement seed, see the constructor);
//   3. lent segments, in the strategy's order: used only once no segment of 2. has room;
//   4. segments on daemons named in avoided (daemons the writer just failed to reach), own
//      then lent, whatever name the memory lent there carries.
// A draining or detached segment takes no allocation at all, and a LOCAL_DISK one (a
// daemon's SSD tier, master/directory/segment.h) is never a candidate.
#ifndef MOONCAKE_MASTER_SEGMENT_REGISTRY_H_
#define MOONCAKE_MASTER_SEGMENT_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/base/error_code.h"
#include "master/directory/segment.h"

namespace mooncake {

// kLocalFirst: the writer's daemon's segments first (tier 1b above), the rest as kRandom.
enum class AllocationStrategy { kRandom, kFreeRatioFirst, kLocalFirst };

// A range reserved for one replica.
struct Placement {
  std::shared_ptr<Segment> segment;
  uint64_t offset = 0;
  uint32_t node = 0;
};

class SegmentRegistry {
 public:
  // placement_seed (--placement_seed): 0 draws the random orders of kRandom and kLocalFirst
  // from a random seed, as a master in production does; any other value draws the n-th
  // order of this registry from (placement_seed, n) alone, so that the same seed, the same
  // segments mounted in the same order and the same sequence of allocations place every
  // replica alike: tests that check where replicas land do not depend on luck.
  SegmentRegistry(AllocationStrategy strategy, uint64_t alignment, uint64_t placement_seed = 0);

  // Adds a segment; -102 for a new one lent under a name that is not its lender's (see
  // SegmentInfo.lender). Mounting a known segment again with the same identity (owner, name,
  // base, size and incarnation) is a no-op for an attached one (a daemon retrying after a
  // lost reply) and re-attaches a detached one (restored, or its daemon fell silent),
  // taking its new endpoints; anything else with a known id → -102. *outcome says which
  // of those it was.
  // LOCAL_DISK segments: at most one per daemon (a second → -102); their identity is the
  // id, name and incarnation (a daemon may change its SSD capacity across restarts), and a
  // detached one may be taken over by another daemon id when taker_has_name (the caller
  // checked that daemon registered under the segment's name: the daemon restarted, a new
  // process with its SSD). -600 for a kind other than MEMORY or LOCAL_DISK, or lent disk.
  // prepare (when given) runs on a new segment before anyone can allocate in it (under the
  // registry's lock: it may take the segment's own lock, nothing else).
  enum class MountOutcome { kNew, kReattached, kAgain };
  ErrorCode Mount(const rpc::SegmentInfo& info, bool taker_has_name, MountOutcome* outcome,
                  const std::function<void(Segment&)>& prepare = nullptr);
  // Adds a segment restored from a snapshot or the log, detached (see segment.h). A known
  // id is described anew (the later record wins) in the same slot.
  void Restore(const rpc::SegmentInfo& info);
  // A number for a LOCAL_DISK segment's new reconciliation round (master/directory/segment.h):
  // unique among this master's rounds, never 0.
  uint32_t NextRound();
  // The slot of a segment id, or false.
  bool SlotOf(int64_t segment_id, uint32_t* slot) const;

  // First half of an unmount: stops allocation in the segment and returns it. The caller
  // drops the replicas that live in it, then calls Erase(). -101 unknown id, -601 when
  // daemon_id does not own it.
  ErrorCode BeginUnmount(int64_t daemon_id, int64_t segment_id, std::shared_ptr<Segment>* out);
  void Erase(uint32_t slot);
  // Forgets every segment (a restore candidate that failed half-way).
  void Clear();

  // Detaches the attached segments of a daemon that fell silent, until deadline_ms (see
  // segment.h); returns them.
  std::vector<std::shared_ptr<Segment>> Detach(int64_t daemon_id, int64_t deadline_ms);
  // Detached segments whose deadline is before now_ms.
  std::vector<std::shared_ptr<Segment>> DetachedPast(int64_t now_ms) const;
  // Moves every detached segment's deadline lost_ms later (the master stood still).
  void PostponeDetached(int64_t lost_ms);

  // Detaches one segment until deadline_ms (a detached one keeps the later deadline).
  void DetachSegment(const std::shared_ptr<Segment>& segment, int64_t deadline_ms);

  std::vector<std::shared_ptr<Segment>> SegmentsOf(int64_t daemon_id) const;
  // The daemon's LOCAL_DISK segment, attached or not; null when it has none.
  std::shared_ptr<Segment> DiskSegmentOf(int64_t daemon_id) const;
  std::shared_ptr<Segment> Get(uint32_t slot) const;  // null once erased
  // Frees a range; a no-op when the segment has been unmounted since (its space is gone).
  void Free(uint32_t slot, uint32_t node) const;

  // Reserves up to replica_num ranges of size bytes, each on a different segment, in the
  // order of the placement policy above (segment names in preferred and avoided), one
  // segment per daemon before a daemon gets a second replica, and one per name before a
  // name gets a second. Returns fewer than replica_num (possibly none) when space runs out.
  // local_daemon: the writer's daemon id for tier 1b, 0 for none.
  std::vector<Placement> Allocate(uint64_t size, size_t replica_num,
                                  const std::vector<std::string>& preferred,
                                  const std::vector<std::string>& avoided = {},
                                  int64_t local_daemon = 0);
  bool local_first() const { return strategy_ == AllocationStrategy::kLocalFirst; }

  // Attached segments, with used bytes filled in and incarnations blanked.
  std::vector<rpc::SegmentInfo> List() const;
  // Every segment, as stored (snapshots); the caller holds the master's state gate.
  std::vector<std::shared_ptr<Segment>> All() const;
  size_t count() const;  // memory segments
  // LOCAL_DISK segments, and their sizes summed.
  void DiskFigures(size_t* count, uint64_t* capacity) const;
  // Detached segments (restored, or of a silent daemon); an atomic read, for hot paths.
  size_t detached_count() const { return detached_.load(std::memory_order_acquire); }
  uint64_t capacity() const;
  uint64_t used() const;
  // Both at once, under one shared lock (a put's watermark check).
  void Usage(uint64_t* used, uint64_t* capacity) const;

 private:
  // A new segment's name is free for its lender (SegmentInfo.lender): no segment not
  // draining carries it for another lender or daemon.
  bool NameFree(const rpc::SegmentInfo& info) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::shared_ptr<Segment>> CandidateOrder(const std::vector<std::string>& preferred,
                                                       const std::vector<std::string>& avoided,
                                                       int64_t local_daemon) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const AllocationStrategy strategy_;
  const uint64_t alignment_;
  const uint64_t placement_seed_;                          // 0: random orders
  mutable std::atomic<uint64_t> orders_drawn_{0};          // n of the next seeded order
  mutable absl::Mutex mu_;
  // Index = slot; null once erased.
  std::vector<std::shared_ptr<Segment>> slots_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<int64_t, uint32_t> slot_by_id_ ABSL_GUARDED_BY(mu_);  // segment id → slot
  std::atomic<size_t> detached_{0};                        // changed under mu_
  // Segments lent by clients (none: the order is the strategy's).
  size_t lent_ ABSL_GUARDED_BY(mu_) = 0;
  // Daemon id → its LOCAL_DISK slot.
  std::unordered_map<int64_t, uint32_t> disk_by_daemon_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint32_t> next_round_{1};                   // NextRound's
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_SEGMENT_REGISTRY_H_
