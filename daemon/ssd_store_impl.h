// The implementation of SsdStore (daemon/ssd_store/ssd_store.h), shared by daemon/ssd_store/ssd_store.cc (Open
// and the scan of the directory, the index, reads) and daemon/ssd_store/ssd_store_write.cc (writes,
// bucket eviction, the group commit and the relaxed mode's flusher).
//
// Locks, in the order they are taken:
//   write_mu_  one Write's placement at a time (slots in the open bucket, the next
//              bucket); the I/O that follows runs outside it, Writes overlapping;
//   sync_mu_   the group commit's state (who syncs, what is synced);
//   mu_        the index, the buckets' state and every counter.
// No method holds mu_ across I/O but the meta appends' bookkeeping; DropFn runs with none
// of them held. An eviction marks its bucket evicting under mu_, calls DropFn unlocked,
// then waits under mu_ (changed_) for the bucket's readers to leave.
#ifndef MOONCAKE_DAEMON_SSD_STORE_IMPL_H_
#define MOONCAKE_DAEMON_SSD_STORE_IMPL_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/base/log_throttle.h"
#include "daemon/ssd_store/ssd_bucket.h"
#include "daemon/ssd_store/ssd_io.h"
#include "daemon/ssd_store/ssd_store.h"

namespace mooncake {

class SsdStoreImpl final : public SsdStore {
 public:
  SsdStoreImpl(const SsdOptions& options, DropFn drop);
  ~SsdStoreImpl() override;

  // Open's work after the options checked: the lock, the probe, the scan (or the wipe).
  ErrorCode Start(std::string* error);

  std::vector<SsdObject> List() const override;
  void Write(std::vector<WriteItem>* items) override;
  ErrorCode Read(const std::string& key, uint64_t offset, char* dest, uint64_t length) override;
  bool Find(const std::string& key, SsdObject* out) const override;
  void Forget(const std::vector<std::string>& keys) override;
  SsdStats Stats() const override;

 private:
  // Where one object lives.
  struct Entry {
    uint64_t bucket = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
    uint32_t data_crc = 0;
    int64_t checksum = -1;
    std::vector<uint32_t> block_crcs;  // one per kSsdCheckBlock
  };
  struct Bucket {
    std::shared_ptr<SsdBucket> file;
    uint64_t size = 0;     // bytes of its slots: the data file's size once sealed
    bool sealed = false;   // takes no more objects (every bucket but the open one)
    bool evicting = false; // DropFn or the wait for readers is under way
    int writers = 0;       // Writes with I/O in flight into it: never evicted then
    int readers = 0;       // Reads in progress: its files stay until they end
    uint64_t last_use = 0; // clock_ at its creation and at each read (lru)
    // (key, offset) of each object ever put in it; the live ones are those the index
    // still maps there.
    std::vector<std::pair<std::string, uint64_t>> slots;
    std::string pending_meta;  // records not yet appended to .meta
    bool data_dirty = false;   // written since the last sync
  };

  bool persistent() const { return options_.persist_mode != SsdPersistMode::kDisabled; }

  // ---- ssd_store.cc ----
  ErrorCode LockDirectory(std::string* error);
  void Wipe(const std::vector<uint64_t>& ids);
  void Rebuild(const std::vector<uint64_t>& ids);
  // Records key's object as dead in its bucket's .meta (a drop record) and takes it out
  // of the index. mu_ held.
  void RemoveEntryLocked(std::unordered_map<std::string, Entry>::iterator it);
  ErrorCode ReadChecked(const SsdBucket& file, const Entry& e, uint64_t offset, char* dest,
                        uint64_t length);

  // ---- ssd_store_write.cc ----
  // Reserves up to need bytes under the watermark, evicting buckets as needed; returns the
  // bytes reserved (less than need when eviction could not make the room).
  uint64_t MakeRoom(uint64_t need);
  // Evicts one bucket (lock holds mu_; released around DropFn and while readers finish).
  // false when no bucket can go, or DropFn refused.
  bool EvictOneLocked(std::unique_lock<std::mutex>* lock);
  Bucket* PickVictimLocked();
  // Takes no more objects; its file is cut to its size (the preallocation). mu_ held.
  void SealLocked(Bucket* b);
  // A fresh open bucket (sealing the one before), with the calling Write as its writer;
  // nullptr with the reason logged. write_mu_ held.
  Bucket* OpenNewBucket();
  // Waits until every write with a ticket up to ticket is durable; false when its sync
  // failed.
  bool GroupSync(uint64_t ticket);
  bool SyncOnce(uint64_t* target);
  void FlusherLoop();

  const SsdOptions options_;
  const DropFn drop_;
  const uint64_t limit_;  // high_watermark x capacity
  bool direct_ = false;
  int lock_fd_ = -1;
  int dir_fd_ = -1;

  mutable std::mutex mu_;
  std::condition_variable changed_;  // readers left a bucket, an eviction ended
  std::unordered_map<std::string, Entry> index_;  // guarded by mu_
  std::map<uint64_t, Bucket> buckets_;            // guarded by mu_; by id, oldest first
  uint64_t next_id_ = 1;                          // guarded by mu_
  uint64_t open_id_ = 0;                          // guarded by mu_; 0: none
  uint64_t used_ = 0;       // guarded by mu_; the buckets' sizes
  uint64_t reserved_ = 0;   // guarded by mu_; room MakeRoom granted to Writes in progress
  uint64_t live_bytes_ = 0; // guarded by mu_
  uint64_t clock_ = 0;      // guarded by mu_
  int evictions_ = 0;       // guarded by mu_; in progress
  uint64_t evicted_buckets_ = 0;  // guarded by mu_
  uint64_t write_failures_ = 0;   // guarded by mu_
  uint64_t corrupt_reads_ = 0;    // guarded by mu_
  uint64_t syncs_ = 0;            // guarded by mu_
  uint64_t read_objects_ = 0;     // guarded by mu_; Reads that succeeded
  uint64_t read_bytes_ = 0;       // guarded by mu_; their lengths
  uint64_t read_failures_ = 0;    // guarded by mu_; Reads that failed at the disk
  uint64_t written_objects_ = 0;  // guarded by mu_; Write items stored
  uint64_t written_bytes_ = 0;    // guarded by mu_; their sizes
  uint64_t write_seq_ = 0;        // guarded by mu_; the last Write's ticket
  bool dir_dirty_ = false;        // guarded by mu_; files created or removed since a sync

  std::mutex write_mu_;  // placement: the open bucket's end, opening the next bucket

  RingPool read_rings_;
  RingPool write_rings_;

  std::mutex sync_mu_;
  std::condition_variable sync_done_;
  bool syncing_ = false;    // guarded by sync_mu_
  uint64_t synced_seq_ = 0; // guarded by sync_mu_
  // Tickets whose sync failed (first, last): rare, and kept short.
  std::vector<std::pair<uint64_t, uint64_t>> failed_syncs_;  // guarded by sync_mu_
  bool stop_ = false;       // guarded by sync_mu_
  std::condition_variable stop_cv_;
  std::thread flusher_;
  // A full disk or an unreachable master fails every write: one line a second each.
  LogThrottle sync_log_;
  LogThrottle write_log_;
  LogThrottle evict_log_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_SSD_STORE_IMPL_H_
