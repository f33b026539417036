// The daemon's connections to the master: a pool of Thrift clients (framed transport,
// binary protocol, as master/main.cc serves), so that no request waits behind another
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
// is repeated once, and only when repeating it is safe (Repeat::kSafe, per wrapper below;
// docs/ha.md lists why each is or is not).
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
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "MasterService.h"
#include "common/auth/cluster_key.h"
#include "common/base/error_code.h"
#include "common/master_link/master_locator.h"

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

// Whether a call that may already have run at a master (its connection broke after
// sending, or its reply came from a lower term) may be sent again to the leader.
enum class Repeat {
  kSafe,   // running it twice has the effect of running it once (reads, heartbeats, ...)
  kNever,  // a second run could undo or redo something (removals, ...): RPC_FAIL instead
};

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

  // Closes every idle connection: after the master restarted they all point at a dead
  // socket. Connections checked out now are dropped when they come back.
  void DropIdle();

  // Runs after each change of leader (through etcd), on the thread that noticed it: it
  // must not block nor call the master (Membership wakes its heartbeat). Null: none.
  // Clearing it waits for a call of it in progress.
  void SetLeaderChangeHandler(std::function<void(const MasterLeader&)> handler);
  // The leader calls go to now (unknown while etcd names none).
  MasterLeader leader() const { return locator_->Current(); }

  // Why the last failed call on this thread failed, for log lines.
  static std::string LastError();

  // Calls since start, and those of them that failed (RPC_FAIL or NOT_LEADER: the master
  // could not be asked, not an RPC's own refusal), for the daemon's /metrics.
  uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  uint64_t failed_calls() const { return failed_calls_.load(std::memory_order_relaxed); }

  // ---- wrappers ----
  ErrorCode RegisterDaemon(int64_t daemon_id, const std::string& name);
  ErrorCode Heartbeat(int64_t daemon_id, rpc::HeartbeatResult* out);
  ErrorCode MountSegment(const rpc::SegmentInfo& segment);
  ErrorCode UnmountSegment(int64_t daemon_id, int64_t segment_id);
  ErrorCode GetAllSegments(std::vector<rpc::SegmentInfo>* out);
  // Returns out->code (or RPC_FAIL).
  ErrorCode DrainSegment(int64_t daemon_id, int64_t segment_id, int64_t cursor,
                         int32_t max_moves, const std::vector<std::string>& avoided,
                         rpc::DrainBatchResult* out);
  // One code per key, as the batch forms below.
  ErrorCode CommitMoves(int64_t daemon_id, int64_t segment_id,
                        const std::vector<std::string>& keys, std::vector<ErrorCode>* out);
  ErrorCode RevokeMoves(int64_t daemon_id, int64_t segment_id,
                        const std::vector<std::string>& keys, std::vector<ErrorCode>* out);

  // The put's first step; after a repeat (a failover), OBJECT_ALREADY_EXISTS may be the
  // reservation our lost first attempt made, and is answered RPC_FAIL (docs/ha.md): so a
  // put never takes its own orphan for "already cached". The same for UpsertStart and
  // BatchPutStart.
  ErrorCode PutStart(int64_t writer, const std::string& key, int64_t size,
                   const rpc::ReplicateConfig& config, rpc::PutStartResult* out);
  // checksum: the value's CRC-32C (common/base/crc32c.h), or -1 for none.
  ErrorCode PutEnd(int64_t writer, const std::string& key, int64_t checksum = -1);
  ErrorCode PutRevoke(int64_t writer, const std::string& key);
  ErrorCode UpsertStart(int64_t writer, const std::string& key, int64_t size,
                      const rpc::ReplicateConfig& config, rpc::PutStartResult* out);
  ErrorCode UpsertEnd(int64_t writer, const std::string& key, int64_t checksum,
                      StaleCaches* stale);
  ErrorCode UpsertRevoke(int64_t writer, const std::string& key);
  // The batch forms fill one result per key; on RPC_FAIL the vectors are left empty.
  ErrorCode BatchPutStart(int64_t writer, const std::vector<std::string>& keys,
                        const std::vector<int64_t>& sizes, const rpc::ReplicateConfig& config,
                        std::vector<rpc::PutStartResult>* out);
  // checksums: one per key, or empty for none.
  ErrorCode BatchPutEnd(int64_t writer, const std::vector<std::string>& keys,
                      std::vector<ErrorCode>* out, const std::vector<int64_t>& checksums = {});
  ErrorCode BatchPutRevoke(int64_t writer, const std::vector<std::string>& keys,
                         std::vector<ErrorCode>* out);

  // Returns out->code (or RPC_FAIL). reader: this daemon's id when it will cache the
  // answer (the master then names it to whoever changes the key), else 0.
  ErrorCode GetReplicaList(const std::string& key, int64_t reader, rpc::ReplicaListResult* out);
  ErrorCode BatchGetReplicaList(const std::vector<std::string>& keys, int64_t reader,
                              std::vector<rpc::ReplicaListResult>* out);
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
  // BatchGetReplicaList so (a read may run twice: Repeat::kSafe).
  void BatchGetReplicaListPipelined(const std::vector<std::string>& keys, int64_t reader,
                                    size_t chunk,
                                    const ChunkDone<rpc::ReplicaListResult>& on_chunk);
  // BatchPutStart so. A chunk sent and never answered may have run: its ordinary call is a
  // repeat, whose OBJECT_ALREADY_EXISTS is distrusted as after any (see PutStart).
  void BatchPutStartPipelined(int64_t writer, const std::vector<std::string>& keys,
                              const std::vector<int64_t>& sizes,
                              const rpc::ReplicateConfig& config, size_t chunk,
                              const ChunkDone<rpc::PutStartResult>& on_chunk);
  Result<bool> ExistKey(const std::string& key);
  // (*out)[i]: 1, 0, or a negative code, as the master sent it.
  ErrorCode BatchExistKey(const std::vector<std::string>& keys, std::vector<int32_t>* out);

  // caller: this daemon's id, which the master leaves out of *stale. tenant: the tenant
  // whose keys RemoveByRegex and RemoveAll walk ("": the default tenant's).
  ErrorCode Remove(const std::string& key, bool force, int64_t caller, StaleCaches* stale);
  ErrorCode BatchRemove(const std::vector<std::string>& keys, bool force, int64_t caller,
                        std::vector<ErrorCode>* out, StaleCaches* stale);
  Result<uint64_t> RemoveByRegex(const std::string& pattern, bool force, int64_t caller,
                                 const std::string& tenant, StaleCaches* stale);
  Result<uint64_t> RemoveAll(bool force, int64_t caller, const std::string& tenant,
                             StaleCaches* stale);
  // Mooncake's batch_replica_clear (common/master_link/master.thrift): one code per key in *out.
  ErrorCode BatchReplicaClear(const std::vector<std::string>& keys,
                              const std::string& segment_name, int64_t caller,
                              std::vector<ErrorCode>* out, StaleCaches* stale);

  // The SSD tier (docs/ssd.md; the contract is common/master_link/master.thrift's). disk_segment_id:
  // this daemon's LOCAL_DISK segment. FetchOffloads returns out->code (or RPC_FAIL); the
  // others fill one code per key (per object) and leave *out empty on RPC_FAIL.
  ErrorCode FetchOffloads(int64_t daemon_id, int32_t max_tasks, rpc::OffloadTasksResult* out);
  // codes[i]: what became of keys[i] (the task naming replica_ids[i]).
  ErrorCode ReportOffloads(int64_t daemon_id, int64_t disk_segment_id,
                           const std::vector<std::string>& keys,
                           const std::vector<int64_t>& replica_ids,
                           const std::vector<ErrorCode>& codes, std::vector<ErrorCode>* out);
  // The reconciliation round's calls (round: the daemon's token for it). Begin and End
  // return the master's code (or RPC_FAIL); both are safe to repeat (the same round).
  ErrorCode BeginDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id, int64_t round);
  ErrorCode RegisterDiskReplicas(int64_t daemon_id, int64_t disk_segment_id,
                                 const std::vector<rpc::DiskObject>& objects, int64_t round,
                                 std::vector<ErrorCode>* out);
  ErrorCode EndDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id, int64_t round);
  ErrorCode DropDiskReplicas(int64_t daemon_id, int64_t disk_segment_id,
                             const std::vector<std::string>& keys, std::vector<ErrorCode>* out);
  // Verification after a restore or a late return (docs/durability.md): both safe to
  // repeat (a report settled already is answered -704 and changes nothing).
  ErrorCode ListUnverified(int64_t daemon_id, int64_t segment_id, int64_t cursor,
                           int32_t max_replicas, rpc::UnverifiedPage* out);
  ErrorCode ReportVerified(int64_t daemon_id, int64_t segment_id,
                           const std::vector<rpc::VerifiedReplica>& replicas,
                           std::vector<ErrorCode>* out);
  // Replicas a read found unreadable (daemon/cluster/bad_replica_reporter.h): one code per
  // replica. Repeated on a lost connection: a report the master already applied finds the
  // replica gone (-704) and drops nothing more.
  ErrorCode ReportBadReplicas(int64_t daemon_id, const std::vector<rpc::BadReplica>& replicas,
                              std::vector<ErrorCode>* out);
  // Promotion on hit (docs/ssd.md).
  // Returns out->code (or RPC_FAIL): OK with one memory replica reserved to write into,
  // OBJECT_ALREADY_EXISTS (it has a memory replica, or one is being made), OBJECT_NOT_FOUND,
  // NO_AVAILABLE_HANDLE (no space). disk_replica_id: of a LOCAL_DISK replica in the list
  // the value was read under (the master refuses a value re-written since, -704).
  ErrorCode PromoteStart(int64_t writer, const std::string& key, int64_t disk_replica_id,
                         rpc::PutStartResult* out);
  // ok: publish the replica PromoteStart reserved; else free it. OBJECT_NOT_FOUND when the
  // object changed meanwhile.
  ErrorCode PromoteEnd(int64_t writer, const std::string& key, bool ok);

  // Copy and move tasks (docs/master.md, "Copy and move tasks"; the contract is
  // common/master_link/master.thrift's). Each returns out->code (or RPC_FAIL); none is sent twice: a
  // task created twice is two tasks, a report sent twice is answered -704 the second time.
  ErrorCode CreateCopyTask(const std::string& key, const std::vector<std::string>& targets,
                           rpc::TaskResult* out);
  ErrorCode CreateMoveTask(const std::string& key, const std::string& source,
                           const std::string& target, rpc::TaskResult* out);
  ErrorCode QueryTask(int64_t id_high, int64_t id_low, const std::string& tenant,
                      rpc::QueryTaskResult* out);
  ErrorCode FetchReplicaTasks(int64_t daemon_id, int32_t max_tasks, rpc::ReplicaTasksResult* out);
  // (*out)[i]: what the master did with outcomes[i].
  ErrorCode CompleteReplicaTasks(int64_t daemon_id,
                                 const std::vector<rpc::ReplicaTaskOutcome>& outcomes,
                                 std::vector<ErrorCode>* out);

 private:
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
  std::unique_ptr<Connection> Checkout(const MasterLeader& leader, std::string* error);
  void Checkin(std::unique_ptr<Connection> conn);
  // Closes a connection that is not to be used again.
  void Discard(std::unique_ptr<Connection> conn);
  std::unique_ptr<Connection> Open(const MasterLeader& leader, std::string* error);
  void OnLeaderChange(const MasterLeader& leader);

  const MasterClientOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;  // guarded by mu_
  size_t open_count_ = 0;                          // checked out + idle; guarded by mu_
  uint64_t generation_ = 0;                        // bumped by DropIdle; guarded by mu_

  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> failed_calls_{0};

  std::mutex handler_mu_;
  std::function<void(const MasterLeader&)> leader_handler_;  // guarded by handler_mu_

  // Last: destroyed first, so that its watch thread stops before the rest goes.
  std::unique_ptr<MasterLocator> locator_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_MASTER_CLIENT_H_
