// The calls of the master's Thrift service (MasterService in
// common/master_link/master.thrift), each described once: what the code around the wire
// needs to know of it and the IDL does not say. The IDL stays the source of the wire
// (arguments, results); a row names its method.
//
// From this table come: the master's per-call metrics (master/server/master_metrics.h: the enum,
// the names, which calls count items), the handler's dispatch boilerplate
// (master/server/rpc_handler.cc: timing, the Sync before a change is acknowledged), which calls
// a standby or a connection not yet admitted may make (master/server/authenticated_processor.cc),
// the daemon's generic call and its repeat policy after a failover
// (daemon/master_link/master_client.h, MasterClient::Ask), and the table in
// docs/master.md ("The calls"), which tests/master_rpcs_test.cc checks against this one,
// as it checks that every method of the IDL has a row and every row a method.
//
// Adding an RPC is:
//  1. its method in common/master_link/master.thrift (the wire);
//  2. one row below (MC_MASTER_RPCS, in the group it belongs to);
//  3. its handler in master/server/rpc_handler.{h,cc}: the MasterServiceIf override, whose body
//     is Serve<MasterRpc::kName>(...) around what it does (the build fails without it);
//  4. on the daemon, client.Ask<MasterRpc::kName>(&reply, args...), or a wrapper in
//     daemon/master_link/master_client.h when callers want its reply converted;
//  5. a test (tests/master_rpc_test.cc is where calls meet a real handler), and
//     `build/tests/master_rpcs_test --write` to regenerate the docs table.
//
// Columns of a row X(Method, metric, repeat, ack, access, shape):
//  Method  the IDL's method name.
//  metric  the name in the metrics (master_<metric>_requests_total, ...; Mooncake's
//          spelling where Mooncake has the call), or nullptr: not counted.
//  repeat  may a call that may already have run at a master (its connection broke after
//          sending; its reply came from an older term) be sent again to the leader?
//          kIdempotent: a read, a second run changes nothing; kSafe: a change whose second
//          run has the effect of one; kNever: a second run could undo or redo something,
//          the caller gets RPC_FAIL instead (docs/ha.md says why for each).
//  ack     kAfterSync: a change whose successes are answered only once
//          MasterService::Sync says they are as durable as the log mode promises (else
//          -1503, or -1600 when the master no longer leads); kAtOnce: answered as computed.
//  access  kHandshake: answered by the processor before admission
//          (common/master_link/master_auth.h); kAnyRole: served in every role;
//          kReplication: a standby's call to the leader, served in every role, fenced
//          when served as leader; kLeader: a client call, refused -1600 unless this
//          master leads (docs/ha.md, "Fencing").
//  shape   kBatch: one result per item (metrics count items, partial successes);
//          kSingle: one result.
#ifndef MOONCAKE_COMMON_MASTER_RPCS_H_
#define MOONCAKE_COMMON_MASTER_RPCS_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

// clang-format off
#define MC_MASTER_RPCS(X) \
  /* membership */ \
  X(RegisterDaemon,          "register_daemon",           kSafe,       kAfterSync, kLeader, kSingle) \
  X(Heartbeat,               "ping",                      kSafe,       kAtOnce,    kLeader, kSingle) \
  X(MountSegment,            "mount_segment",             kSafe,       kAfterSync, kLeader, kSingle) \
  X(UnmountSegment,          "unmount_segment",           kSafe,       kAfterSync, kLeader, kSingle) \
  X(GetAllSegments,          "get_all_segments",          kIdempotent, kAtOnce,    kLeader, kSingle) \
  /* drains */ \
  X(DrainSegment,            "drain_segment",             kNever,      kAtOnce,    kLeader, kSingle) \
  X(CommitMoves,             "commit_moves",              kNever,      kAfterSync, kLeader, kBatch) \
  X(RevokeMoves,             "revoke_moves",              kNever,      kAtOnce,    kLeader, kBatch) \
  /* puts */ \
  X(PutStart,                "put_start",                 kSafe,       kAtOnce,    kLeader, kSingle) \
  X(PutEnd,                  "put_end",                   kSafe,       kAfterSync, kLeader, kSingle) \
  X(PutRevoke,               "put_revoke",                kSafe,       kAtOnce,    kLeader, kSingle) \
  X(BatchPutStart,           "batch_put_start",           kSafe,       kAtOnce,    kLeader, kBatch) \
  X(BatchPutEnd,             "batch_put_end",             kSafe,       kAfterSync, kLeader, kBatch) \
  X(BatchPutRevoke,          "batch_put_revoke",          kSafe,       kAtOnce,    kLeader, kBatch) \
  X(UpsertStart,             "upsert_start",              kSafe,       kAtOnce,    kLeader, kSingle) \
  X(UpsertEnd,               "upsert_end",                kSafe,       kAfterSync, kLeader, kSingle) \
  X(UpsertRevoke,            "upsert_revoke",             kSafe,       kAtOnce,    kLeader, kSingle) \
  /* reads */ \
  X(GetReplicaList,          "get_replica_list",          kIdempotent, kAtOnce,    kLeader, kSingle) \
  X(BatchGetReplicaList,     "batch_get_replica_list",    kIdempotent, kAtOnce,    kLeader, kBatch) \
  X(ExistKey,                "exist_key",                 kIdempotent, kAtOnce,    kLeader, kSingle) \
  X(BatchExistKey,           "batch_exist_key",           kIdempotent, kAtOnce,    kLeader, kBatch) \
  /* removals */ \
  X(Remove,                  "remove",                    kNever,      kAfterSync, kLeader, kSingle) \
  X(BatchRemove,             "batch_remove",              kNever,      kAfterSync, kLeader, kBatch) \
  X(RemoveByRegex,           "remove_by_regex",           kNever,      kAfterSync, kLeader, kSingle) \
  X(RemoveAll,               "remove_all",                kNever,      kAfterSync, kLeader, kSingle) \
  /* the SSD tier */ \
  X(FetchOffloads,           "fetch_offloads",            kNever,      kAtOnce,    kLeader, kSingle) \
  X(ReportOffloads,          "report_offloads",           kNever,      kAfterSync, kLeader, kBatch) \
  X(RegisterDiskReplicas,    "register_disk_replicas",    kNever,      kAfterSync, kLeader, kBatch) \
  X(DropDiskReplicas,        "drop_disk_replicas",        kNever,      kAfterSync, kLeader, kBatch) \
  /* verification after a restore */ \
  X(ListUnverified,          "list_unverified",           kIdempotent, kAtOnce,    kLeader, kSingle) \
  X(ReportVerified,          "report_verified",           kSafe,       kAfterSync, kLeader, kBatch) \
  X(BeginDiskReconciliation, "begin_disk_reconciliation", kSafe,       kAtOnce,    kLeader, kSingle) \
  X(EndDiskReconciliation,   "end_disk_reconciliation",   kSafe,       kAfterSync, kLeader, kSingle) \
  X(ReportBadReplicas,       "report_bad_replicas",       kSafe,       kAfterSync, kLeader, kBatch) \
  /* promotion on hit */ \
  X(PromoteStart,            "promote_start",             kNever,      kAtOnce,    kLeader, kSingle) \
  X(PromoteEnd,              "promote_end",               kNever,      kAfterSync, kLeader, kSingle) \
  /* operations, roles, replication */ \
  X(GetStats,                "get_stats",                 kIdempotent, kAtOnce,    kLeader, kSingle) \
  X(Snapshot,                "snapshot",                  kNever,      kAtOnce,    kLeader, kSingle) \
  X(LastSnapshot,            "last_snapshot",             kIdempotent, kAtOnce,    kLeader, kSingle) \
  X(GetRole,                 "get_role",                  kIdempotent, kAtOnce,    kAnyRole, kSingle) \
  X(FollowLog,               "follow_log",                kSafe,       kAtOnce,    kReplication, kSingle) \
  X(FetchSnapshot,           "fetch_snapshot",            kIdempotent, kAtOnce,    kReplication, kSingle) \
  X(BatchReplicaClear,       "batch_replica_clear",       kNever,      kAfterSync, kLeader, kBatch) \
  /* copy and move tasks */ \
  X(CreateCopyTask,          "create_copy_task",          kNever,      kAtOnce,    kLeader, kSingle) \
  X(CreateMoveTask,          "create_move_task",          kNever,      kAtOnce,    kLeader, kSingle) \
  X(QueryTask,               "query_task",                kIdempotent, kAtOnce,    kLeader, kSingle) \
  X(FetchReplicaTasks,       "fetch_tasks",               kNever,      kAtOnce,    kLeader, kSingle) \
  X(CompleteReplicaTasks,    "mark_task_to_complete",     kNever,      kAfterSync, kLeader, kBatch) \
  /* the cluster key's handshake (common/master_link/master_auth.h) */ \
  X(AuthChallenge,           nullptr,                     kNever,      kAtOnce,    kHandshake, kSingle) \
  X(Authenticate,            nullptr,                     kNever,      kAtOnce,    kHandshake, kSingle)
// clang-format on

namespace mooncake {

// The columns' values (see above).
enum class Repeat : uint8_t { kIdempotent, kSafe, kNever };
enum class RpcAck : uint8_t { kAtOnce, kAfterSync };
enum class RpcAccess : uint8_t { kHandshake, kAnyRole, kReplication, kLeader };
enum class RpcShape : uint8_t { kSingle, kBatch };

// One value per row, in table order: MasterRpc::kPutStart, ...
enum class MasterRpc : uint8_t {
#define MC_MASTER_RPC_ENUM(Method, ...) k##Method,
  MC_MASTER_RPCS(MC_MASTER_RPC_ENUM)
#undef MC_MASTER_RPC_ENUM
  kCount
};

struct MasterRpcInfo {
  const char* method;
  const char* metric;  // nullptr: not counted
  Repeat repeat;
  RpcAck ack;
  RpcAccess access;
  RpcShape shape;
};

inline constexpr MasterRpcInfo kMasterRpcs[] = {
#define MC_MASTER_RPC_INFO(Method, metric, repeat, ack, access, shape) \
  {#Method, metric, Repeat::repeat, RpcAck::ack, RpcAccess::access, RpcShape::shape},
    MC_MASTER_RPCS(MC_MASTER_RPC_INFO)
#undef MC_MASTER_RPC_INFO
};
static_assert(sizeof(kMasterRpcs) / sizeof(kMasterRpcs[0]) ==
                  static_cast<size_t>(MasterRpc::kCount),
              "one row per value");

constexpr const MasterRpcInfo& InfoOf(MasterRpc rpc) {
  return kMasterRpcs[static_cast<size_t>(rpc)];
}

// Who may make the call named method (kLeader for a name no row has: the generated
// processor then refuses it as unknown). A scan of the few rows that are not kLeader.
inline RpcAccess AccessOf(std::string_view method) {
  for (const MasterRpcInfo& rpc : kMasterRpcs) {
    if (rpc.access != RpcAccess::kLeader && method == rpc.method) return rpc.access;
  }
  return RpcAccess::kLeader;
}

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_MASTER_RPCS_H_
