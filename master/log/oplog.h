// The master's operation log (write-ahead log). Every change of state a client may have
// been told about (an object published or removed, a segment mounted or unmounted, an
// eviction) is appended here as an opaque payload (the caller encodes it; the log never
// interprets it) and numbered with a sequence number. A snapshot records the sequence at
// which it was taken; at restart the master loads the newest valid snapshot and replays the
// records after its sequence (Recover), then appends after them (Start).
//
// Appending never does I/O: request threads append while they hold a shard lock, so Append
// only copies the payload into a buffer under a mutex. Records reach the disk (pwrite(2)
// at the log's logical end, then fdatasync(2)) in one of two ways: a flusher thread writes
// what is pending every flush_interval_ms, and Sync(seq), which an RPC calls before it
// answers, writes at once on the caller's own thread when no write is running (group
// commit, leader style: the Syncs arriving during one write + fdatasync are all served by
// the next, which the first of them makes). Whether a reply waits for Sync is the caller's
// choice: the master's strict mode.
//
// Preallocation (preallocate_bytes, 0: off). The file being appended to is kept extended
// with zeros, written with pwrite(2) (not fallocate, whose unwritten extents make the first
// write into them a metadata change too), ahead of the logical end, in steps of
// preallocate_bytes: a write + fdatasync into zeros already on disk changes neither the
// blocks nor the size, so fdatasync flushes data only, without a journal commit (bench/
// README.md, "durability_bench"). A new file gets its header and its first step together,
// synced before its directory entry is; a flush whose batch does not fit extends first
// (on whichever thread flushes); and the flushing thread that leaves less than half a step
// wakes the flusher thread, which extends by one step, so that request threads rarely pay
// for it. Zeros get no fdatasync of their own: the next flush's covers them. A file is
// never extended once it has reached file_bytes (the next flush starts a new one), so every
// file but the last has its zeros durable; Recover fsyncs the last file it keeps.
//
// A disk that fills (or fails) loses nothing: the records not yet durable stay in memory,
// the file is cut back to its last durable length (so no torn frame is ever followed by
// later records; the cut drops the preallocated zeros, and the next attempt extends again)
// and the flusher retries every 100 ms. healthy() is false meanwhile and Sync answers
// PERSISTENT_FAIL after sync_timeout_ms. Memory grows until the disk takes the records
// again. An extension that fails is a failed flush like any other, so with preallocation on
// the log refuses records once the disk cannot take the zeros up to the next step boundary,
// though the records alone might still fit.
//
// On-disk format. The directory holds files named <first seq, 20 decimal digits>.log, e.g.
// 00000000000000000001.log; each file holds consecutive records, and the next file starts
// with the seq after this one's last. All integers little-endian.
//
//   header (24 bytes)  "MCOPLOG1" (8) | first seq u64 | format version u32 (1)
//                      | CRC-32C u32 of the 20 bytes before it
//   frame, repeated    payload length u32 (at most kMaxPayload; more is corruption)
//                      | seq u64 | payload | CRC-32C u32 of the 12 + length bytes before it
//   zero tail          optional: zero bytes up to the end of the file (preallocated room).
//                      A frame head (length + seq) that is all zeros, or fewer than 12
//                      bytes left that are all zeros, with nothing but zeros after it, ends
//                      the file's records (no real frame has seq 0). A zero head with any
//                      non-zero byte after it is corruption.
//
// The logical size of a file is its header plus its frames; its size on disk includes the
// zero tail.
//
// Files recovery cut off are renamed <name>.cut, files DiscardAll gave up <name>.discarded;
// neither is ever read again.
//
// One OpLog per directory, and one process: nothing locks the directory.
#ifndef MOONCAKE_MASTER_OPLOG_H_
#define MOONCAKE_MASTER_OPLOG_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/base/error_code.h"
#include "master/log/log_tail.h"

namespace mooncake {

struct OpLogOptions {
  std::string dir;                    // created (with parents) if missing
  int64_t flush_interval_ms = 100;    // longest a record nobody Syncs waits in memory before
                                      // it is written and fdatasync'ed
  uint64_t file_bytes = 64ull << 20;  // a new file is started once the current one has
                                      // reached this logical size (header and frames, not
                                      // the zero tail) after a flush
  uint64_t preallocate_bytes = 4ull << 20;  // step of zeros kept ahead of the logical end
                                            // (see the top); 0: off, the file grows with
                                            // each write. At most 1 GiB.
  int64_t sync_timeout_ms = 5000;     // Sync gives up (PERSISTENT_FAIL) when the disk has
                                      // not taken the records by then
  uint64_t tail_bytes = 0;            // > 0: the newest records (this much payload) are also
                                      // kept in memory, for standbys to pull (tail(); HA).
                                      // 0: no copy is made, Append costs what it did
};

struct OpLogStats {
  uint64_t files = 0;           // *.log files in the directory
  uint64_t bytes = 0;           // their total size on disk, zero tails included (so up to
                                // preallocate_bytes per file above the logical sizes)
  uint64_t fdatasyncs = 0;      // fdatasync calls made on log files since construction
  uint64_t failed_flushes = 0;  // write or fdatasync attempts that failed (and were retried)
};

class OpLog {
 public:
  static constexpr char kMagic[8] = {'M', 'C', 'O', 'P', 'L', 'O', 'G', '1'};
  static constexpr uint32_t kFormatVersion = 1;
  static constexpr size_t kHeaderBytes = 24;
  static constexpr size_t kFrameOverhead = 16;  // length, seq, CRC
  static constexpr uint32_t kMaxPayload = 64u << 20;

  explicit OpLog(OpLogOptions options);
  // Writes and syncs what is pending (one attempt: best effort; what a failing disk still
  // refuses is reported with MC_LOG_ERROR), stops the flusher thread, closes the file.
  ~OpLog();
  OpLog(const OpLog&) = delete;
  OpLog& operator=(const OpLog&) = delete;

  // Before Start, from one thread. Creates the directory if missing, then reads its *.log
  // files in sequence order and calls apply(seq, payload) for every record with
  // seq > after_seq, in order (payload points into a read buffer: valid during the call).
  // Records with seq <= after_seq are skipped: the snapshot holds them.
  //
  // The records replayed form a contiguous chain after_seq+1, after_seq+2, ...: replay
  // stops at the first record that is torn (a crash cut it), fails its checksum, is
  // undecodable (bad file header, length above kMaxPayload, a file whose first record is
  // not the seq in its name), does not continue the chain (a gap), or for which apply
  // returns false. That record and everything after it is cut off, point-in-time style:
  // its file is truncated right before it (renamed <name>.cut instead when nothing would be
  // left of it but the header), and every later file is renamed <name>.cut. One MC_LOG_WARN
  // line says which file, at which byte offset, why, and how many bytes and files were cut.
  // A file holding only its header (a crash right after it was created, or a run that
  // appended nothing), zero tail or not, is deleted. A zero tail ends a file cleanly
  // (replay goes on with the next file, whose first seq must still continue the chain) and
  // is left in place: Start creates a new file anyway, and DropThrough removes it with its
  // file. The last file kept is fsync'ed (the zeros, and records a killed process left
  // unsynced, are then durable before Start creates a later file).
  //
  // Returns the last seq of the log after the cut: after_seq when nothing was replayed (so
  // 0 for an empty log and after_seq 0). Errors: INVALID_PARAMS after Start or with an
  // empty dir option, FILE_OPEN_FAIL when the directory cannot be created or listed,
  // FILE_READ_FAIL when a file cannot be read, FILE_WRITE_FAIL when the cut, a deletion or
  // the last file's fsync fails.
  using ApplyFn = std::function<bool(uint64_t seq, std::string_view payload)>;
  Result<uint64_t> Recover(uint64_t after_seq, const ApplyFn& apply);

  // Before Start, instead of replaying: renames every *.log file to <name>.discarded (a
  // restore found no valid snapshot to replay them on, so they must never be replayed onto
  // a different state). Creates the directory if missing. INVALID_PARAMS after Start,
  // FILE_OPEN_FAIL when the directory cannot be created or listed, FILE_WRITE_FAIL when a
  // rename fails.
  ErrorCode DiscardAll();

  // Starts appending after seq `last` in a new file named after last+1 (its header written,
  // zeros after it up to preallocate_bytes, both synced, the directory fsync'ed), and starts
  // the flusher thread. Recover or DiscardAll must have run first, and last must be at
  // least what Recover returned, so no seq is ever used twice. INVALID_PARAMS otherwise (or
  // when already started, or for options out of range), FILE_OPEN_FAIL / FILE_WRITE_FAIL
  // when the file cannot be created (a disk without room for one preallocation step
  // included).
  ErrorCode Start(uint64_t last);

  // Thread-safe; never blocks on I/O (copies the payload into a buffer under a mutex).
  // Returns the record's sequence number (consecutive, starting at Start's last + 1) and
  // remembers it as the calling thread's last append. Returns 0, appending nothing, before
  // Start or for a payload longer than kMaxPayload.
  uint64_t Append(std::string_view payload);

  // The seq the calling thread's last successful Append returned (0 if none): what an RPC
  // handler passes to Sync before it answers. Thread-local, shared by all OpLogs (the
  // master has one).
  static uint64_t LastAppendedByThisThread();

  // Thread-safe. Blocks until every record up to seq is written and fdatasync'ed, writing
  // them itself when no write is running (see the top). Returns OK at once, taking no
  // lock, when seq <= synced() (it is called after every RPC). PERSISTENT_FAIL when the
  // records are not on disk within sync_timeout_ms (the disk refuses them: full, I/O
  // error); they stay queued and the flusher keeps retrying. INVALID_PARAMS for
  // seq > last().
  ErrorCode Sync(uint64_t seq);

  // Thread-safe, lock-free. synced: the highest seq written and fdatasync'ed; last: the
  // highest appended; healthy: false while the last write or fdatasync failed.
  uint64_t synced() const { return synced_.load(std::memory_order_acquire); }
  uint64_t last() const { return last_.load(std::memory_order_acquire); }
  bool healthy() const { return healthy_.load(std::memory_order_acquire); }

  // A standby that loaded a snapshot of sequence `last` from its leader: makes what is
  // pending durable, renames every *.log file to <name>.discarded (they hold another
  // history), starts a new file after last and continues from there, as Start would
  // (last() and synced() become last; the tail is emptied). The caller guarantees that no
  // thread appends meanwhile. INVALID_PARAMS before Start; FILE_* when a file cannot be
  // renamed or created (the log then refuses appends until a Rebase succeeds).
  ErrorCode Rebase(uint64_t last);

  // The in-memory tail (options.tail_bytes > 0), null without. Owned by the log.
  LogTail* tail() { return tail_.get(); }

  // Thread-safe; lists and unlinks files, so call it from upkeep, not under a shard lock.
  // Deletes the files all of whose records have seq <= seq: the records a retained
  // snapshot already holds. The last file (the one being appended to, once started) is
  // never deleted. A file that cannot be deleted is logged and left for the next call.
  void DropThrough(uint64_t seq);

  // Thread-safe. Lists the directory (files, bytes) and reads the counters; a file's
  // header (with its first step of zeros) costs one fdatasync, every flush one more.
  OpLogStats stats() const;

 private:
  void FlusherLoop();
  // With mu_ held (released meanwhile) and no flush running: makes everything pending
  // durable on the calling thread, or records the failure. False when it failed.
  bool FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes batch_ (extending the file first when it does not fit) and fdatasyncs it; on
  // failure cuts the file back to its durable length and describes what failed in *error.
  // Only ever one at a time (flushing_).
  bool Flush(std::string* error);
  // The flusher's, with mu_ held (released meanwhile) and no flush running: extends the
  // file by a step when less than half a step of zeros is left (no fdatasync).
  void ExtendLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes zeros into the file from alloc_bytes_ up to `end` rounded up to a step.
  bool Preallocate(uint64_t end);
  bool DataSync(int fd);  // fdatasync(2), counted
  // Creates <dir>/<first_seq>.log with its header and zeros up to the first step, durable
  // with its directory entry; on failure removes what it created.
  ErrorCode OpenFile(uint64_t first_seq, std::string* error);

  const OpLogOptions options_;
  const std::unique_ptr<LogTail> tail_;  // null without options_.tail_bytes

  absl::Mutex mu_;
  absl::CondVar flusher_cv_;  // wakes the flusher: stopping, or extend_wanted_
  absl::CondVar synced_cv_;   // synced_ moved, or a flush ended
  // Frames appended since the flusher took them (no CRC)
  std::string pending_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // A flush or an extension is running (it owns batch_ and the file).
  bool flushing_ ABSL_GUARDED_BY(mu_) = false;
  bool extend_wanted_ ABSL_GUARDED_BY(mu_) = false;  // a flush left less than half a step of zeros
  bool failing_ ABSL_GUARDED_BY(mu_) = false;  // the last flush failed; the flusher retries
  bool recovered_ ABSL_GUARDED_BY(mu_) = false;  // Recover or DiscardAll ran
  uint64_t recovered_last_ ABSL_GUARDED_BY(mu_) = 0;  // what it left as the log's last seq

  std::atomic<uint64_t> last_{0};
  std::atomic<uint64_t> synced_{0};
  std::atomic<bool> healthy_{true};
  std::atomic<uint64_t> fdatasyncs_{0};
  std::atomic<uint64_t> failed_flushes_{0};

  // The flushing thread's, whichever it is (Start sets them up before any flush).
  int fd_ = -1;                // the file being appended to: pwrite at file_bytes_
  std::string file_path_;
  uint64_t file_bytes_ = 0;    // its durable logical length (header and frames)
  uint64_t alloc_bytes_ = 0;   // zeros written from file_bytes_ up to here (<= its size)
  bool dirty_ = false;         // bytes past file_bytes_ may be on disk: cut them before writing
  bool low_room_ = false;      // the last flush left less than half a step of zeros
  bool extend_failing_ = false;  // the last extension failed (logged once); until one of the
                                 // flusher's own succeeds, flushes write without extending
  std::chrono::steady_clock::time_point last_extend_try_;  // the flusher's last attempt
  std::string batch_;          // frames not yet durable, records synced_+1 .. batch_last_
  uint64_t batch_last_ = 0;
  std::thread flusher_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_OPLOG_H_
