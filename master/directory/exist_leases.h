// The exist leases of one metadata shard (--exist_lease_ttl, off by default): for which
// objects an existence hit counted lately, and until when eviction passes them over
// (docs/master.md, "Existence checks").
//
// An existence check is a question, not a read: it hands out no replica list, so nothing
// must stay in place for it, and renewing the full read lease on every check (what the
// master did before) let an engine that polls batch_is_exist keep every key it ever wrote
// from being evicted, while the keys it had just written went instead. A hit now counts as
// one use per access (MasterService::ExistKey); an exist lease adds a hard guard for the
// read that usually follows, granted with that use and not renewed by later hits.
//
// Why a table beside the objects rather than a deadline in ObjectMetadata: that struct is
// paid for by millions of objects and has no 8 bytes to spare, while exist leases are short,
// so few are live at once (about checks per second times the TTL). ObjectMetadata::
// exist_hit says whether an object may have an entry, so an object never checked costs
// eviction no lookup. The table is bounded (kMaxPerShard); a check that finds it full of
// live leases answers without granting one.
//
// Not thread-safe: the shard's mutex guards it. Entries are keyed by the object's address,
// which is stable for the object's life (ObjectTable never moves a block); the shard
// forgets an object's entry before its block is freed (MasterService::ReleaseObject).
#ifndef MOONCAKE_MASTER_EXIST_LEASES_H_
#define MOONCAKE_MASTER_EXIST_LEASES_H_

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "master/directory/object_metadata.h"

namespace mooncake {

class ExistLeaseTable {
 public:
  // Live leases one shard holds at most: 1 Mi master-wide, far more than the master can
  // grant within a short TTL (about 40 bytes each).
  static constexpr size_t kMaxPerShard = 1024;

  // Records a lease of object until until_ms (replacing any earlier one); false when the
  // table holds kMaxPerShard live leases.
  bool Grant(const ObjectMetadata* object, int64_t until_ms, int64_t now_ms);
  // object's lease runs past now_ms.
  bool Live(const ObjectMetadata* object, int64_t now_ms) const;
  void Forget(const ObjectMetadata* object) { until_.erase(object); }
  // Drops the leases that have ended.
  void Prune(int64_t now_ms);
  void Clear() { until_.clear(); }
  size_t size() const { return until_.size(); }
  bool empty() const { return until_.empty(); }

 private:
  std::unordered_map<const ObjectMetadata*, int64_t> until_;
  // Grant prunes once the table reaches this size, then doubles it from what is left:
  // ended leases cost amortized O(1) each without a sweep.
  size_t prune_at_ = kMinPruneAt;
  static constexpr size_t kMinPruneAt = 64;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_EXIST_LEASES_H_
