// The admin commands of mooncake-cli, reads of the master's admin HTTP (docs/operations.md,
// "Admin HTTP of the master"): stat (/query_key, which takes no read lease), ls
// (/get_all_keys, page after page), segments (/get_segments_detail), stats (/stats),
// health (/health of the master, and of the daemon with --daemon_admin_url) and snapshot
// status (/snapshot); and admin-token, which prints the token they send. None changes the
// store.
//
// Every request but health's (/health is open) carries the admin token
// (common/admin/admin_http.h) of --admin_token_file, else of --cluster_key_file, when either is
// given; a key file that cannot be loaded is 3 before anything is asked.
//
// Each function prints tables (or, with --json, the master's JSON as it came, so that
// scripts see every field) and returns an exit code of cli/exit_codes.h: a master that
// cannot be reached is 4, with a line naming the URL tried and the flag and variable that
// name another; an error answer ({"success":false,"error_code":C,...}) prints C
// by name and is 3, or 1 for a key that does not exist; a refusal (401 -1400, 403 -1401)
// is 3 with a line naming the flags that give a token. One thread.
#ifndef MOONCAKE_CLI_ADMIN_COMMANDS_H_
#define MOONCAKE_CLI_ADMIN_COMMANDS_H_

#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_args.h"

namespace mooncake {
namespace cli {

// ls: the page size asked of the master (its limit is 100000 a page).
constexpr uint64_t kListPageKeys = 1000;
// ls without --limit.
constexpr uint64_t kDefaultListLimit = 1000;

// The master's description of one key (/query_key: size, replicas, lease, pins), which
// takes no read lease: put checks what it stored and rm whether a leased key is
// hard-pinned (cli/data_commands.h). Prints nothing.
struct KeyDescription {
  enum Outcome { kFound, kMissing, kFailed };
  Outcome outcome = kFailed;
  nlohmann::json body;  // kFound: the master's answer
  std::string error;    // kFailed: what was asked and why it failed
};
KeyDescription DescribeKey(const GlobalOptions& g, const std::string& key);

int RunStat(const Invocation& inv);
int RunList(const Invocation& inv);
int RunSegments(const Invocation& inv);
int RunStats(const Invocation& inv);
int RunHealth(const Invocation& inv);
int RunSnapshotStatus(const Invocation& inv);
// Prints the admin token (usage error 2 without a key file).
int RunAdminToken(const Invocation& inv);

}  // namespace cli
}  // namespace mooncake

#endif  // MOONCAKE_CLI_ADMIN_COMMANDS_H_
