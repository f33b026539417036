// The master's durable state, spelt once for both places that keep it: the snapshot's
// payloads and the operation log's records. Each is a msgpack array of fields in the order
// below; a record written by one format version is read back field for field.
//
//   segment   [segment_id, name, base, size, daemon_id, incarnation,
//              [[protocol, address, descriptor(bin)], ...], lent_by_client, kind]
//             (lent_by_client and kind came later: a segment of 7 fields, as older masters
//             wrote it, is a daemon's own; one of 8 is a memory segment. kind is the
//             ReplicaKind: 1 a daemon's SSD tier, LOCAL_DISK)
//   object    [key, size, checksum (-1: none), hard_pin, [[segment_id, offset, kind], ...],
//              soft_pin_until, group]
//             (a replica of kind 1 is on the SSD of its LOCAL_DISK segment's daemon,
//             offset 0. soft_pin_until, the soft pin's fixed deadline in Unix-epoch ms, came
//             later and is written only for a soft-pinned object: an object of 5 fields, as
//             older masters wrote it and as this one writes an unpinned one, has no pin.
//             group, the object's group as its clients name it (master/directory/groups.h), came after
//             it and is written only for a grouped object, soft_pin_until then 0 when it has
//             no pin: an object of 5 or 6 fields is in no group)
//   log record  [1, object]        published (PutEnd, UpsertEnd), left with fewer replicas
//                                  (BatchReplicaClear on one segment), or moved out of a
//                                  draining segment (CommitMoves): the object as it is now
//               [2, key]           gone (Remove, RemoveAll, RemoveByRegex, eviction,
//                                  BatchReplicaClear of its last replicas)
//               [3, segment]       mounted (or re-attached after a restore)
//               [4, segment_id]    unmounted, or its daemon declared dead: its replicas go
//
// What is not here, on purpose: objects still being written (PROCESSING puts, pending
// upserts and pending moves are revoked by a restart; a segment's draining state too: its
// owner's drain starts again, see daemon/replicas/segment_drainer.h), leases (runtime state: they restart),
// allocator internals (a segment's allocator is rebuilt from the replica ranges, which are
// its whole state) and daemons (those that own a restored segment are expected back).
//
// Input policy: decoding is strict — the exact shape, msgpack types and field counts, or
// false. Snapshot payloads and log records are checksummed before they get here, so a
// decoding failure means a bug or a format from another version, never a crash.
#ifndef MOONCAKE_MASTER_STATE_RECORDS_H_
#define MOONCAKE_MASTER_STATE_RECORDS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mooncake {

struct EndpointRecord {
  std::string protocol;
  std::string address;
  std::string descriptor;
};

struct SegmentRecord {
  int64_t segment_id = 0;
  std::string name;
  int64_t base = 0;
  int64_t size = 0;
  int64_t daemon_id = 0;
  int64_t incarnation = 0;
  std::vector<EndpointRecord> endpoints;
  bool lent_by_client = false;  // placement's last resort (master/directory/segment_registry.h)
  uint8_t kind = 0;             // ReplicaKind: 1 LOCAL_DISK (master/directory/segment.h)
};

struct ReplicaRecord {
  int64_t segment_id = 0;
  uint64_t offset = 0;
  uint8_t kind = 0;  // ReplicaKind
};

struct ObjectRecord {
  std::string key;
  uint64_t size = 0;
  int64_t checksum = -1;
  bool hard_pin = false;
  std::vector<ReplicaRecord> replicas;
  int64_t soft_pin_until_unix_ms = 0;  // 0: not soft-pinned
  std::string group;                   // "": in no group
};

enum class LogOp : uint8_t { kPublish = 1, kRemove = 2, kMount = 3, kUnmount = 4 };

struct LogRecord {
  LogOp op = LogOp::kPublish;
  ObjectRecord object;    // kPublish
  std::string key;        // kRemove
  SegmentRecord segment;  // kMount
  int64_t segment_id = 0; // kUnmount
};

// ---- encoding (each appends to *out) ----

// One object as a bare array (a snapshot shard is an array of these).
void AppendObject(std::string* out, std::string_view key, uint64_t size, int64_t checksum,
                  bool hard_pin, const ReplicaRecord* replicas, size_t replica_count,
                  int64_t soft_pin_until_unix_ms = 0, std::string_view group = {});
void AppendSegment(std::string* out, const SegmentRecord& segment);
// The header of an array of count elements (a shard's objects, the segment list).
void AppendArrayHeader(std::string* out, uint32_t count);

void AppendPublishRecord(std::string* out, std::string_view key, uint64_t size, int64_t checksum,
                         bool hard_pin, const ReplicaRecord* replicas, size_t replica_count,
                         int64_t soft_pin_until_unix_ms = 0, std::string_view group = {});
void AppendRemoveRecord(std::string* out, std::string_view key);
void AppendMountRecord(std::string* out, const SegmentRecord& segment);
void AppendUnmountRecord(std::string* out, int64_t segment_id);

// ---- decoding ----

bool DecodeLogRecord(std::string_view bytes, LogRecord* out);
bool DecodeSegments(std::string_view bytes, std::vector<SegmentRecord>* out);
// Calls visit for each object of an array of objects; false when the bytes are malformed
// (objects already visited stay visited: the caller discards what it built).
bool DecodeObjects(std::string_view bytes, const std::function<void(ObjectRecord&&)>& visit);

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_STATE_RECORDS_H_
