// The master's RPC interface: daemons ask it where to put bytes, publish what they wrote,
// and learn where to read. It never carries object bytes.
//
// Keys are stored keys (common/base/tenant_key.h): a tenant's keys carry its id, the default
// tenant's are the keys its clients name.
//
// Errors are values: every call returns a code from the table in include/mooncake_store.h
// (0 OK, -704 not found, ...) inside its result, never a Thrift exception. Every call on
// keys has a batch form taking many keys in one round trip; a batch returns one result per
// key, in order. Transport: framed, binary protocol. A master and the daemons talking to it
// come from one build: the changes' replies became structs (ChangeResult) when they began
// naming cache holders, which an older daemon cannot read.

namespace cpp mooncake.rpc

enum ReplicaKind {
  MEMORY = 0,
  LOCAL_DISK = 1,
}

enum ReplicaStatus {
  PROCESSING = 0,   // reserved, bytes being written; never shown to readers
  COMPLETE = 1,
  FAILED = 2,
  REMOVED = 3,
}

// How a daemon can be reached for one-sided transfers, e.g. {"tcp", "127.0.0.1:12300", ""}
// or {"rdma", "mlx5_0", <gid, lid, qpn, rkey...>}. The master stores it and hands it back
// unchanged; only daemons interpret it.
struct TransportEndpoint {
  1: string protocol,
  2: string address,
  3: binary descriptor,
}

struct SegmentInfo {
  1: i64 segment_id,                      // chosen by the daemon, unique in the cluster
  2: string name,                         // "host:port" of the owning daemon, or its client's
                                          // name (lender)
  3: i64 base,                            // base address in the owner's address space
  4: i64 size,
  5: i64 daemon_id,
  6: list<TransportEndpoint> endpoints,
  7: i64 used,                            // filled by GetAllSegments
  8: i64 incarnation,                     // a secret the daemon draws at start and mounts with:
                                          // after a master restart it proves the re-mount comes
                                          // from the daemon that owns the memory. Never listed
                                          // (GetAllSegments answers 0).
  9: bool lent_by_client = false,         // memory an application's connection lent (setup with
                                          // a segment size): it leaves when that client does, so
                                          // placement uses it only when the daemons' own segments
                                          // are full, or when a put names its daemon
  10: i32 kind = 0,                       // a ReplicaKind (an i32, so that a hostile value is an
                                          // integer to refuse, -600, never an invalid enum):
                                          // LOCAL_DISK: the daemon's SSD tier (docs/ssd.md):
                                          // size is its capacity, base 0; the master allocates
                                          // nothing in it and never counts it as memory. Its
                                          // replicas are objects the daemon wrote to its SSD,
                                          // located by the daemon's own index, never by offset.
                                          // At most one per daemon.
  11: i64 lender = 0,                     // lent memory named by its client (Mooncake's
                                          // local_hostname, docs/mooncake-api.md "naming"): the
                                          // lending process (its pid on the daemon), and name is
                                          // the client's, not the daemon's. 0: the daemon's own
                                          // memory, or lent by a client that named none. A name
                                          // belongs to one lender on one daemon: a new segment
                                          // under a name that another lender or daemon holds (in
                                          // a segment not draining), or that a daemon registered
                                          // under, is -102
}

struct ReplicateConfig {
  1: i32 replica_num = 1,
  2: bool with_soft_pin = false,
  3: bool with_hard_pin = false,
  4: list<string> preferred_segments,     // "host:port" names, tried first, in order
  5: i64 soft_pin_ttl_ms = 0,             // 0: the master's default_kv_soft_pin_ttl
  6: list<string> avoided_segments,       // "host:port" names placed last, after every other
                                          // segment (daemons the writer just failed to reach)
  7: i32 offload = 0,                     // the SSD tier: 0 as the master's --enable_offload says,
                                          // 1 offload this put's value at PutEnd, 2 do not
  // Mooncake's SoftPinAction (docs/mooncake-api.md, "put-config"): 0 PRESERVE (an upsert
  // keeps the old value's pin until its deadline), 1 ENABLE, 2 DISABLE; -1: not given, as an
  // older daemon sends it: with_soft_pin says ENABLE or DISABLE, and soft_pin_ttl_ms 0 is the
  // default TTL. An i32, so that a hostile value is an integer to refuse (-600).
  8: i32 soft_pin_action = -1,
  // With soft_pin_action given: soft_pin_ttl_ms is ENABLE's exact TTL (0 unpins; above
  // --max_kv_soft_pin_ttl is -600); not given, ENABLE takes --default_kv_soft_pin_ttl. A TTL
  // given with PRESERVE or DISABLE is -600 (Mooncake's rule).
  9: bool soft_pin_ttl_given = false,
  // The first replica on the writer's own daemon's segments (prefer_alloc_in_same_node), as
  // --allocation_strategy local_first does for every put.
  10: bool prefer_local = false,
  // Mooncake's per-key group ids (docs/mooncake-api.md, "groups"): empty, no group named (a
  // new object is in none; an upsert keeps its object's group); else one id per key of the
  // call (PutStart and UpsertStart one, BatchPutStart one per key, else -600 for every
  // key), "" for a key in no group. An id is 1..4096 bytes without NUL (else -600), scoped
  // to the key's tenant. An upsert naming another group than its object's is -600: an
  // object stays in the group it was put in.
  11: list<string> group_ids,
}

// A replica a daemon's read found unreadable (ReportBadReplicas), and the value the reader
// expected of it -- size and checksum as its replica list gave them (-1: none) -- so that
// the master can tell whether the object is still that value.
enum BadReplicaReason {
  CHECKSUM_MISMATCH = 1,                  // its bytes did not match the object's checksum
                                          // (any reader; replica_id names it)
  NOT_HELD = 2,                           // a disk replica its owner's SSD does not hold (the
                                          // owner only; segment_id, its LOCAL_DISK segment)
}

struct BadReplica {
  1: string key,
  2: BadReplicaReason reason,
  3: i64 replica_id,                      // CHECKSUM_MISMATCH: as the replica list named it
  4: i64 segment_id,                      // NOT_HELD: the reporter's LOCAL_DISK segment
  5: i64 size,
  6: i64 checksum,
}

struct ReplicaDescriptor {
  1: i64 replica_id,
  2: ReplicaKind kind,
  3: ReplicaStatus status,
  4: i64 segment_id,
  5: string segment_name,
  6: i64 daemon_id,
  7: i64 offset,                          // inside the segment
  8: i64 size,
  // A memory replica restored (or re-attached) whose bytes its daemon has not verified
  // against the object's CRC-32C yet (docs/durability.md, "Verification after restore"):
  // a whole-value read may use it (the reader checks the CRC), a fragment read must not.
  9: bool unverified = false,
}

struct PutStartResult {
  1: i32 code,
  2: list<ReplicaDescriptor> replicas,    // where to write; PROCESSING until PutEnd
  3: i64 master_epoch,                    // of the master that reserved them: owners refuse
                                          // writes under another master's reservations
}

struct ReplicaListResult {
  1: i32 code,
  2: i64 size,
  3: list<ReplicaDescriptor> replicas,    // COMPLETE replicas only
  4: i64 lease_ttl_ms,                    // the read must finish within it
  5: i64 checksum = -1,                   // CRC-32C of the value as its writer gave it; -1: none
  6: i64 master_epoch,                    // of the master that granted the lease; owners refuse
                                          // reads under another master's leases
  7: bool promote = false,                // --promotion_on_hit: the object has no memory replica;
                                          // the reader that served it from disk may re-create
                                          // one (PromoteStart / PromoteEnd)
}

// A daemon whose read cache may still hold keys a write just changed (docs/daemon.md,
// "Read cache"). The writer tells it to forget them before answering its own client.
struct CacheHolder {
  1: i64 daemon_id,
  2: string address,                      // its transfer port, "host:port"; empty when the
                                          // master does not know it (declared dead, or a
                                          // lease from before a restore): the writer cannot
                                          // reach it and waits ms_left instead
  3: i64 ms_left,                         // its lease on them ends this long after the reply;
                                          // its cache entries end before (at 0.9 x the lease)
  4: list<i32> keys,                      // BatchRemove: which of the batch's keys (indices);
                                          // empty for the other calls (the one key, or for
                                          // RemoveByRegex and RemoveAll: forget everything)
}

// What a change (UpsertEnd, Remove, RemoveByRegex, RemoveAll) did, and whose read caches
// it may have left behind. holders never names the caller.
struct ChangeResult {
  1: i64 code,                            // a code; RemoveByRegex, RemoveAll: the count removed
  2: list<CacheHolder> holders,
}

struct BatchChangeResult {
  1: list<i32> codes,                     // one per key, in order
  2: list<CacheHolder> holders,
}

struct HeartbeatResult {
  1: i32 code,                            // -103: the master does not know this daemon: re-register and re-mount
  2: i64 master_epoch,                    // changes when the master restarts
}

// One object to move out of a draining segment: its bytes are at from_offset there, and go
// to `to`, reserved for the move (PROCESSING) until CommitMoves or RevokeMoves.
struct SegmentMove {
  1: string key,
  2: i64 size,
  3: i64 from_offset,                     // inside the draining segment
  4: ReplicaDescriptor to,
}

// One batch of a walk over the objects of a draining segment (DrainSegment).
struct DrainBatchResult {
  1: i32 code,
  2: list<SegmentMove> moves,             // reserved now; commit or revoke each
  3: i64 next_cursor,                     // where the walk goes on; -1: this walk is over
  4: i64 stranded,                        // objects left in place: no space for them elsewhere
  5: i64 shed,                            // objects with a complete replica elsewhere, which
                                          // simply lose the one in this segment
  6: i64 busy,                            // objects being written into the segment or already
                                          // moving: a later walk finds them settled
  7: i64 master_epoch,                    // of the master that reserved the moves' targets
}

// Eviction as operators watch it (docs/master.md, "Eviction"): rounds run by the upkeep
// (usage above the high watermark) and by puts (a reservation that would pass it, or that
// found no space; the put waits for its round).
struct EvictionStats {
  1: i64 rounds,                          // every eviction round
  2: i64 put_rounds,                      // of which run by a put
  3: i64 short_rounds,                    // rounds that freed less than asked: too few candidates
  4: i64 evicted_bytes,                   // over all rounds, every replica counted
  5: i64 total_us,                        // time spent in rounds
  6: i64 max_us,                          // the longest round
  7: i64 last_us,                         // the latest round
  8: i64 last_used_bytes,                 // pool usage right after the latest round
  9: i64 no_space_puts,                   // PutStart/UpsertStart answered -200 (each retry counts)
  10: i64 exist_uses,                     // existence hits counted as a use (once per access)
  11: i64 exist_leases,                   // exist leases granted (--exist_lease_ttl)
}

// One tenant's figures (docs/security.md, "Tenants"): every tenant with objects or a quota,
// and the default tenant ("") while it holds objects.
struct TenantStats {
  1: string tenant,                       // "": the default tenant
  2: i64 objects,                         // its objects, those being written included
  3: i64 bytes,                           // memory they take: size x memory replicas, summed
                                          // (reserved ones, an upsert's new value, included)
  4: i64 quota_bytes,                     // --tenant_quota; 0: none
  5: i64 refused_puts,                    // puts answered -1402 since the master started
}

// The SSD tier as the master sees it (docs/ssd.md).
struct DiskStats {
  1: i64 segments,                        // LOCAL_DISK segments mounted (attached or not)
  2: i64 capacity_bytes,                  // their sizes, summed
  3: i64 objects,                         // objects with a LOCAL_DISK replica
  4: i64 bytes,                           // size x disk replicas, summed
  5: i64 disk_only_objects,               // of which have no memory replica
  6: i64 offloads_queued,                 // tasks waiting for their daemon (FetchOffloads)
  7: i64 offloads_done,                   // disk replicas registered by ReportOffloads
  8: i64 offloads_failed,                 // reports of a failure, or tasks that timed out
  9: i64 evict_offloads,                  // of the tasks, those an eviction round queued
  10: i64 promotions,                     // memory replicas re-created from disk (PromoteEnd)
  11: i64 adopted,                        // disk replicas RegisterDiskReplicas added
  12: i64 dropped,                        // disk replicas DropDiskReplicas removed
  13: i64 offloads_dropped,               // tasks not queued: their daemon's queue was full
                                          // (a put's offload is then not made; an eviction
                                          // treats the object as one that cannot offload)
}

struct MasterStats {
  1: i64 objects,
  2: i64 segments,
  3: i64 daemons,
  4: i64 capacity_bytes,
  5: i64 used_bytes,
  6: i64 resident_bytes,                  // the master process's RSS
  7: i64 evicted_objects,
  8: i64 master_epoch,
  9: i64 oplog_sequence,                  // last operation-log record appended (0: no log)
  10: i64 oplog_synced,                   // last one written and fdatasync'ed
  11: i64 snapshot_sequence,              // oplog sequence of the newest snapshot published (0: none)
  12: i64 restore_ms,                     // how long the restore at start took (0: none)
  13: i64 restored_objects,               // objects the restore at start brought back
  14: i64 pending_segments,               // detached segments (restored, or of a silent daemon)
  15: EvictionStats eviction,
  16: list<TenantStats> tenants,          // by tenant id
  17: DiskStats disk,
  // Replication (docs/ha.md): 0 on a master that neither serves nor follows a log.
  18: i64 replication_lag,                // standby: the leader's last record (at the last pull)
                                          // minus the last one applied here
  19: i64 replication_bootstraps,         // standby: snapshots fetched from the leader and loaded
  20: i64 replication_applied,            // standby: log records applied since start
  21: i64 sync_set_size,                  // leader: standbys a strict acknowledgement waits for
  // Objects (or replicas) dropped because their bytes could not be trusted, by reason
  // (mooncake_master_objects_dropped_total{reason}; master/object_drops.h): unreadable,
  // restore_checksum, restore_unverifiable (kept: counted only), disk_reconcile,
  // parked_expired.
  22: map<string, i64> objects_dropped,
  23: i64 unverified_replicas,            // memory replicas waiting for their daemon's check
  24: i64 parked_objects,                 // objects of dropped segments kept aside (parked)
  25: i64 parked_adopted,                 // parked objects adopted back since start
}

struct SnapshotResult {
  1: i32 code,                            // 0, -1011 when snapshots are off, -1503 when it failed
  2: string name,                         // directory under <snapshot_dir>/snapshots; empty: none
  3: i64 sequence,                        // oplog sequence it holds everything up to
  4: i64 pause_us,                        // how long request handlers were held (lock + fork)
  5: i64 duration_ms,                     // fork to published
  6: i64 bytes,                           // payloads + manifest + descriptor
  7: i64 objects,
  8: string error,                        // why it failed, when it did
  9: bool running,                        // forked and still being written (5-7 not known yet)
}

// The SSD tier (docs/ssd.md). An offload copies a COMPLETE memory replica of the daemon's
// own into its SSD; the daemon fetches what to copy and reports what it wrote.
struct OffloadTask {
  1: string key,
  2: i64 size,
  3: i64 segment_id,                      // the memory replica to copy from: the caller's segment
  4: i64 offset,                          // inside it
  5: i64 checksum,                        // the value's CRC-32C, -1: none
  6: i64 replica_id,                      // of that memory replica; the report names it
  7: bool for_eviction,                   // an eviction round waits for it: its memory replicas
                                          // are freed once the disk replica is registered
}

struct OffloadTasksResult {
  1: i32 code,                            // -103 unknown daemon, -101 it has no LOCAL_DISK segment
  2: list<OffloadTask> tasks,
  3: i64 lease_ttl_ms,                    // each task's memory replica is read-leased this long
                                          // from the reply: the copy must end within it
  4: i64 master_epoch,                    // of the master that granted those leases
}

// Verification after a restore or a late return (docs/durability.md): a memory replica in
// the caller's segment the master cannot vouch for, with what the daemon checks it against.
struct UnverifiedReplica {
  1: string key,                          // stored key
  2: i64 offset,                          // inside the segment
  3: i64 size,
  4: i64 checksum,                        // CRC-32C of the value; -1: none (cannot be checked)
}

struct UnverifiedPage {
  1: i32 code,
  2: list<UnverifiedReplica> replicas,
  3: i64 next_cursor,                     // -1: the walk is over
}

// What the daemon found: ok, the CRC-32C of [offset, offset + size) of its segment is the
// checksum listed (or the listing had none).
struct VerifiedReplica {
  1: string key,
  2: i64 offset,
  3: bool ok,
}

// An object a daemon's SSD holds, as it re-registers them (RegisterDiskReplicas).
struct DiskObject {
  1: string key,
  2: i64 size,
  3: i64 checksum,                        // -1: none
}

// High availability (docs/ha.md). A master without --enable_ha is always LEADER of term 0.
enum MasterRole {
  LEADER = 0,                             // serves every call
  STANDBY = 1,                            // follows the leader's log; answers -1600 to the rest
  DEPOSED = 2,                            // lost its lease: serves nothing, answers -1600
}

struct RoleResult {
  1: i32 code,
  2: MasterRole role,
  3: i64 term,                            // the leader's term (its etcd key's create_revision):
                                          // grows with every election. A daemon takes replies
                                          // only from a connection whose term is the highest
                                          // it knows (docs/ha.md, "Fencing")
  4: string leader,                       // the leader's rpc address "host:port", "" unknown
  5: i64 applied_seq,                     // the last operation-log record in this master's state
}

// The cluster key's handshake (common/auth/cluster_key.h, context "master"), answered by the
// connection's AuthenticatedProcessor (master/authenticated_processor.h).
struct AuthChallengeResult {
  1: i32 code,                            // 0, or -1400 (the connection is refused for good)
  2: binary server_nonce,                 // 32 random bytes
}

struct AuthenticateResult {
  1: i32 code,                            // 0: admitted; -1400: refused for good
  2: binary server_proof,                 // the master's proof, made with the key the
                                          // client's proof checked against
}

// Replication (docs/ha.md, "Replication"): a standby pulls the leader's operation log. One
// record: its sequence number and its payload (master/state_records.h).
struct LogEntry {
  1: i64 seq,
  2: binary payload,
}

struct FollowLogResult {
  1: i32 code,                            // 0; -1600 not the leader; -600 bad arguments;
                                          // -1011 this master does not replicate
  2: i64 term,                            // the leader's term: a standby ignores a lower one
  3: list<LogEntry> records,              // from_seq on, consecutive, at most max_bytes of
                                          // payload (at least one record when any is there)
  4: i64 last_seq,                        // the leader's last record
  5: bool bootstrap,                      // from_seq is no longer in the leader's tail, is past
                                          // its end, or the record before it differs from the
                                          // standby's (prev_crc): fetch a snapshot first
}

struct FetchSnapshotResult {
  1: i32 code,                            // 0; -1600; -600 hostile or bad arguments; -1011 no
                                          // replication or no snapshots; -1503 the snapshot
                                          // failed; -1100 it is gone (pruned): start again
  2: i64 term,
  3: string name,                         // the snapshot being served
  4: i64 sequence,                        // the operation-log sequence it holds everything up to
  5: bool ready,                          // published: files lists it, chunks may be read
  6: list<string> files,                  // with file "" and ready: the snapshot's files
  7: binary data,                         // with a file: max_bytes (at most) from offset
  8: i64 file_size,                       // with a file: its whole size
}

// Copy and move tasks (Mooncake's CreateCopyTask / CreateMoveTask / QueryTask; docs/master.md,
// "Copy and move tasks"). A task's id is Mooncake's UUID: two 64-bit halves.
struct TaskResult {
  1: i32 code,
  2: i64 id_high,
  3: i64 id_low,
}

struct TaskInfo {
  1: i64 id_high,
  2: i64 id_low,
  3: i32 type,                            // 0 REPLICA_COPY, 1 REPLICA_MOVE
  4: i32 status,                          // 0 PENDING, 1 PROCESSING, 2 FAILED, 3 SUCCESS
  5: i64 created_unix_ms,
  6: i64 updated_unix_ms,
  7: i64 assigned_daemon,                 // the daemon that runs it (holds the source replica)
  8: string message,                      // why it failed; "" while it runs
}

struct QueryTaskResult {
  1: i32 code,                            // 0; -704 unknown (or pruned, or another tenant's)
  2: TaskInfo task,
}

// One task handed to the daemon holding its source replica: the bytes at source_offset of
// its segment source_segment_id go to each of targets, reserved (PROCESSING) for it until
// CompleteReplicaTasks.
struct ReplicaTaskAssignment {
  1: i64 id_high,
  2: i64 id_low,
  3: i32 type,
  4: string key,                          // stored key
  5: i64 size,
  6: i64 source_segment_id,               // one of the caller's memory segments
  7: i64 source_offset,
  8: list<ReplicaDescriptor> targets,
}

struct ReplicaTasksResult {
  1: i32 code,                            // 0; -103 unknown daemon
  2: list<ReplicaTaskAssignment> tasks,
  3: i64 master_epoch,                    // of the master that reserved the targets
}

struct ReplicaTaskOutcome {
  1: i64 id_high,
  2: i64 id_low,
  3: i32 code,                            // 0 the bytes are in every target, else why not
}

service MasterService {
  // The handshake, first on every connection: the client's nonce, then its proof over
  // both nonces. A master without a key admits peers on its own host without them (its
  // connections answer both with -600: there is no key to prove), and refuses the others.
  AuthChallengeResult AuthChallenge(1: binary client_nonce),
  AuthenticateResult Authenticate(1: binary client_proof),

  // Who this master is now; answered in every role, also by a standby or a deposed leader.
  // A daemon asks it on every new connection and keeps the connection's term.
  RoleResult GetRole(),

  // Daemons
  i32 RegisterDaemon(1: i64 daemon_id, 2: string name),
  HeartbeatResult Heartbeat(1: i64 daemon_id),
  i32 MountSegment(1: SegmentInfo segment),
  i32 UnmountSegment(1: i64 daemon_id, 2: i64 segment_id),
  list<SegmentInfo> GetAllSegments(),

  // Draining (docs/master.md, "Draining a segment"), by the segment's owner before it
  // unmounts it: DrainSegment stops new allocations in the segment and, from cursor (0 to
  // start a walk), reserves a new place for each object living only there, batch by batch
  // (about max_moves objects each; avoided_segments as in ReplicateConfig). The owner
  // copies each object's bytes and commits the move, which swaps the object's replica to
  // its new place; an object removed or replaced meanwhile answers -704 and is left alone.
  // -101 unknown segment, -601 not the caller's.
  DrainBatchResult DrainSegment(1: i64 daemon_id, 2: i64 segment_id, 3: i64 cursor,
                                4: i32 max_moves, 5: list<string> avoided_segments),
  list<i32> CommitMoves(1: i64 daemon_id, 2: i64 segment_id, 3: list<string> keys),
  list<i32> RevokeMoves(1: i64 daemon_id, 2: i64 segment_id, 3: list<string> keys),

  // Writes: PutStart reserves, the writer moves the bytes, PutEnd publishes or PutRevoke frees.
  // checksum: the CRC-32C (common/base/crc32c.h) of the value, 0..2^32-1, stored with the object
  // and returned to readers; < 0 stores none; above 2^32-1 is -600. BatchPutEnd takes one
  // per key, or an empty list for none (any other length: -600 for every key). A caller that
  // omits the argument (one built before it existed) stores none.
  PutStartResult PutStart(1: i64 writer, 2: string key, 3: i64 size, 4: ReplicateConfig config),
  i32 PutEnd(1: i64 writer, 2: string key, 3: i64 checksum = -1),
  i32 PutRevoke(1: i64 writer, 2: string key),
  list<PutStartResult> BatchPutStart(1: i64 writer, 2: list<string> keys, 3: list<i64> sizes,
                                     4: ReplicateConfig config),
  list<i32> BatchPutEnd(1: i64 writer, 2: list<string> keys, 3: list<i64> checksums),
  list<i32> BatchPutRevoke(1: i64 writer, 2: list<string> keys),

  // Upserts: like puts, but an existing value stays readable until UpsertEnd replaces it.
  PutStartResult UpsertStart(1: i64 writer, 2: string key, 3: i64 size, 4: ReplicateConfig config),
  // checksum as for PutEnd. The holders are the daemons that may still serve the old value
  // from their read caches.
  ChangeResult UpsertEnd(1: i64 writer, 2: string key, 3: i64 checksum = -1),
  i32 UpsertRevoke(1: i64 writer, 2: string key),

  // Reads: each hit grants a lease of lease_ttl_ms. reader: the daemon asking, when it will
  // remember the answer in its read cache; the master then names it to whoever changes the
  // key within the lease (CacheHolder). 0 (or omitted): nothing is remembered.
  ReplicaListResult GetReplicaList(1: string key, 2: i64 reader = 0),
  list<ReplicaListResult> BatchGetReplicaList(1: list<string> keys, 2: i64 reader = 0),
  // Existence: 1 readable, 0 missing or PROCESSING, < 0 error. A hit grants no read lease;
  // the first one since the object was written or read counts as a use in eviction's
  // order (and grants an exist lease with --exist_lease_ttl): docs/master.md, "Existence
  // checks".
  i32 ExistKey(1: string key),
  list<i32> BatchExistKey(1: list<string> keys),

  // Removal. caller: the daemon asking, which the holders leave out (0: none). tenant: whose
  // keys RemoveByRegex and RemoveAll walk ("", or omitted: the default tenant's); the
  // pattern is matched against the keys as that tenant's clients name them; -600 for a
  // malformed tenant id.
  ChangeResult Remove(1: string key, 2: bool force, 3: i64 caller = 0),
  BatchChangeResult BatchRemove(1: list<string> keys, 2: bool force, 3: i64 caller = 0),
  ChangeResult RemoveByRegex(1: string pattern, 2: bool force, 3: i64 caller = 0,
                             4: string tenant = ""),  // code: count removed, or a code
  ChangeResult RemoveAll(1: bool force, 2: i64 caller = 0, 3: string tenant = ""),
  // Mooncake's BatchReplicaClear: per key, frees the replicas of an object no read lease
  // runs on -- all of them (the object goes) when segment_name is "", else those in
  // segments of that name (a daemon's "host:port"), the object going when none is left.
  // codes[i]: 0 cleared, -704 missing, -703 being written, -706 leased, -1010 hard-pinned,
  // -101 no replica on segment_name, -600 a bad key (every key: a name over 263 bytes).
  // holders as BatchRemove's.
  BatchChangeResult BatchReplicaClear(1: list<string> keys, 2: string segment_name,
                                      3: i64 caller = 0),

  // The SSD tier (docs/ssd.md). disk_segment_id: the caller's LOCAL_DISK segment, mounted
  // with MountSegment (-101 unknown, -601 another daemon's). Keys are stored keys.
  //
  // Up to max_tasks (1..1024, else -600) offloads queued for the caller's memory replicas
  // (at PutEnd with offload, or by an eviction round), each granted a read lease. -101: the
  // caller has no attached LOCAL_DISK segment.
  OffloadTasksResult FetchOffloads(1: i64 daemon_id, 2: i32 max_tasks),
  // What became of fetched tasks, one code per key (keys[i] with replica_ids[i] and
  // codes[i]; lists of different lengths: -600 for every key). codes[i] 0: the value is on
  // the SSD; the master registers the LOCAL_DISK replica and answers 0 (and frees the memory
  // replicas of an eviction's task), or -704 when the object changed or went meanwhile, or
  // the task is no longer open (not reported within its lease + 2 s, it counted as failed):
  // the daemon forgets its copy. Any other code: the offload failed; the object keeps its
  // memory replica and the master answers 0.
  list<i32> ReportOffloads(1: i64 daemon_id, 2: i64 disk_segment_id, 3: list<string> keys,
                           4: list<i64> replica_ids, 5: list<i32> codes),
  // Reconciliation (docs/ssd.md, "Reconciliation"), after every (re-)mount of the disk
  // segment: BeginDiskReconciliation names a round (round: a token the daemon draws, not
  // 0), RegisterDiskReplicas sends what the SSD holds under it, EndDiskReconciliation says
  // that was everything. Begin: 0 (a repeat with the same round changes nothing), -600
  // round 0, or the segment codes above.
  i32 BeginDiskReconciliation(1: i64 daemon_id, 2: i64 disk_segment_id, 3: i64 round),
  // What the SSD holds. Per object 0 when it is kept (the master knows that replica) or
  // adopted (the master has no such object: it is created with this disk replica alone;
  // only into a segment this master mounted new and never detached since, i.e. not after a
  // re-attach or a restore), -704 when the daemon must drop it (the master knows the
  // segment and not the replica -- removed or replaced while the daemon was away -- or
  // holds another value under the key: size or checksum differ), -600 a bad key or size.
  // Objects kept or adopted count as vouched for in round when it is the current one
  // (0, or another: they are kept as answered, and vouched for in no round).
  list<i32> RegisterDiskReplicas(1: i64 daemon_id, 2: i64 disk_segment_id,
                                 3: list<DiskObject> objects, 4: i64 round),
  // Every disk replica of the segment that round did not vouch for (neither registered in
  // it nor created since it began) is dropped, logged and counted (objects left with no
  // replica go); then the segment's replicas are all listed again. 0 (a repeat: nothing
  // more), -1010 round is not the segment's current one (another began, or this master
  // never saw it begin: reconcile again), -1503 the log cannot write, or the segment codes.
  i32 EndDiskReconciliation(1: i64 daemon_id, 2: i64 disk_segment_id, 3: i64 round),
  // Before a daemon deletes a bucket, or after it found an object corrupt: drops those
  // LOCAL_DISK replicas (objects left with no replica go). Per key 0, or -704 when there was
  // no such replica (also 0 for the daemon: nothing to keep).
  list<i32> DropDiskReplicas(1: i64 daemon_id, 2: i64 disk_segment_id, 3: list<string> keys),

  // Verification after a restore, a takeover, or a return past the grace period
  // (docs/durability.md, "Verification after restore", "A daemon that returns late"). After
  // (re-)mounting a memory segment its daemon pages through the replicas there the master
  // cannot vouch for -- restored ones, and objects parked when the segment was dropped --
  // from cursor 0 until next_cursor is -1, at most max_replicas (1..4096, else -600) a
  // page; -101 unknown segment, -601 not daemon_id's, -103 unknown daemon. Reads nothing
  // it changes: safe to repeat.
  UnverifiedPage ListUnverified(1: i64 daemon_id, 2: i64 segment_id, 3: i64 cursor,
                                4: i32 max_replicas),
  // What the daemon found, per replica (key and offset as listed): 0 once settled -- a
  // good one is verified (a parked one adopted, or discarded when its key was written or
  // removed meanwhile), a bad one dropped (the object goes with its last replica) -- and
  // -704 when there is no such replica waiting (settled already: a repeat is answered so,
  // and changes nothing), -600 a bad key. Same segment codes as ListUnverified.
  list<i32> ReportVerified(1: i64 daemon_id, 2: i64 segment_id, 3: list<VerifiedReplica> replicas),

  // A reader found these replicas unreadable (docs/master.md, "Checksums"): per replica 0
  // when the master dropped it (the object goes when it was the last), -704 when it is no
  // longer what the reader saw (no such object, replica or value -- the object was removed,
  // re-placed or re-written since: nothing to drop), -600 a bad key, reason, size or
  // checksum, a NOT_HELD's segment not the reporter's attached LOCAL_DISK one (or -601 when
  // another daemon's), -103 an unknown daemon (every replica). Safe to repeat: a report
  // already applied finds the replica gone (-704) and drops nothing more.
  list<i32> ReportBadReplicas(1: i64 daemon_id, 2: list<BadReplica> replicas),
  // Promotion on hit (--promotion_on_hit): reserves one memory replica (PROCESSING) for an
  // object whose replicas are all on disk, for the reader to write its bytes into; -705 it
  // has a memory replica (or one is being made), -704 missing, or no longer the value read:
  // disk_replica_id is the replica_id of a LOCAL_DISK replica in the list the reader read
  // it under, which a re-written value does not have. -200 no space. PromoteEnd publishes
  // it (ok) or frees it; -704 when the object changed meanwhile.
  PutStartResult PromoteStart(1: i64 writer, 2: string key, 3: i64 disk_replica_id),
  i32 PromoteEnd(1: i64 writer, 2: string key, 3: bool ok),

  MasterStats GetStats(),

  // Admin: takes a snapshot now (fork + copy-on-write, as the periodic ones), or joins the one
  // running, and answers once it has forked (running, with its name and sequence): writing
  // it takes seconds, which no handler may spend on the server's I/O threads.
  // LastSnapshot answers how the newest snapshot that ended, ended.
  SnapshotResult Snapshot(),
  SnapshotResult LastSnapshot(),

  // Replication, leader side (docs/ha.md, "Replication"), answered by a leader only. A
  // standby (standby_name: its rpc address "host:port") pulls the records from from_seq
  // (>= 1) on, reporting durable_seq, the last record in its own log on disk, and prev_crc,
  // the CRC-32C of the payload of its record from_seq - 1 (-1: unknown). max_bytes: payload
  // bytes wanted, capped at 4 MiB. A pull with nothing new answers at once.
  FollowLogResult FollowLog(1: string standby_name, 2: i64 from_seq, 3: i64 durable_seq,
                            4: i64 prev_crc, 5: i32 max_bytes),
  // A snapshot for a standby to start from, in chunks. name "": takes one now (or joins the
  // one running) and answers its name and sequence, not ready yet. name set, file "": ready
  // and its files once published. name and file: up to max_bytes (1..4 MiB) of the file from
  // offset. Names other than a snapshot name and a file name of [A-Za-z0-9._-] (no leading
  // '.') are refused (-600).
  FetchSnapshotResult FetchSnapshot(1: string standby_name, 2: string name, 3: string file,
                                    4: i64 offset, 5: i32 max_bytes),

  // Copy and move tasks (docs/master.md, "Copy and move tasks"). key is a stored key; its
  // tenant is the task's. CreateCopyTask: a copy of the object into a new replica in each
  // target segment (by name) that has none yet, run by the daemon of a source replica chosen
  // at random: -600 no target, more than 64, or one no memory segment carries; -1010 a target
  // that takes no allocation (draining or detached); -704 missing; -703 being written;
  // -1300 too many tasks pending. CreateMoveTask: the replica in source goes to target (the
  // source is freed once the copy is in): -704 missing; -600 source = target, an unknown
  // target, or no complete replica in source; -1010 as above.
  TaskResult CreateCopyTask(1: string key, 2: list<string> targets),
  TaskResult CreateMoveTask(1: string key, 2: string source, 3: string target),
  // A task of tenant ("": the default tenant's).
  QueryTaskResult QueryTask(1: i64 id_high, 2: i64 id_low, 3: string tenant),
  // Up to max_tasks (1..1024, else -600) of the caller's pending tasks, their targets
  // reserved: each becomes PROCESSING. A task whose targets have no room waits (it is
  // retried on later fetches, Mooncake's max_retry_attempts times); one with nothing to
  // copy ends at once.
  ReplicaTasksResult FetchReplicaTasks(1: i64 daemon_id, 2: i32 max_tasks),
  // What became of fetched tasks: per outcome 0 once published (a copy's replicas added, a
  // move's source swapped for its target) or freed after a failure; -704 when the task is
  // no longer open (timed out) or its object changed meanwhile (its targets are freed);
  // -601 another daemon's task.
  list<i32> CompleteReplicaTasks(1: i64 daemon_id, 2: list<ReplicaTaskOutcome> outcomes),
}
