#include "master/rpc_handler.h"

#include <thrift/protocol/TBinaryProtocol.h>

#include "common/uds/uds_protocol.h"

namespace mooncake {

using Rpc = MasterMetrics::Rpc;

static_assert(kMaxRpcListEntries >= static_cast<int64_t>(uds::kMaxBatch),
              "a daemon forwards a whole batch of the socket protocol in one call");
static_assert(kMaxRpcStringBytes >= MOONCAKE_STORE_MAX_KEY_LEN, "a key must fit");
static_assert(static_cast<int>(RoleMachine::Role::kLeader) == rpc::MasterRole::LEADER &&
                  static_cast<int>(RoleMachine::Role::kStandby) == rpc::MasterRole::STANDBY &&
                  static_cast<int>(RoleMachine::Role::kDeposed) == rpc::MasterRole::DEPOSED,
              "GetRole answers the role as the wire numbers it");

std::shared_ptr<apache::thrift::protocol::TProtocolFactory> MakeRpcProtocolFactory() {
  return std::make_shared<apache::thrift::protocol::TBinaryProtocolFactory>(
      kMaxRpcStringBytes, kMaxRpcListEntries, /*strict_read=*/false, /*strict_write=*/true);
}

namespace {

// Why a change that Sync did not confirm is not acknowledged: the disk did not take it
// (-1503), or we no longer lead (-1600: the sync set could not be published).
ErrorCode Unconfirmed(ErrorCode sync) {
  return sync == ErrorCode::NOT_LEADER ? ErrorCode::NOT_LEADER : ErrorCode::PERSISTENT_FAIL;
}

}  // namespace

int32_t RpcHandler::Acknowledge(ErrorCode code) {
  if (code != ErrorCode::OK) return ToInt(code);
  const ErrorCode sync = service_->Sync();
  return ToInt(sync == ErrorCode::OK ? code : Unconfirmed(sync));
}

template <typename T>
void RpcHandler::AcknowledgeAll(std::vector<T>* results) {
  const ErrorCode sync = service_->Sync();
  if (sync == ErrorCode::OK) return;
  for (T& r : *results) {
    if (r >= 0) r = ToInt(Unconfirmed(sync));
  }
}

void RpcHandler::AuthChallenge(rpc::AuthChallengeResult& out, const std::string&) {
  out.code = ToInt(ErrorCode::INVALID_PARAMS);
}

void RpcHandler::Authenticate(rpc::AuthenticateResult& out, const std::string&) {
  out.code = ToInt(ErrorCode::INVALID_PARAMS);
}

int32_t RpcHandler::RegisterDaemon(int64_t daemon_id, const std::string& name) {
  RpcCall call(metrics_, Rpc::kRegisterDaemon);
  return call.Code(Acknowledge(service_->RegisterDaemon(daemon_id, name)));
}

void RpcHandler::Heartbeat(rpc::HeartbeatResult& out, int64_t daemon_id) {
  RpcCall call(metrics_, Rpc::kHeartbeat);
  out = service_->Heartbeat(daemon_id);
  call.Code(out.code);
}

// Without HA (docs/ha.md) the one master leads, in term 0, for as long as it runs.
void RpcHandler::GetRole(rpc::RoleResult& out) {
  RpcCall call(metrics_, Rpc::kGetRole);
  out.code = ToInt(ErrorCode::OK);
  if (role_ == nullptr) {
    out.role = rpc::MasterRole::LEADER;
    out.term = 0;
    out.applied_seq = static_cast<int64_t>(service_->GetStats().oplog_sequence);
    return;
  }
  out.role = static_cast<rpc::MasterRole::type>(role_->role());
  out.term = role_->term();
  out.leader = role_->leader();
  out.applied_seq = static_cast<int64_t>(role_->applied_seq());
}

int32_t RpcHandler::MountSegment(const rpc::SegmentInfo& segment) {
  RpcCall call(metrics_, Rpc::kMountSegment);
  return call.Code(Acknowledge(service_->MountSegment(segment)));
}

int32_t RpcHandler::UnmountSegment(int64_t daemon_id, int64_t segment_id) {
  RpcCall call(metrics_, Rpc::kUnmountSegment);
  return call.Code(Acknowledge(service_->UnmountSegment(daemon_id, segment_id)));
}

void RpcHandler::GetAllSegments(std::vector<rpc::SegmentInfo>& out) {
  RpcCall call(metrics_, Rpc::kGetAllSegments);
  out = service_->GetAllSegments();
}

void RpcHandler::DrainSegment(rpc::DrainBatchResult& out, int64_t daemon_id, int64_t segment_id,
                              int64_t cursor, int32_t max_moves,
                              const std::vector<std::string>& avoided_segments) {
  RpcCall call(metrics_, Rpc::kDrainSegment);
  out = service_->DrainSegment(daemon_id, segment_id, cursor, max_moves, avoided_segments);
  call.Code(out.code);
}

void RpcHandler::CommitMoves(std::vector<int32_t>& out, int64_t daemon_id, int64_t segment_id,
                             const std::vector<std::string>& keys) {
  RpcCall call(metrics_, Rpc::kCommitMoves);
  out = service_->CommitMoves(daemon_id, segment_id, keys);
  AcknowledgeAll(&out);
  call.Items(out, [](int32_t code) { return code; });
}

void RpcHandler::RevokeMoves(std::vector<int32_t>& out, int64_t daemon_id, int64_t segment_id,
                             const std::vector<std::string>& keys) {
  RpcCall call(metrics_, Rpc::kRevokeMoves);
  out = service_->RevokeMoves(daemon_id, segment_id, keys);
  call.Items(out, [](int32_t code) { return code; });
}

void RpcHandler::PutStart(rpc::PutStartResult& out, int64_t writer, const std::string& key,
                          int64_t size, const rpc::ReplicateConfig& config) {
  RpcCall call(metrics_, Rpc::kPutStart);
  out = service_->PutStart(writer, key, size, config);
  call.Code(out.code);
}

int32_t RpcHandler::PutEnd(int64_t writer, const std::string& key, int64_t checksum) {
  RpcCall call(metrics_, Rpc::kPutEnd);
  return call.Code(Acknowledge(service_->PutEnd(writer, key, checksum)));
}

int32_t RpcHandler::PutRevoke(int64_t writer, const std::string& key) {
  RpcCall call(metrics_, Rpc::kPutRevoke);
  return call.Code(ToInt(service_->PutRevoke(writer, key)));
}

void RpcHandler::BatchPutStart(std::vector<rpc::PutStartResult>& out, int64_t writer,
                               const std::vector<std::string>& keys,
                               const std::vector<int64_t>& sizes,
                               const rpc::ReplicateConfig& config) {
  RpcCall call(metrics_, Rpc::kBatchPutStart);
  service_->BatchPutStart(writer, keys, sizes, config, &out);
  call.Items(out, [](const rpc::PutStartResult& r) { return r.code; });
}

void RpcHandler::BatchPutEnd(std::vector<int32_t>& out, int64_t writer,
                             const std::vector<std::string>& keys,
                             const std::vector<int64_t>& checksums) {
  RpcCall call(metrics_, Rpc::kBatchPutEnd);
  const bool same_lengths = checksums.empty() || checksums.size() == keys.size();
  service_->BatchPutEnd(writer, keys, checksums, &out);
  // One Sync for the batch: every publication above is on disk (or refused) before any is
  // acknowledged. Nothing to confirm when the lists disagreed: nothing was published.
  if (same_lengths) AcknowledgeAll(&out);
  call.Items(out, [](int32_t code) { return code; });
}

void RpcHandler::BatchPutRevoke(std::vector<int32_t>& out, int64_t writer,
                                const std::vector<std::string>& keys) {
  RpcCall call(metrics_, Rpc::kBatchPutRevoke);
  service_->BatchPutRevoke(writer, keys, &out);
  call.Items(out, [](int32_t code) { return code; });
}

void RpcHandler::UpsertStart(rpc::PutStartResult& out, int64_t writer, const std::string& key,
                             int64_t size, const rpc::ReplicateConfig& config) {
  RpcCall call(metrics_, Rpc::kUpsertStart);
  out = service_->UpsertStart(writer, key, size, config);
  call.Code(out.code);
}

void RpcHandler::UpsertEnd(rpc::ChangeResult& out, int64_t writer, const std::string& key,
                           int64_t checksum) {
  RpcCall call(metrics_, Rpc::kUpsertEnd);
  CacheHolderSet holders;
  out.code = call.Code(Acknowledge(service_->UpsertEnd(writer, key, checksum, &holders)));
  out.holders = service_->DescribeHolders(holders, writer, /*with_keys=*/false);
}

int32_t RpcHandler::UpsertRevoke(int64_t writer, const std::string& key) {
  RpcCall call(metrics_, Rpc::kUpsertRevoke);
  return call.Code(ToInt(service_->UpsertRevoke(writer, key)));
}

void RpcHandler::GetReplicaList(rpc::ReplicaListResult& out, const std::string& key,
                                int64_t reader) {
  RpcCall call(metrics_, Rpc::kGetReplicaList);
  out = service_->GetReplicaList(key, reader);
  call.Code(out.code);
}

void RpcHandler::BatchGetReplicaList(std::vector<rpc::ReplicaListResult>& out,
                                     const std::vector<std::string>& keys, int64_t reader) {
  RpcCall call(metrics_, Rpc::kBatchGetReplicaList);
  service_->BatchGetReplicaList(keys, reader, &out);
  call.Items(out, [](const rpc::ReplicaListResult& r) { return r.code; });
}

int32_t RpcHandler::ExistKey(const std::string& key) {
  RpcCall call(metrics_, Rpc::kExistKey);
  return call.Code(service_->ExistKey(key));
}

void RpcHandler::BatchExistKey(std::vector<int32_t>& out, const std::vector<std::string>& keys) {
  RpcCall call(metrics_, Rpc::kBatchExistKey);
  service_->BatchExistKey(keys, &out);
  call.Items(out, [](int32_t code) { return code; });
}

void RpcHandler::Remove(rpc::ChangeResult& out, const std::string& key, bool force,
                        int64_t caller) {
  RpcCall call(metrics_, Rpc::kRemove);
  CacheHolderSet holders;
  out.code = call.Code(Acknowledge(service_->Remove(key, force, &holders)));
  out.holders = service_->DescribeHolders(holders, caller, /*with_keys=*/false);
}

void RpcHandler::BatchRemove(rpc::BatchChangeResult& out, const std::vector<std::string>& keys,
                             bool force, int64_t caller) {
  RpcCall call(metrics_, Rpc::kBatchRemove);
  CacheHolderSet holders;
  out.codes.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    out.codes[i] = ToInt(service_->Remove(keys[i], force, &holders, static_cast<int32_t>(i)));
  }
  AcknowledgeAll(&out.codes);
  call.Items(out.codes, [](int32_t code) { return code; });
  out.holders = service_->DescribeHolders(holders, caller, /*with_keys=*/true);
}

void RpcHandler::BatchReplicaClear(rpc::BatchChangeResult& out,
                                   const std::vector<std::string>& keys,
                                   const std::string& segment_name, int64_t caller) {
  RpcCall call(metrics_, Rpc::kBatchReplicaClear);
  CacheHolderSet holders;
  out.codes = service_->BatchReplicaClear(keys, segment_name, &holders);
  AcknowledgeAll(&out.codes);
  call.Items(out.codes, [](int32_t code) { return code; });
  out.holders = service_->DescribeHolders(holders, caller, /*with_keys=*/true);
}

void RpcHandler::RemoveByRegex(rpc::ChangeResult& out, const std::string& pattern, bool force,
                               int64_t caller, const std::string& tenant) {
  RpcCall call(metrics_, Rpc::kRemoveByRegex);
  CacheHolderSet holders;
  std::vector<int64_t> removed{service_->RemoveByRegex(pattern, force, &holders, tenant)};
  AcknowledgeAll(&removed);
  out.code = call.Code(removed[0]);
  out.holders = service_->DescribeHolders(holders, caller, /*with_keys=*/false);
}

void RpcHandler::RemoveAll(rpc::ChangeResult& out, bool force, int64_t caller,
                           const std::string& tenant) {
  RpcCall call(metrics_, Rpc::kRemoveAll);
  CacheHolderSet holders;
  std::vector<int64_t> removed{service_->RemoveAll(force, &holders, tenant)};
  AcknowledgeAll(&removed);
  out.code = call.Code(removed[0]);
  out.holders = service_->DescribeHolders(holders, caller, /*with_keys=*/false);
}

void RpcHandler::FetchOffloads(rpc::OffloadTasksResult& out, int64_t daemon_id,
                               int32_t max_tasks) {
  RpcCall call(metrics_, Rpc::kFetchOffloads);
  out = service_->FetchOffloads(daemon_id, max_tasks);
  call.Code(out.code);
}

void RpcHandler::ReportOffloads(std::vector<int32_t>& out, int64_t daemon_id,
                                int64_t disk_segment_id, const std::vector<std::string>& keys,
                                const std::vector<int64_t>& replica_ids,
                                const std::vector<int32_t>& codes) {
  RpcCall call(metrics_, Rpc::kReportOffloads);
  out = service_->ReportOffloads(daemon_id, disk_segment_id, keys, replica_ids, codes);
  AcknowledgeAll(&out);
  call.Items(out, [](int32_t code) { return code; });
}

int32_t RpcHandler::BeginDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id,
                                            int64_t round) {
  RpcCall call(metrics_, Rpc::kBeginDiskReconciliation);
  return call.Code(ToInt(service_->BeginDiskReconciliation(daemon_id, disk_segment_id, round)));
}

void RpcHandler::RegisterDiskReplicas(std::vector<int32_t>& out, int64_t daemon_id,
                                      int64_t disk_segment_id,
                                      const std::vector<rpc::DiskObject>& objects,
                                      int64_t round) {
  RpcCall call(metrics_, Rpc::kRegisterDiskReplicas);
  out = service_->RegisterDiskReplicas(daemon_id, disk_segment_id, objects, round);
  AcknowledgeAll(&out);
  call.Items(out, [](int32_t code) { return code; });
}

int32_t RpcHandler::EndDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id,
                                          int64_t round) {
  RpcCall call(metrics_, Rpc::kEndDiskReconciliation);
  return call.Code(
      Acknowledge(service_->EndDiskReconciliation(daemon_id, disk_segment_id, round)));
}

void RpcHandler::DropDiskReplicas(std::vector<int32_t>& out, int64_t daemon_id,
                                  int64_t disk_segment_id, const std::vector<std::string>& keys) {
  RpcCall call(metrics_, Rpc::kDropDiskReplicas);
  out = service_->DropDiskReplicas(daemon_id, disk_segment_id, keys);
  AcknowledgeAll(&out);
  call.Items(out, [](int32_t code) { return code; });
}

void RpcHandler::ListUnverified(rpc::UnverifiedPage& out, int64_t daemon_id,
                                int64_t segment_id, int64_t cursor, int32_t max_replicas) {
  RpcCall call(metrics_, Rpc::kListUnverified);
  out = service_->ListUnverified(daemon_id, segment_id, cursor, max_replicas);
  call.Code(out.code);
}

void RpcHandler::ReportVerified(std::vector<int32_t>& out, int64_t daemon_id, int64_t segment_id,
                                const std::vector<rpc::VerifiedReplica>& replicas) {
  RpcCall call(metrics_, Rpc::kReportVerified);
  out = service_->ReportVerified(daemon_id, segment_id, replicas);
  AcknowledgeAll(&out);
  call.Items(out, [](int32_t code) { return code; });
}

void RpcHandler::ReportBadReplicas(std::vector<int32_t>& out, int64_t daemon_id,
                                   const std::vector<rpc::BadReplica>& replicas) {
  RpcCall call(metrics_, Rpc::kReportBadReplicas);
  out = service_->ReportBadReplicas(daemon_id, replicas);
  AcknowledgeAll(&out);
  call.Items(out, [](int32_t code) { return code; });
}

void RpcHandler::PromoteStart(rpc::PutStartResult& out, int64_t writer, const std::string& key,
                              int64_t disk_replica_id) {
  RpcCall call(metrics_, Rpc::kPromoteStart);
  out = service_->PromoteStart(writer, key, disk_replica_id);
  call.Code(out.code);
}

int32_t RpcHandler::PromoteEnd(int64_t writer, const std::string& key, bool ok) {
  RpcCall call(metrics_, Rpc::kPromoteEnd);
  return call.Code(Acknowledge(service_->PromoteEnd(writer, key, ok)));
}

void RpcHandler::CreateCopyTask(rpc::TaskResult& out, const std::string& key,
                                const std::vector<std::string>& targets) {
  RpcCall call(metrics_, Rpc::kCreateCopyTask);
  out = service_->CreateCopyTask(key, targets);
  call.Code(out.code);
}

void RpcHandler::CreateMoveTask(rpc::TaskResult& out, const std::string& key,
                                const std::string& source, const std::string& target) {
  RpcCall call(metrics_, Rpc::kCreateMoveTask);
  out = service_->CreateMoveTask(key, source, target);
  call.Code(out.code);
}

void RpcHandler::QueryTask(rpc::QueryTaskResult& out, int64_t id_high, int64_t id_low,
                           const std::string& tenant) {
  RpcCall call(metrics_, Rpc::kQueryTask);
  out = service_->QueryTask(id_high, id_low, tenant);
  call.Code(out.code);
}

void RpcHandler::FetchReplicaTasks(rpc::ReplicaTasksResult& out, int64_t daemon_id,
                                   int32_t max_tasks) {
  RpcCall call(metrics_, Rpc::kFetchReplicaTasks);
  out = service_->FetchReplicaTasks(daemon_id, max_tasks);
  call.Code(out.code);
}

void RpcHandler::CompleteReplicaTasks(std::vector<int32_t>& out, int64_t daemon_id,
                                      const std::vector<rpc::ReplicaTaskOutcome>& outcomes) {
  RpcCall call(metrics_, Rpc::kCompleteReplicaTasks);
  out = service_->CompleteReplicaTasks(daemon_id, outcomes);
  AcknowledgeAll(&out);
  call.Items(out, [](int32_t code) { return code; });
}

void RpcHandler::GetStats(rpc::MasterStats& out) {
  RpcCall call(metrics_, Rpc::kGetStats);
  out = CollectMasterStats({service_, snapshotter_, replication_, role_});
}

void RpcHandler::FollowLog(rpc::FollowLogResult& out, const std::string& standby_name,
                           int64_t from_seq, int64_t durable_seq, int64_t prev_crc,
                           int32_t max_bytes) {
  RpcCall call(metrics_, Rpc::kFollowLog);
  if (replication_ == nullptr) {
    out.code = call.Code(ToInt(ErrorCode::UNAVAILABLE_IN_CURRENT_MODE));
    return;
  }
  replication_->server()->FollowLog(out, standby_name, from_seq, durable_seq, prev_crc,
                                    max_bytes);
  call.Code(out.code);
}

void RpcHandler::FetchSnapshot(rpc::FetchSnapshotResult& out, const std::string& standby_name,
                               const std::string& name, const std::string& file,
                               int64_t offset, int32_t max_bytes) {
  RpcCall call(metrics_, Rpc::kFetchSnapshot);
  if (replication_ == nullptr) {
    out.code = call.Code(ToInt(ErrorCode::UNAVAILABLE_IN_CURRENT_MODE));
    return;
  }
  replication_->server()->FetchSnapshot(out, standby_name, name, file, offset, max_bytes);
  call.Code(out.code);
}

namespace {

void Describe(const SnapshotOutcome& taken, rpc::SnapshotResult* out) {
  out->code = ToInt(taken.code);
  out->name = taken.name;
  out->sequence = static_cast<int64_t>(taken.sequence);
  out->pause_us = taken.pause_us;
  out->duration_ms = taken.duration_ms;
  out->bytes = taken.bytes;
  out->objects = taken.objects;
  out->error = taken.error;
  out->running = taken.running;
}

// -1011 when snapshots are off.
bool SnapshotsOff(const Snapshotter* snapshotter, rpc::SnapshotResult* out) {
  if (snapshotter != nullptr) return false;
  out->code = ToInt(ErrorCode::UNAVAILABLE_IN_CURRENT_MODE);
  out->error = "snapshots are off (--enable_snapshot)";
  return true;
}

}  // namespace

void RpcHandler::Snapshot(rpc::SnapshotResult& out) {
  RpcCall call(metrics_, Rpc::kSnapshot);
  if (!SnapshotsOff(snapshotter_, &out)) Describe(snapshotter_->Request(), &out);
  call.Code(out.code);
}

void RpcHandler::LastSnapshot(rpc::SnapshotResult& out) {
  RpcCall call(metrics_, Rpc::kLastSnapshot);
  if (!SnapshotsOff(snapshotter_, &out)) Describe(snapshotter_->Last(), &out);
  call.Code(out.code);
}

}  // namespace mooncake
