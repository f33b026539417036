// The master's object directory: every object's metadata, by key, in kShardCount shards by
// key hash, each with its own mutex, and beside each object the states of what is under
// way on it (an upsert's new value, a drain's or a task's move, an offload, a promotion)
// and who may cache it. It owns the shards and their locks; what the objects mean (the
// put/get path, eviction, liveness, drains, the SSD tier, the restore) is MasterService's,
// which shares this directory by reference among its parts.
//
// Thread roles: any thread. No lock is global: a single-key operation holds its key's
// shard (LockedKey), a walk over every object one shard at a time, a slice of kScanSlice
// slots at a time (Scan), so that requests and the upkeep never wait long for one. The
// lock order has no two shards at once; a shard comes after the state gate and the
// eviction round's lock, before the segment registry's (master/service/master_service.h).
//
// Why the shard's fields carry no ABSL_GUARDED_BY: every user reaches a shard through a
// LockedKey or a Shard& whose lock the caller holds, and the analysis cannot name the
// mutex of a shard chosen at run time by hashing a key.
#ifndef MOONCAKE_MASTER_OBJECT_DIRECTORY_H_
#define MOONCAKE_MASTER_OBJECT_DIRECTORY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/synchronization/mutex.h"
#include "master/directory/cache_holders.h"
#include "master/directory/exist_leases.h"
#include "master/directory/object_metadata.h"
#include "master/directory/object_table.h"
#include "master/directory/replica_tasks.h"
#include "master/directory/state_gate.h"

namespace mooncake {

// A put's soft-pin request (MasterService::ResolveSoftPin).
enum class SoftPin : int32_t { kPreserve = 0, kEnable = 1, kDisable = 2 };
struct SoftPinRequest {
  SoftPin action = SoftPin::kPreserve;
  int64_t ttl_ms = 0;
};

// A replacement value being written by an upsert while the old one stays readable.
struct PendingUpsert {
  int64_t writer = 0;
  int64_t start_ms = 0;
  uint64_t size = 0;
  bool hard_pin = false;
  SoftPinRequest soft_pin;  // applied at UpsertEnd, from then
  bool offload = false;     // UpsertEnd queues an offload of the new value
  ReplicaList replicas;
};

// An object's replica being moved out of a draining segment: from (a replica of the
// object, by slot and allocator node) is copied to `to` by the segment's owner.
// A copy or move task's reservation is one too (task set): `to` holds a replica per
// target of a copy, which keeps its source, or the one target of a move.
struct PendingMove {
  int64_t mover = 0;  // the daemon draining the segment, or running the task
  int64_t start_ms = 0;
  uint32_t from_slot = 0;
  uint32_t from_node = 0;
  ReplicaList to;  // one replica (a copy task's: one or more), PROCESSING
  // The object changed or went since: the move can only fail, but its mover may still
  // be copying into `to`, which is freed when it commits or revokes (it is done then).
  bool orphaned = false;
  bool keep_source = false;  // a copy task: `to` is added, the source stays
  TaskId task;               // the task it serves; {0, 0} for a drain's move

  // Whether any of the targets lies in slot.
  bool Into(uint32_t slot) const;
};

// An offload of one object's memory replica to its daemon's SSD, from queueing to the
// report (MasterService, "The SSD tier").
struct OffloadState {
  enum class Stage : uint8_t { kQueued, kFetched, kFailed };
  Stage stage = Stage::kQueued;
  bool for_eviction = false;  // the object is pinned (ObjectMetadata::offload_pinned)
  int64_t daemon = 0;         // whose SSD
  int64_t replica_id = 0;     // the memory replica to copy
  // Queued, fetched: when it counts as failed. Failed: when it may be offered again.
  int64_t due_ms = 0;
  // Fetched: the lease deadline granted, and the object's deadline before it.
  int64_t granted_ms = 0;
  int64_t prior_ms = 0;
  uint64_t pinned_bytes = 0;  // for_eviction: its memory, pinned for eviction's offloads
};

// A memory replica being re-created from disk (PromoteStart): `to`, PROCESSING, is
// published into the object's replicas by PromoteEnd.
struct PendingPromotion {
  int64_t writer = 0;
  int64_t start_ms = 0;
  uint64_t size = 0;
  ReplicaList to;
  // As PendingMove's: the object changed or went; freed when its writer ends it, or once
  // it must have given up (put_start_release_timeout).
  bool orphaned = false;
};

// One shard: its objects and what is under way on them, all under mu.
struct Shard {
  mutable absl::Mutex mu;  // const readers (cache_holder_records) take it too
  ObjectTable objects;
  std::unordered_map<std::string, PendingUpsert> upserts;  // rare: a plain map will do
  std::unordered_map<std::string, PendingMove> moves;      // only while a segment drains
  std::unordered_map<std::string, OffloadState> offloads;  // the SSD tier's tasks
  std::unordered_map<std::string, PendingPromotion> promotions;
  CacheHolderTable holders;      // daemons that may cache the shard's objects
  ExistLeaseTable exist_leases;  // with exist_lease_ttl: exist leases running
};

class ObjectDirectory {
 public:
  static constexpr size_t kShardCount = 1024;
  // The slots a walk visits under one hold of a shard's lock.
  static constexpr size_t kScanSlice = 256;

  // gate: the master's state gate (not owned), which a walk holds shared per slice.
  // max_cache_holders: the master-wide bound on holder records (0: none kept), shared
  // evenly among the shards.
  ObjectDirectory(StateGate& gate, int64_t max_cache_holders);
  ObjectDirectory(const ObjectDirectory&) = delete;
  ObjectDirectory& operator=(const ObjectDirectory&) = delete;

  Shard& shard(size_t index) { return shards_[index]; }
  const Shard& shard(size_t index) const { return shards_[index]; }
  Shard& ShardOf(uint64_t hash) { return shards_[hash % kShardCount]; }

  // Walks one shard's objects as ObjectTable::ForEach does, but a slice at a time: visit
  // runs under the shard's lock (and the state gate, shared) for at most kScanSlice slots,
  // then both are let go so that waiting requests get their turn, and between (with no
  // lock held) runs. A table rehashed between two slices (by an insert) is walked
  // again from the start, after restarted: every object present for the whole walk is
  // visited, those added meanwhile may or may not be, and one already visited may be
  // visited again (so visit must be idempotent, or restarted undo what it collected).
  using Visit = std::function<bool(std::string_view, ObjectMetadata&)>;
  void Scan(Shard& shard, const Visit& visit, const std::function<void()>& between = nullptr,
            const std::function<void()>& restarted = nullptr);

  // Every shard emptied (objects and what is under way), holding each one's lock in turn.
  void Clear();
  // Holder records over all shards, for tests and logs.
  size_t cache_holder_records() const;

 private:
  StateGate& gate_;
  std::unique_ptr<Shard[]> shards_;
};

// How every single-key operation starts: hashes the key, locks its shard for as long as
// this lives and finds the key's object there (object is null when there is none). The
// shard lock is the first in the lock order after the gate, so freeing replicas under it
// is fine, but reserving is not: a reservation may evict, which takes shard locks.
// Checking the key is left to the caller, which answers a bad one in its own result type.
// Lives on the caller's stack; nothing is allocated.
class LockedKey {
 public:
  LockedKey(ObjectDirectory& directory, const std::string& key);
  LockedKey(const LockedKey&) = delete;
  LockedKey& operator=(const LockedKey&) = delete;

  // Takes the object out of the table; the caller has released what it held.
  void Erase() {
    shard.objects.Erase(key, hash);
    object = nullptr;
  }

  const std::string& key;
  const uint64_t hash;  // what the shard's ObjectTable wants
  Shard& shard;
  ObjectMetadata* object;  // looked up in the constructor's body, once lock_ is held

 private:
  absl::MutexLock lock_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_OBJECT_DIRECTORY_H_
