// What the master remembers about one object. Kept small on purpose: a master holds
// millions of these, and the budget is about 250 bytes per single-replica object including
// the key and the hash-map node.
#ifndef MOONCAKE_MASTER_OBJECT_METADATA_H_
#define MOONCAKE_MASTER_OBJECT_METADATA_H_

#include <cstdint>
#include <memory>

namespace mooncake {

enum class ReplicaKind : uint8_t { kMemory = 0, kLocalDisk = 1 };
enum class ReplicaStatus : uint8_t { kProcessing = 0, kComplete = 1, kFailed = 2, kRemoved = 3 };

// One copy of the bytes: a range inside a mounted segment (kMemory), or an object on a
// daemon's SSD (kLocalDisk: segment is its LOCAL_DISK segment's slot, offset 0, and
// alloc_node a number the master draws, unique in the slot: nothing is allocated there).
struct Replica {
  uint64_t offset = 0;      // inside the segment
  uint32_t segment = 0;     // slot in the SegmentRegistry (never reused)
  uint32_t alloc_node = 0;  // the segment allocator's handle, for Free(); see above for disk
  ReplicaKind kind = ReplicaKind::kMemory;
  ReplicaStatus status = ReplicaStatus::kProcessing;
  // A memory replica restored (or re-attached) whose range its daemon has not checked
  // against the object's CRC-32C yet: the range may have been freed and reused after the
  // restored point (docs/durability.md, "Verification after restore"). In the struct's
  // padding: it costs no byte (see the static_assert below).
  bool unverified = false;
  // A disk replica: the reconciliation round of its segment in which its daemon last
  // vouched for it (registered it, or created it by an offload's report or an adoption);
  // 0 for none (restored). Runtime state, never logged (master/directory/segment.h). In what was
  // padding: a Replica stays 24 bytes.
  uint32_t round = 0;

  // Unique among live replicas: slots are never reused and a node is unique in its slot.
  int64_t id() const { return (static_cast<int64_t>(segment) << 32) | alloc_node; }
  bool memory() const { return kind == ReplicaKind::kMemory; }
};

// A short list of replicas with room for one inline: almost every KV-cache object has a
// single replica, and a heap block for it would cost more than the rest of the metadata.
class ReplicaList {
 public:
  ReplicaList() = default;
  ReplicaList(ReplicaList&&) = default;
  ReplicaList& operator=(ReplicaList&&) = default;

  uint8_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  Replica& operator[](size_t i) { return i == 0 ? first_ : rest_[i - 1]; }
  const Replica& operator[](size_t i) const { return i == 0 ? first_ : rest_[i - 1]; }

  void push_back(const Replica& r) {
    if (count_ == 0) {
      first_ = r;
    } else {
      std::unique_ptr<Replica[]> grown(new Replica[count_]);
      for (uint8_t i = 1; i < count_; ++i) grown[i - 1] = rest_[i - 1];
      grown[count_ - 1] = r;
      rest_ = std::move(grown);
    }
    ++count_;
  }

  // Removes element i by moving the last one into its place (order is not meaningful).
  void erase(size_t i) {
    (*this)[i] = (*this)[count_ - 1];
    --count_;
    if (count_ <= 1) rest_.reset();
  }

  void clear() {
    rest_.reset();
    count_ = 0;
  }

 private:
  Replica first_;
  std::unique_ptr<Replica[]> rest_;  // replicas 1..count_-1
  uint8_t count_ = 0;
};

// Where in a replica list: the index of the replica with that id, of the disk replica in
// segment slot, or kNoReplica.
constexpr size_t kNoReplica = static_cast<size_t>(-1);
inline size_t ReplicaById(const ReplicaList& replicas, int64_t id) {
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (replicas[i].id() == id) return i;
  }
  return kNoReplica;
}
inline size_t DiskReplicaIn(const ReplicaList& replicas, uint32_t slot) {
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (!replicas[i].memory() && replicas[i].segment == slot) return i;
  }
  return kNoReplica;
}

struct ObjectMetadata {
  ObjectMetadata()
      : complete(false),
        hard_pin(false),
        untracked_holders(false),
        has_checksum(false),
        exist_hit(false),
        offload_at_put(false),
        offload_pinned(false),
        grouped(false),
        unread(false) {}

  uint64_t size = 0;
  // While PROCESSING: when the put started. Once COMPLETE: the read-lease deadline (an
  // object whose deadline is in the past has no active lease). It also orders eviction,
  // oldest first (master/eviction/eviction.h): the last use the master can vouch for -- the
  // publication, the end of a read's lease (a daemon's read cache may serve reads until
  // then), or an existence hit counted as a use (exist_hit).
  int64_t time_ms = 0;
  // While PROCESSING: the soft-pin TTL asked for (0: none). Once COMPLETE: the soft-pin
  // deadline, fixed at publication (reads do not move it; 0: not soft-pinned).
  int64_t soft_pin_ms = 0;
  int64_t writer = 0;                // daemon that started the put
  ReplicaList replicas;
  // Nine one-bit flags in two bytes (bit-fields, so that they, the quota slot and the
  // checksum still fit in the 8 bytes after the replica list; the static_assert below
  // holds that).
  bool complete : 1;
  bool hard_pin : 1;
  // Some daemon was granted a lease it may cache without a record of it (the shard's
  // CacheHolderTable was full, master/directory/cache_holders.h): until time_ms, a change must assume
  // that any daemon holds it.
  bool untracked_holders : 1;
  // The CRC-32C the writer gave at PutEnd/UpsertEnd, if any.
  bool has_checksum : 1;
  // An existence hit was counted since the object was last written or read: it moved
  // time_ms up to the check, as a use, and granted the exist lease if there is one
  // (--exist_lease_ttl; its deadline is in the shard's ExistLeaseTable). Further hits count
  // for nothing until the next read, so polling cannot keep an object young.
  bool exist_hit : 1;
  // While PROCESSING: PutEnd queues an offload to the SSD tier (ReplicateConfig.offload,
  // or --enable_offload). Unused once COMPLETE.
  bool offload_at_put : 1;
  // An eviction round queued an offload of it (--offload_on_evict): it is no eviction
  // candidate until the report (or the task's end) says what became of it.
  bool offload_pinned : 1;
  // The object is in a group (Mooncake's group_ids): master/directory/groups.h knows which. It stays
  // in it for as long as it exists; whoever erases it takes it out of its group.
  bool grouped : 1;
  // Published by a put and not read since (no read lease granted): time_ms is the
  // publication, or an existence hit after it. BatchReplicaClear leaves such an object
  // alone for one lease after time_ms, as if its put had leased it (docs/mooncake-api.md,
  // "leases").
  bool unread : 1;
  // The key's tenant among those with a quota (TenantUsage::QuotaSlot; 0: none, as the
  // default tenant and every tenant without a quota), set where the metadata is made: what
  // eviction asks to tell whether the object is sheltered (master/eviction/eviction.h) without
  // reading its key. In the two bytes the flags leave before the checksum.
  uint16_t quota_slot = 0;
  uint32_t checksum = 0;

  bool leased(int64_t now_ms) const { return complete && time_ms > now_ms; }
  bool soft_pinned(int64_t now_ms) const { return complete && soft_pin_ms > now_ms; }

  size_t memory_replicas() const {
    size_t n = 0;
    for (size_t i = 0; i < replicas.size(); ++i) n += replicas[i].memory();
    return n;
  }
  size_t disk_replicas() const { return replicas.size() - memory_replicas(); }

  // -1 for none, as the RPCs say it.
  int64_t checksum_or_none() const { return has_checksum ? int64_t{checksum} : -1; }
  // A negative value clears it; the caller has rejected values above 2^32-1.
  void set_checksum(int64_t value) {
    has_checksum = value >= 0;
    checksum = has_checksum ? static_cast<uint32_t>(value) : 0;
  }
};

// Every byte here is paid a million times over: growing it moves a 64-byte-key object's
// block (metadata + key) into the next malloc size class. See docs/master.md.
static_assert(sizeof(void*) != 8 || sizeof(Replica) == 24, "Replica must stay 24 bytes");
static_assert(sizeof(void*) != 8 || sizeof(ObjectMetadata) == 80,
              "ObjectMetadata must stay 80 bytes on 64-bit targets");

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_OBJECT_METADATA_H_
