// Reads of this daemon's disk replicas (its SSD tier, daemon/ssd_store/ssd_store.h), for the two
// readers it has: its own gets (straight into the application's pool) and other daemons'
// READ_DISK requests on the transfer port (into one of DiskReadSlots' buffers, then onto
// the socket).
//
// Identity. The master lists a disk replica by key; the SSD holds at most one value per
// key, and may hold another one than the listed (an upsert offloaded meanwhile, a replica
// the master dropped that the daemon has not forgotten yet). So a read serves a range only
// when the SSD's object has the listed size and, when both know one, the listed checksum:
// otherwise OBJECT_NOT_FOUND, as when it has none. The bytes themselves are checked by the
// store (length and checksum from `.meta`; a corrupt object answers CHECKSUM_MISMATCH and
// is dropped there).
//
// Bounded. Disk reads on the transfer port are few at a time (DiskReadSlots: a semaphore
// of `slots` buffers of transfer::kMaxDiskRead bytes each, allocated on first use and kept;
// memory: slots x 4 MiB at most), so peers cannot queue up unbounded SSD work or memory
// on this daemon: a request that finds every slot busy waits a bounded time, then is
// refused.
//
// Thread-safety: every function and method may be called from any thread.
#ifndef MOONCAKE_DAEMON_DISK_READS_H_
#define MOONCAKE_DAEMON_DISK_READS_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/base/error_code.h"
#include "daemon/ssd_store/ssd_store.h"
#include "daemon/transfer/transport.h"

namespace mooncake {

// Copies [value_offset, +length) of the listed value into dest: OK; OBJECT_NOT_FOUND (no
// such value on the SSD); INVALID_PARAMS (a range outside it, or empty); CHECKSUM_MISMATCH
// (the SSD copy is corrupt: the store dropped it); FILE_READ_FAIL; INTERNAL_ERROR without
// a store.
ErrorCode ReadDiskReplica(SsdStore* store, const DiskAddress& object, uint64_t value_offset,
                          char* dest, uint64_t length);

class DiskReadSlots {
 public:
  explicit DiskReadSlots(size_t slots);  // 0 counts as 1
  ~DiskReadSlots();
  DiskReadSlots(const DiskReadSlots&) = delete;
  DiskReadSlots& operator=(const DiskReadSlots&) = delete;

  // A buffer of transfer::kMaxDiskRead bytes (4 KiB aligned, for O_DIRECT), held for as
  // long as this lives; buffer() null when every slot stayed busy until the deadline (or
  // memory ran out).
  class Slot {
   public:
    Slot(Slot&& other) noexcept : owner_(other.owner_), buffer_(other.buffer_) {
      other.buffer_ = nullptr;
    }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot();
    char* buffer() const { return buffer_; }

   private:
    friend class DiskReadSlots;
    Slot(DiskReadSlots* owner, char* buffer) : owner_(owner), buffer_(buffer) {}
    DiskReadSlots* owner_;
    char* buffer_;
  };
  Slot Acquire(std::chrono::steady_clock::time_point deadline);

  size_t slots() const { return slots_; }
  size_t busy() const;  // for tests and stats

 private:
  void Release(char* buffer);

  const size_t slots_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t busy_ = 0;               // guarded by mu_
  std::vector<char*> free_;       // allocated, not in use; guarded by mu_
  std::vector<char*> allocated_;  // every buffer, freed at destruction; guarded by mu_
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_DISK_READS_H_
