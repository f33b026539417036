// Objects of memory segments the master dropped because their daemon did not come back in
// time (past --daemon_grace_period_sec, or --reattach_grace_period_sec after a restore),
// kept aside -- "parked" -- for --parked_segment_ttl_sec (docs/durability.md, "A daemon
// that returns late"). A daemon that was only paused still holds their bytes; when it
// mounts the same segment again (same id, owner, name, base, size and incarnation) the
// master reserves the parked ranges in the new segment before anyone can allocate there
// (Claim), and the daemon verifies them against their checksums as after a restore
// (MasterService::ListUnverified / ReportVerified), which adopts the good ones.
//
// A parked object is not in the directory: reads miss it, a put of its key works as for
// any missing key (the parked one is then discarded at its report), eviction and the
// space figures do not see it. Remove, RemoveByRegex and RemoveAll discard it, so a key
// removed while its daemon was away never comes back. A mount under another incarnation
// (the daemon restarted: its memory is gone) or the TTL discards the set.
//
// Runtime state only: neither snapshotted nor logged (a restarted master has nothing to
// adopt back; its restored segments are verified instead). Memory: about twice the key
// plus 150 bytes per parked object (the entry and its index by key), for at most the TTL.
//
// Thread safety: every method may be called from any thread; the lock is a leaf (taken
// under a shard's lock, never holding another). Ranges to free are handed back to the
// caller, which frees them with no parked lock held.
#ifndef MOONCAKE_MASTER_PARKED_SEGMENTS_H_
#define MOONCAKE_MASTER_PARKED_SEGMENTS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "master/directory/segment.h"
#include "master_types.h"

namespace mooncake {

class ParkedSegments {
 public:
  struct Object {
    std::string key;  // stored key
    uint64_t offset = 0;
    uint64_t size = 0;
    int64_t checksum = -1;  // -1: none
    bool hard_pin = false;
  };
  // A range reserved for a parked object in a re-mounted segment, to free.
  struct Range {
    uint32_t slot;
    uint32_t node;
  };

  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }
  // Parked objects, those waiting for their daemon's report included.
  int64_t count() const { return count_.load(std::memory_order_acquire); }

  // Keeps objects of the dropped segment info until deadline_ms. A set already parked
  // under its id (a segment dropped again before its report ended) takes them over.
  void Park(const rpc::SegmentInfo& info, std::vector<Object> objects, int64_t deadline_ms);

  // At the mount of a new segment with info.segment_id (before anyone can allocate in it).
  // Same identity: reserves every parked range in segment (one that does not fit is
  // discarded, *expired), the set waits for the daemon's report until deadline_ms, true.
  // Another identity: the set is discarded (*expired its objects), false. No set: false.
  bool Claim(const rpc::SegmentInfo& info, Segment& segment, int64_t deadline_ms,
             int64_t* expired);

  // A page of the claimed set of segment_id in slot, from index from: at most max objects
  // not yet settled; the index to go on from, or -1 at the end (also when there is none).
  int64_t Page(int64_t segment_id, uint32_t slot, int64_t from, size_t max,
               std::vector<rpc::UnverifiedReplica>* out) const;

  // Takes the claimed object (key, offset) of segment_id in slot out of the set; false
  // when there is none (settled already, discarded, or never parked).
  bool Take(int64_t segment_id, uint32_t slot, const std::string& key, uint64_t offset,
            Object* out, uint32_t* node);

  // Discards every parked object of key (a removal); the number discarded.
  size_t Discard(const std::string& key, std::vector<Range>* to_free);
  // The parked keys for which match holds (RemoveByRegex, RemoveAll), copied out.
  std::vector<std::string> Keys(const std::function<bool(const std::string&)>& match) const;
  // Discards the set of segment_id (its segment was unmounted on purpose). to_free may be
  // null here and above when the ranges went with their segment.
  size_t DiscardSegment(int64_t segment_id, std::vector<Range>* to_free);
  // Discards sets past their deadline; the objects discarded.
  size_t Expire(int64_t now_ms, std::vector<Range>* to_free);
  void Clear();

 private:
  static constexpr uint32_t kUnclaimed = UINT32_MAX;
  static constexpr uint32_t kNoNode = UINT32_MAX;
  struct Entry {
    Object object;
    uint32_t node = kNoNode;  // its range in the claimed segment
    bool live = true;         // false once settled or discarded
  };
  struct Set {
    rpc::SegmentInfo info;
    int64_t deadline_ms = 0;
    uint32_t slot = kUnclaimed;  // the re-mounted segment's slot once claimed
    std::vector<Entry> entries;
    size_t live = 0;
  };
  // Marks entry i of set (id) settled, handing back its range.
  void Settle(int64_t id, Set& set, size_t i, std::vector<Range>* to_free)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseSet(int64_t id, std::vector<Range>* to_free, size_t* discarded)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::unordered_map<int64_t, Set> sets_ ABSL_GUARDED_BY(mu_);  // by segment id
  // Key → set, entry.
  std::unordered_multimap<std::string, std::pair<int64_t, size_t>> by_key_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> count_{0};
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_PARKED_SEGMENTS_H_
