// The leader's side of replication (docs/ha.md, "Replication"): answers the standbys'
// FollowLog pulls from the operation log's in-memory tail (master/log/log_tail.h) and their
// FetchSnapshot downloads from the snapshot directory, and reports each pull's durable_seq
// to the sync set (master/log/sync_set.h).
//
// Never blocks an I/O thread for long: a pull copies at most kMaxPullBytes of payload and
// answers at once, also when there is nothing new (the follower polls); FetchSnapshot
// reads one chunk of at most kMaxChunkBytes, and with name "" waits only for the fork of an
// on-demand snapshot (Snapshotter::Request, the Snapshot admin RPC's cost).
//
// Input policy: every argument is bounded and checked before use; a hostile one is -600
// with one log line. standby_name: 1..255 bytes of [A-Za-z0-9._:-]. FetchSnapshot's name
// must be a snapshot name (ParseSnapshotName) of a published snapshot, its file a token of
// [A-Za-z0-9._-] without a leading '.' (so no '/' and no ".."), opened with O_NOFOLLOW
// inside <snapshot_dir>/snapshots/<name>/ only.
//
// Thread-safe: Lead and Stop from the owner, the RPCs from any I/O thread.
#ifndef MOONCAKE_MASTER_LOG_SERVER_H_
#define MOONCAKE_MASTER_LOG_SERVER_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "MasterService.h"
#include "absl/synchronization/mutex.h"
#include "master/log/oplog.h"
#include "master/snapshot/snapshotter.h"
#include "master/log/sync_set.h"

namespace mooncake {

class LogServer {
 public:
  static constexpr int32_t kMaxPullBytes = 4 << 20;
  static constexpr int32_t kMaxChunkBytes = 4 << 20;

  // oplog must have a tail (OpLogOptions::tail_bytes); snapshotter may be null (no
  // bootstrap: FetchSnapshot answers -1011). Neither is owned.
  LogServer(OpLog* oplog, Snapshotter* snapshotter, std::string snapshot_dir);

  // Serves as the leader of term; sync_set (not owned, outlives Stop) hears every pull.
  void Lead(int64_t term, SyncSet* sync_set);
  // Answers NOT_LEADER from now on.
  void Stop();

  void FollowLog(rpc::FollowLogResult& out, const std::string& standby, int64_t from_seq,
                 int64_t durable_seq, int64_t prev_crc, int32_t max_bytes);
  void FetchSnapshot(rpc::FetchSnapshotResult& out, const std::string& standby,
                     const std::string& name, const std::string& file, int64_t offset,
                     int32_t max_bytes);

  static bool ValidStandbyName(const std::string& name);

 private:
  // The sync set while leading, null otherwise (out->code NOT_LEADER, term filled).
  SyncSet* Leading(int32_t* code, int64_t* term);
  void ReadChunk(rpc::FetchSnapshotResult& out, const std::string& name, const std::string& file,
                 int64_t offset, int32_t max_bytes);

  OpLog* const oplog_;
  Snapshotter* const snapshotter_;
  const std::string snapshot_dir_;

  absl::Mutex mu_;
  int64_t term_ ABSL_GUARDED_BY(mu_) = 0;
  SyncSet* sync_set_ ABSL_GUARDED_BY(mu_) = nullptr;  // non-null while leading
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_LOG_SERVER_H_
