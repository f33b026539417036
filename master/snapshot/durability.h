// What keeps the master's state across a restart, brought up from its flags
// (docs/durability.md): the snapshot directory, the operation log in <snapshot_dir>/oplog,
// the restore at start, and the snapshotter.
//
// Order at start: refuse an earlier run's state unless asked to restore it (a fresh
// sequence would sort below it, and the next restore would mix the two); restore when
// asked; start the log after the last record replayed; attach it to the service. Periodic
// snapshots begin with Start(), once the server is about to serve.
//
// Modes: the snapshot directory and what the master makes in it are its user's alone
// (common/base/private_dir.h): files 0600, directories 0700; at start, the snapshot directory
// and its snapshots/ are tightened when they are looser (an earlier version made them
// 0755 and their files 0644, readable by every local user, and they list every tenant's
// keys).
#ifndef MOONCAKE_MASTER_DURABILITY_H_
#define MOONCAKE_MASTER_DURABILITY_H_

#include <memory>
#include <string>

#include "master/directory/master_options.h"
#include "master/service/master_service.h"
#include "master/log/oplog.h"
#include "master/snapshot/snapshotter.h"

namespace mooncake {

class Durability {
 public:
  // Null with *error and *exit_code (2: the configuration or the directory's contents are
  // refused; 1: the disk failed) when it cannot come up. options.enable_snapshot must be on.
  static std::unique_ptr<Durability> Open(const MasterOptions& options, MasterService* service,
                                          std::string* error, int* exit_code);
  ~Durability();  // stops the snapshotter, then flushes and closes the log
  Durability(const Durability&) = delete;
  Durability& operator=(const Durability&) = delete;

  void Start() { snapshotter_->Start(); }
  Snapshotter* snapshotter() { return snapshotter_.get(); }
  // The log (null with --oplog_mode disabled). With --enable_ha it keeps a tail of
  // ha_tail_bytes in memory for the standbys, and the restore is left unfinished (see
  // RestoreMasterState): master/ha/replication.h takes it from there.
  OpLog* oplog() { return oplog_.get(); }

 private:
  Durability() = default;

  std::unique_ptr<OpLog> oplog_;  // null with --oplog_mode disabled
  std::unique_ptr<Snapshotter> snapshotter_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_DURABILITY_H_
