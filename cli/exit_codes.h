// The exit codes of mooncake-cli, the contract scripts rely on (docs/operations.md,
// "mooncake-cli", lists the same table; keep them in step).
#ifndef MOONCAKE_CLI_EXIT_CODES_H_
#define MOONCAKE_CLI_EXIT_CODES_H_

namespace mooncake {
namespace cli {

enum ExitCode : int {
  kExitOk = 0,
  // get, stat, exists (any of the keys), rm (any of the keys): the key does not exist.
  kExitMissing = 1,
  // Bad command line: unknown command or option, missing or extra arguments, a bad value.
  kExitUsage = 2,
  // The daemon or the master answered with an error (its code is printed), or a local file
  // could not be read or written.
  kExitError = 3,
  // The daemon's socket or the master's HTTP or Thrift port could not be reached.
  kExitUnreachable = 4,
  // put without --upsert: the key exists, and keeps its value (a put never overwrites).
  kExitExists = 5,
};

}  // namespace cli
}  // namespace mooncake

#endif  // MOONCAKE_CLI_EXIT_CODES_H_
