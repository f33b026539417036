// The data commands of mooncake-cli: put, get, exists, rm and rm --regex, through the public
// C ABI (include/mooncake_store.h) and the daemon's Unix socket, exactly as an application
// reaches the store, so that they exercise the real path.
//
// Memory: a value is held once, in this process's heap, while it moves between the file
// and the store; the handle's pool is kStagingPoolBytes, and the library copies through it
// in chunks (its chunked staging), so a 4 GiB value needs 4 GiB plus the pool, not twice.
// A regular file is read straight into a buffer of its size; stdin grows one (realloc,
// which moves large blocks by remapping pages, not copying them).
//
// Each function prints its result (a table line per key, or JSON with --json) and its
// errors, and returns an exit code of cli/exit_codes.h. One thread; each call opens one
// handle and closes it before returning.
#ifndef MOONCAKE_CLI_DATA_COMMANDS_H_
#define MOONCAKE_CLI_DATA_COMMANDS_H_

#include <cstdint>

#include "cli/cli_args.h"

namespace mooncake {
namespace cli {

// The pool of the CLI's handle: room for the library's two 4 MiB chunks in flight.
constexpr uint64_t kStagingPoolBytes = 16ull << 20;

int RunPut(const Invocation& inv);
int RunGet(const Invocation& inv);
int RunExists(const Invocation& inv);
int RunRemove(const Invocation& inv);  // rm KEY... and rm --regex PATTERN

}  // namespace cli
}  // namespace mooncake

#endif  // MOONCAKE_CLI_DATA_COMMANDS_H_
