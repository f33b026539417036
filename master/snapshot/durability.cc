#include "master/snapshot/durability.h"

#include "common/base/logging.h"
#include "common/base/private_dir.h"
#include "master/snapshot/snapshot_format.h"
#include "master/snapshot/state_restore.h"

namespace mooncake {

std::unique_ptr<Durability> Durability::Open(const MasterOptions& options,
                                             MasterService* service, std::string* error,
                                             int* exit_code) {
  std::unique_ptr<Durability> d(new Durability());
  KeepPrivate(options.snapshot_dir, "--snapshot_dir");
  KeepPrivate(options.snapshot_dir + "/" + snapshot_format::kSnapshotsDir,
              "the snapshots directory");
  SnapshotStore store(options.snapshot_dir);
  OpLogOptions log_options;
  log_options.dir = options.snapshot_dir + "/oplog";
  log_options.flush_interval_ms = options.oplog_flush_interval_ms;
  if (options.enable_ha) log_options.tail_bytes = options.ha_tail_bytes;
  // With the log disabled one is still opened, read-only in effect, so that a restore
  // replays what an earlier run with the log on wrote; it is never started.
  auto oplog = std::make_unique<OpLog>(log_options);
  bool logging = options.oplog_mode != "disabled";

  if (!options.enable_snapshot_restore && (store.HasAny() || oplog->stats().files > 0)) {
    *error = options.snapshot_dir +
             " holds snapshots or an operation log of an earlier run: start with "
             "--enable_snapshot_restore to load them, or move them away";
    *exit_code = 2;
    return nullptr;
  }
  uint64_t last = 0;
  if (options.enable_snapshot_restore) {
    Result<RestoreOutcome> restored = RestoreMasterState(service, &store, oplog.get(),
                                                          /*finish=*/!options.enable_ha);
    if (!restored.ok()) {
      *error = std::string("cannot read the operation log in ") + log_options.dir + ": " +
               ErrorName(restored.code());
      *exit_code = 1;
      return nullptr;
    }
    last = restored.value().last_sequence;
  } else {
    Result<uint64_t> empty = oplog->Recover(0, [](uint64_t, std::string_view) { return true; });
    if (!empty.ok()) {
      *error = "cannot create " + log_options.dir + ": " + ErrorName(empty.code());
      *exit_code = 1;
      return nullptr;
    }
  }
  if (logging) {
    ErrorCode code = oplog->Start(last);
    if (code != ErrorCode::OK) {
      *error = "cannot start the operation log in " + log_options.dir + ": " + ErrorName(code);
      *exit_code = 1;
      return nullptr;
    }
    service->AttachOpLog(oplog.get(), options.oplog_mode == "strict");
    d->oplog_ = std::move(oplog);
  }
  SnapshotterOptions snap;
  snap.dir = options.snapshot_dir;
  snap.interval_ms = options.snapshot_interval_ms;
  snap.retention_count = static_cast<size_t>(options.snapshot_retention_count);
  snap.child_timeout_ms = options.snapshot_child_timeout_ms;
  snap.base_sequence = last;
  d->snapshotter_ = std::make_unique<Snapshotter>(service, d->oplog_.get(), snap);
  MC_LOG_INFO("durability: snapshots in %s every %lld s (keeping %lld); operation log %s%s",
              options.snapshot_dir.c_str(),
              static_cast<long long>(options.snapshot_interval_ms / 1000),
              static_cast<long long>(options.snapshot_retention_count),
              options.oplog_mode.c_str(),
              logging ? "" : ": a crash loses every change since the last snapshot");
  return d;
}

Durability::~Durability() {
  // The snapshotter first: its child reads state the log's last records describe.
  if (snapshotter_) snapshotter_->Stop();
}

}  // namespace mooncake
