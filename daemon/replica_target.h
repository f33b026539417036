// Where one replica's bytes live, as the data path sees it: in a segment of this daemon
// (local) or in one another daemon owns (remote, reached through the transfer engine).
#ifndef MOONCAKE_DAEMON_REPLICA_TARGET_H_
#define MOONCAKE_DAEMON_REPLICA_TARGET_H_

#include <cstdint>
#include <memory>

#include "daemon/segment_memory.h"
#include "daemon/transport.h"

namespace mooncake {

struct ReplicaTarget {
  // Set when this daemon owns the replica. Holding it keeps the memory mapped even if the
  // segment is unmounted meanwhile.
  std::shared_ptr<SegmentMemory> segment;
  std::shared_ptr<const RemoteSegment> remote;  // set when another daemon does
  int64_t segment_id = 0;
  uint64_t offset = 0;  // of the value, inside the segment
  // Of the master whose grant covers the access: the lease of a read, the reservation of a
  // write (0: unchecked).
  int64_t master_epoch = 0;

  bool local() const { return segment != nullptr; }
  char* data() const { return segment->base() + offset; }  // local only
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_REPLICA_TARGET_H_
