// The operations of docs/protocol.md, one handler per op, run on worker threads.
//
// A put asks the master where (PutStart), copies pool -> segment for every replica, and
// publishes (PutEnd); any failure, or a client gone before the publish, revokes instead,
// so nothing half-written is ever visible. A get asks which replicas (GetReplicaList),
// copies segment -> pool from one this daemon owns, and checks the copy finished inside
// the read lease. Batches become the master's batch RPCs: one round trip per phase.
//
// Reads remember where the object lives for 90% of its lease (daemon/cluster/read_cache.h), and
// later reads of the key within it skip the master. Every write or removal made here
// invalidates what it touches before its client is answered: here, and in every other
// daemon's read cache the master names as a holder (daemon/cluster/cache_invalidator.h), so that a
// read that starts after the answer sees the change on every host.
//
// Most requests run on workers. A few that cannot block (HOSTNAME, HEALTH, and a small
// GET, EXIST or GET_SIZE the read cache answers) run on the event-loop thread through
// TryInline, saving the hand-off to a worker.
//
// Replicas that live on another daemon are written and read through the transfer engine
// (daemon/replicas/replica_io.h); a put that could not write every replica answers TRANSFER_FAIL
// (-800) and is revoked. With --checksum, a put stores the value's CRC32C with the master;
// every get of an object that has one verifies it (CHECKSUM_MISMATCH, -801).
//
// Input is untrusted. A request whose shape is wrong (argument count or type, a batch
// over uds::kMaxBatch) is malformed: it is refused in one place, before any handler runs
// (common/uds/uds_fields.h), and the caller closes the connection. Values that are
// well-typed but unacceptable (key length, value size, a pool range outside the pool, an
// unknown staged id) get INVALID_PARAMS (-600).
//
// Refusals say why: a handler that refuses returns Refuse(code, why), and the reply carries
// why as its reason (common/uds/uds_ops.h, "reasons"), which libmc shows the application; a
// -600 for a bad key says which key rule it broke without the handler's help (ScopeKeys
// finds it). HELLO's refusals carry the same text the daemon logs.
//
// A connection's extra segments (MOUNT_SEGMENT and ALLOCATE_SEGMENT: memory the daemon maps
// for the application to lend; MOUNT_POOL_SEGMENT: a range of the application's own pool)
// are drained before they are unmounted (daemon/replicas/segment_drainer.h): on UNMOUNT_SEGMENT (one
// of them), on UNMOUNT_SEGMENTS, which a graceful close sends, and at the teardown of a
// connection that went without (a crash), since the memory is the daemon's own mapping
// (of the pool too: a mapping of its own of the pool's memfd) and outlives the client.
//
// Tenants (docs/security.md, "Tenants"): HELLO settles the connection's tenant
// (daemon/base/tenant_policy.h), and every request's keys become that tenant's stored keys as
// its arguments are parsed (daemon/base/tenant_scope.h), before any handler, cache or RPC sees
// them. REMOVE_BY_REGEX and REMOVE_ALL, which name no key, pass the tenant to the master,
// which walks that tenant's keys only.
//
// Every op of common/uds/uds_ops.h has one handler here, On<Name>: it gets the op's parsed
// Args (keys already scoped), fills its Reply, and returns the code; Handle sends [id,
// code, reply].
//
// Metrics (daemon/transfer/daemon_metrics.h): each request is counted, with its code and latency,
// where it is dispatched -- Run for the workers' requests, TryInline for the event loop's
// -- and never in the handlers; the get handlers count the read cache's hits and misses.
#ifndef MOONCAKE_DAEMON_STORE_SERVICE_H_
#define MOONCAKE_DAEMON_STORE_SERVICE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "MasterService.h"
#include "common/base/error_code.h"
#include "common/uds/uds_ops.h"
#include "common/uds/uds_protocol.h"
#include "daemon/cluster/cache_invalidator.h"
#include "daemon/service/client_connection.h"
#include "daemon/cluster/master_batcher.h"
#include "daemon/master_link/master_client.h"
#include "daemon/cluster/membership.h"
#include "daemon/ssd_tier/promoter.h"
#include "daemon/cluster/read_cache.h"
#include "daemon/replicas/replica_io.h"
#include "daemon/replicas/segment_drainer.h"
#include "daemon/memory/segment_budget.h"
#include "daemon/base/tenant_policy.h"

namespace mooncake {

class StoreService {
 public:
  // Values up to this size are copied on the event-loop thread when cached; a bigger
  // copy would hold up every other connection.
  static constexpr uint64_t kInlineMaxBytes = 64 * 1024;

  // Puts give a transfer this long to finish; a dead peer fails it sooner (stall timeout).
  static constexpr std::chrono::seconds kPutTransferBudget{60};

  // master_address: the daemon's --master, resolved here once to its endpoint (a HELLO
  // naming another endpoint is refused; if it does not resolve, the text itself is
  // compared). checksum: compute a CRC32C of every value put through this daemon. segment_budget
  // pays for MOUNT_SEGMENT (daemon/memory/segment_budget.h). put_no_space_wait_ms: how long a put
  // the master has no space for waits for eviction to make some (daemon/service/no_space_wait.h). tenants:
  // --tenant_uids. group_commit_max: --group_commit_max (daemon/cluster/master_batcher.h). spin_us: --spin_us.
  StoreService(MasterClient* master, Membership* membership, ReadCache* cache,
               CacheInvalidator* invalidator, ReplicaIO* io, SegmentDrainer* drainer,
               std::string master_address, bool checksum,
               std::shared_ptr<SegmentBudget> segment_budget, int64_t put_no_space_wait_ms,
               TenantPolicy tenants = TenantPolicy(),
               size_t group_commit_max = MasterBatcher::kDefaultMaxGroup,
               int64_t spin_us = kDefaultSpinMicros);

  // The handshake, run before any other frame of the connection is read. Sends the reply.
  // false (with *why for the log) when the connection must be closed: a malformed HELLO,
  // an ABI or master mismatch, a tenant the peer may not claim (PERMISSION_DENIED) or a
  // malformed tenant id, or a pool fd that is missing, extra or unsealed.
  // Takes ownership of fds.
  bool Hello(ClientConnection* client, const uds::Message& hello, std::vector<int> fds,
             std::string* why);

  // Any request after HELLO. Sends the response, unless the request is malformed: then
  // false, with *why for the log, and the caller closes the connection.
  bool Handle(ClientConnection* client, const uds::Message& request, std::string* why);

  // Answers a request on the calling (event-loop) thread when that is cheap and cannot
  // block: never a master RPC, never a copy over kInlineMaxBytes, never a blocking write.
  // The caller holds the client (Acquire). kNotInline: nothing was done or sent (also
  // for anything malformed or unacceptable); hand the request to Handle on a worker.
  // kDeferred: the answer is in *deferred, for a worker to write (the socket was full, or
  // a worker was writing to it).
  enum class Inline { kNotInline, kAnswered, kDeferred };
  Inline TryInline(ClientConnection* client, const uds::Message& request, std::string* deferred);

  // Runs once per connection, after it closed and its last request ended: revokes its
  // unfinished staged puts, ends its staged gets, drains and unmounts its segments (on the
  // calling worker, for as long as the drain takes), unmaps its pool.
  void Teardown(ClientConnection* client);

  // The promoter's figures (daemon/ssd_tier/promoter.h), for /metrics.
  Promoter::Stats promotions() const { return promoter_.stats(); }

 private:
  // Parses request's Args for op, runs handler, sends the reply: false when malformed.
  template <uds::Op op>
  bool Run(ClientConnection* s, const uds::Message& request,
           ErrorCode (StoreService::*handler)(ClientConnection*,
                                              const typename uds::OpSpec<op>::Args&,
                                              typename uds::OpSpec<op>::Reply*));

  // ---- the handlers, one per op of MC_UDS_OPS ----
#define MC_UDS_HANDLER_(name, wire, code, args, reply, note) \
  ErrorCode On##name(ClientConnection* s, const uds::args& in, uds::reply* out);
  MC_UDS_OPS(MC_UDS_HANDLER_)
#undef MC_UDS_HANDLER_

  // Drains and unmounts segments taken from a connection, forgetting them in the read cache.
  SegmentDrainer::Outcome DrainSegments(const std::vector<int64_t>& segments);

  // ---- segments (store_service_segments.cc) ----
  // Maps size bytes of the daemon's memory under the segment budget (daemon/
  // segment_budget.h) and mounts them, lent, for the connection (*segment_id). op names the
  // request for the log line of a refusal.
  ErrorCode MountDaemonMemory(ClientConnection* s, uint64_t size, const char* op,
                              int64_t* segment_id);

  // A batch get's misses are listed, and a batch put's entries reserved, by the master in
  // chunks of this many keys, pipelined (MasterClient's *Pipelined calls): the master
  // answers the next chunks while this daemon copies one. 128 x 4 KiB gets (loaded 2-vCPU
  // VM, alternating runs): 32 beat 64 and one whole-batch call in 2 of 3 rounds; a chunk
  // costs an RPC's overhead.
  static constexpr size_t kMasterChunk = 32;

  // ---- client names (store_service_tasks.cc) ----
  // ToRpcConfig for a put of s. A client names itself (SET_CLIENT_NAME) and its memory: when
  // it lends none, a preferred segment of its own name means its host, this daemon (as
  // LMCache's preferred_segment = get_hostname() asks), and is sent as this daemon's name.
  bool ConfigOf(const ClientConnection* s, const uds::WireConfig& wire,
                rpc::ReplicateConfig* out) const;

  // ---- puts (store_service_put.cc) ----
  // PUT and UPSERT.
  ErrorCode PutWhole(ClientConnection* s, const uds::PutArgs& in, bool upsert);
  // One entry of a BATCH_PUT: src is its range of the pool.
  struct BatchPutEntry {
    std::string key;
    char* src = nullptr;  // the pool is the daemon's mapping: writable, never written here
    uint64_t size = 0;
    std::string group;  // its group id when the batch names them (PutEntry.group)
  };
  // Puts items[i] for every i in which, in three batched phases (reserve and write,
  // pipelined in chunks of kMasterChunk; publish or revoke), setting (*results)[i] (a wire
  // value: 0 or a code); *retry gets the entries whose transfer failed and whose
  // reservation was revoked.
  void BatchPutRound(ClientConnection* s, const std::vector<BatchPutEntry>& items,
                     const std::vector<size_t>& which, const rpc::ReplicateConfig& config,
                     std::vector<int64_t>* results, std::vector<size_t>* retry);
  struct PutRoundOutcome;
  // Writes the entries js (indices into keys and which) that started[j] reserved, and
  // notes each for the publish or the revoke; (*keys)[j] of a written one is moved out.
  void WriteStarted(const std::vector<BatchPutEntry>& items, const std::vector<size_t>& which,
                    std::vector<std::string>* keys,
                    const std::vector<rpc::PutStartResult>& started, const std::vector<size_t>& js,
                    std::vector<int64_t>* results, PutRoundOutcome* out);
  // PUT_COMMIT (commit) or PUT_ABORT: both take the staged put and wait for its chunks.
  ErrorCode EndStagedPut(ClientConnection* s, uint64_t put_id, bool commit);
  // Reserves (StartPut), writes every replica from src, and leaves the put reserved and
  // written for FinishPut (*checksum: the value's, or -1), or revokes it and returns why.
  // *retryable: a transfer failed and the revoke went through, so trying again may place
  // the replicas on daemons that answer.
  ErrorCode ReserveAndWrite(ClientConnection* s, const std::string& key, char* src,
                            uint64_t size, const rpc::ReplicateConfig& config, bool upsert,
                            int64_t* checksum, bool* retryable);
  // PutStart or UpsertStart, registering again and retrying once on -103, and asking again
  // on -200 for up to put_no_space_wait_ms_ (daemon/service/no_space_wait.h) while s is open.
  // Daemons a transfer just failed against are asked to be placed last (avoided_segments).
  ErrorCode StartPut(ClientConnection* s, const std::string& key, uint64_t size,
                     const rpc::ReplicateConfig& config, bool upsert, rpc::PutStartResult* out);
  // BatchPutStart for a batch's entries, with StartPut's -103 and -200 handling (the
  // entries answered -200 asked again together). A code only when the call itself failed.
  ErrorCode StartBatch(ClientConnection* s, int64_t writer, const std::vector<std::string>& keys,
                       const std::vector<int64_t>& sizes, const rpc::ReplicateConfig& config,
                       std::vector<rpc::PutStartResult>* started);
  // *stale: the other daemons whose caches may hold the value an upsert replaced.
  ErrorCode EndPut(const std::string& key, bool upsert, int64_t checksum, StaleCaches* stale);
  ErrorCode RevokePut(const std::string& key, bool upsert);
  // Publishes (with the value's checksum, or -1), or revokes when the client is gone or
  // the publish failed.
  ErrorCode FinishPut(ClientConnection* s, const std::string& key, bool upsert, int64_t checksum);
  // The CRC32C of a written value when this daemon computes them (the one a transport
  // computed on the way, if any), else -1.
  int64_t ValueChecksum(const ValueSlice& written) const;
  static std::chrono::steady_clock::time_point TransferDeadline() {
    return std::chrono::steady_clock::now() + kPutTransferBudget;
  }

  // The reader id a replica list is asked under: ours when the answer may be cached (the
  // master then names us to whoever changes the key), else 0.
  int64_t CacheReader() const { return cache_->enabled() ? membership_->daemon_id() : 0; }
  // After a change made here: forgets keys (or everything) in our cache and in every
  // holder's stale names, before the client is answered.
  void ForgetEverywhere(const StaleCaches& stale, const std::vector<std::string>& keys,
                        bool everything);

  // ---- gets (store_service_get.cc) ----
  // Objects the master listed, to be read into their destinations (the pool).
  struct ListedReads {
    std::vector<std::string> keys;
    std::vector<ReadCache::Ticket> tickets;  // taken before the RPC
    std::vector<rpc::ReplicaListResult> lists;
    std::vector<char*> dests;
    std::vector<uint64_t> capacities;
  };
  // Reads the listed objects [first, first + count) of reads (the remote ones in parallel)
  // and remembers local ones in the read cache; (*results)[j]: bytes read, or a code.
  // asked_at and generation were taken before the RPC that listed them.
  void ReadListed(const ListedReads& reads, size_t first, size_t count,
                  std::chrono::steady_clock::time_point asked_at, uint64_t generation,
                  std::vector<int64_t>* results);
  // Copies a cached object of at most max_size bytes from this daemon's memory into dest
  // (for the event loop, which must not wait on a transfer): bytes copied, INVALID_PARAMS
  // when it exceeds capacity, or 0 when the cache cannot answer (miss, remote, too big, or
  // the copy overran the entry's deadline or overlapped a re-registration).
  Result<uint64_t> CopyCached(const std::string& key, char* dest, uint64_t capacity,
                              uint64_t max_size);
  // Answers what the read cache can of several reads: local entries by memcpy, remote ones
  // by transfer, in parallel. (*results)[j]: bytes, -600 (buffer too small), or 0: ask the
  // master (a miss, or a cached read that failed or cannot be trusted; a failed remote
  // entry is forgotten).
  void ReadCached(const std::vector<std::string>& keys, const std::vector<char*>& dests,
                  const std::vector<uint64_t>& capacities, std::vector<int64_t>* results);
  // The replicas a read of key, listed in list, may use, best first (*size set); -800 if
  // none.
  ErrorCode Locate(const std::string& key, const rpc::ReplicaListResult& list,
                   std::vector<ReplicaTarget>* candidates, uint64_t* size);
  // Fills the read cache with the replica a read used (a remote one only over TCP, with
  // the value's checksum for later reads to verify; never a disk replica: its owner may
  // delete it with its bucket without asking anyone's cache).
  void Remember(const std::string& key, ReadCache::Ticket ticket, const ReplicaTarget& where,
                uint64_t size, std::chrono::steady_clock::time_point asked_at,
                int64_t lease_ttl_ms, int64_t checksum);
  // One chunk of a staged get: OK, or -707, -800, -801 (the chunk completing a corrupt value).
  ErrorCode ReadChunk(StagedGet* get, uint64_t value_offset, char* dest, uint64_t length);

  // ---- ranged gets (store_service_ranges.cc) ----
  // Reads the fragments of every entry (GET_RANGES: one) into the pool: (*values) gets one
  // value per fragment, entry after entry (its length, or a code). INVALID_PARAMS for the
  // whole request past uds::kMaxRangesPerRequest fragments.
  ErrorCode ReadRanges(ClientConnection* s, const std::vector<const uds::GetRangesArgs*>& entries,
                       std::vector<int64_t>* values);

  MasterClient* const master_;
  // The single-key puts' and gets' master calls, shared among concurrent requests.
  MasterBatcher batcher_;
  Membership* const membership_;
  ReadCache* const cache_;
  CacheInvalidator* const invalidator_;
  ReplicaIO* const io_;
  SegmentDrainer* const drainer_;
  const std::string master_address_;
  const std::string master_endpoint_;  // master_address_'s (CanonicalMasterEndpoint)
  const bool checksum_;
  const std::shared_ptr<SegmentBudget> segment_budget_;
  const int64_t put_no_space_wait_ms_;
  const TenantPolicy tenants_;
  // Re-creates memory replicas of objects read from disk that the master marked promote.
  Promoter promoter_;
};

// ---- helpers shared by the handler files ----
namespace store_detail {

// A key as the handlers get it, scoped (daemon/base/tenant_scope.h): "" stands for a key the
// client got wrong.
bool ValidKey(const std::string& key);
// The valid keys of a batch, in order, and where each stands in it (index[j] for keys[j]):
// what a batch handler asks the master about, the other entries answering -600.
struct ValidKeys {
  std::vector<std::string> keys;
  std::vector<size_t> index;
};
ValidKeys PickValidKeys(const std::vector<std::string>& batch);
bool ValidSize(uint64_t size);
// The chunk's range lies inside a value of value_size bytes (overflow included).
inline bool ChunkInside(const uds::ChunkArgs& chunk, uint64_t value_size) {
  return chunk.length <= value_size && chunk.value_offset <= value_size - chunk.length;
}
// Converts a wire config; false when replica_num is out of 1..64 or offload out of 0..2, or
// for a bad group id. A config naming its group (group_given) names it for one key: a
// batch puts its entries' own in its place (PutEntry.group).
bool ToRpcConfig(const uds::WireConfig& wire, rpc::ReplicateConfig* out);
// wire.group is "" or a valid group id the config names (group_given).
bool ValidGroup(const uds::WireConfig& wire);

// A handler refusing its request: returns code and keeps why for Run, which sends it as the
// reply's reason when the handler returns that same code (a reason kept for a code the
// handler then did not return is dropped). Kept per thread: a handler runs its request from
// start to end on the thread that called it.
ErrorCode Refuse(ErrorCode code, std::string why);
// The reason kept for code since the last take, "" if none; forgets it either way.
std::string TakeRefusal(ErrorCode code);
// Refuse(INVALID_PARAMS, ...) naming what is wrong with a value size outside ValidSize, a
// pool range outside s's pool, a config ToRpcConfig refuses, or an unknown staged id.
ErrorCode RefuseSize(uint64_t size);
ErrorCode RefusePoolRange(const ClientConnection* s, uint64_t offset, uint64_t length);
ErrorCode RefuseConfig(const uds::WireConfig& wire);
ErrorCode RefuseStagedId(const char* kind, uint64_t id);

}  // namespace store_detail

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_STORE_SERVICE_H_
