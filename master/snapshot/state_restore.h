// Restore at start (--enable_snapshot_restore): the newest valid snapshot, then the
// operation log after it, then the re-attach wait.
//
//   1. Candidates, newest first (master/snapshot/snapshot_store.h). Each is validated (manifest,
//      payload sizes and CRCs) and decoded into the service; one that fails is renamed
//      *.invalid, the service is cleared and the next older one is tried.
//   2. The log records after the chosen snapshot's sequence are replayed in order
//      (master/log/oplog.h cuts the log at the first torn or corrupt record). With no valid
//      snapshot, the log is replayed from its first record when it still starts at 1 (no
//      snapshot ever truncated it); otherwise nothing can be trusted: its files are
//      renamed aside and the master starts empty.
//   3. FinishRestore rebuilds the allocators and expects every segment's daemon back
//      within --reattach_grace_period_sec.
// Each step logs one line, so an operator can read what was loaded and what was not.
#ifndef MOONCAKE_MASTER_STATE_RESTORE_H_
#define MOONCAKE_MASTER_STATE_RESTORE_H_

#include <cstdint>
#include <string>

#include "common/base/error_code.h"
#include "master/service/master_service.h"
#include "master/log/oplog.h"
#include "master/snapshot/snapshot_store.h"

namespace mooncake {

struct RestoreOutcome {
  std::string snapshot;       // the one loaded; empty when none was valid
  uint64_t last_sequence = 0; // the log's last record after the replay (what Start gets)
  int64_t replayed = 0;       // log records applied
  MasterService::RestoreCounts counts;
  int64_t elapsed_ms = 0;
};

// service must be empty and not serving yet. oplog may be null (no log to replay).
// An error only when the log's directory cannot be read; a bad snapshot or a cut log is
// not an error (the master starts with what could be trusted). finish false: step 3 is
// left out, the service stays in the restore's state (a standby applies the leader's
// records on top; master/ha/replication.h finishes it when it takes over).
Result<RestoreOutcome> RestoreMasterState(MasterService* service, SnapshotStore* store,
                                          OpLog* oplog, bool finish = true);

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_STATE_RESTORE_H_
