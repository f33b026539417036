// The SSD tier of one daemon (docs/ssd.md): objects packed into append-only bucket files
// under one directory, each bucket with a `.meta` file listing (key, offset, length,
// checksum) of its objects, and the key -> (bucket, offset, length) index in DRAM.
//
// Lifetime. Open() scans the directory: with persistence relaxed or strict it rebuilds the
// index from the `.meta` files (an object whose record is cut short or fails its own
// check is left out; a bucket file shorter than its `.meta` says loses the objects past
// its end), with disabled it wipes the directory. List() then names what survived, for the
// daemon to re-register with the master.
//
// Writes (the offloader's thread): Write() appends a batch of objects to the open bucket,
// through io_uring (O_DIRECT where the filesystem allows it; otherwise buffered I/O, said
// once in the log), sealing it and opening the next when it is full. Persistence modes:
//   disabled  nothing survives a restart;
//   relaxed   a background flusher (every kRelaxedSyncMs / 4) fdatasyncs the buckets
//             written, then appends and fdatasyncs their `.meta` records: an object whose
//             Write returned kRelaxedSyncMs or more before a crash survives it (unless a
//             sync itself failed, which is logged); younger ones may be lost, never served
//             torn (every object is checked at read). A clean close (the destructor)
//             writes everything;
//   strict    Write() returns only once the data and `.meta` of every object it wrote are
//             fdatasynced (and the directory, for a new bucket): one round of syncs per
//             batch, shared by the Writes that wait at the same time (group commit), so
//             what the daemon reports to the master survives a crash. Forget's records
//             follow within kRelaxedSyncMs, as in relaxed mode.
// A write that does not fit (the capacity, or ENOSPC from the filesystem) fails with
// FILE_WRITE_FAIL for that object alone; the store stays usable.
//
// Space. When usage passes high_watermark x capacity (or a write meets ENOSPC), whole
// buckets are evicted, oldest sealed first (fifo) or least recently read first (lru):
// the store first calls DropFn with the keys still live in the bucket (the daemon tells
// the master to drop those LOCAL_DISK replicas), and only if it returns true waits for the
// reads in progress on the bucket to end and deletes its files. If DropFn fails, nothing
// is deleted and the write that needed the room fails. The open bucket's file is
// preallocated to bucket_size (cut to its contents when sealed): the filesystem may hold
// up to one bucket more than used_bytes says.
//
// Reads (workers, the transfer port's threads): Read() copies a range of one object into
// dest -- straight from the file where alignment allows, else through a bounce buffer --
// and checks it against the object's length and checksums from `.meta`: each value is
// checked in blocks of kSsdCheckBlock (256 KiB, daemon/ssd_store/ssd_bucket.h), and a read checks
// every block its range touches, whole (a partial read costs at most two blocks more
// than its range). A torn or corrupt object answers CHECKSUM_MISMATCH, is dropped from the
// index and reported through DropFn, and is never served. OBJECT_NOT_FOUND for a key the
// index does not hold.
//
// Thread-safety: every method may be called from any thread; many Reads run at once, and
// Writes overlap with them and with each other (only placement in the open bucket takes
// turns; their syncs are shared). DropFn is called with no lock held, from the thread of
// the Write that needs room or of the Read that found a corrupt object; it may call any
// method but Write (a Write there would wait for the eviction that called it). Locks:
// daemon/ssd_store/ssd_store_impl.h.
#ifndef MOONCAKE_DAEMON_SSD_STORE_H_
#define MOONCAKE_DAEMON_SSD_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/base/error_code.h"
#include "daemon/ssd_store/ssd_options.h"

namespace mooncake {

// One object the store holds.
struct SsdObject {
  std::string key;       // a stored key (common/base/tenant_key.h)
  uint64_t size = 0;
  int64_t checksum = -1;  // the value's CRC-32C as the master knows it, -1: none
};

struct SsdStats {
  uint64_t capacity = 0;
  uint64_t used_bytes = 0;      // bucket files, live objects and dead space
  uint64_t live_bytes = 0;      // objects the index holds
  uint64_t objects = 0;
  uint64_t buckets = 0;
  uint64_t evicted_buckets = 0;
  uint64_t write_failures = 0;  // objects Write() could not store
  uint64_t corrupt_reads = 0;   // objects Read() found torn or corrupt
  uint64_t syncs = 0;           // rounds of fdatasync that had files to sync
  uint64_t read_objects = 0;    // Read() calls that succeeded (whole values or chunks)
  uint64_t read_bytes = 0;      // the bytes they copied out
  uint64_t read_failures = 0;   // Read() calls that failed at the disk (FILE_READ_FAIL)
  uint64_t written_objects = 0; // objects Write() stored
  uint64_t written_bytes = 0;   // their values' bytes
  bool direct_io = false;       // O_DIRECT in use
};

class SsdStore {
 public:
  // Tells the master to drop these LOCAL_DISK replicas; false when it could not be told.
  using DropFn = std::function<bool(const std::vector<std::string>& keys)>;

  // How long relaxed mode may keep an object's `.meta` record in memory (above).
  static constexpr int kRelaxedSyncMs = 1000;

  // Opens (creating it if needed) options.path, whose `LOCK` file it holds (flock) until
  // destroyed. FILE_LOCK_FAIL with *error when another process (or another SsdStore)
  // holds it; FILE_OPEN_FAIL when the directory cannot be used (not writable, no
  // io_uring); INVALID_PARAMS for options out of range or no drop. Only `<id>.bucket` and
  // `<id>.meta` files are the store's: others (IDENTITY, LOCK) are never touched.
  static ErrorCode Open(const SsdOptions& options, DropFn drop, std::unique_ptr<SsdStore>* out,
                        std::string* error);

  virtual ~SsdStore() = default;

  // What the index holds (after Open: what survived the restart).
  virtual std::vector<SsdObject> List() const = 0;

  // One object of a Write() batch: data[0, size) is its value.
  struct WriteItem {
    SsdObject object;
    const char* data = nullptr;
    ErrorCode result = ErrorCode::OK;  // set by Write
  };
  // Stores every item (replacing an earlier object of the same key), in one batch of
  // submissions; each result OK, or why not (FILE_WRITE_FAIL: no room, or the disk failed;
  // INVALID_PARAMS: an empty or too long key, no data). In strict mode, returns once every
  // stored item is durable. The data is copied before Write returns.
  virtual void Write(std::vector<WriteItem>* items) = 0;

  // Copies [offset, offset + length) of key's value into dest, checked as above: OK,
  // OBJECT_NOT_FOUND, INVALID_PARAMS (a range outside the value), CHECKSUM_MISMATCH
  // (corrupt: dropped), FILE_READ_FAIL. After an error dest's contents are unspecified.
  virtual ErrorCode Read(const std::string& key, uint64_t offset, char* dest,
                         uint64_t length) = 0;
  // The object key names, if the index holds it.
  virtual bool Find(const std::string& key, SsdObject* out) const = 0;
  // Forgets keys (the master dropped them or never took them); their space is reclaimed
  // with their bucket.
  virtual void Forget(const std::vector<std::string>& keys) = 0;

  virtual SsdStats Stats() const = 0;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_SSD_STORE_H_
