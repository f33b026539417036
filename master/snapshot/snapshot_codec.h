// What a snapshot's payloads hold and how they are packed: the write side runs in the
// forked child (master/snapshot/snapshotter.h), the read side in a restore (master/snapshot/state_restore.h).
//
//   segments   zstd( msgpack array of segments )                  (master/log/state_records.h)
//   metadata   one frame per non-empty shard, in shard order:
//                u32 shard | u32 objects | u32 raw bytes | u32 zstd bytes | zstd( array of objects )
//              little-endian; each shard compressed on its own (zstd level 3) so that a
//              restore can decompress one at a time.
//
// The snapshot store checks every payload's size and CRC-32C before these are read, so a
// decoding failure here means a bug or another format version; it still never crashes
// (sizes are bounded by the bytes present) and is reported as DESERIALIZE_FAIL.
#ifndef MOONCAKE_MASTER_SNAPSHOT_CODEC_H_
#define MOONCAKE_MASTER_SNAPSHOT_CODEC_H_

#include <cstdint>
#include <string>

#include "common/base/error_code.h"
#include "master/service/master_service.h"
#include "master/snapshot/snapshot_store.h"
#include "master/snapshot/snapshot_writer.h"

namespace mooncake {

struct SnapshotFigures {
  int64_t objects = 0;
  int64_t segments = 0;
};

// Encodes the service's state into writer's payloads. Safe in a forked child: no logging,
// no lock that another thread of the parent could have held at the fork.
ErrorCode WriteSnapshotPayloads(MasterService* service, SnapshotWriter* writer,
                                SnapshotFigures* figures, std::string* error);

// Loads a snapshot into an empty service: segments first (detached), then objects. On
// failure *why says what was wrong and the service holds a partial state (ClearState it).
ErrorCode LoadSnapshotPayloads(MasterService* service, const LoadedSnapshot& snapshot,
                               SnapshotFigures* figures, std::string* why);

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_SNAPSHOT_CODEC_H_
