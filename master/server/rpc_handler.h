// Thrift front of MasterService: unpacks each RPC, forwards it, and turns batch calls into
// loops over the single forms (one result per key, in order). What every call shares --
// its metrics, the Sync before a change is acknowledged -- follows its row of
// MC_MASTER_RPCS (common/master_link/master_rpcs.h); each override here is only what its call does.
//
// A reply that acknowledges a change (a row's kAfterSync: PutEnd, UpsertEnd, removals,
// mounts, moves, the SSD tier's reports, registrations, drops and promotions) is sent only
// once MasterService::Sync says the change is as durable as the log mode promises; when it
// is not (-1503), the results that said OK say -1503 instead: the change may or may not
// survive a crash, so it is not acknowledged.
//
// A change's reply also names the daemons whose read caches may hold what it changed
// (MasterService::DescribeHolders), whatever its code: the change is made in memory either
// way, and the writer invalidates them before it answers.
#ifndef MOONCAKE_MASTER_RPC_HANDLER_H_
#define MOONCAKE_MASTER_RPC_HANDLER_H_

#include <memory>

#include <thrift/protocol/TProtocol.h>

#include "MasterService.h"
#include "common/master_link/master_rpcs.h"
#include "master/server/master_metrics.h"
#include "master/ha/master_role.h"
#include "master/service/master_service.h"
#include "master/ha/replication.h"
#include "master/snapshot/snapshotter.h"

namespace mooncake {

// What one call may declare. Thrift's binary protocol allocates a string or a list as
// long as the call says before it reads it (a 30-byte call made the master zero-fill
// 1.3 GB), so anything longer is refused before that: strings carry keys (4 KiB at most),
// names and descriptors; lists carry at most a daemon's batch (uds::kMaxBatch entries).
constexpr int32_t kMaxRpcStringBytes = 1 << 16;
constexpr int32_t kMaxRpcListEntries = 1 << 18;

// The protocol the master reads calls with and answers in (master/server/main.cc): binary, with
// the limits above.
std::shared_ptr<apache::thrift::protocol::TProtocolFactory> MakeRpcProtocolFactory();

class RpcHandler : public rpc::MasterServiceIf {
 public:
  // snapshotter: null when snapshots are off (Snapshot then answers -1011). replication:
  // null without HA (FollowLog and FetchSnapshot then answer -1011). role: who this master
  // is (GetRole); null: LEADER of term 0, as a master without HA always is. Which calls
  // reach the handler in which role is the processor's business
  // (master/server/authenticated_processor.h). metrics: where every call is counted and timed
  // (master/server/master_metrics.h); null: nowhere.
  explicit RpcHandler(MasterService* service, Snapshotter* snapshotter = nullptr,
                      Replication* replication = nullptr, const RoleMachine* role = nullptr,
                      MasterMetrics* metrics = nullptr)
      : service_(service),
        snapshotter_(snapshotter),
        replication_(replication),
        role_(role),
        metrics_(metrics) {}

  // Reached only on a connection already admitted (master/server/authenticated_processor.h
  // answers the handshake before): by a handshake, or as a peer on this host of a master
  // without a key, which has no key to prove. Both answer -600 and change nothing.
  void AuthChallenge(rpc::AuthChallengeResult& out, const std::string& client_nonce) override;
  void Authenticate(rpc::AuthenticateResult& out, const std::string& client_proof) override;

  void GetRole(rpc::RoleResult& out) override;
  int32_t RegisterDaemon(int64_t daemon_id, const std::string& name) override;
  void Heartbeat(rpc::HeartbeatResult& out, int64_t daemon_id) override;
  int32_t MountSegment(const rpc::SegmentInfo& segment) override;
  int32_t UnmountSegment(int64_t daemon_id, int64_t segment_id) override;
  void GetAllSegments(std::vector<rpc::SegmentInfo>& out) override;

  void DrainSegment(rpc::DrainBatchResult& out, int64_t daemon_id, int64_t segment_id,
                    int64_t cursor, int32_t max_moves,
                    const std::vector<std::string>& avoided_segments) override;
  void CommitMoves(std::vector<int32_t>& out, int64_t daemon_id, int64_t segment_id,
                   const std::vector<std::string>& keys) override;
  void RevokeMoves(std::vector<int32_t>& out, int64_t daemon_id, int64_t segment_id,
                   const std::vector<std::string>& keys) override;

  void PutStart(rpc::PutStartResult& out, int64_t writer, const std::string& key, int64_t size,
                const rpc::ReplicateConfig& config) override;
  int32_t PutEnd(int64_t writer, const std::string& key, int64_t checksum) override;
  int32_t PutRevoke(int64_t writer, const std::string& key) override;
  void BatchPutStart(std::vector<rpc::PutStartResult>& out, int64_t writer,
                     const std::vector<std::string>& keys, const std::vector<int64_t>& sizes,
                     const rpc::ReplicateConfig& config) override;
  void BatchPutEnd(std::vector<int32_t>& out, int64_t writer,
                   const std::vector<std::string>& keys,
                   const std::vector<int64_t>& checksums) override;
  void BatchPutRevoke(std::vector<int32_t>& out, int64_t writer,
                      const std::vector<std::string>& keys) override;

  void UpsertStart(rpc::PutStartResult& out, int64_t writer, const std::string& key,
                   int64_t size, const rpc::ReplicateConfig& config) override;
  void UpsertEnd(rpc::ChangeResult& out, int64_t writer, const std::string& key,
                 int64_t checksum) override;
  int32_t UpsertRevoke(int64_t writer, const std::string& key) override;

  void GetReplicaList(rpc::ReplicaListResult& out, const std::string& key,
                      int64_t reader) override;
  void BatchGetReplicaList(std::vector<rpc::ReplicaListResult>& out,
                           const std::vector<std::string>& keys, int64_t reader) override;
  int32_t ExistKey(const std::string& key) override;
  void BatchExistKey(std::vector<int32_t>& out, const std::vector<std::string>& keys) override;

  void Remove(rpc::ChangeResult& out, const std::string& key, bool force,
              int64_t caller) override;
  void BatchRemove(rpc::BatchChangeResult& out, const std::vector<std::string>& keys, bool force,
                   int64_t caller) override;
  void RemoveByRegex(rpc::ChangeResult& out, const std::string& pattern, bool force,
                     int64_t caller, const std::string& tenant) override;
  void RemoveAll(rpc::ChangeResult& out, bool force, int64_t caller,
                 const std::string& tenant) override;
  void BatchReplicaClear(rpc::BatchChangeResult& out, const std::vector<std::string>& keys,
                         const std::string& segment_name, int64_t caller) override;

  // The SSD tier (master_service_disk.cc).
  void FetchOffloads(rpc::OffloadTasksResult& out, int64_t daemon_id, int32_t max_tasks) override;
  void ReportOffloads(std::vector<int32_t>& out, int64_t daemon_id, int64_t disk_segment_id,
                      const std::vector<std::string>& keys,
                      const std::vector<int64_t>& replica_ids,
                      const std::vector<int32_t>& codes) override;
  int32_t BeginDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id,
                                  int64_t round) override;
  void RegisterDiskReplicas(std::vector<int32_t>& out, int64_t daemon_id,
                            int64_t disk_segment_id, const std::vector<rpc::DiskObject>& objects,
                            int64_t round) override;
  int32_t EndDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id,
                                int64_t round) override;
  void DropDiskReplicas(std::vector<int32_t>& out, int64_t daemon_id, int64_t disk_segment_id,
                        const std::vector<std::string>& keys) override;
  // Verification after a restore, parked objects (master_service_verify.cc).
  void ListUnverified(rpc::UnverifiedPage& out, int64_t daemon_id, int64_t segment_id,
                      int64_t cursor, int32_t max_replicas) override;
  void ReportVerified(std::vector<int32_t>& out, int64_t daemon_id, int64_t segment_id,
                      const std::vector<rpc::VerifiedReplica>& replicas) override;
  void ReportBadReplicas(std::vector<int32_t>& out, int64_t daemon_id,
                         const std::vector<rpc::BadReplica>& replicas) override;
  void PromoteStart(rpc::PutStartResult& out, int64_t writer, const std::string& key,
                    int64_t disk_replica_id) override;
  int32_t PromoteEnd(int64_t writer, const std::string& key, bool ok) override;

  void GetStats(rpc::MasterStats& out) override;
  void Snapshot(rpc::SnapshotResult& out) override;
  void LastSnapshot(rpc::SnapshotResult& out) override;

  // Copy and move tasks (master_service_tasks.cc).
  void CreateCopyTask(rpc::TaskResult& out, const std::string& key,
                      const std::vector<std::string>& targets) override;
  void CreateMoveTask(rpc::TaskResult& out, const std::string& key, const std::string& source,
                      const std::string& target) override;
  void QueryTask(rpc::QueryTaskResult& out, int64_t id_high, int64_t id_low,
                 const std::string& tenant) override;
  void FetchReplicaTasks(rpc::ReplicaTasksResult& out, int64_t daemon_id,
                         int32_t max_tasks) override;
  void CompleteReplicaTasks(std::vector<int32_t>& out, int64_t daemon_id,
                            const std::vector<rpc::ReplicaTaskOutcome>& outcomes) override;

  // Replication (master/ha/log_server.h).
  void FollowLog(rpc::FollowLogResult& out, const std::string& standby_name, int64_t from_seq,
                 int64_t durable_seq, int64_t prev_crc, int32_t max_bytes) override;
  void FetchSnapshot(rpc::FetchSnapshotResult& out, const std::string& standby_name,
                     const std::string& name, const std::string& file, int64_t offset,
                     int32_t max_bytes) override;

 private:
  // One call as its row of MC_MASTER_RPCS (common/master_link/master_rpcs.h) says: timed
  // and counted in metrics_ (per item, for a batch); for a change acknowledged after Sync, its
  // successes (codes >= 0) confirmed durable before they are answered. body() computes
  // the reply (returns it, or fills out); then() runs after the acknowledgement, within
  // the call's time.
  template <MasterRpc R, typename Reply, typename Body, typename Then>
  void Serve(Reply& out, Body body, Then then);
  template <MasterRpc R, typename Reply, typename Body>
  void Serve(Reply& out, Body body) {
    Serve<R>(out, body, [] {});
  }
  // The same for a call answering a bare code (body returns an ErrorCode or the code).
  template <MasterRpc R, typename Body>
  int32_t Serve(Body body);

  MasterService* const service_;
  Snapshotter* const snapshotter_;
  Replication* const replication_;
  const RoleMachine* const role_;
  MasterMetrics* const metrics_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_RPC_HANDLER_H_
