// The data commands of mooncake-cli: put, get, exists, rm and rm --regex, through the public
// C ABI (include/mooncake_store.h) and the daemon's Unix socket, exactly as an application
// reaches the store, so that they exercise the real path.
//
// put: a put never overwrites, and the C ABI answers 0 for a put of a key that exists (the
// old value stays), so without --upsert put looks the key up first (is_exist, no read
// lease) and refuses with kExitExists; after the put it asks the master's /query_key (no
// lease) what it holds: how many replicas were placed (the master places what it can), and
// whether a value another writer put between the check and the put is there instead (told
// by its size, or by it still being written; one of the same size is not told apart).
//
// rm KEY: a key a read holds (-706) is removed with force, which unpublishes it at once and
// frees its space when the lease ends; hard-pinned keys, which force would remove too, are
// looked up first (/query_key) and kept unless --force.
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
