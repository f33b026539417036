#include "master/server/rpc_handler.h"

#include <type_traits>

#include <thrift/protocol/TBinaryProtocol.h>

#include "common/uds/uds_protocol.h"

namespace mooncake {

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

// A reply's code: a bare one, or a result's.
template <typename T, typename = void>
struct HasCode : std::is_arithmetic<T> {};
template <typename T>
struct HasCode<T, std::void_t<decltype(std::declval<T&>().code)>> : std::true_type {};

template <typename T>
auto& CodeOf(T& reply) {
  if constexpr (std::is_arithmetic_v<T>) {
    return reply;
  } else {
    return reply.code;
  }
}

// A batch's items: a list of results, or a change's codes.
template <typename T>
std::vector<T>& ItemsOf(std::vector<T>& items) { return items; }
std::vector<int32_t>& ItemsOf(rpc::BatchChangeResult& change) { return change.codes; }

int32_t Wire(ErrorCode code) { return ToInt(code); }
int32_t Wire(int32_t code) { return code; }

}  // namespace

template <MasterRpc R, typename Reply, typename Body, typename Then>
void RpcHandler::Serve(Reply& out, Body body, Then then) {
  static constexpr MasterRpcInfo kRow = InfoOf(R);
  RpcCall call(metrics_, R);
  if constexpr (std::is_void_v<decltype(body())>) {
    body();
  } else {
    out = body();
  }
  // Visits the reply's codes: each item's of a batch, else the one.
  auto for_each_code = [&](auto visit) {
    if constexpr (kRow.shape == RpcShape::kBatch) {
      for (auto& item : ItemsOf(out)) visit(CodeOf(item));
    } else if constexpr (HasCode<Reply>::value) {
      visit(CodeOf(out));
    }
  };
  if constexpr (kRow.ack == RpcAck::kAfterSync) {
    // One Sync for the call: every success above is on disk (or refused) before any is
    // acknowledged; nothing to confirm when nothing succeeded.
    bool succeeded = false;
    for_each_code([&](auto code) { succeeded |= code >= 0; });
    const ErrorCode sync = succeeded ? service_->Sync() : ErrorCode::OK;
    if (sync != ErrorCode::OK) {
      for_each_code([&](auto& code) {
        if (code >= 0) code = ToInt(Unconfirmed(sync));
      });
    }
  }
  if constexpr (kRow.shape == RpcShape::kBatch) {
    call.Items(ItemsOf(out), [](auto& item) { return CodeOf(item); });
  } else if constexpr (HasCode<Reply>::value) {
    call.Code(CodeOf(out));
  }
  then();
}

template <MasterRpc R, typename Body>
int32_t RpcHandler::Serve(Body body) {
  int32_t code = 0;
  Serve<R>(code, [&] { return Wire(body()); });
  return code;
}

// ---- the calls: each body is what the call does; Serve does what its row says ----

void RpcHandler::AuthChallenge(rpc::AuthChallengeResult& out, const std::string&) {
  out.code = ToInt(ErrorCode::INVALID_PARAMS);
}

void RpcHandler::Authenticate(rpc::AuthenticateResult& out, const std::string&) {
  out.code = ToInt(ErrorCode::INVALID_PARAMS);
}

int32_t RpcHandler::RegisterDaemon(int64_t daemon_id, const std::string& name) {
  return Serve<MasterRpc::kRegisterDaemon>(
      [&] { return service_->RegisterDaemon(daemon_id, name); });
}

void RpcHandler::Heartbeat(rpc::HeartbeatResult& out, int64_t daemon_id) {
  Serve<MasterRpc::kHeartbeat>(out, [&] { return service_->Heartbeat(daemon_id); });
}

// Without HA (docs/ha.md) the one master leads, in term 0, for as long as it runs.
void RpcHandler::GetRole(rpc::RoleResult& out) {
  Serve<MasterRpc::kGetRole>(out, [&] {
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
  });
}

int32_t RpcHandler::MountSegment(const rpc::SegmentInfo& segment) {
  return Serve<MasterRpc::kMountSegment>([&] { return service_->MountSegment(segment); });
}

int32_t RpcHandler::UnmountSegment(int64_t daemon_id, int64_t segment_id) {
  return Serve<MasterRpc::kUnmountSegment>(
      [&] { return service_->UnmountSegment(daemon_id, segment_id); });
}

void RpcHandler::GetAllSegments(std::vector<rpc::SegmentInfo>& out) {
  Serve<MasterRpc::kGetAllSegments>(out, [&] { return service_->GetAllSegments(); });
}

void RpcHandler::DrainSegment(rpc::DrainBatchResult& out, int64_t daemon_id, int64_t segment_id,
                              int64_t cursor, int32_t max_moves,
                              const std::vector<std::string>& avoided_segments) {
  Serve<MasterRpc::kDrainSegment>(out, [&] {
    return service_->DrainSegment(daemon_id, segment_id, cursor, max_moves, avoided_segments);
  });
}

void RpcHandler::CommitMoves(std::vector<int32_t>& out, int64_t daemon_id, int64_t segment_id,
                             const std::vector<std::string>& keys) {
  Serve<MasterRpc::kCommitMoves>(
      out, [&] { return service_->CommitMoves(daemon_id, segment_id, keys); });
}

void RpcHandler::RevokeMoves(std::vector<int32_t>& out, int64_t daemon_id, int64_t segment_id,
                             const std::vector<std::string>& keys) {
  Serve<MasterRpc::kRevokeMoves>(
      out, [&] { return service_->RevokeMoves(daemon_id, segment_id, keys); });
}

void RpcHandler::PutStart(rpc::PutStartResult& out, int64_t writer, const std::string& key,
                          int64_t size, const rpc::ReplicateConfig& config) {
  Serve<MasterRpc::kPutStart>(out, [&] { return service_->PutStart(writer, key, size, config); });
}

int32_t RpcHandler::PutEnd(int64_t writer, const std::string& key, int64_t checksum) {
  return Serve<MasterRpc::kPutEnd>([&] { return service_->PutEnd(writer, key, checksum); });
}

int32_t RpcHandler::PutRevoke(int64_t writer, const std::string& key) {
  return Serve<MasterRpc::kPutRevoke>([&] { return service_->PutRevoke(writer, key); });
}

void RpcHandler::BatchPutStart(std::vector<rpc::PutStartResult>& out, int64_t writer,
                               const std::vector<std::string>& keys,
                               const std::vector<int64_t>& sizes,
                               const rpc::ReplicateConfig& config) {
  Serve<MasterRpc::kBatchPutStart>(
      out, [&] { service_->BatchPutStart(writer, keys, sizes, config, &out); });
}

// Lists of different lengths publish nothing: every key answers -600, and nothing waits
// for a Sync.
void RpcHandler::BatchPutEnd(std::vector<int32_t>& out, int64_t writer,
                             const std::vector<std::string>& keys,
                             const std::vector<int64_t>& checksums) {
  Serve<MasterRpc::kBatchPutEnd>(
      out, [&] { service_->BatchPutEnd(writer, keys, checksums, &out); });
}

void RpcHandler::BatchPutRevoke(std::vector<int32_t>& out, int64_t writer,
                                const std::vector<std::string>& keys) {
  Serve<MasterRpc::kBatchPutRevoke>(out, [&] { service_->BatchPutRevoke(writer, keys, &out); });
}

void RpcHandler::UpsertStart(rpc::PutStartResult& out, int64_t writer, const std::string& key,
                             int64_t size, const rpc::ReplicateConfig& config) {
  Serve<MasterRpc::kUpsertStart>(
      out, [&] { return service_->UpsertStart(writer, key, size, config); });
}

// The changes below name, after their acknowledgement, whose read caches may hold what
// they changed, whatever their code.
void RpcHandler::UpsertEnd(rpc::ChangeResult& out, int64_t writer, const std::string& key,
                           int64_t checksum) {
  CacheHolderSet holders;
  Serve<MasterRpc::kUpsertEnd>(
      out, [&] { out.code = ToInt(service_->UpsertEnd(writer, key, checksum, &holders)); },
      [&] { out.holders = service_->DescribeHolders(holders, writer, /*with_keys=*/false); });
}

int32_t RpcHandler::UpsertRevoke(int64_t writer, const std::string& key) {
  return Serve<MasterRpc::kUpsertRevoke>([&] { return service_->UpsertRevoke(writer, key); });
}

void RpcHandler::GetReplicaList(rpc::ReplicaListResult& out, const std::string& key,
                                int64_t reader) {
  Serve<MasterRpc::kGetReplicaList>(out, [&] { return service_->GetReplicaList(key, reader); });
}

void RpcHandler::BatchGetReplicaList(std::vector<rpc::ReplicaListResult>& out,
                                     const std::vector<std::string>& keys, int64_t reader) {
  Serve<MasterRpc::kBatchGetReplicaList>(
      out, [&] { service_->BatchGetReplicaList(keys, reader, &out); });
}

int32_t RpcHandler::ExistKey(const std::string& key) {
  return Serve<MasterRpc::kExistKey>([&] { return service_->ExistKey(key); });
}

void RpcHandler::BatchExistKey(std::vector<int32_t>& out, const std::vector<std::string>& keys) {
  Serve<MasterRpc::kBatchExistKey>(out, [&] { service_->BatchExistKey(keys, &out); });
}

void RpcHandler::Remove(rpc::ChangeResult& out, const std::string& key, bool force,
                        int64_t caller) {
  CacheHolderSet holders;
  Serve<MasterRpc::kRemove>(
      out, [&] { out.code = ToInt(service_->Remove(key, force, &holders)); },
      [&] { out.holders = service_->DescribeHolders(holders, caller, /*with_keys=*/false); });
}

void RpcHandler::BatchRemove(rpc::BatchChangeResult& out, const std::vector<std::string>& keys,
                             bool force, int64_t caller) {
  CacheHolderSet holders;
  Serve<MasterRpc::kBatchRemove>(
      out,
      [&] {
        out.codes.resize(keys.size());
        for (size_t i = 0; i < keys.size(); ++i) {
          out.codes[i] =
              ToInt(service_->Remove(keys[i], force, &holders, static_cast<int32_t>(i)));
        }
      },
      [&] { out.holders = service_->DescribeHolders(holders, caller, /*with_keys=*/true); });
}

void RpcHandler::BatchReplicaClear(rpc::BatchChangeResult& out,
                                   const std::vector<std::string>& keys,
                                   const std::string& segment_name, int64_t caller) {
  CacheHolderSet holders;
  Serve<MasterRpc::kBatchReplicaClear>(
      out, [&] { out.codes = service_->BatchReplicaClear(keys, segment_name, &holders); },
      [&] { out.holders = service_->DescribeHolders(holders, caller, /*with_keys=*/true); });
}

// Their code is the count removed, or a code.
void RpcHandler::RemoveByRegex(rpc::ChangeResult& out, const std::string& pattern, bool force,
                               int64_t caller, const std::string& tenant) {
  CacheHolderSet holders;
  Serve<MasterRpc::kRemoveByRegex>(
      out, [&] { out.code = service_->RemoveByRegex(pattern, force, &holders, tenant); },
      [&] { out.holders = service_->DescribeHolders(holders, caller, /*with_keys=*/false); });
}

void RpcHandler::RemoveAll(rpc::ChangeResult& out, bool force, int64_t caller,
                           const std::string& tenant) {
  CacheHolderSet holders;
  Serve<MasterRpc::kRemoveAll>(
      out, [&] { out.code = service_->RemoveAll(force, &holders, tenant); },
      [&] { out.holders = service_->DescribeHolders(holders, caller, /*with_keys=*/false); });
}

void RpcHandler::FetchOffloads(rpc::OffloadTasksResult& out, int64_t daemon_id,
                               int32_t max_tasks) {
  Serve<MasterRpc::kFetchOffloads>(
      out, [&] { return service_->FetchOffloads(daemon_id, max_tasks); });
}

void RpcHandler::ReportOffloads(std::vector<int32_t>& out, int64_t daemon_id,
                                int64_t disk_segment_id, const std::vector<std::string>& keys,
                                const std::vector<int64_t>& replica_ids,
                                const std::vector<int32_t>& codes) {
  Serve<MasterRpc::kReportOffloads>(out, [&] {
    return service_->ReportOffloads(daemon_id, disk_segment_id, keys, replica_ids, codes);
  });
}

int32_t RpcHandler::BeginDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id,
                                            int64_t round) {
  return Serve<MasterRpc::kBeginDiskReconciliation>(
      [&] { return service_->BeginDiskReconciliation(daemon_id, disk_segment_id, round); });
}

void RpcHandler::RegisterDiskReplicas(std::vector<int32_t>& out, int64_t daemon_id,
                                      int64_t disk_segment_id,
                                      const std::vector<rpc::DiskObject>& objects,
                                      int64_t round) {
  Serve<MasterRpc::kRegisterDiskReplicas>(out, [&] {
    return service_->RegisterDiskReplicas(daemon_id, disk_segment_id, objects, round);
  });
}

int32_t RpcHandler::EndDiskReconciliation(int64_t daemon_id, int64_t disk_segment_id,
                                          int64_t round) {
  return Serve<MasterRpc::kEndDiskReconciliation>(
      [&] { return service_->EndDiskReconciliation(daemon_id, disk_segment_id, round); });
}

void RpcHandler::DropDiskReplicas(std::vector<int32_t>& out, int64_t daemon_id,
                                  int64_t disk_segment_id, const std::vector<std::string>& keys) {
  Serve<MasterRpc::kDropDiskReplicas>(
      out, [&] { return service_->DropDiskReplicas(daemon_id, disk_segment_id, keys); });
}

void RpcHandler::ListUnverified(rpc::UnverifiedPage& out, int64_t daemon_id,
                                int64_t segment_id, int64_t cursor, int32_t max_replicas) {
  Serve<MasterRpc::kListUnverified>(out, [&] {
    return service_->ListUnverified(daemon_id, segment_id, cursor, max_replicas);
  });
}

void RpcHandler::ReportVerified(std::vector<int32_t>& out, int64_t daemon_id, int64_t segment_id,
                                const std::vector<rpc::VerifiedReplica>& replicas) {
  Serve<MasterRpc::kReportVerified>(
      out, [&] { return service_->ReportVerified(daemon_id, segment_id, replicas); });
}

void RpcHandler::ReportBadReplicas(std::vector<int32_t>& out, int64_t daemon_id,
                                   const std::vector<rpc::BadReplica>& replicas) {
  Serve<MasterRpc::kReportBadReplicas>(
      out, [&] { return service_->ReportBadReplicas(daemon_id, replicas); });
}

void RpcHandler::PromoteStart(rpc::PutStartResult& out, int64_t writer, const std::string& key,
                              int64_t disk_replica_id) {
  Serve<MasterRpc::kPromoteStart>(
      out, [&] { return service_->PromoteStart(writer, key, disk_replica_id); });
}

int32_t RpcHandler::PromoteEnd(int64_t writer, const std::string& key, bool ok) {
  return Serve<MasterRpc::kPromoteEnd>([&] { return service_->PromoteEnd(writer, key, ok); });
}

void RpcHandler::CreateCopyTask(rpc::TaskResult& out, const std::string& key,
                                const std::vector<std::string>& targets) {
  Serve<MasterRpc::kCreateCopyTask>(out, [&] { return service_->CreateCopyTask(key, targets); });
}

void RpcHandler::CreateMoveTask(rpc::TaskResult& out, const std::string& key,
                                const std::string& source, const std::string& target) {
  Serve<MasterRpc::kCreateMoveTask>(
      out, [&] { return service_->CreateMoveTask(key, source, target); });
}

void RpcHandler::QueryTask(rpc::QueryTaskResult& out, int64_t id_high, int64_t id_low,
                           const std::string& tenant) {
  Serve<MasterRpc::kQueryTask>(out, [&] { return service_->QueryTask(id_high, id_low, tenant); });
}

void RpcHandler::FetchReplicaTasks(rpc::ReplicaTasksResult& out, int64_t daemon_id,
                                   int32_t max_tasks) {
  Serve<MasterRpc::kFetchReplicaTasks>(
      out, [&] { return service_->FetchReplicaTasks(daemon_id, max_tasks); });
}

void RpcHandler::CompleteReplicaTasks(std::vector<int32_t>& out, int64_t daemon_id,
                                      const std::vector<rpc::ReplicaTaskOutcome>& outcomes) {
  Serve<MasterRpc::kCompleteReplicaTasks>(
      out, [&] { return service_->CompleteReplicaTasks(daemon_id, outcomes); });
}

void RpcHandler::GetStats(rpc::MasterStats& out) {
  Serve<MasterRpc::kGetStats>(
      out, [&] { return CollectMasterStats({service_, snapshotter_, replication_, role_}); });
}

// Without HA (replication_ null) both answer -1011.
void RpcHandler::FollowLog(rpc::FollowLogResult& out, const std::string& standby_name,
                           int64_t from_seq, int64_t durable_seq, int64_t prev_crc,
                           int32_t max_bytes) {
  Serve<MasterRpc::kFollowLog>(out, [&] {
    if (replication_ == nullptr) {
      out.code = ToInt(ErrorCode::UNAVAILABLE_IN_CURRENT_MODE);
      return;
    }
    replication_->server()->FollowLog(out, standby_name, from_seq, durable_seq, prev_crc,
                                      max_bytes);
  });
}

void RpcHandler::FetchSnapshot(rpc::FetchSnapshotResult& out, const std::string& standby_name,
                               const std::string& name, const std::string& file,
                               int64_t offset, int32_t max_bytes) {
  Serve<MasterRpc::kFetchSnapshot>(out, [&] {
    if (replication_ == nullptr) {
      out.code = ToInt(ErrorCode::UNAVAILABLE_IN_CURRENT_MODE);
      return;
    }
    replication_->server()->FetchSnapshot(out, standby_name, name, file, offset, max_bytes);
  });
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
  Serve<MasterRpc::kSnapshot>(out, [&] {
    if (!SnapshotsOff(snapshotter_, &out)) Describe(snapshotter_->Request(), &out);
  });
}

void RpcHandler::LastSnapshot(rpc::SnapshotResult& out) {
  Serve<MasterRpc::kLastSnapshot>(out, [&] {
    if (!SnapshotsOff(snapshotter_, &out)) Describe(snapshotter_->Last(), &out);
  });
}

}  // namespace mooncake
