#include "master/snapshot/state_restore.h"

#include <chrono>

#include "common/base/logging.h"
#include "master/snapshot/snapshot_codec.h"

namespace mooncake {

namespace {

// Loads the first candidate that validates and decodes; returns its sequence and name, or
// false when none did.
bool LoadNewestValid(MasterService* service, SnapshotStore* store, std::string* name,
                     uint64_t* sequence) {
  for (const std::string& candidate : store->Candidates()) {
    std::string why;
    Result<LoadedSnapshot> loaded = store->Load(candidate, &why);
    SnapshotFigures figures;
    if (loaded.ok()) {
      ErrorCode code = LoadSnapshotPayloads(service, loaded.value(), &figures, &why);
      if (code == ErrorCode::OK) {
        MC_LOG_INFO("restore: snapshot %s loaded: %lld objects on %lld segments, sequence %llu",
                    candidate.c_str(), static_cast<long long>(figures.objects),
                    static_cast<long long>(figures.segments),
                    static_cast<unsigned long long>(loaded.value().info.sequence));
        *name = candidate;
        *sequence = loaded.value().info.sequence;
        return true;
      }
      service->ClearState();
    }
    MC_LOG_WARN("restore: snapshot %s is not valid (%s); falling back to the next older one",
                candidate.c_str(), why.c_str());
    store->MarkInvalid(candidate);
  }
  return false;
}

}  // namespace

Result<RestoreOutcome> RestoreMasterState(MasterService* service, SnapshotStore* store,
                                          OpLog* oplog, bool finish) {
  auto started = std::chrono::steady_clock::now();
  RestoreOutcome outcome;
  uint64_t sequence = 0;
  bool loaded = LoadNewestValid(service, store, &outcome.snapshot, &sequence);
  if (!loaded) {
    MC_LOG_WARN("restore: no valid snapshot in %s; %s", store->dir().c_str(),
                oplog != nullptr ? "replaying the operation log from its first record, if it "
                                   "still has it"
                                 : "starting empty");
  }
  outcome.last_sequence = sequence;
  if (oplog != nullptr) {
    Result<uint64_t> last = oplog->Recover(sequence, [&](uint64_t, std::string_view payload) {
      if (!service->ApplyLogRecord(payload)) return false;
      ++outcome.replayed;
      return true;
    });
    if (!last.ok()) return last.code();
    outcome.last_sequence = last.value();
    MC_LOG_INFO("restore: %lld operation-log records replayed after sequence %llu (log ends "
                "at %llu)",
                static_cast<long long>(outcome.replayed), static_cast<unsigned long long>(sequence),
                static_cast<unsigned long long>(outcome.last_sequence));
    if (!loaded && outcome.replayed == 0 && outcome.last_sequence == 0) {
      MC_LOG_WARN("restore: nothing to restore; starting empty");
    }
  }
  if (!finish) {
    MC_LOG_INFO("restore: state kept as restored; finished when this master takes over");
    return outcome;
  }
  outcome.counts = service->FinishRestore();
  outcome.elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - started).count();
  MC_LOG_INFO("restore: %lld objects on %lld segments in %lld ms (%lld replicas and %lld "
              "objects dropped as invalid); their daemons are expected back",
              static_cast<long long>(outcome.counts.objects),
              static_cast<long long>(outcome.counts.segments),
              static_cast<long long>(outcome.elapsed_ms),
              static_cast<long long>(outcome.counts.dropped_replicas),
              static_cast<long long>(outcome.counts.dropped_objects));
  service->NoteRestore(outcome.elapsed_ms, outcome.counts.objects);
  return outcome;
}

}  // namespace mooncake
