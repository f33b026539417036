// Which daemons may hold an object in their read caches, and until when: the master's half
// of keeping every host's reads fresh (docs/daemon.md, "Read cache").
//
// A daemon that will remember a GetReplicaList answer names itself (the reader argument);
// the grant is recorded here with the lease deadline it got. A change to the object
// (UpsertEnd, a removal) takes the records whose lease has not ended into a CacheHolderSet,
// and the reply names those daemons to the writer, which makes them forget the key before
// it answers its own client. A record outliving its use costs one needless message, never a
// stale read; a record missing would cost a stale read, so whenever one cannot be kept the
// object is marked untracked instead (ObjectMetadata::untracked_holders): "any daemon, until
// the object's lease ends" (ObjectMetadata::time_ms is the latest lease granted on it).
//
// Memory. Records live only as long as their lease: a grant drops the object's expired
// records, a change drops all of them, and MasterService::Tick sweeps a slice of the shards
// each time (Prune), so every shard is swept every couple of seconds. An object keeps at
// most kMaxPerObject records and a table at most max_records; a grant beyond either is not
// recorded (Grant returns false) and the object becomes untracked, which costs nothing.
// An object's first record lives in the table's own slot (an open-addressing table, 33
// bytes a slot at most 7/8 full): no allocation per grant, which is what a batch read of
// keys nobody read before costs (a node, a bucket and a vector block per key with
// std::unordered_map, over half of BatchGetReplicaList's time). A second reader moves the
// records into a heap block, 16 bytes each. None for an object nobody reads through a
// cache.
//
// Keyed by the object's address: an ObjectTable block never moves while the object lives,
// and MasterService forgets the records when it releases the object. (Were one forgotten
// late, the next object at that address would inherit a needless message until the record
// expired.)
//
// Not thread-safe: one table per metadata shard, guarded by the shard's mutex.
#ifndef MOONCAKE_MASTER_CACHE_HOLDERS_H_
#define MOONCAKE_MASTER_CACHE_HOLDERS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "master/directory/object_metadata.h"

namespace mooncake {

// The daemons one change names, gathered over every object it changed: one for UpsertEnd
// and Remove, several for a batch (each under its key's index in the batch) or a pattern.
class CacheHolderSet {
 public:
  struct Holder {
    int64_t until_ms = 0;       // the latest lease deadline over its keys
    std::vector<int32_t> keys;  // indices of the keys it may hold, ascending; see Add
  };

  // daemon may hold the key at key_index until until_ms. A negative key_index records no
  // index (a pattern's keys, which the writer never lists).
  void Add(int64_t daemon, int64_t until_ms, int32_t key_index);
  // Any daemon may hold it until until_ms (an untracked object).
  void AddEveryone(int64_t until_ms, int32_t key_index);
  // Something changed: a change that names nobody still answers for the master's blind
  // spots (MasterService::DescribeHolders).
  void NoteChange() { changed_ = true; }

  bool changed() const { return changed_; }
  const std::map<int64_t, Holder>& daemons() const { return daemons_; }
  const Holder& everyone() const { return everyone_; }  // until_ms 0: nobody

  // Merges h into into (later deadline, union of keys).
  static void Merge(const Holder& h, Holder* into);

 private:
  static void AddTo(Holder* h, int64_t until_ms, int32_t key_index);

  std::map<int64_t, Holder> daemons_;
  Holder everyone_;
  bool changed_ = false;
};

class CacheHolderTable {
 public:
  static constexpr size_t kMaxPerObject = 8;

  explicit CacheHolderTable(size_t max_records = SIZE_MAX) : max_records_(max_records) {}
  CacheHolderTable(const CacheHolderTable&) = delete;
  CacheHolderTable& operator=(const CacheHolderTable&) = delete;

  void set_max_records(size_t max_records) { max_records_ = max_records; }

  // Records that daemon may hold object until until_ms (renewing its record if it has
  // one). false when it could not be recorded: the caller marks the object untracked.
  bool Grant(const ObjectMetadata* object, int64_t daemon, int64_t until_ms, int64_t now_ms);
  // Adds the object's records still live at now_ms to *out, under key_index, and forgets
  // all of them.
  void Take(const ObjectMetadata* object, int64_t now_ms, int32_t key_index,
            CacheHolderSet* out);
  // The object is going away.
  void Forget(const ObjectMetadata* object);
  // Drops every record whose lease ended by now_ms.
  void Prune(int64_t now_ms);
  void Clear();

  size_t records() const { return records_; }
  bool empty() const { return by_object_.empty(); }

 private:
  struct Record {
    int64_t daemon;
    int64_t until_ms;
  };
  using Records = absl::InlinedVector<Record, 1>;
  using Map = absl::flat_hash_map<const ObjectMetadata*, Records>;

  // Drops the expired records of one object; erases it when none is left (it, which the
  // caller advanced past first, stays valid: an erase never moves other slots).
  void DropExpired(Map::iterator it, int64_t now_ms);

  Map by_object_;
  size_t records_ = 0;
  size_t max_records_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_CACHE_HOLDERS_H_
