// A memory segment a daemon lends to the cluster, as the master sees it: who owns it, how
// to reach it, and which ranges inside it are taken.
#ifndef MOONCAKE_MASTER_SEGMENT_H_
#define MOONCAKE_MASTER_SEGMENT_H_

#include <cstdint>
#include <mutex>

#include "common/offset_allocator.h"
#include "master_types.h"

namespace mooncake {

class Segment {
 public:
  Segment(uint32_t slot, rpc::SegmentInfo info, uint64_t alignment);

  uint32_t slot() const { return slot_; }
  // Immutable after mount; safe to read without a lock.
  const rpc::SegmentInfo& info() const { return info_; }

  // Reserves size bytes; false when no free range fits or the segment is being unmounted.
  bool Allocate(uint64_t size, uint64_t* offset, uint32_t* node);
  void Free(uint32_t node);
  // After this no Allocate succeeds; the unmount then drops every replica in it.
  void StopAllocating();

  uint64_t capacity() const;
  uint64_t used() const;
  double free_ratio() const;

 private:
  const uint32_t slot_;
  const rpc::SegmentInfo info_;
  mutable std::mutex mu_;
  OffsetAllocator allocator_;  // guarded by mu_
  bool allocating_ = true;     // guarded by mu_
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_SEGMENT_H_
