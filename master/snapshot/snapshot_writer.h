// SnapshotWriter: stores one of the master's snapshots, in the format and the publishing
// order of master/snapshot/snapshot_format.h. SnapshotStore (master/snapshot/snapshot_store.h) reads them back.
#ifndef MOONCAKE_MASTER_SNAPSHOT_WRITER_H_
#define MOONCAKE_MASTER_SNAPSHOT_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base/error_code.h"
#include "master/snapshot/snapshot_format.h"

namespace mooncake {

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
  // master/snapshot/snapshot_format.h. A failure after the descriptor is durable leaves a complete
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

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_SNAPSHOT_WRITER_H_
