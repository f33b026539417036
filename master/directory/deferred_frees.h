// Memory ranges whose freeing waits: someone may still be reading them (a read lease runs
// on the object that held them), or the log record that let them go is not on disk yet.
// Were such a range reused at once, a reader could see another object's bytes, or a crash
// could restore the old object pointing at bytes that have since become another's
// (docs/durability.md). Each range is freed into the segment registry once the clock has
// reached its due_ms and the log its due_seq.
//
// Thread roles: any thread adds (under a shard's lock: this lock is a leaf); the upkeep,
// and a put after its eviction round, free what is due.
#ifndef MOONCAKE_MASTER_DEFERRED_FREES_H_
#define MOONCAKE_MASTER_DEFERRED_FREES_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "master/directory/object_metadata.h"
#include "master/directory/segment_registry.h"

namespace mooncake {

class DeferredFrees {
 public:
  explicit DeferredFrees(SegmentRegistry& segments) : segments_(segments) {}
  DeferredFrees(const DeferredFrees&) = delete;
  DeferredFrees& operator=(const DeferredFrees&) = delete;

  // The memory replicas' ranges, freed once the clock reaches due_ms and the log due_seq
  // (0: no record to wait for). Disk replicas hold no range and are skipped.
  void Add(const ReplicaList& replicas, int64_t due_ms, uint64_t due_seq)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Frees every range due by now with the log durable up to synced.
  void FreeDue(int64_t now, uint64_t synced) ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets every range unfreed (the segments they lie in are gone).
  void Clear() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Range {
    int64_t due_ms;
    uint64_t due_seq;
    uint32_t slot;
    uint32_t node;
  };

  SegmentRegistry& segments_;
  absl::Mutex mu_;
  std::vector<Range> ranges_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_DEFERRED_FREES_H_
