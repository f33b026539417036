// Where recently read objects live -- in this daemon's memory or another daemon's -- kept
// for as long as the master's read lease guarantees it, so that repeated reads skip the
// master round trip.
//
// Why it is safe. After a successful GetReplicaList the master keeps the object's bytes
// where it said until the lease runs out: a leased object is never evicted, and a forced
// remove or an upsert of it frees the old space only once the lease has ended. So until
// that deadline a read may copy from the listed replica without asking again. An entry is
// used only until asked_at + 0.9 x lease_ttl_ms on our monotonic clock, asked_at taken
// before the request was sent; the 10% margin absorbs clock-rate differences between the
// hosts. A replica in another daemon's segment is kept too when the read goes over TCP:
// the owner checks the epoch of the master that granted the lease on every read, and
// refuses it once it has mounted its segments at another master (which may reuse their
// ranges at once), so a master restart cannot make a remembered remote range serve
// another object's bytes. (RDMA reads bypass the owner's CPU, so they are not kept.)
//
// Freshness. A get or exist that starts after an upsert or remove has returned, on any
// host, never answers the old value. A change made through *this* daemon invalidates the
// key here before its writer is answered. One made through another daemon reaches us
// before *its* writer is answered: a read that fills this cache names this daemon to the
// master (GetReplicaList's reader), the master names us to the writer as a holder of the
// key, and the writer sends us an INVALIDATE on the transfer port, which runs Invalidate()
// or Clear() here and only then acknowledges (daemon/cluster/cache_invalidator.h). If we cannot
// answer (stopped, partitioned), the writer waits until our lease on the key has ended;
// our entry ended before that. So a hit costs no master round trip, and a key nobody
// changes (the KV-cache case) costs nothing more than before; a change pays one round trip
// to each daemon that read the key within its lease.
//
// Races. A fill takes a ticket (the epoch of the key's stripe, one of 4096) before the
// RPC and is dropped if any invalidation of that stripe ran meanwhile, so a reply the
// master gave before a remove can never be cached after it; unrelated writes seldom cost
// a fill. That holds for remote invalidations as well: a request the master ordered
// before the change got us named, our ticket predates that request, and the INVALIDATE
// runs here after the change, so it bumps the stripe after the ticket was taken (a request
// ordered after the change got the new value). A fill whose deadline has passed (we were
// stopped between the master's answer and the fill, and the writer waited our lease out)
// is dropped too. Every ordering is spelled out in daemon/cluster/cache_invalidator.h.
// ClearForRemount() (re-registration: a restarted master knows no leases and will reuse
// our segment's offsets once we mount again) also bumps a generation that every copy made
// under a lease checks afterwards, seqlock style: a copy that overlapped it may be torn,
// so it is not trusted.
//
// Bounded: at most max_entries keys and roughly max_bytes of keys and bookkeeping. A full
// shard first drops what has expired, then arbitrary entries down to 7/8 of its share.
// Each shard is an open-addressing table that keeps each key's hash beside it: a fill
// allocates nothing but a long key's bytes, and growing a table reads no key (a batch of
// first reads fills one entry per key; std::unordered_map's node per fill, and rehashing
// keys whose bytes are each a cache miss, were most of a fill's cost).
//
// Thread-safety: every method may be called from any thread; 64 shards, each its own lock.
#ifndef MOONCAKE_DAEMON_READ_CACHE_H_
#define MOONCAKE_DAEMON_READ_CACHE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "daemon/transfer/replica_target.h"

namespace mooncake {

class ReadCache {
 public:
  using Clock = std::chrono::steady_clock;

  struct Entry {
    ReplicaTarget where;  // a local one keeps its memory mapped while copying
    uint64_t size = 0;
    int64_t checksum = -1;  // the value's CRC32C, for remote reads to verify; -1: none
    Clock::time_point deadline;  // asked_at + 0.9 x lease
    bool local() const { return where.local(); }
    char* data() const { return where.data(); }  // local only
  };

  // Taken before asking the master; a Fill with a stale ticket is dropped.
  using Ticket = uint64_t;

  static constexpr size_t kDefaultMaxEntries = 1u << 20;
  static constexpr size_t kDefaultMaxBytes = 256u << 20;

  explicit ReadCache(bool enabled, size_t max_entries = kDefaultMaxEntries,
                     size_t max_bytes = kDefaultMaxBytes);
  ReadCache(const ReadCache&) = delete;
  ReadCache& operator=(const ReadCache&) = delete;

  bool enabled() const { return enabled_; }

  // The lease deadline an entry gets: 90% of the lease, from before the request was sent.
  static Clock::time_point EntryDeadline(Clock::time_point asked_at, int64_t lease_ttl_ms);

  Ticket Begin(const std::string& key) const;
  void Fill(const std::string& key, Ticket ticket, Entry entry);
  // A live entry (copied out), or false. Expired entries are dropped on the way.
  bool Lookup(const std::string& key, Entry* out);

  // Forgets the key (and voids fills of its stripe in flight). A local write, or another
  // daemon's INVALIDATE.
  void Invalidate(const std::string& key);
  // Forgets everything and voids every fill in flight (removal by pattern, here or
  // through another daemon). Leases granted before stay valid, so copies running
  // meanwhile are still sound.
  void Clear();
  // Forgets everything before the segments are mounted again at a master that may have
  // restarted (its leases are gone), and bumps remount_generation(). Runs even when the
  // cache is disabled: the generation also guards copies made under a fresh lease.
  void ClearForRemount();
  // Forgets every entry in a segment being unmounted. Its memory stays mapped while a
  // copy holds it, and the master never reuses an unmounted segment, so running copies
  // are unaffected.
  void DropSegment(int64_t segment_id);

  // Read before a copy made under a lease, and again after it (behind an acquire fence):
  // a change means the master may have handed the range out again meanwhile.
  uint64_t remount_generation() const { return generation_.load(std::memory_order_acquire); }
  bool SameGeneration(uint64_t before) const {
    std::atomic_thread_fence(std::memory_order_acquire);  // the copy's loads come first
    return generation_.load(std::memory_order_relaxed) == before;
  }

  size_t size() const;  // entries, for tests and logs

 private:
  static constexpr size_t kShards = 64;
  // Epoch stripes; stripe i belongs to shard i % kShards and changes under its lock.
  static constexpr size_t kStripes = 4096;

  // A key and its hash, computed once per call and used for both the stripe and the table.
  struct KeyRef {
    std::string_view key;
    size_t hash;
  };
  struct StoredKey {
    explicit StoredKey(const KeyRef& ref) : key(ref.key), hash(ref.hash) {}
    std::string key;
    size_t hash;
  };
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(const StoredKey& k) const { return k.hash; }
    size_t operator()(const KeyRef& k) const { return k.hash; }
  };
  struct KeyEq {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return a.hash == b.hash && std::string_view(a.key) == std::string_view(b.key);
    }
  };
  using Map = absl::flat_hash_map<StoredKey, Entry, KeyHash, KeyEq>;
  // Rough cost of one entry besides a long key's bytes: its slot (key, hash, Entry,
  // control byte) in a table between 7/16 and 7/8 full.
  static constexpr size_t kEntryOverhead = 2 * (sizeof(StoredKey) + sizeof(Entry) + 1);
  struct alignas(64) Shard {
    std::mutex mu;
    Map map;                                     // guarded by mu
    size_t bytes = 0;                            // guarded by mu
  };

  static KeyRef Hashed(const std::string& key) {
    return KeyRef{key, std::hash<std::string_view>()(key)};
  }
  // The high bits: the table inside the shard places by the low ones.
  static size_t StripeOf(const KeyRef& key) { return (key.hash >> 40) % kStripes; }
  Shard& ShardOf(size_t stripe) const { return shards_[stripe % kShards]; }
  // Bumps every stripe of the shard (whose lock the caller holds).
  void BumpShardLocked(size_t shard);
  void EvictLocked(Shard& shard, Clock::time_point now);
  void EraseLocked(Shard& shard, Map::iterator it);

  const bool enabled_;
  const size_t shard_max_entries_;
  const size_t shard_max_bytes_;
  std::unique_ptr<Shard[]> shards_;
  std::unique_ptr<std::atomic<uint64_t>[]> epochs_;  // kStripes; written under the shard lock
  std::atomic<uint64_t> generation_{0};
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_READ_CACHE_H_
