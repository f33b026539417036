// Writes every harness's seeds (fuzz/seeds.h) under a directory: <dir>/<harness>/<seed>.
// scripts/fuzz.sh runs it before fuzzing; `make fuzz-seeds` writes fuzz/corpus/ with it.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/base/logging.h"
#include "fuzz/seeds.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  mooncake::SetLogLevel(mooncake::LogLevel::kError);
  using mooncake::fuzz::Seeds;
  const struct {
    const char* harness;
    Seeds (*make)();
  } kHarnesses[] = {
      {"uds_frame_fuzzer", mooncake::fuzz::UdsFrameSeeds},
      {"transfer_header_fuzzer", mooncake::fuzz::TransferHeaderSeeds},
      {"transfer_opening_fuzzer", mooncake::fuzz::TransferOpeningSeeds},
      {"flags_fuzzer", mooncake::fuzz::FlagsSeeds},
      {"master_rpc_fuzzer", mooncake::fuzz::MasterRpcSeeds},
      {"rpc_preauth_fuzzer", mooncake::fuzz::RpcPreauthSeeds},
      {"state_records_fuzzer", mooncake::fuzz::StateRecordsSeeds},
      {"oplog_recovery_fuzzer", mooncake::fuzz::OplogRecoverySeeds},
      {"snapshot_codec_fuzzer", mooncake::fuzz::SnapshotCodecSeeds},
      {"snapshot_restore_fuzzer", mooncake::fuzz::SnapshotRestoreSeeds},
      {"ssd_meta_fuzzer", mooncake::fuzz::SsdMetaSeeds},
      {"admin_http_fuzzer", mooncake::fuzz::AdminHttpSeeds},
  };
  for (const auto& h : kHarnesses) {
    const std::filesystem::path dir = std::filesystem::path(argv[1]) / h.harness;
    std::filesystem::create_directories(dir);
    for (const auto& [name, bytes] : h.make()) {
      std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      if (!out) {
        std::fprintf(stderr, "cannot write %s\n", (dir / name).c_str());
        return 1;
      }
    }
  }
  return 0;
}
