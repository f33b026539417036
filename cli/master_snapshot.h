// Taking a snapshot of the master's state (docs/durability.md): the Thrift Snapshot() call,
// after the cluster key's handshake (common/master_link/master_auth.h) when --cluster_key_file is given,
// then LastSnapshot() polled until the snapshot started is published or failed. The one
// admin command that is not a read of the admin HTTP: a snapshot forks the master, so it
// stays behind the key. One thread; one connection per call.
#ifndef MOONCAKE_CLI_MASTER_SNAPSHOT_H_
#define MOONCAKE_CLI_MASTER_SNAPSHOT_H_

#include "cli/cli_args.h"

namespace mooncake {
namespace cli {

// mooncake-cli snapshot [--no_wait]: prints the snapshot's name, sequence, objects, bytes
// and duration (JSON with --json); returns an exit code of cli/exit_codes.h.
int RunSnapshotTake(const Invocation& inv);

}  // namespace cli
}  // namespace mooncake

#endif  // MOONCAKE_CLI_MASTER_SNAPSHOT_H_
