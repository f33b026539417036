// The master's state machine: object metadata, replica placement, leases, pins, eviction,
// and the liveness of daemons. Transport-free (the Thrift handler forwards to it), so the
// rules can be tested directly with a hand-driven clock.
//
// The consistency contract (docs/design.md, "Object lifecycle"):
//   PutStart reserves PROCESSING replicas → the writer moves the bytes → PutEnd publishes
//   them as COMPLETE (or PutRevoke frees them). Readers only ever see COMPLETE replicas,
//   and every replica list grants a read lease during which the object is neither evicted
//   nor removed without force. An existence hit grants no lease: it counts as a use for
//   eviction's order, once per access (and, with --exist_lease_ttl, keeps eviction off the
//   object that long: master/directory/exist_leases.h).
//
// How it is cut. MasterService is the facade every caller uses; the state lives in parts
// that own it and their locks, each documented in its header:
//   master/directory/object_directory.h  every object's metadata by key, in 1024 shards each with
//                              its own lock, beside what is under way on it (an upsert's
//                              new value, a move, an offload, a promotion) and who may
//                              cache it; LockedKey, and the sliced walk over a shard.
//                              Shared by reference with the parts below.
//   master/eviction/eviction_rounds.h   eviction's rounds: watermarks, sampling, planning (with
//                              master/eviction/eviction.h), the walk, one round at a time.
//   master/drains/drain_jobs.h        the operator's drain jobs, planners of move tasks.
//   master/liveness/liveness.h          who is live: daemons and their segments registering,
//                              mounting, falling silent, coming back or declared dead.
//   master/ssd_tier/disk_tier.h         the SSD tier's offload tasks, disk replica numbers, figures.
//   master/log/change_log.h        the records of changes appended to the operation log.
//   master/directory/deferred_frees.h    ranges whose freeing waits for a lease or the log.
//   master/directory/segment_registry.h, daemon_registry.h, parked_segments.h, offload_queues.h,
//   replica_tasks.h, tenant_usage.h, groups.h, object_drops.h: the tables of segments,
//   daemons, parked objects, offload queues, tasks, tenants, groups and loss counts.
// What changes one object (put/get, removal, upserts, moves, offloads, promotions,
// verification) is written here, over the master_service_*.cc files by concern, each of
// which opens with its rules: the put/get path, read caches and tenants (master_service.cc,
// _batch, _clear), daemons' calls and the upkeep (_upkeep), drains and move tasks (_drain,
// _tasks), the SSD tier (_disk,
// _promote), eviction's side of an object (_evict), groups (_groups), unreadable replicas
// and restored ones (_bad, _verify), the log, snapshots and restore (_durable), and the
// admin's reads (_admin). Parts call back into the facade through small interfaces
// (EvictionRounds::Objects, DrainJobs::Mover, Liveness::Objects) for what one object's
// change means.
//
// Concurrency: no lock is global on the hot path. Lock order: state gate (shared) →
// membership (Liveness) → eviction round (EvictionRounds) → shard → segment registry →
// segment → deferred frees; the daemon registry's lock is a leaf. Every public call but Sync,
// RemoveByRegex, RemoveAll and ListKeys holds the state gate shared for its duration
// (master/directory/state_gate.h): a snapshot takes it exclusively to fork, a drain as a barrier
// after marking its segment (DrainSegment holds no shared guard then). A walk over every
// object (removal by pattern, RemoveAll, dropping a segment's replicas, revoking a
// writer's puts, eviction) holds a shard's lock for a slice at a time
// (ObjectDirectory::Scan); RemoveByRegex, RemoveAll and ListKeys take the gate per slice
// too, and run their patterns with no lock held at all.
#ifndef MOONCAKE_MASTER_MASTER_SERVICE_H_
#define MOONCAKE_MASTER_MASTER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/base/error_code.h"
#include "common/base/log_throttle.h"
#include "master/directory/admin_views.h"
#include "master/directory/cache_holders.h"
#include "master/log/change_log.h"
#include "master/liveness/daemon_registry.h"
#include "master/directory/deferred_frees.h"
#include "master/ssd_tier/disk_tier.h"
#include "master/drains/drain_jobs.h"
#include "master/eviction/eviction.h"
#include "master/eviction/eviction_rounds.h"
#include "master/directory/exist_leases.h"
#include "master/directory/groups.h"
#include "master/liveness/liveness.h"
#include "master/directory/object_drops.h"
#include "master/directory/master_options.h"
#include "master/directory/object_directory.h"
#include "master/directory/object_metadata.h"
#include "master/directory/object_table.h"
#include "master/liveness/parked_segments.h"
#include "master/directory/replica_tasks.h"
#include "master/directory/segment_registry.h"
#include "master/directory/state_gate.h"
#include "master/log/state_records.h"
#include "master/directory/tenant_usage.h"
#include "master_types.h"

namespace re2 {
class RE2;
}

namespace mooncake {

class OpLog;
class SyncSet;

class MasterService : private EvictionRounds::Objects,
                      private DrainJobs::Mover,
                      private Liveness::Objects {
 public:
  static constexpr size_t kShardCount = ObjectDirectory::kShardCount;
  static constexpr size_t kMaxReplicaNum = 64;
  static constexpr int64_t kNoChecksum = -1;

  explicit MasterService(MasterOptions options);
  MasterService(const MasterService&) = delete;
  MasterService& operator=(const MasterService&) = delete;

  // ---- daemons and segments (master_service_upkeep.cc) ----
  ErrorCode RegisterDaemon(int64_t daemon_id, const std::string& name);
  // code -103 tells the daemon the master does not know it: register and mount again
  // (also what a daemon expected back after a restore hears, so that it re-mounts).
  rpc::HeartbeatResult Heartbeat(int64_t daemon_id);
  // A known segment id re-mounted with the same identity (owner, name, base, size and
  // incarnation) is a no-op, or re-attaches a detached (restored or silent) segment; -102
  // otherwise.
  ErrorCode MountSegment(const rpc::SegmentInfo& segment);
  // Drops every replica in the segment; objects left without a replica disappear.
  ErrorCode UnmountSegment(int64_t daemon_id, int64_t segment_id);
  // Attached segments; incarnations read 0.
  std::vector<rpc::SegmentInfo> GetAllSegments() const;

  // ---- draining a segment (master_service_drain.cc) ----
  // Marks the segment draining (from the first call on: no new allocation in it, until it
  // is unmounted) and walks its objects from cursor (0: a new walk; then next_cursor until
  // it is -1), one shard range at a time, stopping after the shard in which about
  // max_moves moves were reserved. For each complete object whose only readable replica
  // is in the segment, reserves a range elsewhere (placement as for a put without
  // preference; avoided as in ReplicateConfig; no eviction: a drain uses free space only)
  // and answers a move; the object is counted stranded when none fits, shed when it keeps
  // a complete replica in another attached, non-draining segment, busy when it is being
  // written into the segment (a put, an upsert or another move bound for it) or already
  // moving. -101 unknown segment, -601 not daemon_id's, -600 a bad cursor or max_moves, or
  // a LOCAL_DISK segment (nothing to move: its replicas are on the daemon's SSD).
  rpc::DrainBatchResult DrainSegment(int64_t daemon_id, int64_t segment_id, int64_t cursor,
                                     int32_t max_moves,
                                     const std::vector<std::string>& avoided);
  // Per key: OK once the object's replica in the segment is swapped for the move's target
  // (logged as the object's new state; the old range is freed once no lease covers it and
  // the record is on disk), -704 when no move of the key is pending any more (the object
  // was removed, replaced or dropped meanwhile: its target is freed), -601 when the move
  // is another daemon's or from another segment, -600 a bad key.
  std::vector<int32_t> CommitMoves(int64_t daemon_id, int64_t segment_id,
                                   const std::vector<std::string>& keys);
  // Per key: frees a pending move's target (the copy failed), OK or -704 / -601 / -600.
  std::vector<int32_t> RevokeMoves(int64_t daemon_id, int64_t segment_id,
                                   const std::vector<std::string>& keys);

  // ---- writes ----
  // -705 when a complete object has the key (or another writer's put is younger than
  // put_start_discard_timeout), -200 when not even one replica fits after eviction (see
  // master/eviction/eviction_rounds.h; nothing is left reserved then),
  // -600 for a bad key, size or config (config.group_ids: at most one, a valid id or ""),
  // -103 for an unknown writer, -1503 while the
  // operation log cannot write (a full or failing disk: nothing new is accepted), -1402
  // when size x replica_num more bytes would take the key's tenant over its quota.
  rpc::PutStartResult PutStart(int64_t writer, const std::string& key, int64_t size,
                               const rpc::ReplicateConfig& config);
  // Only the writer that started the put may end or revoke it (-601 otherwise).
  // checksum: the value's CRC-32C (0..2^32-1), which GetReplicaList hands to readers;
  // kNoChecksum (any negative) for none; above 2^32-1 is -600. A repeated PutEnd keeps the
  // first one's checksum.
  ErrorCode PutEnd(int64_t writer, const std::string& key, int64_t checksum = kNoChecksum);
  ErrorCode PutRevoke(int64_t writer, const std::string& key);

  // Like PutStart, but a complete object is replaced: its old replicas stay readable until
  // UpsertEnd swaps in the new ones (and are freed once their read leases run out). The
  // old value's checksum stays with it until then, and UpsertEnd's becomes the object's.
  // Until then both values count against the tenant's quota. The object keeps its group:
  // config.group_ids naming another (or "" for a grouped object) is -600.
  rpc::PutStartResult UpsertStart(int64_t writer, const std::string& key, int64_t size,
                                  const rpc::ReplicateConfig& config);
  // holders (when given) gets the daemons that may still cache the old value.
  ErrorCode UpsertEnd(int64_t writer, const std::string& key, int64_t checksum = kNoChecksum,
                      CacheHolderSet* holders = nullptr);
  ErrorCode UpsertRevoke(int64_t writer, const std::string& key);

  // ---- reads ----
  // COMPLETE replicas only, a lease of default_kv_lease_ttl, and the checksum (-1: none).
  // -704 missing, -703 still being written, or restored with every replica on a segment
  // whose daemon has not re-attached yet. reader: the daemon that will cache the answer,
  // recorded as a holder for the lease (0: none).
  rpc::ReplicaListResult GetReplicaList(const std::string& key, int64_t reader = 0);
  // 1 readable, 0 missing, still being written or not readable yet (restored, waiting for
  // its daemon), -600 bad key. A hit renews no read lease. The first hit since the object
  // was last written or read, unless a read lease covers it, counts as a use: eviction
  // orders the object as if used now (ObjectMetadata::exist_hit); with exist_lease_ttl,
  // it also grants an exist lease (master/directory/exist_leases.h). Later hits count for nothing.
  int32_t ExistKey(const std::string& key);

  // ---- batches (master/service/master_service_batch.cc) ----
  // The single calls above, key by key in order (a key named twice is answered twice, as
  // two calls in a row would answer it), under one hold of the state gate instead of one
  // per key; out gets one result per key. Lists of different lengths are -600 for every
  // key. checksums empty: none for any key.
  void BatchPutStart(int64_t writer, const std::vector<std::string>& keys,
                     const std::vector<int64_t>& sizes, const rpc::ReplicateConfig& config,
                     std::vector<rpc::PutStartResult>* out);
  void BatchPutEnd(int64_t writer, const std::vector<std::string>& keys,
                   const std::vector<int64_t>& checksums, std::vector<int32_t>* out);
  void BatchPutRevoke(int64_t writer, const std::vector<std::string>& keys,
                      std::vector<int32_t>* out);
  void BatchGetReplicaList(const std::vector<std::string>& keys, int64_t reader,
                           std::vector<rpc::ReplicaListResult>* out);
  void BatchExistKey(const std::vector<std::string>& keys, std::vector<int32_t>* out);

  // ---- removal ----
  // -703 while being written (even with force); without force -706 while leased and
  // -1010 when hard-pinned. holders (when given) gets the daemons that may still cache the
  // removed object, under key_index (a batch's position of the key).
  ErrorCode Remove(const std::string& key, bool force, CacheHolderSet* holders = nullptr,
                   int32_t key_index = 0);
  // Removes tenant's complete objects whose key (as its clients name it) the RE2 pattern
  // finds (a search, not a full match; keys and pattern are taken as Latin-1, byte for
  // byte); without force, leased and hard-pinned ones stay. Number removed, or -600 for a
  // pattern that is longer than MOONCAKE_STORE_MAX_PATTERN_LEN, malformed, or needs more
  // than kRegexMaxMem compiled, or a malformed tenant id. RE2 matches in time linear in the
  // key, and the pattern runs with no lock held. Objects complete when the call starts, and
  // still there when the walk reaches them, are matched; objects published meanwhile may or
  // may not be. holders: as Remove's. tenant "": the default tenant.
  int64_t RemoveByRegex(const std::string& pattern, bool force,
                        CacheHolderSet* holders = nullptr, const std::string& tenant = "");
  // Removes tenant's complete objects; without force, leased and hard-pinned ones stay.
  // Objects published meanwhile may or may not be removed. -600 for a malformed tenant id.
  int64_t RemoveAll(bool force, CacheHolderSet* holders = nullptr,
                    const std::string& tenant = "");
  // The memory one compiled pattern may take (RE2's program and its DFA cache).
  static constexpr int64_t kRegexMaxMem = 1 << 20;

  // ---- clearing replicas (master_service_clear.cc) ----
  // Mooncake's BatchReplicaClear: frees the replicas of objects no read lease runs on.
  // segment_name "": every replica (the object goes, as a Remove without force would take
  // it); else only those in segments of that name -- a daemon's "host:port", so its memory
  // and its SSD tier alike -- the object going when none is left. Per key: OK cleared;
  // -704 missing; -703 being written; -706 a read lease runs; -1010 hard-pinned (as a
  // Remove without force); -101 no replica in a segment of that name; -600 a bad key, or
  // every key when segment_name is longer than kMaxClearSegmentName. Logged as a removal
  // ([2, key]) or as the object's new state ([1, object]); freed ranges are reused once the
  // record is on disk. Unlike Mooncake's, any client of the key's tenant may clear it (as
  // with Remove): there is no owning client to check. holders: as BatchRemove's.
  std::vector<int32_t> BatchReplicaClear(const std::vector<std::string>& keys,
                                         const std::string& segment_name,
                                         CacheHolderSet* holders = nullptr);
  // Longer than any "host:port" (a DNS name is at most 253 bytes).
  static constexpr size_t kMaxClearSegmentName = 263;

  // ---- read caches ----
  // The daemons a change's reply names (rpc::CacheHolder), leaving out caller: each one
  // holders has whose lease is live, with its address; every known daemon for an untracked
  // object; and one without an address (the writer cannot reach it and waits ms_left)
  // standing for what the master cannot name: a holder it no longer knows (declared dead),
  // a daemon forgotten while an untracked object's lease ran, or any cache at all filled
  // under the master before a restore, for one lease after it. with_keys: fill each one's
  // key indices (BatchRemove). Empty when nothing changed.
  std::vector<rpc::CacheHolder> DescribeHolders(const CacheHolderSet& holders, int64_t caller,
                                                bool with_keys) const;
  // Records held over all shards, for tests and logs.
  size_t cache_holder_records() const;

  rpc::MasterStats GetStats() const;

  // ---- admin reads (master_service_admin.cc; the admin HTTP, master/server/master_admin.h) ----
  // None grants a lease, changes an object or counts as a use (eviction's order is left
  // as it was); each holds the state gate, shared, and a shard's lock for one key or one
  // slice of kScanSlice slots at a time, as RemoveByRegex does.
  //
  // A page of tenant's complete objects, as its clients name them, in table order (shard
  // by shard, slot by slot) from cursor ("" to start; then the previous page's
  // next_cursor, which is "" once the walk is over): at most limit keys, those pattern
  // finds when it is not empty (an RE2 search, compiled as RemoveByRegex compiles it, run
  // on keys copied out of the shard with no lock held). Weakly consistent: every object
  // present for the whole walk is listed exactly once, except that a shard whose table
  // is resized between two pages starts over (its keys are listed again); one added or
  // removed meanwhile may or may not be. A page also ends after kListScanSlots slots
  // however few keys it found (a pattern that matches nothing never holds the caller
  // long): fewer than limit keys with a cursor is not the end. -600 for a malformed
  // cursor, tenant or pattern (*error says which).
  using KeyPage = ::mooncake::KeyPage;  // master/directory/admin_views.h
  static constexpr size_t kListScanSlots = size_t{1} << 20;
  ErrorCode ListKeys(const std::string& tenant, const std::string& cursor, size_t limit,
                     const std::string& pattern, KeyPage* out, std::string* error);

  // One object as it is, its lease untouched: every replica (memory first, being written
  // ones too) with where it lives, and the object's lease, pins and checksum. key is a
  // stored key (common/base/tenant_key.h). -600 bad key, -704 missing.
  using ReplicaView = ::mooncake::ReplicaView;
  using KeyDescription = ::mooncake::KeyDescription;
  ErrorCode DescribeKey(const std::string& key, KeyDescription* out);

  // Every segment, attached or not, with its use: what GetAllSegments lists, plus detached
  // segments and each one's state.
  using SegmentView = ::mooncake::SegmentView;
  std::vector<SegmentView> SegmentDetails() const;

  // ---- the SSD tier (master_service_disk.cc, master_service_promote.cc) ----
  // The calls' rules are common/master_link/master.thrift's. disk_segment_id: the caller's LOCAL_DISK
  // segment (-101 unknown or detached, -601 another daemon's, -103 unknown daemon).
  // Up to max_tasks (1..kMaxOffloadBatch, else -600) queued tasks, each read-leased.
  rpc::OffloadTasksResult FetchOffloads(int64_t daemon_id, int32_t max_tasks);
  // A success registers the disk replica only for a task still fetched (not timed out)
  // whose object has not changed since; else -704.
  std::vector<int32_t> ReportOffloads(int64_t daemon_id, int64_t disk_segment_id,
                                      const std::vector<std::string>& keys,
                                      const std::vector<int64_t>& replica_ids,
                                      const std::vector<int32_t>& codes);
  // Keeps, adopts or answers -704 (docs/ssd.md, "master"): an object the master lacks is
  // adopted only into a segment this master mounted new (after a restore, or a re-attach,
  // a missing object was removed while the daemon was away); a known object gains the
  // disk replica there only when its size and checksum (both present) match.
  // round: the reconciliation round the objects kept or adopted are vouched for in, when
  // it is the segment's current one (master/directory/segment.h); 0 for none.
  std::vector<int32_t> RegisterDiskReplicas(int64_t daemon_id, int64_t disk_segment_id,
                                            const std::vector<rpc::DiskObject>& objects,
                                            int64_t round = 0);
  // Reconciliation rounds (docs/ssd.md, "Reconciliation"; master/directory/segment.h). Begin: OK,
  // also for a repeat; -600 round 0. End: drops every disk replica of the segment the round
  // did not vouch for (logged; counted as objects_dropped{reason="disk_reconcile"}); OK,
  // also for a repeat; -1010 round is not the current one; -1503 the log cannot write.
  ErrorCode BeginDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id, int64_t round);
  ErrorCode EndDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id, int64_t round);
  std::vector<int32_t> DropDiskReplicas(int64_t daemon_id, int64_t disk_segment_id,
                                        const std::vector<std::string>& keys);

  // ---- unreadable replicas (master_service_bad.cc) ----
  // A daemon found these replicas unreadable: bytes that fail the object's checksum (any
  // reader), or a disk replica its own SSD does not hold (the owner only, naming its
  // LOCAL_DISK segment). The master cannot check bytes, so it takes the daemon's word, but
  // only for the value the reader read: a replica is dropped when the object still lists
  // it (COMPLETE) with the size and checksum the report names; a mismatch report needs a
  // checksum to mismatch. Then: logged (a publish record of what is left, or the
  // object's removal when nothing is), its memory freed once no lease covers it and the
  // record is on disk, counted DropReason::kUnreadable. Per replica 0 (dropped), -704 (not
  // what the reader saw: removed, re-placed or re-written since), -600 (a bad key, reason,
  // size or checksum); every one -103 for an unknown daemon.
  std::vector<int32_t> ReportBadReplicas(int64_t daemon_id,
                                         const std::vector<rpc::BadReplica>& replicas);
  // -705 when the object has a memory replica, is being written, or another promotion of
  // it is open; -704 missing; -200 no space; -1402 over quota; -103 unknown writer. The
  // replica is placed on the writer's own segments first.
  rpc::PutStartResult PromoteStart(int64_t writer, const std::string& key,
                                   int64_t disk_replica_id);
  // OK once published (ok) or freed (!ok); -704 no open promotion, or the object changed
  // or went meanwhile (the reserved range is freed); -601 another writer's.
  ErrorCode PromoteEnd(int64_t writer, const std::string& key, bool ok);
  static constexpr int32_t kMaxOffloadBatch = 1024;
  // The margins of offload tasks: master/ssd_tier/disk_tier.h.
  static constexpr int64_t kOffloadReportMarginMs = DiskTier::kOffloadReportMarginMs;

  // ---- verification after a restore, parked objects (master_service_verify.cc) ----
  // The calls' rules are common/master_link/master.thrift's (docs/durability.md, "Verification after
  // restore"): daemon_id's own attached memory segment segment_id (-103, -101, -601 as
  // FindOwnSegment). A page walks the segment's unverified replicas shard by shard
  // (cursor 0..kShardCount-1; only while the segment counts some), then its claimed parked
  // objects (cursor kShardCount + index); about max_replicas (1..kMaxUnverifiedPage, else
  // -600) a page. A report verifies, drops or adopts per replica; -704 for one not waiting.
  rpc::UnverifiedPage ListUnverified(int64_t daemon_id, int64_t segment_id, int64_t cursor,
                                     int32_t max_replicas);
  std::vector<int32_t> ReportVerified(int64_t daemon_id, int64_t segment_id,
                                      const std::vector<rpc::VerifiedReplica>& replicas);
  static constexpr int32_t kMaxUnverifiedPage = 4096;

  // ---- copy and move tasks (master_service_tasks.cc; docs/master.md) ----
  // The calls' rules are common/master_link/master.thrift's; the table is master/directory/replica_tasks.h. A
  // fetched task's targets are reserved as a drain's moves are (a PendingMove beside the
  // object, no eviction): any change of the object meanwhile orphans it, and its report
  // then answers -704 and frees the targets.
  rpc::TaskResult CreateCopyTask(const std::string& key, const std::vector<std::string>& targets);
  rpc::TaskResult CreateMoveTask(const std::string& key, const std::string& source,
                                 const std::string& target);
  rpc::QueryTaskResult QueryTask(int64_t id_high, int64_t id_low, const std::string& tenant);
  rpc::ReplicaTasksResult FetchReplicaTasks(int64_t daemon_id, int32_t max_tasks);
  std::vector<int32_t> CompleteReplicaTasks(int64_t daemon_id,
                                            const std::vector<rpc::ReplicaTaskOutcome>& outcomes);
  static constexpr int32_t kMaxTaskBatch = 1024;
  ReplicaTasks::Counts task_counts() const { return tasks_.counts(); }

  // ---- drain jobs (master/drains/drain_jobs.h; docs/master.md, "Drain jobs") ----
  using JobStatus = DrainJobs::Status;
  using DrainJobView = DrainJobs::View;
  ErrorCode CreateDrainJob(const std::vector<std::string>& segments,
                           const std::vector<std::string>& targets, uint32_t max_concurrency,
                           TaskId* id);
  ErrorCode QueryDrainJob(const TaskId& id, DrainJobView* out) const;
  ErrorCode CancelDrainJob(const TaskId& id);
  ErrorCode SegmentStatusOf(const std::string& name, int32_t* status) const;
  static constexpr int kMaxDrainUnitRetries = DrainJobs::kMaxUnitRetries;
  static constexpr size_t kMaxDrainJobs = DrainJobs::kMaxJobs;

  // ---- durability ----
  // Before serving: from now on every change is appended to log (not owned; outlives us);
  // strict: replies that acknowledge a change wait until it is on disk (Sync).
  void AttachOpLog(OpLog* log, bool strict) { log_.Attach(log, strict); }
  // After a call that changed something, before its reply: with a strict log, waits until
  // every record this thread appended is on disk (-1503 when the disk does not take it);
  // otherwise OK at once. Holds no lock while it waits.
  // With a sync set attached (a leader with standbys, master/log/sync_set.h), a strict Sync
  // also waits until the sync set has the records durable; NOT_LEADER when we no longer
  // lead. Attach null to detach; the set outlives its attachment.
  ErrorCode Sync();
  void AttachSyncSet(SyncSet* sync_set) { log_.AttachSyncSet(sync_set); }
  StateGate& gate() { return gate_; }

  // Snapshot encoding (the forked child; tests call it directly): every segment, and each
  // non-empty shard's complete objects as a msgpack array of objects, handed to
  // emit(shard, bytes, count) one shard at a time. Stops when emit returns false.
  std::vector<SegmentRecord> ExportSegments() const;
  bool ExportObjects(
      const std::function<bool(size_t shard, const std::string& objects, uint32_t count)>& emit);

  // Restore, before serving (master/snapshot/state_restore.h drives it): segments first, then
  // objects, then the log's records in order. A replica on a segment that is not known is
  // dropped. FinishRestore then rebuilds every segment's allocator from its replicas'
  // ranges (dropping a replica that overlaps another or lies outside its segment, and an
  // object left with none), leaves every segment detached until reattach_grace from now
  // and expects its daemon back by then. ClearState undoes a candidate that failed
  // half-way.
  struct RestoreCounts {
    int64_t objects = 0;
    int64_t segments = 0;
    int64_t dropped_replicas = 0;
    int64_t dropped_objects = 0;
  };
  void RestoreSegment(const SegmentRecord& segment);
  void RestoreObject(ObjectRecord&& object);
  // False when the payload is not a record this version knows.
  bool ApplyLogRecord(std::string_view payload);
  RestoreCounts FinishRestore();
  void ClearState();
  // High availability (docs/ha.md): a standby that has applied every record it was sent
  // becomes the leader. As after a restore, and for the same reasons: every segment is
  // detached (its allocator rebuilt from the replicas' ranges) until its daemon re-mounts
  // it within reattach_grace, every daemon is expected back by then, and for one lease
  // every change's reply says "any cache may hold it" (the previous leader's read leases
  // are not logged). A new master_epoch tells the daemons to re-register and re-mount.
  // Before serving, with no client call running (the standby refuses them all).
  RestoreCounts TakeOver();
  // For GetStats: what the restore at start did.
  void NoteRestore(int64_t elapsed_ms, int64_t objects) {
    restore_ms_ = elapsed_ms;
    restored_objects_ = objects;
  }

  // Upkeep, every upkeep_interval from the server (tests call it after moving the clock):
  // forgives its own stalls, detaches silent daemons and declares dead those whose grace
  // ran out, frees abandoned reservations and deferred ranges, prunes ended cache-holder
  // records and exist leases, and evicts when usage is above the high watermark. Called
  // from one thread at a time.
  void Tick();

  // One eviction round: evicts candidates (complete; not hard-pinned, read- or
  // exist-leased; soft-pinned ones only when the rest cannot cover it and
  // allow_evict_soft_pinned_objects), about the oldest lease deadlines first, until at
  // least target_bytes are freed or no candidate is left. Bytes freed, every replica
  // counted (logged ones are reused once their record is on disk).
  uint64_t Evict(uint64_t target_bytes);

 private:
  int64_t Now() const { return options_.now_ms(); }
  // The durable form of meta's soft pin: its deadline in Unix-epoch ms (records survive
  // restarts and move between masters, whose monotonic clocks differ), 0 for none.
  int64_t SoftPinUntilUnixMs(const ObjectMetadata& meta) const;
  // A key pattern as RemoveByRegex and ListKeys take it: RE2, Latin-1 (keys are bytes),
  // at most MOONCAKE_STORE_MAX_PATTERN_LEN bytes and kRegexMaxMem compiled. Null with
  // *error saying why when it is refused.
  static std::unique_ptr<re2::RE2> CompileKeyPattern(const std::string& pattern,
                                                     std::string* error);
  // "attached", "detached" or "draining".
  static const char* SegmentStatus(const Segment& segment);
  static int64_t NewEpoch();
  // A stored key (common/base/tenant_key.h): a user key of 1..MOONCAKE_STORE_MAX_KEY_LEN bytes
  // without NUL, behind a valid tenant id for a named tenant.
  static bool ValidKey(std::string_view key);
  ErrorCode ValidatePut(int64_t writer, const std::string& key, int64_t size,
                        const rpc::ReplicateConfig& config) const;

  // ---- groups (master_service_groups.cc) ----
  // config.group_ids for a call of keys keys: empty, or one valid id (or "") per key.
  static bool ValidGroupIds(const rpc::ReplicateConfig& config, size_t keys);
  // The group a single-key put names (config.group_ids[0]), null when it names none.
  static const std::string* GroupAsked(const rpc::ReplicateConfig& config) {
    return config.group_ids.empty() ? nullptr : &config.group_ids[0];
  }
  // The body of PutStart for one key of group (null: none named).
  rpc::PutStartResult PutStartOne(int64_t writer, const std::string& key, int64_t size,
                                  const rpc::ReplicateConfig& config, const std::string* group);
  // Under key's shard lock: whether an upsert asking group (null: none named) may replace
  // meta, whose group is kept (Mooncake: membership is immutable while the object exists).
  bool UpsertKeepsGroup(std::string_view key, const ObjectMetadata& meta,
                        const std::string* group) const;
  // Under the shard lock, as a new object's metadata is inserted: meta joins group.
  void JoinGroup(std::string_view key, ObjectMetadata& meta, const std::string* group);
  // Whoever erases an object calls this first, under its shard's lock.
  void LeaveGroup(std::string_view key, ObjectMetadata& meta) {
    if (!meta.grouped) return;
    groups_.Leave(key);
    meta.grouped = false;
  }
  // With no shard lock held (the reader's own let go): the read lease until until_ms, or
  // (until_ms 0) the existence hit, shared with these members of a group, each under its
  // own shard's lock; objects gone or still being written meanwhile are skipped.
  void ShareWithGroup(const std::vector<std::string>& members, int64_t until_ms);
  // With no shard lock held: after eviction took a grouped object, the rest of its group
  // (members) goes too, each one that eviction could take alone now whatever its age
  // (TierOf: not leased, hard-pinned, being written...; of a tier the walk's thresholds,
  // take, reach). Bytes freed; *evicted, *queued as EvictionWalk's.
  uint64_t EvictRestOfGroup(const std::vector<std::string>& members,
                            const EvictionThresholds& take, int64_t now, int64_t* evicted,
                            uint64_t* queued) override;
  // The group a record of meta names: its group's id, or "" for none.
  std::string GroupForLog(std::string_view key, const ObjectMetadata& meta) const;
  // A put's soft-pin request, with Mooncake's rules (docs/mooncake-api.md, "put-config"):
  // the action (kPreserve, kEnable, kDisable) and, for kEnable, the TTL from publication
  // (0: no pin). -600 for a TTL with PRESERVE or DISABLE, one above --max_kv_soft_pin_ttl,
  // or an unknown action. A config without an action (an older daemon's) reads with_soft_pin
  // as ENABLE or DISABLE, its TTL clamped to the maximum as before.
  ErrorCode ResolveSoftPin(const rpc::ReplicateConfig& config, SoftPinRequest* out) const;
  // The TTL a new object gets from request: ENABLE's, else none.
  static int64_t NewObjectSoftPinTtl(const SoftPinRequest& request) {
    return request.action == SoftPin::kEnable ? request.ttl_ms : 0;
  }

  // Reserves replicas for size bytes (with no shard lock held: it may evict), evicting
  // first when the reservation would pass the high watermark, and again when it finds no
  // space (master/eviction/eviction_rounds.h). Fills *out; -200 when nothing fits.
  // writer: the daemon putting (its segments first with config.prefer_local or
  // --allocation_strategy local_first), 0 for none.
  ErrorCode Reserve(uint64_t size, const rpc::ReplicateConfig& config, int64_t writer,
                    ReplicaList* out);
  // Reserve for a put of key, its bytes charged to key's tenant first (-1402 when they do
  // not fit its quota); what was not reserved is given back.
  ErrorCode ReserveCharged(const std::string& key, uint64_t size,
                           const rpc::ReplicateConfig& config, int64_t writer, ReplicaList* out);
  // What a value of size bytes in these replicas counts against its tenant: size per
  // memory replica.
  static int64_t MemoryBytes(uint64_t size, const ReplicaList& replicas);
  bool TryReserve(uint64_t size, const rpc::ReplicateConfig& config, int64_t writer,
                  ReplicaList* out);

  // Shared body of PutStart and the "no value yet" case of UpsertStart, under the shard
  // lock: records the key's object as PROCESSING with the reserved replicas.
  rpc::PutStartResult StartLocked(LockedKey& locked, int64_t writer, uint64_t size,
                                  const rpc::ReplicateConfig& config, const ReplicaList& reserved,
                                  const std::string* group = nullptr);

  void DescribeReplicas(const ReplicaList& replicas, uint64_t size, bool include_processing,
                        std::vector<rpc::ReplicaDescriptor>* out) const;
  // Some replica may be listed (Listable).
  bool Readable(const ReplicaList& replicas) const;
  // Whether a memory replica lies in a detached segment (restored, or of a silent daemon).
  bool OnDetachedSegment(const ReplicaList& replicas) const;
  void FreeReplicas(const ReplicaList& replicas);
  void ForgetUnverified(const ReplicaList& replicas);
  void DeferFree(const ReplicaList& replicas, int64_t due_ms, uint64_t due_seq = 0);
  // Releases what an object holds (its space, its counts, a pending upsert of it) before
  // the caller takes it out of the shard's table. removed_at: the log record saying it is
  // gone (0: none, e.g. an unfinished put nobody was told about).
  void ReleaseObject(Shard& shard, std::string_view key, ObjectMetadata& meta,
                     uint64_t removed_at = 0);
  // One key of BatchReplicaClear, under its shard lock.
  ErrorCode ClearOne(const std::string& key, const std::string& segment_name,
                     int32_t key_index, CacheHolderSet* holders);
  // Removes a complete object for good: logs it, releases it. The caller erases it.
  void RemoveLogged(Shard& shard, std::string_view key, ObjectMetadata& meta);
  void DropPendingUpsert(Shard& shard, std::string_view key);
  // Orphans a key's pending move (its object changed or went): its commit fails, and its
  // target is freed when the mover commits or revokes it, or once the mover must have
  // given up (put_start_release_timeout, as an abandoned upsert).
  void DropPendingMove(Shard& shard, std::string_view key);
  // Drops replica in of locked's object (ReportBadReplicas), or the object when it was its
  // last: logged, accounted, memory freed once no lease covers it and the record is on
  // disk. True when memory was freed or is due to be.
  bool DropBadReplica(LockedKey& locked, size_t in);
  // The owner check and slot of DrainSegment, CommitMoves and RevokeMoves.
  ErrorCode FindOwnSegment(int64_t daemon_id, int64_t segment_id,
                           std::shared_ptr<Segment>* out) const;
  // The walk of a batch call that names the caller's own segment (CommitMoves,
  // RevokeMoves, and the SSD tier's ReportOffloads, RegisterDiskReplicas and
  // DropDiskReplicas), under the state gate, shared: find (FindOwnSegment or
  // FindOwnDiskSegment) checks daemon_id's segment_id, and its code answers every key when
  // it fails; otherwise a bad key answers -600 and each other one (its index in keys) what
  // settle says, under the key's shard lock. done, when given, runs last, still under the
  // gate.
  using OwnSegmentFinder = ErrorCode (MasterService::*)(int64_t, int64_t,
                                                        std::shared_ptr<Segment>*) const;
  using KeySettle = std::function<ErrorCode(size_t index, LockedKey& locked,
                                            const Segment& segment)>;
  std::vector<int32_t> SettleOwnKeys(OwnSegmentFinder find, int64_t daemon_id,
                                     int64_t segment_id, const std::vector<std::string>& keys,
                                     const KeySettle& settle,
                                     const std::function<void()>& done = nullptr);
  // The walk of CommitMoves and RevokeMoves: each key that names a move of daemon_id's out
  // of its segment segment_id is settled (its code) under the key's shard lock, and the
  // move is erased; other keys answer -600 (a bad key), -704 (no such move, or it was
  // dropped) or -601 (not daemon_id's move out of that segment).
  std::vector<int32_t> SettleMoves(
      int64_t daemon_id, int64_t segment_id, const std::vector<std::string>& keys,
      const std::function<ErrorCode(LockedKey&, PendingMove&)>& settle);
  // DrainSegment's look at one complete object with a replica in slot: a move reserved
  // into *result, or the count it adds to.
  void PlanMove(Shard& shard, std::string_view key, ObjectMetadata& meta, size_t in_slot,
                int64_t daemon_id, const std::vector<std::string>& avoided,
                rpc::DrainBatchResult* result);
  // Removes complete objects whose key matches (leased and hard-pinned ones only with
  // force); the body of RemoveByRegex and RemoveAll (match null: every key). match runs
  // with no lock held, on keys copied out of the shard a slice at a time. holders: as
  // Remove's.
  // Only tenant's keys are walked; match gets their user keys (common/base/tenant_key.h).
  using KeyMatch = std::function<bool(std::string_view)>;
  int64_t RemoveMatching(bool force, const std::string& tenant, const KeyMatch* match,
                         CacheHolderSet* holders);
  bool Removable(const ObjectMetadata& meta, bool force) const {
    return meta.complete && (force || (!meta.hard_pin && !meta.leased(Now())));
  }

  static constexpr size_t kScanSlice = ObjectDirectory::kScanSlice;
  // The object changed: moves who may cache it into *out (key_index: as Remove's) and
  // forgets them; the object is tracked again from here on.
  void TakeHolders(Shard& shard, ObjectMetadata& meta, int64_t now, int32_t key_index,
                   CacheHolderSet* out);
  // Raises unlisted_until_ms_ to until_ms.
  void ExtendUnlisted(int64_t until_ms) override;
  // Upkeep: prunes expired holder records and exist leases in the next slice of shards.
  void PruneShardRecords(int64_t now);

  // Appends meta's record to the log (ChangeLog::Publish), under the lock that made the
  // change it records.
  uint64_t LogPublish(std::string_view key, const ObjectMetadata& meta) {
    return log_.Publish(key, meta, SoftPinUntilUnixMs(meta), GroupForLog(key, meta));
  }
  // Erases an object during a restore (nothing is allocated yet, so nothing is freed).
  void EraseRestored(const std::string& key);

  // Drops every replica in the segment (objects left with none go, unlogged: the caller
  // logged the unmount) and every pending move from or into it; the number of objects
  // that went.
  // parked (when given) gets the complete objects that went, as ParkedSegments keeps them.
  int64_t DropSegmentReplicas(uint32_t slot,
                              std::vector<ParkedSegments::Object>* parked = nullptr) override;
  void RevokeWriter(int64_t writer) override;
  void ReleaseAbandonedPuts(int64_t now);
  // Drops unfinished puts and upserts for which match(writer, start_ms) holds; their space
  // is freed put_start_release_timeout after they started (at once when that is past).
  void DropUnfinished(const std::function<bool(int64_t, int64_t)>& match);
  void RunDeferredFrees(int64_t now);
  // After an eviction made room: puts the evictions on disk and frees their space now,
  // rather than at the next Tick.
  void ReclaimEvicted() override;

  // ---- verification and parked objects (master_service_verify.cc) ----
  // Counts n objects under reason in drops_, which logs the loss (throttled).
  void CountDropped(DropReason reason, int64_t n) override;
  // Under the key's shard lock: meta's unverified memory replica (index in) failed its
  // check: it goes, logged; the object goes with it when it was the last.
  void DropUnverifiedReplica(LockedKey& locked, ObjectMetadata& meta, size_t in);
  // Under the key's shard lock: the key was removed: any parked object of it goes.
  void DiscardParked(const std::string& key);
  // RemoveByRegex and RemoveAll: tenant's parked keys that match (null: all) go.
  void DiscardParkedMatching(const std::string& tenant, const KeyMatch* match);
  // Upkeep: parked sets past their TTL go (counted parked_expired).
  void ExpireParked(int64_t now);
  // Under the registry's lock, on a memory segment mounted new: reserves the ranges of the
  // objects parked under its id when its identity is the dropped one's, else discards them.
  void ClaimParked(const rpc::SegmentInfo& info, Segment& segment) override;
  // For GetStats.
  int64_t UnverifiedReplicas() const;
  std::map<std::string, int64_t> DroppedObjects() const;

  // ---- copy and move tasks (master_service_tasks.cc) ----
  // The attached memory segments named name (none: the name is unknown here).
  std::vector<std::shared_ptr<Segment>> SegmentsNamed(const std::string& name) const override;
  // A name a task may target: -600 unknown, -1010 none of its segments takes allocation.
  ErrorCode CheckTarget(const std::string& name) const override;
  // Under the key's shard lock: reserves one task's targets (or ends it when there is
  // nothing to copy); adds its assignment to *out, or settles it in the table.
  void StartTask(const ReplicaTask& task, int64_t daemon_id, rpc::ReplicaTasksResult* out);
  // Under the key's shard lock: the report of one fetched task.
  ErrorCode SettleTask(LockedKey& locked, const ReplicaTask& task, int64_t daemon_id,
                       int32_t code);
  // Upkeep: tasks past their timeouts, or whose daemon left, fail; their reservations are
  // orphaned (freed when the daemon reports, or once it must have given up).
  void ExpireTasks(int64_t now);
  // CreateMoveTask's body, under the state gate held by the caller.
  rpc::TaskResult CreateMoveTaskLocked(const std::string& key, const std::string& source,
                                       const std::string& target) override;
  // ---- the SSD tier (master_service_disk.cc) ----
  // The put asks for an offload at PutEnd (config.offload, or --enable_offload for 0).
  bool WantsOffload(const rpc::ReplicateConfig& config) const {
    return config.offload == 1 || (config.offload == 0 && options_.enable_offload);
  }
  // The caller's own attached LOCAL_DISK segment: -103 unknown daemon, -101 unknown or
  // detached segment or not a disk one, -601 another daemon's.
  ErrorCode FindOwnDiskSegment(int64_t daemon_id, int64_t segment_id,
                               std::shared_ptr<Segment>* out) const;
  // r (of any kind) in segment may be listed: attached, and for a disk replica vouched for
  // unless the segment is reconciled (master/directory/segment.h).
  static bool Listable(const Replica& r, const Segment& segment) {
    return segment.attached() && (r.memory() || segment.Vouches(r.round));
  }
  // Under the key's shard lock: takes meta's disk replica (index in) away, logged; the
  // object goes with it when that was its last replica.
  void DropDiskReplica(LockedKey& locked, ObjectMetadata& meta, size_t in);
  // Orphans a key's open promotion (as DropPendingMove) and gives back its tenant charge.
  void DropPendingPromotion(Shard& shard, std::string_view key);

  // ---- eviction (master_service_evict.cc): what EvictionRounds asks of objects ----
  // What eviction may do with meta now; under its shard's lock. Objects without a memory
  // replica (on disk only), those pinned for an offload and those with a replica on a
  // detached segment are never candidates; those of a tenant at or under its quota are
  // sheltered (TenantUsage::Sheltered, as of now: a tenant that eviction brings down to
  // its quota is sheltered from then on).
  EvictionTier TierOf(const Shard& shard, const ObjectMetadata& meta, int64_t now) const override;
  // A candidate the walk takes: with a disk replica it loses only its memory replicas;
  // without one, on a daemon with an SSD tier (--offload_on_evict), it gets an eviction's
  // offload instead (*queued: its bytes) unless that cannot proceed (then freed only with
  // --allow_evict_without_offload); else it goes. Bytes freed; *erase: it went.
  uint64_t EvictOne(Shard& shard, std::string_view key, ObjectMetadata& meta,
                    uint64_t* queued, bool* erase) override;
  bool QueueEarlyOffload(Shard& shard, std::string_view key, ObjectMetadata& meta) override;
  int64_t ObjectCount() const override { return object_count_.load(); }

  // ExistKey's hit counted as a use (and its exist lease), under the shard's lock.
  void CountExistHit(Shard& shard, ObjectMetadata& meta, int64_t now);
  // The object was written or read (or goes): its exist lease (if any) is over, and the
  // next existence hit counts again.
  static void ForgetExistHit(Shard& shard, ObjectMetadata& meta) {
    if (!meta.exist_hit) return;
    shard.exist_leases.Forget(&meta);
    meta.exist_hit = false;
  }

  const MasterOptions options_;
  // Random, so that a restarted master (or a new leader: TakeOver) has another; read by
  // every reply that carries it, changed only by TakeOver.
  std::atomic<int64_t> epoch_;
  mutable StateGate gate_;  // const readers (GetAllSegments) hold it too
  SegmentRegistry segments_;
  DaemonRegistry daemons_;
  ObjectDirectory objects_;  // every object, in shards

  DeferredFrees deferred_{segments_};
  ChangeLog log_{segments_};  // the operation log, when one is attached

  TenantUsage tenants_;  // per-tenant objects, bytes, quotas, refusals
  GroupTable groups_;    // the members of every group (master_service_groups.cc)
  std::atomic<int64_t> object_count_{0};
  std::atomic<int64_t> processing_count_{0};  // lets Tick skip the abandoned-put scan
  int64_t last_abandoned_scan_ms_ = 0;  // only touched by Tick
  RestoreCounts restore_counts_;        // only touched by the restore, before serving

  ReplicaTasks tasks_;  // copy and move tasks

  // Verification and parked objects (master_service_verify.cc).
  ParkedSegments parked_;
  std::atomic<int64_t> parked_adopted_{0};
  ObjectDrops drops_;
  size_t holder_sweep_next_ = 0;  // the shard PruneShardRecords starts at; only touched by Tick
  // Until then a daemon the registry no longer lists may cache an untracked object: the
  // latest lease granted to an unregistered reader of one, or one lease after a daemon
  // was declared dead.
  std::atomic<int64_t> unlisted_until_ms_{0};
  // Set by the restore: until then, caches filled under the previous master may hold any
  // restored object (leases are not logged). 0: no restore.
  int64_t restore_fence_ms_ = 0;
  std::atomic<int64_t> restore_ms_{0};
  std::atomic<int64_t> restored_objects_{0};
  // Last: it refers to the members above (see "Eviction").
  EvictionRounds eviction_{options_, objects_, segments_, tenants_, groups_, *this};
  DrainJobs drain_jobs_{options_, objects_, segments_, tasks_, *this};
  DiskTier disk_tier_{options_, objects_, segments_, eviction_};
  Liveness liveness_{options_, daemons_, segments_, log_, parked_, disk_tier_.queues(), *this};
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_MASTER_SERVICE_H_
