// What the master's admin reads hand out (MasterService::ListKeys, DescribeKey and
// SegmentDetails; the admin HTTP renders them: master/server/master_admin.h). Plain values,
// copied out under the locks of what they describe, so that a caller holds none.
#ifndef MOONCAKE_MASTER_ADMIN_VIEWS_H_
#define MOONCAKE_MASTER_ADMIN_VIEWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "master/directory/object_metadata.h"
#include "master_types.h"

namespace mooncake {

// A page of keys, and where the next one starts ("" once the walk is over).
struct KeyPage {
  std::vector<std::string> keys;
  std::string next_cursor;
};

// One replica of an object, with where it lives.
struct ReplicaView {
  int64_t replica_id = 0;
  ReplicaKind kind = ReplicaKind::kMemory;
  ReplicaStatus status = ReplicaStatus::kProcessing;
  int64_t segment_id = 0;
  std::string segment_name;
  std::string segment_status;  // "attached", "detached" or "draining"
  int64_t daemon_id = 0;
  uint64_t offset = 0;   // inside the segment
  uint64_t base = 0;     // the segment's base address (base + offset: the buffer)
  std::string protocol;  // the segment's first transport endpoint
  std::string endpoint;
};

// One object as it is: its replicas (memory first, being written ones too), its lease,
// pins and checksum.
struct KeyDescription {
  uint64_t size = 0;
  bool complete = false;
  bool hard_pinned = false;
  bool soft_pinned = false;
  int64_t lease_remaining_ms = 0;     // 0: no read lease runs
  int64_t soft_pin_remaining_ms = 0;  // 0: not soft-pinned
  int64_t checksum = -1;              // -1: none
  std::string group;                  // its group as its clients name it, "" for none
  std::vector<ReplicaView> replicas;
};

// One segment, attached or not, with its use.
struct SegmentView {
  rpc::SegmentInfo info;  // used filled in, incarnation blanked
  std::string status;     // "attached", "detached" or "draining"
  uint64_t capacity = 0;  // allocatable bytes (0 for a LOCAL_DISK segment)
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_ADMIN_VIEWS_H_
