// The operations of the Unix-socket protocol between libmooncake_store and mooncaked,
// each defined once: its code, its typed arguments, its typed reply, and its line of
// docs/protocol.md (which a test checks against this table, so the two cannot drift).
//
// libmc fills an XxxArgs and reads an XxxReply; the daemon's handler for op kXxx gets the
// XxxArgs already parsed (a wrong shape closes the connection, in one place: see
// common/uds/uds_fields.h) and fills the XxxReply. Adding an op is: its structs and one row
// of MC_UDS_OPS here, one libmc call, one daemon handler.
//
// A request is [request_id, op, args]; a reply [request_id, code, results], where results
// are the reply's fields when code is 0, and otherwise empty or one reason (below).
//
// Keys: every field named kKeyField (a std::string, or a list of them) holds a user key,
// and only those do. The daemon turns each into the key stored for the connection's tenant
// as it parses the request (daemon/base/tenant_scope.h), so a field that carries a key must be
// named so, and no other field may be.
#ifndef MOONCAKE_COMMON_UDS_OPS_H_
#define MOONCAKE_COMMON_UDS_OPS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/error_code.h"
#include "common/uds/uds_fields.h"

namespace mooncake {
namespace uds {

// ---- building blocks ----

// The name of every field that holds a user key (see above).
inline constexpr char kKeyField[] = "key";

// How a put is placed, as it travels on the socket (mooncake_put_config_t, less what
// libmc refuses or resolves itself: NoF/DFS fields, host id, data type).
struct WireConfig {
  uint64_t replica_num = 1;
  // Mooncake's SoftPinAction: 0 PRESERVE, 1 ENABLE, 2 DISABLE (anything else is -600);
  // with soft_pin_ttl_given, soft_pin_ttl_ms is ENABLE's TTL (0 unpins), else the master's
  // --default_kv_soft_pin_ttl applies.
  uint64_t soft_pin_action = 0;
  bool with_hard_pin = false;
  std::vector<std::string> preferred_segments;
  // The SSD tier (docs/ssd.md): 0 as the master's --enable_offload says, 1 offload this
  // put's value, 2 do not (rpc::ReplicateConfig.offload); anything else is -600.
  uint64_t offload = 0;
  bool soft_pin_ttl_given = false;
  uint64_t soft_pin_ttl_ms = 0;
  // The first replica on this connection's daemon (prefer_alloc_in_same_node).
  bool prefer_local = false;
  // Mooncake's group_ids (docs/mooncake-api.md, "groups"): group_given says the put names
  // its key's group ("" for none: an upsert then must find its object in none); PUT, UPSERT
  // and PUT_BEGIN name it in group, BATCH_PUT and BATCH_UPSERT per entry (PutEntry.group,
  // group left ""). A group id is 1..4096 bytes without NUL, else the entry is -600.
  bool group_given = false;
  std::string group;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("replica_num", s.replica_num);
    v("soft_pin_action 0/1/2", s.soft_pin_action);
    v("with_hard_pin", s.with_hard_pin);
    v("preferred \"host:port\"", s.preferred_segments);
    v("offload 0/1/2", s.offload);
    v("soft_pin_ttl_given", s.soft_pin_ttl_given);
    v("soft_pin_ttl_ms", s.soft_pin_ttl_ms);
    v("prefer_local", s.prefer_local);
    v("group_given", s.group_given);
    v("group", s.group);
  }
};

struct NoArgs {
  template <class S, class V>
  static void Fields(S&, V&) {}
};
using NoReply = NoArgs;

// A key alone: GET_BEGIN, EXIST, GET_SIZE.
struct KeyArgs {
  std::string key;
  template <class S, class V>
  static void Fields(S& s, V& v) { v(kKeyField, s.key); }
};

// One code per entry of a batch (or a value where the entry succeeded), in entry order.
struct EntryResults {
  std::vector<int64_t> values;
};

// ---- handshake ----

struct HelloArgs {
  uint64_t abi_version = 0;
  uint64_t pool_size = 0;
  uint64_t pid = 0;  // informational: the daemon trusts and logs SO_PEERCRED
  std::string master_address;
  // The tenant the connection's keys belong to (common/base/tenant_key.h); "": none named (the
  // daemon's --tenant_uids default for the peer's uid, else the default tenant).
  std::string tenant;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("abi_version", s.abi_version);
    v("pool_size", s.pool_size);
    v("pid", s.pid);
    v("master_address", s.master_address);
    v("tenant", s.tenant);
  }
};

struct HelloReply {
  std::string hostname;  // "host:port"
  uint64_t daemon_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("hostname \"host:port\"", s.hostname);
    v("daemon_id", s.daemon_id);
  }
};

// ---- puts ----

struct PutArgs {  // PUT and UPSERT
  std::string key;
  uint64_t pool_offset = 0;
  uint64_t size = 0;
  WireConfig config;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v(kKeyField, s.key);
    v("pool_offset", s.pool_offset);
    v("size", s.size);
    v("config", s.config);
  }
};

struct PutEntry {  // one value of a BATCH_PUT
  std::string key;
  uint64_t pool_offset = 0;
  uint64_t size = 0;
  std::string group;  // its group id, when the batch's config.group_given ("": none)
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v(kKeyField, s.key);
    v("pool_offset", s.pool_offset);
    v("size", s.size);
    v("group", s.group);
  }
};

struct BatchPutArgs {
  std::vector<PutEntry> entries;
  WireConfig config;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("entries", s.entries);
    v("config", s.config);
  }
};

struct BatchPutReply : EntryResults {
  template <class S, class V>
  static void Fields(S& s, V& v) { v.Spread("code", s.values); }
};

struct PutBeginArgs {
  std::string key;
  uint64_t size = 0;
  WireConfig config;
  Flag upsert;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v(kKeyField, s.key);
    v("size", s.size);
    v("config", s.config);
    v("upsert", s.upsert);
  }
};

struct PutBeginReply {
  uint64_t put_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) { v("put_id", s.put_id); }
};

// PUT_CHUNK and GET_CHUNK: one chunk of a staged put or get, between the value and the
// pool.
struct ChunkArgs {
  uint64_t staged_id = 0;  // the put_id or get_id
  uint64_t value_offset = 0;
  uint64_t pool_offset = 0;
  uint64_t length = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("staged_id", s.staged_id);
    v("value_offset", s.value_offset);
    v("pool_offset", s.pool_offset);
    v("length", s.length);
  }
};

// PUT_COMMIT, PUT_ABORT and GET_END.
struct StagedIdArgs {
  uint64_t staged_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) { v("staged_id", s.staged_id); }
};

// ---- gets ----

struct GetArgs {  // also one entry of a BATCH_GET
  std::string key;
  uint64_t pool_offset = 0;
  uint64_t capacity = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v(kKeyField, s.key);
    v("pool_offset", s.pool_offset);
    v("capacity", s.capacity);
  }
};

struct GetReply {
  uint64_t bytes = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) { v("bytes", s.bytes); }
};

struct BatchGetArgs {
  std::vector<GetArgs> entries;
  template <class S, class V>
  static void Fields(S& s, V& v) { v("entries", s.entries); }
};

struct BatchGetReply : EntryResults {
  template <class S, class V>
  static void Fields(S& s, V& v) { v.Spread("bytes or code", s.values); }
};

struct GetBeginReply {
  uint64_t get_id = 0;
  uint64_t size = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("get_id", s.get_id);
    v("size", s.size);
  }
};

// ---- ranged gets ----

// One fragment of a ranged get: bytes [src_offset, src_offset + length) of the object go to
// the pool at pool_offset.
struct WireRange {
  uint64_t src_offset = 0;
  uint64_t length = 0;
  uint64_t pool_offset = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("src_offset", s.src_offset);
    v("length", s.length);
    v("pool_offset", s.pool_offset);
  }
};

// GET_RANGES, and one entry of a BATCH_GET_RANGES: a key and its fragments.
struct GetRangesArgs {
  std::string key;
  std::vector<WireRange> ranges;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v(kKeyField, s.key);
    v("ranges", s.ranges);
  }
};

struct BatchGetRangesArgs {
  std::vector<GetRangesArgs> entries;
  template <class S, class V>
  static void Fields(S& s, V& v) { v("entries", s.entries); }
};

// One value per fragment (the bytes read, its length, or a code), in request order: for a
// batch, entry by entry.
struct GetRangesReply : EntryResults {
  template <class S, class V>
  static void Fields(S& s, V& v) { v.Spread("bytes or code", s.values); }
};

// At most this many fragments per GET_RANGES or BATCH_GET_RANGES request, all entries
// together (more: -600 for the request), so that the request (four msgpack objects a
// fragment) and its reply stay inside kMaxFrameObjects; libmc splits larger calls.
inline constexpr size_t kMaxRangesPerRequest = 16384;

// ---- queries and removal ----

struct ExistReply {
  uint64_t present = 0;  // 0 or 1
  template <class S, class V>
  static void Fields(S& s, V& v) { v("0 or 1", s.present); }
};

// Keys alone: BATCH_EXIST, BATCH_GET_REPLICA_DESC.
struct BatchExistArgs {
  std::vector<std::string> keys;
  template <class S, class V>
  static void Fields(S& s, V& v) { v(kKeyField, s.keys); }
};

struct BatchExistReply : EntryResults {
  template <class S, class V>
  static void Fields(S& s, V& v) { v.Spread("0, 1 or code", s.values); }
};

struct SizeReply {
  uint64_t size = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) { v("size", s.size); }
};

struct RemoveArgs {
  std::string key;
  Flag force;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v(kKeyField, s.key);
    v("force", s.force);
  }
};

struct RemoveByRegexArgs {
  std::string pattern;
  Flag force;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("pattern", s.pattern);
    v("force", s.force);
  }
};

struct RemoveAllArgs {
  Flag force;
  template <class S, class V>
  static void Fields(S& s, V& v) { v("force", s.force); }
};

struct BatchRemoveArgs {
  std::vector<std::string> keys;
  Flag force;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v(kKeyField, s.keys);
    v("force", s.force);
  }
};

struct BatchRemoveReply : EntryResults {
  template <class S, class V>
  static void Fields(S& s, V& v) { v.Spread("code", s.values); }
};

struct CountReply {
  uint64_t count = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) { v("count", s.count); }
};

// ---- replica descriptors ----

// One replica of an object, as the master lists it (COMPLETE replicas only).
struct WireReplica {
  uint64_t kind = 0;    // rpc::ReplicaKind: 0 memory, 1 disk (the holder's SSD tier)
  uint64_t status = 0;  // rpc::ReplicaStatus: 1 complete (the only one listed)
  std::string location;  // "host:port" of the daemon holding it (its transfer port)
  uint64_t size = 0;     // bytes
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("kind", s.kind);
    v("status", s.status);
    v("\"host:port\"", s.location);
    v("size", s.size);
  }
};

struct ReplicaDescReply {
  std::vector<WireReplica> replicas;
  template <class S, class V>
  static void Fields(S& s, V& v) { v("replicas", s.replicas); }
};

// One key of a BATCH_GET_REPLICA_DESC: code 0 and its replicas, or a code and none.
struct ReplicaDescEntry {
  int64_t code = 0;
  std::vector<WireReplica> replicas;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("code", s.code);
    v("replicas", s.replicas);
  }
};

// At most this many keys per BATCH_GET_REPLICA_DESC (more: -600), so that a reply listing
// every replica of every key stays inside kMaxFrameBytes and kMaxFrameObjects.
inline constexpr size_t kMaxReplicaDescBatch = 1024;

struct BatchReplicaDescReply {
  std::vector<ReplicaDescEntry> entries;  // one per key, in order
  template <class S, class V>
  static void Fields(S& s, V& v) { v("entries", s.entries); }
};

// ---- the daemon ----

struct HostnameReply {
  std::string hostname;
  template <class S, class V>
  static void Fields(S& s, V& v) { v("\"host:port\"", s.hostname); }
};

struct HealthReply {
  uint64_t master_reachable = 0;  // 0 or 1
  template <class S, class V>
  static void Fields(S& s, V& v) { v("master_reachable 0/1", s.master_reachable); }
};

// CLIENT_STATS: what the daemon counted for this connection.
struct ClientStatsReply {
  uint64_t disk_reads = 0;  // objects (or ranges of one) read from an SSD replica
  template <class S, class V>
  static void Fields(S& s, V& v) { v("disk_reads", s.disk_reads); }
};

struct MountSegmentArgs {
  uint64_t size = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) { v("size", s.size); }
};

// What UNMOUNT_SEGMENTS did with the objects in the connection's segments.
struct UnmountSegmentsReply {
  uint64_t moved = 0;    // moved to other segments
  uint64_t dropped = 0;  // no room for them elsewhere: gone with the segments
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("moved", s.moved);
    v("dropped", s.dropped);
  }
};

// ---- segments and replica clearing (ABI 4: Mooncake's segment calls) ----

struct BatchReplicaClearArgs {
  std::vector<std::string> keys;
  std::string segment_name;  // "": every replica; else those on the daemon of that name
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v(kKeyField, s.keys);
    v("segment_name", s.segment_name);
  }
};

struct BatchReplicaClearReply : EntryResults {
  template <class S, class V>
  static void Fields(S& s, V& v) { v.Spread("code", s.values); }
};

// MOUNT_POOL_SEGMENT: a range of the connection's pool, lent to the cluster as a segment.
struct MountPoolSegmentArgs {
  uint64_t pool_offset = 0;
  uint64_t size = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("pool_offset", s.pool_offset);
    v("size", s.size);
  }
};

// A segment mounted for the connection: its id and its size in bytes.
struct MountedSegmentReply {
  uint64_t segment_id = 0;
  uint64_t size = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("segment_id", s.segment_id);
    v("size", s.size);
  }
};

struct UnmountSegmentArgs {
  uint64_t segment_id = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) { v("segment_id", s.segment_id); }
};

// ---- client names, copy and move tasks (docs/mooncake-api.md, "naming", "tasks") ----

// SET_CLIENT_NAME: the name the client gives itself (Mooncake's local_hostname, with a
// port); the segments the connection lends from then on are mounted under it.
struct ClientNameArgs {
  std::string name;
  template <class S, class V>
  static void Fields(S& s, V& v) { v("name \"host:port\"", s.name); }
};

// CREATE_COPY_TASK: copy key's value to a replica in each of targets (segment names).
struct CopyTaskArgs {
  std::string key;
  std::vector<std::string> targets;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v(kKeyField, s.key);
    v("targets", s.targets);
  }
};

// CREATE_MOVE_TASK: move key's replica in segment source to segment target.
struct MoveTaskArgs {
  std::string key;
  std::string source;
  std::string target;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v(kKeyField, s.key);
    v("source", s.source);
    v("target", s.target);
  }
};

// MOUNT_FILE_SEGMENT: [offset, offset + size) of the file whose descriptor comes with the
// request (SCM_RIGHTS; one request of the kind in flight per connection), lent as a
// segment.
struct MountFileSegmentArgs {
  uint64_t offset = 0;
  uint64_t size = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("offset", s.offset);
    v("size", s.size);
  }
};

// A task's id: Mooncake's UUID, two 64-bit halves.
struct TaskIdArgs {
  uint64_t id_high = 0;
  uint64_t id_low = 0;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("id_high", s.id_high);
    v("id_low", s.id_low);
  }
};
using TaskIdReply = TaskIdArgs;

// QUERY_TASK's answer: Mooncake's QueryTaskResponse.
struct TaskReply {
  uint64_t type = 0;    // 0 REPLICA_COPY, 1 REPLICA_MOVE
  uint64_t status = 0;  // 0 PENDING, 1 PROCESSING, 2 FAILED, 3 SUCCESS
  int64_t created_unix_ms = 0;
  int64_t updated_unix_ms = 0;
  uint64_t assigned_daemon = 0;  // the daemon that runs it (holds the source replica)
  std::string message;
  template <class S, class V>
  static void Fields(S& s, V& v) {
    v("type 0/1", s.type);
    v("status 0..3", s.status);
    v("created_unix_ms", s.created_unix_ms);
    v("updated_unix_ms", s.updated_unix_ms);
    v("assigned_daemon", s.assigned_daemon);
    v("message", s.message);
  }
};

// ---- reasons ----
//
// A reply whose code is not 0 may carry one reason: its results are then [reason], a str
// saying, for an operator, what was refused and why ("ABI version 3, daemon speaks 4 ...",
// "key longer than 4096 bytes (5000)"), at most kMaxReasonBytes. libmc shows it to the
// application (mooncake_store_errmsg, and the log line of a failed connect). It is
// optional both ways: every libmc reads the results of a failed reply not at all or only
// through ReasonOf, and a daemon that sends none (empty results) leaves libmc to say what
// it knows itself. So adding it changed no ABI version.
inline constexpr size_t kMaxReasonBytes = 1024;

// The reason a reply carries: its one str when its code is not 0 and it has exactly one,
// cut to kMaxReasonBytes, with control characters (a newline) made blanks so that it
// stays one log line; "" otherwise. Its bytes are the daemon's: shown, never interpreted.
std::string ReasonOf(const Message& reply);

// ---- the table ----
//
// X(Name, "WIRE_NAME", code, Args, Reply, "note for docs/protocol.md"): every op that may
// follow HELLO. Codes are never reused; the daemon's handler of an op is On<Name>.
// Codes 27..29 are reserved for ranged reads, 31..36 for segments and replica clearing
// (31..35 taken, 36 free), 37..40 for the version-4 write family (ABI 4, issue 17),
// 50..54 for Mooncake's remaining client members and 60..69 for client names and copy/move
// tasks (issue 31); 30 is POOL_FENCE.
#define MC_UDS_OPS(X)                                                                          \
  X(Put, "PUT", 2, PutArgs, NoReply,                                                           \
    "whole value already in the pool; code 0 also when the key exists (put never overwrites)") \
  X(BatchPut, "BATCH_PUT", 3, BatchPutArgs, BatchPutReply, "one code per entry")               \
  X(Upsert, "UPSERT", 4, PutArgs, NoReply, "replaces an existing value")                       \
  X(PutBegin, "PUT_BEGIN", 5, PutBeginArgs, PutBeginReply,                                     \
    "staged put of a value that does not fit in the pool at once; -705 when the key exists")   \
  X(PutChunk, "PUT_CHUNK", 6, ChunkArgs, NoReply,                                              \
    "`staged_id` is the `put_id`; copies one chunk into every replica")                        \
  X(PutCommit, "PUT_COMMIT", 7, StagedIdArgs, NoReply, "publishes (PutEnd)")                   \
  X(PutAbort, "PUT_ABORT", 8, StagedIdArgs, NoReply, "revokes")                                \
  X(Get, "GET", 9, GetArgs, GetReply, "-600 when capacity < size")                             \
  X(BatchGet, "BATCH_GET", 10, BatchGetArgs, BatchGetReply, "one result per entry")            \
  X(GetBegin, "GET_BEGIN", 11, KeyArgs, GetBeginReply,                                         \
    "staged get; holds the replica under its lease")                                           \
  X(GetChunk, "GET_CHUNK", 12, ChunkArgs, NoReply,                                             \
    "`staged_id` is the `get_id`; -707 once the lease ran out")                                \
  X(GetEnd, "GET_END", 13, StagedIdArgs, NoReply, "ends the staged get")                       \
  X(Exist, "EXIST", 14, KeyArgs, ExistReply, "")                                               \
  X(BatchExist, "BATCH_EXIST", 15, BatchExistArgs, BatchExistReply, "")                        \
  X(GetSize, "GET_SIZE", 16, KeyArgs, SizeReply, "")                                           \
  X(Remove, "REMOVE", 17, RemoveArgs, NoReply, "")                                             \
  X(RemoveByRegex, "REMOVE_BY_REGEX", 18, RemoveByRegexArgs, CountReply, "")                   \
  X(RemoveAll, "REMOVE_ALL", 19, RemoveAllArgs, CountReply, "")                                \
  X(Hostname, "HOSTNAME", 20, NoArgs, HostnameReply, "")                                       \
  X(Health, "HEALTH", 21, NoArgs, HealthReply, "")                                             \
  X(MountSegment, "MOUNT_SEGMENT", 22, MountSegmentArgs, NoReply,                              \
    "an extra segment for this connection; drained (its objects moved to other segments) and " \
    "unmounted when the connection closes")                                                    \
  X(BatchRemove, "BATCH_REMOVE", 23, BatchRemoveArgs, BatchRemoveReply,                        \
    "one code per key, as `REMOVE` answers it")                                                \
  X(UnmountSegments, "UNMOUNT_SEGMENTS", 24, NoArgs, UnmountSegmentsReply,                     \
    "drains and unmounts this connection's extra segments now, answering once done (a "        \
    "graceful close sends it)")                                                                \
  X(GetReplicaDesc, "GET_REPLICA_DESC", 25, KeyArgs, ReplicaDescReply,                         \
    "the object's complete replicas (kind 0 memory, 1 disk); takes the read lease "            \
    "GetReplicaList grants, reads no bytes; -704 on a miss")                                   \
  X(BatchGetReplicaDesc, "BATCH_GET_REPLICA_DESC", 26, BatchExistArgs, BatchReplicaDescReply,  \
    "one entry per key, as `GET_REPLICA_DESC` answers it; at most 1024 keys (else -600)") \
  X(GetRanges, "GET_RANGES", 27, GetRangesArgs, GetRangesReply,                                 \
    "copies only the fragments' bytes from one replica into the pool; one value per fragment "  \
    "(its length, or -600 past the object or pool, the key's code on a miss); at most 16384 "   \
    "fragments (else -600)")                                                                   \
  X(BatchGetRanges, "BATCH_GET_RANGES", 28, BatchGetRangesArgs, GetRangesReply,                \
    "`GET_RANGES` for several keys in one request; the values of every entry's fragments in "  \
    "order; at most 16384 fragments in all (else -600)")                                       \
  X(BatchReplicaClear, "BATCH_REPLICA_CLEAR", 31, BatchReplicaClearArgs,                       \
    BatchReplicaClearReply,                                                                    \
    "one code per key: the master's BatchReplicaClear (leased keys -706)")                     \
  X(MountPoolSegment, "MOUNT_POOL_SEGMENT", 32, MountPoolSegmentArgs, MountedSegmentReply,     \
    "lends a range of the connection's pool as a segment; -600 outside the pool")              \
  X(AllocateSegment, "ALLOCATE_SEGMENT", 33, MountSegmentArgs, MountedSegmentReply,            \
    "as `MOUNT_SEGMENT`, answering the new segment's id")                                      \
  X(UnmountSegment, "UNMOUNT_SEGMENT", 34, UnmountSegmentArgs, UnmountSegmentsReply,           \
    "drains and unmounts one of the connection's segments; -101 when it is not one")           \
  X(UnmountLocalDiskSegment, "UNMOUNT_LOCAL_DISK_SEGMENT", 35, NoArgs, NoReply,                \
    "0 without an SSD tier; -1012 with one (the daemon's, not the connection's)")              \
  X(BatchUpsert, "BATCH_UPSERT", 37, BatchPutArgs, BatchPutReply,                              \
    "one code per entry, as `UPSERT` answers it; entries in order")                            \
  X(ClientStats, "CLIENT_STATS", 50, NoArgs, ClientStatsReply,                                 \
    "what the daemon counted for this connection: its reads served from an SSD replica")       \
  X(SetClientName, "SET_CLIENT_NAME", 60, ClientNameArgs, NoReply,                             \
    "names the client (setup's local_hostname): the segments it lends from then on carry the " \
    "name; -600 malformed, -102 the daemon's own name")                                        \
  X(CreateCopyTask, "CREATE_COPY_TASK", 61, CopyTaskArgs, TaskIdReply,                         \
    "the master's CreateCopyTask: a copy of the value into each target segment, run by the "   \
    "daemon holding a source replica; -704 missing, -600 no or an unknown target")             \
  X(CreateMoveTask, "CREATE_MOVE_TASK", 62, MoveTaskArgs, TaskIdReply,                         \
    "the master's CreateMoveTask: the replica in source moves to target; -704 missing, -600 "  \
    "source = target, an unknown target, or no replica in source")                            \
  X(QueryTask, "QUERY_TASK", 63, TaskIdArgs, TaskReply,                                        \
    "a task of the connection's tenant; -704 unknown (or forgotten: finished long ago)")      \
  X(MountFileSegment, "MOUNT_FILE_SEGMENT", 64, MountFileSegmentArgs, MountedSegmentReply,     \
    "lends a range of the file whose descriptor comes with it (Mooncake's mount_segment of "   \
    "a path): a device or a file sealed against shrinking; -1012 a file that can shrink")

// Besides the table, two ops about the connection itself rather than the store, which
// the daemon's server handles: HELLO (first, once), and POOL_FENCE: answered, with no
// results, once no connection opened before this one still has this connection's pool
// mapped (their requests have all ended and the daemon unmapped it there), so that
// libmc may reuse the pool memory a lost connection's requests were using.
#define MC_UDS_OP_ENUM_(name, wire, code, args, reply, note) k##name = (code),
enum class Op : uint32_t { kHello = 1, MC_UDS_OPS(MC_UDS_OP_ENUM_) kPoolFence = 30 };
#undef MC_UDS_OP_ENUM_

// The types of an op: OpSpec<Op::kGet>::Args is GetArgs, ::Reply is GetReply.
template <Op op>
struct OpSpec;
template <>
struct OpSpec<Op::kHello> {
  using Args = HelloArgs;
  using Reply = HelloReply;
};
template <>
struct OpSpec<Op::kPoolFence> {
  using Args = NoArgs;
  using Reply = NoReply;
};
#define MC_UDS_OP_SPEC_(name, wire, code, args, reply, note) \
  template <>                                                \
  struct OpSpec<Op::k##name> {                               \
    using Args = args;                                       \
    using Reply = reply;                                     \
  };
MC_UDS_OPS(MC_UDS_OP_SPEC_)
#undef MC_UDS_OP_SPEC_

// A request frame: [id, op, args].
class RequestFrame : public FrameBuilder {
 public:
  template <class Args>
  RequestFrame(uint64_t id, Op op, const Args& args)
      : FrameBuilder(id, static_cast<int64_t>(op), FieldCount(args)) {
    PackFields(this->args(), args);
  }
};

// A reply frame: [id, code, results], the results being reply's fields when code is OK,
// else [reason] when a reason is given (cut to kMaxReasonBytes), else nothing.
class ReplyFrame : public FrameBuilder {
 public:
  template <class Reply>
  ReplyFrame(uint64_t id, ErrorCode code, const Reply& reply, std::string_view reason = {})
      : FrameBuilder(id, ToInt(code), code == ErrorCode::OK ? FieldCount(reply)
                                                            : (reason.empty() ? 0 : 1)) {
    if (code == ErrorCode::OK) {
      PackFields(args(), reply);
    } else if (!reason.empty()) {
      PackReason(reason);
    }
  }

 private:
  void PackReason(std::string_view reason);
};

// True for the code of an op that may follow HELLO: MC_UDS_OPS and POOL_FENCE.
bool IsRequestOp(int64_t head);

// One op as docs/protocol.md lists it.
struct OpDoc {
  std::string name;  // "GET"
  uint32_t code = 0;
  std::string args;     // "[key, pool_offset, capacity]"
  std::string results;  // "[bytes]"
  std::string note;
};
// HELLO, POOL_FENCE, then every op of MC_UDS_OPS in table order.
std::vector<OpDoc> DescribeOps();

// The Markdown tables of docs/protocol.md: the connection's ops (HELLO, POOL_FENCE), and
// the operations'.
std::string HandshakeTableMarkdown();
std::string OpsTableMarkdown();

}  // namespace uds
}  // namespace mooncake

#endif  // MOONCAKE_COMMON_UDS_OPS_H_
