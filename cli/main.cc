// mooncake-cli: put, get and look up keys, list segments and stats, take snapshots
// (docs/operations.md, "mooncake-cli"). Parses the command line (cli/cli_args.h) and runs
// the command; data commands use the C ABI (cli/data_commands.h), admin commands the
// master's admin HTTP (cli/admin_commands.h) or its Thrift service (cli/master_snapshot.h).
#include <curl/curl.h>

#include <iostream>
#include <string>

#include "cli/admin_commands.h"
#include "cli/cli_args.h"
#include "cli/data_commands.h"
#include "cli/exit_codes.h"
#include "cli/master_snapshot.h"
#include "cli/output.h"

namespace {

int Run(const mooncake::cli::Invocation& inv) {
  using namespace mooncake::cli;
  const std::string name = inv.command->name;
  if (name == "put") return RunPut(inv);
  if (name == "get") return RunGet(inv);
  if (name == "exists") return RunExists(inv);
  if (name == "rm") return RunRemove(inv);
  if (name == "stat") return RunStat(inv);
  if (name == "ls") return RunList(inv);
  if (name == "segments") return RunSegments(inv);
  if (name == "stats") return RunStats(inv);
  if (name == "health") return RunHealth(inv);
  if (name == "admin-token") return RunAdminToken(inv);
  if (name == "snapshot") return inv.args.empty() ? RunSnapshotTake(inv) : RunSnapshotStatus(inv);
  PrintError("command " + name + " has no implementation");
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mooncake::cli;
  Invocation inv;
  std::string error;
  if (!ParseArgs(argc, argv, &inv, &error)) {
    PrintError(error);
    std::cerr << "Usage: mooncake-cli [OPTIONS] COMMAND [COMMAND OPTIONS] [ARGS]... "
                 "(mooncake-cli --help)\n";
    return kExitUsage;
  }
  if (!inv.message.empty()) {
    std::cout << inv.message;
    return kExitOk;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc = Run(inv);
  curl_global_cleanup();
  std::cout.flush();
  return rc;
}
