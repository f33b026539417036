// The seed corpus of every harness, made by the encoders the code itself writes with, so
// that seeds stay valid when a format changes (fuzz/seed_generator.cc writes them out;
// docs/fuzzing.md). Each function returns (file name, bytes) pairs.
#ifndef MOONCAKE_FUZZ_SEEDS_H_
#define MOONCAKE_FUZZ_SEEDS_H_

#include <string>
#include <utility>
#include <vector>

namespace mooncake {
namespace fuzz {

using Seeds = std::vector<std::pair<std::string, std::string>>;

// fuzz/seeds_daemon.cc
Seeds UdsFrameSeeds();
Seeds TransferHeaderSeeds();
Seeds FlagsSeeds();

// fuzz/seeds_master.cc
Seeds MasterRpcSeeds();
Seeds StateRecordsSeeds();
Seeds OplogRecoverySeeds();
Seeds SnapshotCodecSeeds();
Seeds SnapshotRestoreSeeds();

// fuzz/seeds_ssd.cc
Seeds SsdMetaSeeds();

// fuzz/seeds_admin.cc
Seeds AdminHttpSeeds();

}  // namespace fuzz
}  // namespace mooncake

#endif  // MOONCAKE_FUZZ_SEEDS_H_
