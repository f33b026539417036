// Eviction's rounds: when usage passes the high watermark (or a put finds no space), a
// round samples the objects, plans how deep to go (master/eviction/eviction.h) and walks the shards
// taking candidates until enough bytes are freed. This class owns what a round needs from
// one round to the next (the sample, where the next walk starts, the sample's random
// windows, the pause after a round that fell short) and the lock that makes rounds run one
// at a time; what one object's eviction does (its tier, freeing or offloading it, its
// group) is the master's, asked through Objects.
//
// A put whose reservation would take usage past the high watermark evicts first, down to
// high − eviction_ratio, and so does the upkeep when usage is past it; a put that finds no
// space at all evicts at least its own size. The put waits for its round; the daemon, not
// the master, waits and retries when even that found nothing (docs/daemon.md): a handler
// runs on a Thrift I/O thread that serves many connections, and must not sleep.
//
// Thread roles: puts (MakeRoom), the upkeep (EvictAboveWatermark, QueueEarlyOffloads) and
// Evict from any thread; a round holds mu_ throughout, and takes the state gate and one
// shard's lock at a time under it (lock order: state gate → mu_ → shard).
#ifndef MOONCAKE_MASTER_EVICTION_ROUNDS_H_
#define MOONCAKE_MASTER_EVICTION_ROUNDS_H_

#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "master/eviction/eviction.h"
#include "master/directory/groups.h"
#include "master/directory/master_options.h"
#include "master/directory/object_directory.h"
#include "master/directory/segment_registry.h"
#include "master/directory/tenant_usage.h"

namespace mooncake {

class EvictionRounds {
 public:
  // What a round asks of the master about objects.
  class Objects {
   public:
    virtual ~Objects() = default;
    // What eviction may do with meta now; under its shard's lock.
    virtual EvictionTier TierOf(const Shard& shard, const ObjectMetadata& meta,
                                int64_t now) const = 0;
    // Under its shard's lock: takes a candidate. Bytes freed; *queued gains the bytes of an
    // eviction's offload queued instead; *erase: the object went (the walk erases it).
    virtual uint64_t EvictOne(Shard& shard, std::string_view key, ObjectMetadata& meta,
                              uint64_t* queued, bool* erase) = 0;
    // With no shard lock held: the rest of the group (members) of an object taken goes
    // too. Bytes freed; *evicted, *queued as EvictOne's.
    virtual uint64_t EvictRestOfGroup(const std::vector<std::string>& members,
                                      const EvictionThresholds& take, int64_t now,
                                      int64_t* evicted, uint64_t* queued) = 0;
    // Under its shard's lock: queues a plain offload of a candidate; true when queued.
    virtual bool QueueEarlyOffload(Shard& shard, std::string_view key,
                                   ObjectMetadata& meta) = 0;
    // After a round freed something: the evictions put on disk and their space freed now.
    virtual void ReclaimEvicted() = 0;
    virtual int64_t ObjectCount() const = 0;
  };

  // All of them outlive this; objects is the master that owns it.
  EvictionRounds(const MasterOptions& options, ObjectDirectory& directory,
                 SegmentRegistry& segments, const TenantUsage& tenants,
                 GroupTable& groups, Objects& objects)
      : options_(options),
        directory_(directory),
        segments_(segments),
        tenants_(tenants),
        groups_(groups),
        objects_(objects) {}
  EvictionRounds(const EvictionRounds&) = delete;
  EvictionRounds& operator=(const EvictionRounds&) = delete;

  // Usage would pass the high watermark with need more bytes.
  bool PastWatermark(uint64_t need) const;
  // A put's round, for need bytes (its size times its replicas): down to high −
  // eviction_ratio with need included, and (no_space: the put found none) at least need.
  // Skipped when, while this put waited for mu_, another round ran (true: try again),
  // when the reservation no longer passes the watermark (true), or within
  // kShortRoundPauseMs of a round that fell short (false: nothing to evict yet). True when
  // it freed something.
  bool MakeRoom(uint64_t need, bool no_space) ABSL_LOCKS_EXCLUDED(mu_);
  // The upkeep's round, while usage is past the high watermark.
  void EvictAboveWatermark() ABSL_LOCKS_EXCLUDED(mu_);
  // MasterService::Evict: one round for target bytes.
  uint64_t Evict(uint64_t target) ABSL_LOCKS_EXCLUDED(mu_);
  // Upkeep (--offload_on_evict): once usage passes high − eviction_ratio, queues plain
  // offloads for the oldest candidates that have no disk replica yet, about one round's
  // worth, so that the round that comes frees their memory at once.
  void QueueEarlyOffloads(int64_t now) ABSL_LOCKS_EXCLUDED(mu_);

  EvictionCounters& counters() { return counters_; }
  const EvictionCounters& counters() const { return counters_; }
  int64_t evicted_objects() const { return evicted_.load(); }
  // Memory pinned for eviction's offloads (the SSD tier adds and takes it): a round counts
  // it towards its target, for the reports of those offloads will free it.
  void AddPendingBytes(int64_t delta) { pending_bytes_.fetch_add(delta); }
  void ClearPendingBytes() { pending_bytes_ = 0; }

  // After a round that fell short, puts start no new one for this long: a round walks
  // every object, and the daemons' retries (docs/daemon.md) would otherwise have the
  // master walk its whole table back to back while nothing can have changed.
  static constexpr int64_t kShortRoundPauseMs = 10;
  // The upkeep queues early offloads (--offload_on_evict) at most this often.
  static constexpr int64_t kEarlyOffloadPeriodMs = 1000;

 private:
  int64_t Now() const { return options_.now_ms(); }
  // Samples, plans and walks until target bytes are freed, and counts the round. by_put:
  // for the figures.
  uint64_t RunRound(uint64_t target, bool by_put) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A window of each shard's table into planner_.
  void Sample(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts, shard by shard from next_shard_, the candidates the thresholds take, until
  // budget bytes are freed; adds to *evicted the objects that went.
  uint64_t Walk(const EvictionThresholds& take, uint64_t budget, int64_t now, int64_t* evicted,
                uint64_t* queued) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const MasterOptions& options_;
  ObjectDirectory& directory_;
  SegmentRegistry& segments_;
  const TenantUsage& tenants_;
  GroupTable& groups_;
  Objects& objects_;

  absl::Mutex mu_;  // one round at a time, so two callers never both evict
  EvictionPlanner planner_ ABSL_GUARDED_BY(mu_);
  // Each walk starts where the last one stopped, so no shard is always first.
  size_t next_shard_ ABSL_GUARDED_BY(mu_) = 0;
  std::minstd_rand rng_ ABSL_GUARDED_BY(mu_);  // the sample's random windows
  int64_t paused_until_ms_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_early_offload_ms_ = 0;  // only touched by the upkeep
  EvictionCounters counters_;
  std::atomic<int64_t> evicted_{0};
  std::atomic<int64_t> pending_bytes_{0};
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_EVICTION_ROUNDS_H_
