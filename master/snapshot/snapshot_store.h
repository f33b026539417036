// SnapshotStore: finds, checks, loads and prunes the master's snapshots on disk, the
// reading side of the format in master/snapshot/snapshot_format.h (layout, files, publishing order).
// SnapshotWriter (master/snapshot/snapshot_writer.h) is the writing side.
#ifndef MOONCAKE_MASTER_SNAPSHOT_STORE_H_
#define MOONCAKE_MASTER_SNAPSHOT_STORE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/base/error_code.h"
#include "master/snapshot/snapshot_format.h"

namespace mooncake {

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
