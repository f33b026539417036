// The SSD tier's own state in the master (docs/ssd.md, "master"): the offload tasks from
// queueing to the report (each one's OffloadState lives beside its object in the shard:
// master/directory/object_directory.h; the queues per daemon: master/ssd_tier/offload_queues.h), the numbering
// of disk replicas, and the tier's figures. What a report, a reconciliation or a promotion
// does to an object is MasterService's (master_service_disk.cc, master_service_promote.cc).
//
// Offloads copy a COMPLETE memory replica to its own daemon's SSD: queued at PutEnd
// (ReplicateConfig.offload, --enable_offload), by an eviction round (--offload_on_evict,
// the object pinned until the report) or early by the upkeep. Any change of the object
// erases its state (so a report of a replica that changed meanwhile answers -704). A
// fetched task read-leases its object; the report gives the object back the deadline it
// had when nobody read it since.
//
// Thread roles: the per-object calls run under the object's shard lock (any thread);
// ExpireOffloads on the upkeep; the figures are atomics, read by GetStats.
#ifndef MOONCAKE_MASTER_DISK_TIER_H_
#define MOONCAKE_MASTER_DISK_TIER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>

#include "master/eviction/eviction_rounds.h"
#include "master/directory/master_options.h"
#include "master/directory/object_directory.h"
#include "master/ssd_tier/offload_queues.h"
#include "master/directory/segment_registry.h"
#include "master_types.h"

namespace mooncake {

class DiskTier {
 public:
  // A task not reported this long after its lease (fetched) or its queueing counts as
  // failed; a failed object is offered again only this long after.
  static constexpr int64_t kOffloadReportMarginMs = 2000;
  static constexpr int64_t kOffloadRetryPauseMs = 30000;

  // The figures in GetStats (rpc::DiskStats), counted where they change.
  struct Counters {
    std::atomic<int64_t> objects{0}, bytes{0}, disk_only{0}, queued{0}, done{0}, failed{0},
        dropped_tasks{0}, evict_offloads{0}, promotions{0}, adopted{0}, dropped{0};
  };

  // All of them outlive this; eviction gets the bytes pinned for its offloads.
  DiskTier(const MasterOptions& options, ObjectDirectory& directory, const SegmentRegistry& segments,
           EvictionRounds& eviction)
      : options_(options), directory_(directory), segments_(segments), eviction_(eviction) {}
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  // The attached LOCAL_DISK segment of the daemon owning meta's first memory replica (and
  // that replica's index), or null: where an offload of meta would go.
  std::shared_ptr<Segment> OffloadTarget(const ObjectMetadata& meta, size_t* replica) const;
  // Under the shard lock: queues an offload of meta (for_eviction: pins it). kBusy when a
  // task of it is open (one queued at put becomes an eviction's when for_eviction), or it
  // failed a moment ago; kNoTier when its daemon has no SSD tier; kFull when the queue is.
  enum class QueueOutcome { kQueued, kBusy, kNoTier, kFull, kFailedRecently };
  QueueOutcome QueueOffload(Shard& shard, std::string_view key, ObjectMetadata& meta,
                            bool for_eviction);
  // Under the shard lock: ends the key's offload state (if any), unpinning meta (may be
  // null: the object went). failed: counts it and keeps the key out of offloads a while.
  void EndOffload(Shard& shard, std::string_view key, ObjectMetadata* meta, bool failed);
  // A fetched task's lease given back: the object's deadline as if nobody read it since.
  static void ReturnOffloadLease(const OffloadState& state, ObjectMetadata& meta);
  // Upkeep: tasks not reported in time fail, as do those whose daemon lost its SSD tier;
  // failed ones are forgotten once their pause is over.
  void ExpireOffloads(int64_t now);

  // A disk replica of disk, COMPLETE, numbered anew, vouched for in its current round.
  Replica NewDiskReplica(const Segment& disk);
  // A number for a disk replica (Replica::alloc_node: disk replicas hold no range).
  uint32_t NextDiskNode() { return next_disk_node_.fetch_add(1); }
  // Adds (sign 1) or takes away (-1) meta's part of the disk figures.
  void Count(const ObjectMetadata& meta, int sign);
  rpc::DiskStats Figures() const;
  Counters& counters() { return counters_; }
  OffloadQueues& queues() { return queues_; }
  // ClearState: no task, no disk object counted.
  void Clear();

 private:
  int64_t Now() const { return options_.now_ms(); }

  const MasterOptions& options_;
  ObjectDirectory& directory_;
  const SegmentRegistry& segments_;
  EvictionRounds& eviction_;

  OffloadQueues queues_;
  std::atomic<uint32_t> next_disk_node_{1};
  std::atomic<int64_t> states_{0};  // OffloadStates in every shard: the upkeep skips when 0
  Counters counters_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_DISK_TIER_H_
