// The daemon's connections to the master: a pool of Thrift clients (framed transport,
// binary protocol, as master/server/main.cc serves), so that no request waits behind another
// request's RPC.
//
// A call checks a connection out (reusing an idle one, or opening a new one while fewer
// than max_connections exist), runs the RPC, and checks it back in. Every wait is bounded:
// connect by connect_timeout, send and receive by rpc_timeout. A connection that fails is
// closed and dropped, and the call returns RPC_FAIL (-900); the next call opens a fresh
// one. So a master restart costs the requests in flight at that moment and nothing more.
//
// Each new connection first runs the cluster key's handshake (common/master_link/master_auth.h): a
// master that refuses our key, or cannot prove the key itself, is treated as unreachable
// (RPC_FAIL, LastError saying which), so the daemon never registers with an impostor nor
// sends it anything.
//
// Which master (docs/ha.md, "Daemons"): the leader its MasterLocator names, a fixed
// host:port or the leader key in etcd. Every new connection then asks GetRole and keeps
// the connection's term (the master's own, or for a master without HA, which says term 0,
// the term of the key that named it). The fencing rule: a connection of a term below the
// highest one the daemon knows is never used, and a reply that arrives on one is not
// taken (the connection is dropped); a master that says STANDBY or DEPOSED, or refuses a
// call as NOT_LEADER (-1600, the whole call: common/master_link/master_auth.h), is dropped too. When
// the leader changes, idle connections to the old one are closed and busy ones are
// dropped as they come back.
//
// Following the leader (through etcd only; a fixed host:port behaves as it always did):
// a call that failed because of the master -- no connection, a refusal as NOT_LEADER, a
// broken connection, a stale term -- re-reads the leader key and runs again on the leader,
// waiting up to failover_wait for one to answer. A call that surely did not run (nothing
// was sent, or the master refused it as NOT_LEADER) is repeated whatever it is; one that
// may have run (the connection broke after sending, or the reply came from a lower term)
// is repeated once, and only when repeating it is safe (its row's repeat in
// common/master_link/master_rpcs.h is kIdempotent or kSafe; docs/ha.md lists why each is
// or is not).
//
// Wrappers return the RPC's own code (OK, OBJECT_NOT_FOUND, ...) or RPC_FAIL; results go
// to out-parameters. Codes become ErrorCode here, where they leave Thrift.
//
// Thread roles: any thread calls; the locator's watch thread reports leader changes.
// Lock order: handler_mu_ -> (the handler's own locks); mu_ is a leaf, and never held while
// calling into the locator.
#ifndef MOONCAKE_DAEMON_MASTER_CLIENT_H_
#define MOONCAKE_DAEMON_MASTER_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "MasterService.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/auth/cluster_key.h"
#include "common/base/error_code.h"
#include "common/master_link/master_locator.h"
#include "common/master_link/master_rpcs.h"

namespace mooncake {

struct MasterClientOptions {
  // The master's address without a locator.
  std::string host = "127.0.0.1";
  int port = 50051;
  // With a locator through etcd: how long a call that failed because of the master waits
  // for a leader to run it again.
  int failover_wait_ms = 5000;
  int connect_timeout_ms = 2000;
  int rpc_timeout_ms = 10000;
  size_t max_connections = 16;
  // A reply's wait polls the socket this long before blocking (adaptive per connection,
  // common/base/spin_wait.h), microseconds; 0 = never.
  int64_t spin_us = 0;
  std::shared_ptr<const ClusterKey> cluster_key;  // null: none (loopback masters only)
};

// Whose read caches a change may have left stale, as the master's reply named them
// (rpc::CacheHolder), and when that reply arrived: their ms_left count from then
// (daemon/cluster/cache_invalidator.h). Empty when the call failed.
struct StaleCaches {
  std::vector<rpc::CacheHolder> holders;
  std::chrono::steady_clock::time_point received_at;
};

namespace master_client_internal {

// The Thrift client's method of each row of MC_MASTER_RPCS (a row that names no method of
// the IDL fails to compile here).
template <MasterRpc R>
struct ClientMethod;
#define MC_MASTER_CLIENT_METHOD(Method, ...)                                \
  template <>                                                               \
  struct ClientMethod<MasterRpc::k##Method> {                               \
    static constexpr auto kCall = &rpc::MasterServiceClient::Method;        \
  };
MC_MASTER_RPCS(MC_MASTER_CLIENT_METHOD)
#undef MC_MASTER_CLIENT_METHOD

// After a repeat, a put's OBJECT_ALREADY_EXISTS becomes RPC_FAIL (see PutStart).
void DistrustRepeatedStart(bool repeated, rpc::PutStartResult* result);

}  // namespace master_client_internal

class MasterClient {
 public:
  // locator: where the leader is (common/master_link/master_locator.h); null: options' host:port,
  // fixed. The client takes it over, sets its change callback and starts its watch.
  explicit MasterClient(MasterClientOptions options,
                        std::unique_ptr<MasterLocator> locator = nullptr);
  ~MasterClient();
  MasterClient(const MasterClient&) = delete;
  MasterClient& operator=(const MasterClient&) = delete;

  // An RPC on a connection; its results are whatever it captures.
  using Rpc = std::function<void(rpc::MasterServiceClient&)>;

  // Runs fn on a pooled connection to the leader. OK when the RPC completed (its own
  // result is whatever fn captured), RPC_FAIL when no leader could be reached or the
  // connection broke (and, per repeat, it was not run again), NOT_LEADER when a fixed
  // master refused it so. *repeated (may be null): fn ran again after an attempt that may
  // have taken effect.
  ErrorCode Call(const Rpc& fn, Repeat repeat, bool* repeated = nullptr);

  // The one call path of every RPC: R's method (common/master_link/master_rpcs.h) with args, its
  // reply in *reply (what the method returns, or fills), run by Call with R's repeat
  // policy. A put's first step repeated has its OBJECT_ALREADY_EXISTS distrusted (see
  // PutStart). The wrappers below convert replies; a call needing no conversion needs no
  // wrapper.
  template <MasterRpc R, typename Reply, typename... Args>
  ErrorCode Ask(Reply* reply, const Args&... args) {
    constexpr auto method = master_client_internal::ClientMethod<R>::kCall;
    bool repeated = false;
    ErrorCode call = Call(
        [&](rpc::MasterServiceClient& c) {
          if constexpr (std::is_invocable_v<decltype(method), rpc::MasterServiceClient&, Reply&,
                                            const Args&...>) {
            (c.*method)(*reply, args...);  // a struct or a list, filled
          } else {
            *reply = (c.*method)(args...);  // a code, returned
          }
        },
        InfoOf(R).repeat, &repeated);
    if constexpr (std::is_same_v<Reply, rpc::PutStartResult>) {
      master_client_internal::DistrustRepeatedStart(repeated, reply);
    } else if constexpr (std::is_same_v<Reply, std::vector<rpc::PutStartResult>>) {
      for (auto& r : *reply) master_client_internal::DistrustRepeatedStart(repeated, &r);
    }
    return call;
  }

  // Closes every idle connection: after the master restarted they all point at a dead
  // socket. Connections checked out now are dropped when they come back.
  void DropIdle() ABSL_LOCKS_EXCLUDED(mu_);

  // Runs after each change of leader (through etcd), on the thread that noticed it: it
  // must not block nor call the master (Membership wakes its heartbeat). Null: none.
  // Clearing it waits for a call of it in progress.
  void SetLeaderChangeHandler(std::function<void(const MasterLeader&)> handler)
      ABSL_LOCKS_EXCLUDED(handler_mu_);
  // The leader calls go to now (unknown while etcd names none).
  MasterLeader leader() const { return locator_->Current(); }

  // Why the last failed call on this thread failed, for log lines.
  static std::string LastError();

  // Calls since start, and those of them that failed (RPC_FAIL or NOT_LEADER: the master
  // could not be asked, not an RPC's own refusal), for the daemon's /metrics.
  uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  uint64_t failed_calls() const { return failed_calls_.load(std::memory_order_relaxed); }

  // ---- wrappers: each converts its call's reply; how each may be repeated is its row's
  // (common/master_link/master_rpcs.h), and docs/ha.md says why ----
  ErrorCode RegisterDaemon(int64_t daemon_id, const std::string& name) {
    return AskCode<MasterRpc::kRegisterDaemon>(daemon_id, name);
  }
  ErrorCode Heartbeat(int64_t daemon_id, rpc::HeartbeatResult* out) {
    return AskResult<MasterRpc::kHeartbeat>(out, daemon_id);
  }
  ErrorCode MountSegment(const rpc::SegmentInfo& segment) {
    return AskCode<MasterRpc::kMountSegment>(segment);
  }
  ErrorCode UnmountSegment(int64_t daemon_id, int64_t segment_id) {
    return AskCode<MasterRpc::kUnmountSegment>(daemon_id, segment_id);
  }
  ErrorCode GetAllSegments(std::vector<rpc::SegmentInfo>* out) {
    return Ask<MasterRpc::kGetAllSegments>(out);
  }
  // Returns out->code (or RPC_FAIL).
  ErrorCode DrainSegment(int64_t daemon_id, int64_t segment_id, int64_t cursor,
                         int32_t max_moves, const std::vector<std::string>& avoided,
                         rpc::DrainBatchResult* out) {
    return AskResult<MasterRpc::kDrainSegment>(out, daemon_id, segment_id, cursor,
                                               max_moves, avoided);
  }
  // One code per key, as the batch forms below.
  ErrorCode CommitMoves(int64_t daemon_id, int64_t segment_id,
                        const std::vector<std::string>& keys, std::vector<ErrorCode>* out) {
    return AskCodes<MasterRpc::kCommitMoves>(keys.size(), out, daemon_id, segment_id, keys);
  }
  ErrorCode RevokeMoves(int64_t daemon_id, int64_t segment_id,
                        const std::vector<std::string>& keys, std::vector<ErrorCode>* out) {
    return AskCodes<MasterRpc::kRevokeMoves>(keys.size(), out, daemon_id, segment_id, keys);
  }

  // The put's first step; after a repeat (a failover), OBJECT_ALREADY_EXISTS may be the
  // reservation our lost first attempt made, and is answered RPC_FAIL (docs/ha.md): so a
  // put never takes its own orphan for "already cached". The same for UpsertStart and
  // BatchPutStart.
  ErrorCode PutStart(int64_t writer, const std::string& key, int64_t size,
                   const rpc::ReplicateConfig& config, rpc::PutStartResult* out) {
    return AskResult<MasterRpc::kPutStart>(out, writer, key, size, config);
  }
  // checksum: the value's CRC-32C (common/base/crc32c.h), or -1 for none.
  ErrorCode PutEnd(int64_t writer, const std::string& key, int64_t checksum = -1) {
    return AskCode<MasterRpc::kPutEnd>(writer, key, checksum);
  }
  ErrorCode PutRevoke(int64_t writer, const std::string& key) {
    return AskCode<MasterRpc::kPutRevoke>(writer, key);
  }
  ErrorCode UpsertStart(int64_t writer, const std::string& key, int64_t size,
                      const rpc::ReplicateConfig& config, rpc::PutStartResult* out) {
    return AskResult<MasterRpc::kUpsertStart>(out, writer, key, size, config);
  }
  ErrorCode UpsertEnd(int64_t writer, const std::string& key, int64_t checksum,
                      StaleCaches* stale) {
    rpc::ChangeResult result;
    ErrorCode call = AskChange<MasterRpc::kUpsertEnd>(&result, stale, writer, key, checksum);
    return CodeOf(call, result.code);
  }
  ErrorCode UpsertRevoke(int64_t writer, const std::string& key) {
    return AskCode<MasterRpc::kUpsertRevoke>(writer, key);
  }
  // The batch forms fill one result per key; on RPC_FAIL the vectors are left empty.
  ErrorCode BatchPutStart(int64_t writer, const std::vector<std::string>& keys,
                        const std::vector<int64_t>& sizes, const rpc::ReplicateConfig& config,
                        std::vector<rpc::PutStartResult>* out) {
    return AskList<MasterRpc::kBatchPutStart>(keys.size(), out, writer, keys, sizes, config);
  }
  // checksums: one per key, or empty for none.
  ErrorCode BatchPutEnd(int64_t writer, const std::vector<std::string>& keys,
                      std::vector<ErrorCode>* out, const std::vector<int64_t>& checksums = {}) {
    return AskCodes<MasterRpc::kBatchPutEnd>(keys.size(), out, writer, keys, checksums);
  }
  ErrorCode BatchPutRevoke(int64_t writer, const std::vector<std::string>& keys,
                         std::vector<ErrorCode>* out) {
    return AskCodes<MasterRpc::kBatchPutRevoke>(keys.size(), out, writer, keys);
  }

  // Returns out->code (or RPC_FAIL). reader: this daemon's id when it will cache the
  // answer (the master then names it to whoever changes the key), else 0.
  ErrorCode GetReplicaList(const std::string& key, int64_t reader, rpc::ReplicaListResult* out) {
    return AskResult<MasterRpc::kGetReplicaList>(out, key, reader);
  }
  ErrorCode BatchGetReplicaList(const std::vector<std::string>& keys, int64_t reader,
                              std::vector<rpc::ReplicaListResult>* out) {
    return AskList<MasterRpc::kBatchGetReplicaList>(keys.size(), out, keys, reader);
  }
  // Batch calls in chunks of at most `chunk` keys, pipelined on one connection: up to
  // kPipelineWindow chunks are in flight, so the master answers the next ones while the
  // caller works on the last (copies it; a batch is otherwise the master's loop, then the
  // daemon's copies, one after the other; with one chunk ahead, the master idled while the
  // daemon copied and the daemon then waited out a round trip). The chunks in flight beyond
  // the first carry at most kPipelineBytes of keys, well inside what the two sockets
  // buffer, so a send never waits on a master that waits for us to read its replies (it
  // stops reading while a reply waits for the socket). on_chunk(first, code, results,
  // asked_at) runs once per chunk, in order, on the calling thread: keys [first, first +
  // results.size()) with their results, or with code RPC_FAIL (results empty) for a chunk
  // that got none; asked_at was taken before that chunk was sent. A chunk the pipeline
  // could not finish (a broken connection, a refusal, a reply from a lower term) is asked
  // again by an ordinary call, with its failover. The keys are copied into their chunks
  // before the first is sent, so on_chunk may move from the caller's keys.
  template <typename Result>
  using ChunkDone = std::function<void(size_t first, ErrorCode code, std::vector<Result>* results,
                                       std::chrono::steady_clock::time_point asked_at)>;
  static constexpr size_t kPipelineWindow = 4;
  static constexpr size_t kPipelineBytes = 64 << 10;
  // BatchGetReplicaList so (a read may run twice: its row says kIdempotent).
  void BatchGetReplicaListPipelined(const std::vector<std::string>& keys, int64_t reader,
                                    size_t chunk,
                                    const ChunkDone<rpc::ReplicaListResult>& on_chunk);
  // BatchPutStart so. A chunk sent and never answered may have run: its ordinary call is a
  // repeat, whose OBJECT_ALREADY_EXISTS is distrusted as after any (see PutStart).
  void BatchPutStartPipelined(int64_t writer, const std::vector<std::string>& keys,
                              const std::vector<int64_t>& sizes,
                              const rpc::ReplicateConfig& config, size_t chunk,
                              const ChunkDone<rpc::PutStartResult>& on_chunk);
  Result<bool> ExistKey(const std::string& key) {
    int32_t found = 0;
    ErrorCode call = Ask<MasterRpc::kExistKey>(&found, key);
    if (call != ErrorCode::OK) return call;
    if (found == 0 || found == 1) return found == 1;
    return FromWire(found);
  }
  // (*out)[i]: 1, 0, or a negative code, as the master sent it.
  ErrorCode BatchExistKey(const std::vector<std::string>& keys, std::vector<int32_t>* out) {
    return AskList<MasterRpc::kBatchExistKey>(keys.size(), out, keys);
  }

  // caller: this daemon's id, which the master leaves out of *stale. tenant: the tenant
  // whose keys RemoveByRegex and RemoveAll walk ("": the default tenant's).
  ErrorCode Remove(const std::string& key, bool force, int64_t caller, StaleCaches* stale) {
    rpc::ChangeResult result;
    ErrorCode call = AskChange<MasterRpc::kRemove>(&result, stale, key, force, caller);
    return CodeOf(call, result.code);
  }
  ErrorCode BatchRemove(const std::vector<std::string>& keys, bool force, int64_t caller,
                        std::vector<ErrorCode>* out, StaleCaches* stale) {
    return AskBatchChange<MasterRpc::kBatchRemove>(keys.size(), out, stale, keys, force,
                                                   caller);
  }
  Result<uint64_t> RemoveByRegex(const std::string& pattern, bool force, int64_t caller,
                                 const std::string& tenant, StaleCaches* stale) {
    rpc::ChangeResult result;
    ErrorCode call = AskChange<MasterRpc::kRemoveByRegex>(&result, stale, pattern, force,
                                                         caller, tenant);
    return CountOf(call, result.code);
  }
  Result<uint64_t> RemoveAll(bool force, int64_t caller, const std::string& tenant,
                             StaleCaches* stale) {
    rpc::ChangeResult result;
    ErrorCode call =
        AskChange<MasterRpc::kRemoveAll>(&result, stale, force, caller, tenant);
    return CountOf(call, result.code);
  }
  // Mooncake's batch_replica_clear (common/master_link/master.thrift): one code per key in *out.
  ErrorCode BatchReplicaClear(const std::vector<std::string>& keys,
                              const std::string& segment_name, int64_t caller,
                              std::vector<ErrorCode>* out, StaleCaches* stale) {
    return AskBatchChange<MasterRpc::kBatchReplicaClear>(keys.size(), out, stale, keys,
                                                         segment_name, caller);
  }

  // The SSD tier (docs/ssd.md; the contract is common/master_link/master.thrift's). disk_segment_id:
  // this daemon's LOCAL_DISK segment. FetchOffloads returns out->code (or RPC_FAIL); the
  // others fill one code per key (per object) and leave *out empty on RPC_FAIL.
  ErrorCode FetchOffloads(int64_t daemon_id, int32_t max_tasks, rpc::OffloadTasksResult* out) {
    return AskResult<MasterRpc::kFetchOffloads>(out, daemon_id, max_tasks);
  }
  // codes[i]: what became of keys[i] (the task naming replica_ids[i]).
  ErrorCode ReportOffloads(int64_t daemon_id, int64_t disk_segment_id,
                           const std::vector<std::string>& keys,
                           const std::vector<int64_t>& replica_ids,
                           const std::vector<ErrorCode>& codes, std::vector<ErrorCode>* out) {
    std::vector<int32_t> wire_codes;
    wire_codes.reserve(codes.size());
    for (ErrorCode code : codes) wire_codes.push_back(ToInt(code));
    return AskCodes<MasterRpc::kReportOffloads>(keys.size(), out, daemon_id,
                                                disk_segment_id, keys, replica_ids, wire_codes);
  }
  // The reconciliation round's calls (round: the daemon's token for it). Begin and End
  // return the master's code (or RPC_FAIL); both are safe to repeat (the same round).
  ErrorCode BeginDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id, int64_t round) {
    return AskCode<MasterRpc::kBeginDiskReconciliation>(daemon_id, disk_segment_id, round);
  }
  ErrorCode RegisterDiskReplicas(int64_t daemon_id, int64_t disk_segment_id,
                                 const std::vector<rpc::DiskObject>& objects, int64_t round,
                                 std::vector<ErrorCode>* out) {
    return AskCodes<MasterRpc::kRegisterDiskReplicas>(objects.size(), out, daemon_id,
                                                      disk_segment_id, objects, round);
  }
  ErrorCode EndDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id, int64_t round) {
    return AskCode<MasterRpc::kEndDiskReconciliation>(daemon_id, disk_segment_id, round);
  }
  ErrorCode DropDiskReplicas(int64_t daemon_id, int64_t disk_segment_id,
                             const std::vector<std::string>& keys, std::vector<ErrorCode>* out) {
    return AskCodes<MasterRpc::kDropDiskReplicas>(keys.size(), out, daemon_id,
                                                  disk_segment_id, keys);
  }
  // Verification after a restore or a late return (docs/durability.md): both safe to
  // repeat (a report settled already is answered -704 and changes nothing).
  ErrorCode ListUnverified(int64_t daemon_id, int64_t segment_id, int64_t cursor,
                           int32_t max_replicas, rpc::UnverifiedPage* out) {
    return AskResult<MasterRpc::kListUnverified>(out, daemon_id, segment_id, cursor,
                                                 max_replicas);
  }
  ErrorCode ReportVerified(int64_t daemon_id, int64_t segment_id,
                           const std::vector<rpc::VerifiedReplica>& replicas,
                           std::vector<ErrorCode>* out) {
    return AskCodes<MasterRpc::kReportVerified>(replicas.size(), out, daemon_id, segment_id,
                                                replicas);
  }
  // Replicas a read found unreadable (daemon/cluster/bad_replica_reporter.h): one code per
  // replica. Repeated on a lost connection: a report the master already applied finds the
  // replica gone (-704) and drops nothing more.
  ErrorCode ReportBadReplicas(int64_t daemon_id, const std::vector<rpc::BadReplica>& replicas,
                              std::vector<ErrorCode>* out) {
    return AskCodes<MasterRpc::kReportBadReplicas>(replicas.size(), out, daemon_id,
                                                   replicas);
  }
  // Promotion on hit (docs/ssd.md).
  // Returns out->code (or RPC_FAIL): OK with one memory replica reserved to write into,
  // OBJECT_ALREADY_EXISTS (it has a memory replica, or one is being made), OBJECT_NOT_FOUND,
  // NO_AVAILABLE_HANDLE (no space). disk_replica_id: of a LOCAL_DISK replica in the list
  // the value was read under (the master refuses a value re-written since, -704).
  ErrorCode PromoteStart(int64_t writer, const std::string& key, int64_t disk_replica_id,
                         rpc::PutStartResult* out) {
    return AskResult<MasterRpc::kPromoteStart>(out, writer, key, disk_replica_id);
  }
  // ok: publish the replica PromoteStart reserved; else free it. OBJECT_NOT_FOUND when the
  // object changed meanwhile.
  ErrorCode PromoteEnd(int64_t writer, const std::string& key, bool ok) {
    return AskCode<MasterRpc::kPromoteEnd>(writer, key, ok);
  }

  // Copy and move tasks (docs/master.md, "Copy and move tasks"; the contract is
  // common/master_link/master.thrift's). Each returns out->code (or RPC_FAIL); none is sent twice: a
  // task created twice is two tasks, a report sent twice is answered -704 the second time.
  ErrorCode CreateCopyTask(const std::string& key, const std::vector<std::string>& targets,
                           rpc::TaskResult* out) {
    return AskResult<MasterRpc::kCreateCopyTask>(out, key, targets);
  }
  ErrorCode CreateMoveTask(const std::string& key, const std::string& source,
                           const std::string& target, rpc::TaskResult* out) {
    return AskResult<MasterRpc::kCreateMoveTask>(out, key, source, target);
  }
  ErrorCode QueryTask(int64_t id_high, int64_t id_low, const std::string& tenant,
                      rpc::QueryTaskResult* out) {
    return AskResult<MasterRpc::kQueryTask>(out, id_high, id_low, tenant);
  }
  ErrorCode FetchReplicaTasks(int64_t daemon_id, int32_t max_tasks, rpc::ReplicaTasksResult* out) {
    return AskResult<MasterRpc::kFetchReplicaTasks>(out, daemon_id, max_tasks);
  }
  // (*out)[i]: what the master did with outcomes[i].
  ErrorCode CompleteReplicaTasks(int64_t daemon_id,
                                 const std::vector<rpc::ReplicaTaskOutcome>& outcomes,
                                 std::vector<ErrorCode>* out) {
    return AskCodes<MasterRpc::kCompleteReplicaTasks>(outcomes.size(), out, daemon_id,
                                                      outcomes);
  }

 private:
  // ---- the shapes of reply the wrappers convert, each over Ask ----
  // The code of an RPC that returns one: RPC_FAIL when the call itself failed.
  static ErrorCode CodeOf(ErrorCode call, int64_t wire) {
    return call != ErrorCode::OK ? call : FromWire(wire);
  }
  // A batch RPC's outcome: RPC_FAIL also for a master that miscounts; *out is left empty
  // on failure.
  template <class T>
  static ErrorCode ListOf(ErrorCode call, size_t expected, std::vector<T>* out) {
    if (call == ErrorCode::OK && out->size() != expected) call = ErrorCode::RPC_FAIL;
    if (call != ErrorCode::OK) out->clear();
    return call;
  }
  // Per-key codes as they came on the wire.
  static std::vector<ErrorCode> CodesOf(const std::vector<int32_t>& wire);
  // A count, or the code that came instead of it.
  static Result<uint64_t> CountOf(ErrorCode call, int64_t wire);
  // What a change's reply said about other daemons' read caches, stamped now.
  static void StaleOf(ErrorCode call, std::vector<rpc::CacheHolder>* holders,
                      StaleCaches* stale);

  // An RPC answering a bare code,
  // (The call is made before its reply is read: the order of a function's arguments is
  // unspecified, so never both in one call's arguments.)
  template <MasterRpc R, class... Args>
  ErrorCode AskCode(const Args&... args) {
    int32_t code = 0;
    const ErrorCode call = Ask<R>(&code, args...);
    return CodeOf(call, code);
  }
  // a result that carries its code,
  template <MasterRpc R, class Reply, class... Args>
  ErrorCode AskResult(Reply* out, const Args&... args) {
    const ErrorCode call = Ask<R>(out, args...);
    return CodeOf(call, out->code);
  }
  // one result per item (expected of them),
  template <MasterRpc R, class T, class... Args>
  ErrorCode AskList(size_t expected, std::vector<T>* out, const Args&... args) {
    return ListOf(Ask<R>(out, args...), expected, out);
  }
  // one code per item,
  template <MasterRpc R, class... Args>
  ErrorCode AskCodes(size_t expected, std::vector<ErrorCode>* out, const Args&... args) {
    std::vector<int32_t> wire;
    ErrorCode call = AskList<R>(expected, &wire, args...);
    *out = CodesOf(wire);
    return call;
  }
  // a change naming the read caches it left stale (result's code: the caller's to read),
  template <MasterRpc R, class Change, class... Args>
  ErrorCode AskChange(Change* result, StaleCaches* stale, const Args&... args) {
    ErrorCode call = Ask<R>(result, args...);
    StaleOf(call, &result->holders, stale);
    return call;
  }
  // a batch change: one code per key; a master that miscounts is as good as no answer, but
  // the holders it named are real.
  template <MasterRpc R, class... Args>
  ErrorCode AskBatchChange(size_t expected, std::vector<ErrorCode>* out, StaleCaches* stale,
                           const Args&... args) {
    rpc::BatchChangeResult result;
    ErrorCode call = ListOf(AskChange<R>(&result, stale, args...), expected, &result.codes);
    *out = CodesOf(result.codes);
    return call;
  }

  struct Connection;
  // How one run of an RPC went.
  enum class Attempt {
    kDone,         // the reply is taken
    kNotSent,      // no connection to the leader: it did not run
    kNotLeader,    // the master refused it as NOT_LEADER: it did not run
    kMaybeRan,     // the connection broke after sending, or the reply came from a lower term
  };
  // Call without the counting.
  ErrorCode CallWithFailover(const Rpc& fn, Repeat repeat, bool* repeated);
  // What the pipeline of one batch call runs: send(client, part, first) and
  // receive(client, results) on the pipeline's connection, and call(part, first,
  // was_sent, results), the ordinary call for a chunk the pipeline did not finish.
  template <typename Result>
  struct PipelineCalls {
    std::function<void(rpc::MasterServiceClient&, const std::vector<std::string>&, size_t)> send;
    std::function<void(rpc::MasterServiceClient&, std::vector<Result>*)> receive;
    std::function<ErrorCode(const std::vector<std::string>&, size_t, bool, std::vector<Result>*)>
        call;
  };
  template <typename Result>
  void Pipeline(const std::vector<std::string>& keys, size_t chunk,
                const PipelineCalls<Result>& calls, const ChunkDone<Result>& on_chunk);
  Attempt Try(const Rpc& fn, std::string* error);
  std::unique_ptr<Connection> Checkout(const MasterLeader& leader, std::string* error)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Checkin(std::unique_ptr<Connection> conn) ABSL_LOCKS_EXCLUDED(mu_);
  // Closes a connection that is not to be used again.
  void Discard(std::unique_ptr<Connection> conn) ABSL_LOCKS_EXCLUDED(mu_);
  std::unique_ptr<Connection> Open(const MasterLeader& leader, std::string* error);
  void OnLeaderChange(const MasterLeader& leader) ABSL_LOCKS_EXCLUDED(mu_, handler_mu_);

  const MasterClientOptions options_;
  absl::Mutex mu_;
  absl::CondVar cv_;  // a connection checked in, discarded or dropped
  std::vector<std::unique_ptr<Connection>> idle_ ABSL_GUARDED_BY(mu_);
  size_t open_count_ ABSL_GUARDED_BY(mu_) = 0;  // checked out + idle
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by DropIdle

  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> failed_calls_{0};

  absl::Mutex handler_mu_;
  std::function<void(const MasterLeader&)> leader_handler_ ABSL_GUARDED_BY(handler_mu_);

  // Last: destroyed first, so that its watch thread stops before the rest goes.
  std::unique_ptr<MasterLocator> locator_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_MASTER_CLIENT_H_
