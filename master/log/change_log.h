// The master's side of durability (docs/durability.md): every change a client may be told
// about becomes a record (master/log/state_records.h) appended to the operation log
// (master/log/oplog.h), under the lock that made the change, so that the log's order is the
// order changes happened in; and a reply that acknowledges a change waits, with a strict
// log, until its record is on disk (and, with standbys, on theirs: master/log/sync_set.h).
// Without a log attached every append is a no-op that answers 0.
//
// Space freed by a logged change (a remove, an eviction, the old value of an upsert) is
// reused only once that record is on disk (master/directory/deferred_frees.h): were it reused
// earlier, a crash could restore the old object pointing at bytes that have since become
// another's.
//
// Thread roles: Attach before serving; AttachSyncSet whenever (a leader gaining or losing
// its standbys); the rest from any thread. The log is not owned and outlives this.
#ifndef MOONCAKE_MASTER_CHANGE_LOG_H_
#define MOONCAKE_MASTER_CHANGE_LOG_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/base/error_code.h"
#include "master/directory/object_metadata.h"
#include "master/directory/segment_registry.h"
#include "master/log/state_records.h"
#include "master_types.h"

namespace mooncake {

class OpLog;
class SyncSet;

class ChangeLog {
 public:
  // segments: to name replicas by segment id (records outlive slots).
  explicit ChangeLog(const SegmentRegistry& segments) : segments_(segments) {}
  ChangeLog(const ChangeLog&) = delete;
  ChangeLog& operator=(const ChangeLog&) = delete;

  // From now on every change is appended to log; strict: Sync waits until it is on disk.
  void Attach(OpLog* log, bool strict) {
    log_ = log;
    strict_ = strict;
  }
  // With a sync set attached, a strict Sync also waits until the set has the records
  // durable. Null detaches; the set outlives its attachment.
  void AttachSyncSet(SyncSet* sync_set) { sync_set_.store(sync_set); }
  OpLog* log() const { return log_; }

  // Appenders: the record's sequence number, 0 without a log. Unmount records also cover
  // the objects the segment's drop removes.
  // soft_pin_until_unix_ms: the pin's deadline in Unix-epoch ms (0: none); group: its id
  // or "".
  uint64_t Publish(std::string_view key, const ObjectMetadata& meta,
                   int64_t soft_pin_until_unix_ms, const std::string& group);
  uint64_t Remove(std::string_view key);
  uint64_t Mount(const rpc::SegmentInfo& segment);
  uint64_t Unmount(int64_t segment_id);
  // The log cannot write (a full or failing disk): new objects and segments are refused
  // (-1503) until it can.
  bool Refusing() const;
  // After a call that changed something, before its reply: with a strict log, waits until
  // every record this thread appended is on disk (-1503 when the disk does not take it);
  // otherwise OK at once. Holds no lock while it waits. NOT_LEADER when a sync set says we
  // no longer lead.
  ErrorCode Sync();
  // Puts what was appended on disk now, when the log is healthy (a failing disk is not
  // waited for).
  void Flush();
  // The last sequence number on disk; 0 without a log.
  uint64_t synced() const;
  // The last appended and the last on disk, for the stats; false without a log.
  bool Figures(int64_t* last, int64_t* synced) const;

  // Replica ranges as records name them (segment ids rather than slots); a replica whose
  // segment is being dropped is left out (the unmount is logged). The number written.
  size_t Describe(const ReplicaList& replicas, ReplicaRecord* out) const;
  static SegmentRecord ToRecord(const rpc::SegmentInfo& info);
  static rpc::SegmentInfo ToInfo(const SegmentRecord& record);

 private:
  const SegmentRegistry& segments_;
  OpLog* log_ = nullptr;
  bool strict_ = false;
  std::atomic<SyncSet*> sync_set_{nullptr};
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_CHANGE_LOG_H_
