// The master's snapshots on disk: SnapshotWriter stores one, SnapshotStore finds, checks,
// loads and prunes them. Neither looks inside a payload: what the bytes mean (msgpack +
// zstd of the object directory) is the encoder's business; here they are named blobs with
// a size and a CRC-32C (common/crc32c.h).
//
// Layout under the snapshot directory `dir`:
//
//   dir/latest                   the name of the newest published snapshot, one line + "\n"
//   dir/latest.tmp               latest being replaced (only ever briefly, or after a crash)
//   dir/snapshots/<name>/        one snapshot: its payload files (one per payload, named
//                                after it), then `manifest`, then `descriptor`
//   dir/snapshots/<name>.invalid a snapshot that failed to load, kept for inspection
//
// <name> is SnapshotName(sequence, created_ms): the operation-log sequence at the fork as
// 20 decimal digits, '-', the creation time in unix milliseconds ("00000000000000000042-
// 1700000000123"), so that names sort by sequence.
//
// manifest (text, every line ends in "\n"):
//
//   mooncake-master snapshot manifest
//   format 1
//   payload <payload name> <size in bytes> <crc32c as 8 lowercase hex digits>   (0 or more)
//   crc32c <8 lowercase hex digits: the CRC-32C of every preceding byte of the file>
//
// descriptor (text, every line ends in "\n"):
//
//   mooncake-master snapshot descriptor
//   format 1
//   sequence <u64>                 the operation-log sequence at the fork
//   created_ms <i64>               unix milliseconds
//   manifest_crc32c <8 hex>        the CRC-32C of the whole manifest file
//   <key> <value>                  0 or more lines from the caller ("objects 123")
//   crc32c <8 hex>                 the CRC-32C of every preceding byte of the file
//
// Publishing, each step durable (fsync) before the next: every payload file; manifest;
// descriptor; the snapshot's directory; then dir/latest.tmp, renamed over dir/latest, and
// dir itself. So a snapshot directory without a valid descriptor is incomplete (its writer
// crashed, was killed, or is still running) and is never loaded, and latest only ever
// names a complete snapshot. A crash between the descriptor and the rename leaves a
// complete snapshot latest does not name: SnapshotStore::Candidates still finds it.
//
// Names of payloads and extra keys: 1..kMaxTokenBytes bytes of [A-Za-z0-9._-], not
// starting with '.'; payloads cannot be called "manifest" or "descriptor", extra keys
// cannot be a key the descriptor already has ("sequence", "created_ms",
// "manifest_crc32c", "format", "crc32c"). Extra values: up to kMaxValueBytes bytes of
// printable ASCII (space included). Numbers are written in canonical form (no sign on
// unsigned, no leading zeros) and read back only in that form.
#ifndef MOONCAKE_MASTER_SNAPSHOT_STORE_H_
#define MOONCAKE_MASTER_SNAPSHOT_STORE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error_code.h"

namespace mooncake {

// The snapshot directory's name for a snapshot: "<sequence as 20 digits>-<created_ms>".
// created_ms must be >= 0 (SnapshotWriter::Begin refuses a negative one).
std::string SnapshotName(uint64_t sequence, int64_t created_ms);

// The inverse, strictly: exactly 20 digits, '-', a canonical non-negative int64 (no sign,
// no leading zeros), nothing else. False for anything else ("<name>.invalid" included).
bool ParseSnapshotName(std::string_view name, uint64_t* sequence, int64_t* created_ms);

// The format both files declare ("format 1"); Load refuses any other.
constexpr int kSnapshotFormat = 1;
// Limits that bound every parse of a file that may be corrupted (the writer keeps to them).
constexpr size_t kMaxTokenBytes = 128;  // a payload name or an extra key
constexpr size_t kMaxValueBytes = 512;  // an extra value
constexpr size_t kMaxSnapshotPayloads = 1000;
constexpr size_t kMaxSnapshotExtras = 1000;
constexpr size_t kMaxSnapshotTextBytes = 1 << 20;  // a manifest or a descriptor

// Writes one snapshot. Made for the child the master forks to take a snapshot, which
// inherits a copy of a multithreaded process: it never logs, takes no lock, starts no
// thread and calls no locale-dependent libc function (errno texts come from
// strerrordesc_np). It uses mkdir, open, write, fsync, rename and close, and malloc
// (which glibc's fork keeps usable in the child). Every call returns its error as a
// value, and the sentence saying what failed (the call, the file, the errno text) in
// *error (which may be null).
//
// Calls, in order: Begin; for each payload OpenPayload, Append any number of times,
// ClosePayload; Publish. A call out of that order, or with a bad name or value, is
// INVALID_PARAMS and changes nothing. An I/O failure is sticky: every later call returns
// the same code with the first failure's message. The writer never removes anything:
// after a failure (or if it is destroyed before Publish) the caller removes path(), e.g.
// with SnapshotStore::RemoveSnapshotDir; until then it is an incomplete snapshot, never
// loaded, and pruned by SnapshotStore::Retain once a newer one is published.
//
// Codes: FILE_OPEN_FAIL (mkdir, open; the snapshot already exists), FILE_WRITE_FAIL
// (write), PERSISTENT_FAIL (fsync, rename), INVALID_PARAMS (misuse).
//
// One writer per dir at a time (the master runs one snapshot child at a time): two would
// race on dir/latest.tmp.
class SnapshotWriter {
 public:
  // Nothing touches the disk before Begin.
  SnapshotWriter(std::string dir, uint64_t sequence, int64_t created_ms);
  // Closes a payload file left open; removes nothing.
  ~SnapshotWriter();
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // Creates dir and dir/snapshots when missing, then dir/snapshots/<name>/, which must
  // not exist yet (FILE_OPEN_FAIL if it does), each new directory's entry made durable.
  ErrorCode Begin(std::string* error);

  // Streams one payload into the file <name> of the snapshot: OpenPayload, any number of
  // Append, ClosePayload (which fsyncs it). Size and CRC-32C are computed on the way.
  // Appends are buffered (kWriteBufferBytes), so small ones cost no system call each.
  // A payload name may be used once per snapshot.
  ErrorCode OpenPayload(const std::string& name, std::string* error);
  ErrorCode Append(std::string_view bytes, std::string* error);
  ErrorCode ClosePayload(std::string* error);

  // Writes the manifest, then the descriptor with these extra lines (in this order, each
  // key once), then makes the snapshot the one dir/latest names: the publishing order in
  // the comment at the top. A failure after the descriptor is durable leaves a complete
  // snapshot that latest may not name; removing it is still safe.
  ErrorCode Publish(const std::vector<std::pair<std::string, std::string>>& extra,
                    std::string* error);

  const std::string& name() const { return name_; }
  // The snapshot's directory, dir/snapshots/<name>, once Begin has created it: what to
  // remove after a failure. Empty before, and when Begin failed to create it (it may then
  // be another writer's, complete snapshot: never remove that).
  const std::string& path() const { return created_path_; }
  // Bytes written to the snapshot's files so far (payloads, manifest, descriptor).
  uint64_t bytes_written() const { return bytes_written_; }

  static constexpr size_t kWriteBufferBytes = 1 << 20;

 private:
  enum class State { kNew, kReady, kPayloadOpen, kPublished, kFailed };
  struct PayloadEntry {
    std::string name;
    uint64_t size = 0;
    uint32_t crc = 0;
  };

  // Records a sticky I/O failure and returns code.
  ErrorCode Fail(ErrorCode code, std::string message, std::string* error);
  // The answer of a call made after a sticky failure.
  ErrorCode Failed(std::string* error) const;
  // INVALID_PARAMS with message, state unchanged.
  static ErrorCode Misuse(std::string message, std::string* error);
  // Writes the buffered bytes of the open payload.
  ErrorCode Flush(std::string* error);
  // Creates file (O_EXCL) in the snapshot directory holding text, fsynced and closed.
  ErrorCode WriteSmallFile(const std::string& file, const std::string& text, std::string* error);

  const std::string dir_;
  const uint64_t sequence_;
  const int64_t created_ms_;
  const std::string name_;
  const std::string path_;
  std::string created_path_;  // path_ once Begin has created it
  State state_ = State::kNew;
  ErrorCode failure_code_ = ErrorCode::OK;
  std::string failure_;  // the first I/O failure's message
  int fd_ = -1;          // the open payload's file
  PayloadEntry current_;
  std::string current_path_;
  std::vector<PayloadEntry> payloads_;
  std::unique_ptr<char[]> buffer_;  // kWriteBufferBytes, allocated by Begin
  size_t buffered_ = 0;
  uint64_t bytes_written_ = 0;
};

// What a snapshot's descriptor says.
struct SnapshotInfo {
  std::string name;  // the directory's name under dir/snapshots
  uint64_t sequence = 0;
  int64_t created_ms = 0;
  std::map<std::string, std::string> extra;  // the caller's key/value lines
};

struct LoadedSnapshot {
  SnapshotInfo info;
  std::map<std::string, std::string> payloads;  // payload name -> its bytes
};

// Reads, validates and prunes the snapshots in dir. Runs in the master's own process and
// logs what it skips or deletes (MC_LOG_WARN / MC_LOG_INFO). Holds no state but dir and
// takes no lock: one caller at a time. A snapshot child writing into dir meanwhile is
// harmless: its directory is incomplete and newer than every published one, which is
// neither a candidate nor pruned.
//
// "Published" below means: a directory dir/snapshots/<name> (name as ParseSnapshotName
// accepts) whose descriptor passes Load's checks (manifest and payloads are not read);
// any other such directory is "incomplete". Candidates only checks that a descriptor file
// exists; Load checks everything.
class SnapshotStore {
 public:
  // Also computes one CRC-32C, so that Crc32cExtend's one-time CPU check (a function-local
  // static) is done before the master ever forks: a child forked while another thread was
  // inside it would wait for it forever.
  explicit SnapshotStore(std::string dir);

  const std::string& dir() const { return dir_; }

  // Names of complete-looking snapshots to try, best first: the one dir/latest names (if
  // its directory has a descriptor file), then every other snapshot directory by sequence,
  // then created_ms, newest first. Directories whose name does not parse (*.invalid ones
  // included) and ones without a descriptor file are left out. A missing latest (while
  // snapshots exist), an unreadable or malformed one, or one naming no candidate is
  // logged (MC_LOG_WARN) and the listing alone is used. Empty when there is nothing.
  std::vector<std::string> Candidates() const;

  // Reads and checks snapshot name: the descriptor (its trailing CRC must match, its lines
  // parse strictly, its sequence and created_ms must be the name's), the manifest (its
  // trailing CRC must match, and the CRC of the whole file must be the descriptor's
  // manifest_crc32c), then every payload the manifest lists (size and CRC-32C must match:
  // a payload file missing, shorter, longer, or with one flipped byte fails). Each file is
  // read with one fstat and one read of the whole of it; manifest and descriptor may be
  // at most kMaxSnapshotTextBytes.
  //
  // On failure *why (may be null) is one sentence naming the file and the problem, and the
  // code is INVALID_PARAMS (name does not parse), FILE_NOT_FOUND (a file is missing),
  // FILE_OPEN_FAIL / FILE_READ_FAIL (the system refused), or DESERIALIZE_FAIL (content).
  Result<LoadedSnapshot> Load(const std::string& name, std::string* why) const;

  // Renames snapshots/<name> to snapshots/<name>.invalid: kept for inspection, never a
  // candidate again (nor pruned by Retain). dir/latest is left alone (Candidates then
  // warns that it names no candidate, until the next snapshot replaces it). Logs and
  // returns the failure: INVALID_PARAMS for a name that does not parse, PERSISTENT_FAIL
  // when the rename fails (e.g. <name>.invalid exists already).
  ErrorCode MarkInvalid(const std::string& name);

  // Deletes published snapshots beyond the newest `count` (by sequence, then created_ms),
  // and incomplete directories (no descriptor, or a broken one) older than the newest
  // published one; never the one latest names, never *.invalid ones, never anything newer
  // than the newest published snapshot (a child may be writing it). count 0 keeps only
  // latest's. A snapshot is deleted descriptor first, so a deletion cut short leaves an
  // incomplete directory, never a broken candidate. Logs every deletion and failure.
  void Retain(size_t count);

  // The sequence of the oldest published snapshot in dir, 0 when there is none: after
  // Retain, the oldest one it kept. Operation-log records up to it are in every snapshot a
  // restart could fall back to, so they may go.
  uint64_t OldestRetainedSequence() const;

  // Removes the snapshot directory tree at path (a partial snapshot whose child failed or
  // timed out: SnapshotWriter::path()). Refuses (INVALID_PARAMS, logged) a path whose last
  // component is not a snapshot name (optionally ".invalid") inside a directory called
  // "snapshots", so a wrong argument cannot delete anything else. FILE_NOT_FOUND when
  // there is nothing there, PERSISTENT_FAIL when the removal fails.
  static ErrorCode RemoveSnapshotDir(const std::string& path);

  // True when dir holds a latest file or anything in dir/snapshots (complete, incomplete
  // or invalid snapshots, or anything else), or dir/snapshots exists but cannot be read:
  // the master refuses to start over them without restoring, since a fresh sequence
  // would sort below them.
  bool HasAny() const;

 private:
  struct Entry {
    std::string name;
    uint64_t sequence = 0;
    int64_t created_ms = 0;
    // With check_descriptors: published (valid descriptor); without: a descriptor file is
    // there.
    bool complete = false;
  };
  // The directories of snapshots/ whose name parses, newest first.
  std::vector<Entry> List(bool check_descriptors) const;
  // The name dir/latest holds, or "" (with *why, which may be null) when it is missing or
  // malformed.
  std::string ReadLatest(std::string* why) const;
  std::string SnapshotPath(const std::string& name) const;
  // Removes one snapshot directory of dir, descriptor first; logs.
  void Delete(const Entry& entry) const;

  const std::string dir_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_SNAPSHOT_STORE_H_
