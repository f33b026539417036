// What the master's harnesses check a MasterService's state with: its own snapshot export
// (master/log/state_records.h records), compared field for field.
#ifndef MOONCAKE_FUZZ_MASTER_STATE_H_
#define MOONCAKE_FUZZ_MASTER_STATE_H_

#include <cstdint>
#include <map>
#include <string>

#include "master/service/master_service.h"
#include "master/log/state_records.h"

namespace mooncake {
namespace fuzz {

// Every segment, by id, and every complete object, by key, as a snapshot exports them.
struct ExportedState {
  std::map<int64_t, SegmentRecord> segments;
  std::map<std::string, ObjectRecord> objects;
};
ExportedState Export(MasterService* service);

// A state that can be trusted: restored (as from a snapshot) into a fresh service, no
// replica overlaps another or lies outside its segment (FinishRestore drops none), and
// the restored service exports the same state.
void CheckRestorable(const ExportedState& state);

// a and b hold the same segments and objects (the names say which is which when not).
void CheckSameState(const ExportedState& a, const ExportedState& b, const char* a_name,
                    const char* b_name);

// master_rpc_fuzzer's connections that need the handshake: the cluster key their master
// holds, and the server nonce it draws (fixed, so that a seed can carry a proof that
// checks: fuzz/seeds_master.cc). A key ClusterKey::Load would take (openssl rand -hex 32).
inline const std::string kFuzzClusterKey =
    "b39eaf2d215a7338c1e01c620d2253c2289f71aa212a789ecfc51255b19b9ae4";
inline const std::string kFuzzServerNonce(32, 'n');

// Takes a snapshot of service into dir as the snapshot child does (master/snapshot/snapshotter.cc:
// SnapshotWriter, WriteSnapshotPayloads, Publish) and returns its name.
std::string WriteSnapshot(MasterService* service, const std::string& dir, uint64_t sequence,
                          int64_t created_ms);

}  // namespace fuzz
}  // namespace mooncake

#endif  // MOONCAKE_FUZZ_MASTER_STATE_H_
