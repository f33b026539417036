// Where one replica's bytes live, as the data path sees it: in a segment of this daemon
// (local memory), in one another daemon owns (remote memory, reached through the transfer
// engine), on this daemon's SSD tier (local disk, read through its SsdStore), or on
// another daemon's (remote disk, read by its owner: READ_DISK).
#ifndef MOONCAKE_DAEMON_REPLICA_TARGET_H_
#define MOONCAKE_DAEMON_REPLICA_TARGET_H_

#include <cstdint>
#include <memory>

#include "daemon/memory/segment_memory.h"
#include "daemon/transfer/transport.h"

namespace mooncake {

class SsdStore;

// Best first: the order in which reads try replicas.
enum class ReplicaTier : uint8_t { kLocalMemory, kRemoteMemory, kLocalDisk, kRemoteDisk };

inline const char* TierName(ReplicaTier tier) {
  switch (tier) {
    case ReplicaTier::kLocalMemory:
      return "local memory";
    case ReplicaTier::kRemoteMemory:
      return "remote memory";
    case ReplicaTier::kLocalDisk:
      return "local disk";
    case ReplicaTier::kRemoteDisk:
      return "remote disk";
  }
  return "?";
}

struct ReplicaTarget {
  // Set when this daemon owns the replica. Holding it keeps the memory mapped even if the
  // segment is unmounted meanwhile.
  std::shared_ptr<SegmentMemory> segment;
  std::shared_ptr<const RemoteSegment> remote;  // set when another daemon does
  int64_t segment_id = 0;
  int64_t replica_id = 0;  // reads: as the master listed it, for a report of it (0: none)
  uint64_t offset = 0;  // of the value, inside the segment (0 for a disk replica)
  // Of the master whose grant covers the access: the lease of a read, the reservation of a
  // write (0: unchecked).
  int64_t master_epoch = 0;
  // A disk replica (read only): which value. Read from ssd when this daemon holds it, else
  // from remote's owner.
  std::shared_ptr<const DiskAddress> disk;
  SsdStore* ssd = nullptr;

  bool local() const { return segment != nullptr; }  // local memory
  bool on_disk() const { return disk != nullptr; }
  char* data() const { return segment->base() + offset; }  // local memory only
  ReplicaTier tier() const {
    if (on_disk()) return ssd != nullptr ? ReplicaTier::kLocalDisk : ReplicaTier::kRemoteDisk;
    return local() ? ReplicaTier::kLocalMemory : ReplicaTier::kRemoteMemory;
  }
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_REPLICA_TARGET_H_
