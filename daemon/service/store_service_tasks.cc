// Client names and copy/move tasks (docs/mooncake-api.md, "naming", "tasks"):
// SET_CLIENT_NAME, CREATE_COPY_TASK, CREATE_MOVE_TASK, QUERY_TASK.
//
// A client that names itself (setup's local_hostname, Mooncake's segment name) lends its
// memory under that name: the segments its connection mounts from then on carry it, so
// that preferred_segment, copy and move targets and batch_replica_clear address that
// client's memory and no other's. The daemon's own segment keeps the daemon's name.
//
// Tasks are the master's (master/directory/replica_tasks.h): these handlers only create and query
// them. The daemon holding a task's source replica runs it (daemon/replicas/replica_task_runner.h).
#include "common/base/logging.h"
#include "daemon/service/store_service.h"

namespace mooncake {

using namespace store_detail;

namespace {

// Longer than any "host:port" (a DNS name is at most 253 bytes), as the master's
// kMaxClearSegmentName.
constexpr size_t kMaxClientName = 263;

// Printable ASCII without blanks: a name appears in logs, listings and replica descriptors.
bool ValidClientName(const std::string& name) {
  if (name.empty() || name.size() > kMaxClientName) return false;
  for (unsigned char c : name) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

// The reason a task's creation was refused, for the application.
ErrorCode RefuseTask(ErrorCode code, const char* call) {
  switch (code) {
    case ErrorCode::INVALID_PARAMS:
      return Refuse(code, std::string(call) +
                              ": no target, more than 64, a target that names no segment, a "
                              "move whose source and target are one, or a source holding no "
                              "replica of the key (a segment's name is its daemon's "
                              "\"host:port\", or its client's local_hostname)");
    case ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS:
      return Refuse(code, std::string(call) +
                              ": a target takes no allocation now (its segment is draining, or "
                              "its daemon is silent)");
    case ErrorCode::RESOURCE_LIMIT_EXCEEDED:
      return Refuse(code, std::string(call) +
                              ": the master has --max_total_pending_tasks tasks waiting; try "
                              "again later");
    default:
      return code;
  }
}

}  // namespace

ErrorCode StoreService::OnSetClientName(ClientConnection* s, const uds::ClientNameArgs& in,
                                        uds::NoReply*) {
  if (!ValidClientName(in.name)) {
    return Refuse(ErrorCode::INVALID_PARAMS,
                  "a client name is 1 to " + std::to_string(kMaxClientName) +
                      " printable characters without blanks (\"host:port\")");
  }
  if (in.name == membership_->name()) {
    return Refuse(ErrorCode::SEGMENT_ALREADY_EXISTS,
                  "local_hostname " + in.name + " is this daemon's own name: give the client "
                  "a name of its own (another port)");
  }
  s->set_client_name(in.name);
  MC_LOG_DEBUG("connection %llu (pid %d) names itself %s",
               static_cast<unsigned long long>(s->id()), static_cast<int>(s->peer_pid()),
               in.name.c_str());
  return ErrorCode::OK;
}

bool StoreService::ConfigOf(const ClientConnection* s, const uds::WireConfig& wire,
                            rpc::ReplicateConfig* out) const {
  if (!ToRpcConfig(wire, out)) return false;
  if (out->preferred_segments.empty() || s->lends_segments()) return true;
  const std::string own = s->client_name();
  if (own.empty()) return true;
  for (std::string& name : out->preferred_segments) {
    if (name == own) name = membership_->name();
  }
  return true;
}

ErrorCode StoreService::OnCreateCopyTask(ClientConnection*, const uds::CopyTaskArgs& in,
                                         uds::TaskIdReply* out) {
  if (!ValidKey(in.key)) return ErrorCode::INVALID_PARAMS;
  rpc::TaskResult result;
  ErrorCode code = master_->CreateCopyTask(in.key, in.targets, &result);
  if (code != ErrorCode::OK) return RefuseTask(code, "create_copy_task");
  out->id_high = static_cast<uint64_t>(result.id_high);
  out->id_low = static_cast<uint64_t>(result.id_low);
  return ErrorCode::OK;
}

ErrorCode StoreService::OnCreateMoveTask(ClientConnection*, const uds::MoveTaskArgs& in,
                                         uds::TaskIdReply* out) {
  if (!ValidKey(in.key)) return ErrorCode::INVALID_PARAMS;
  rpc::TaskResult result;
  ErrorCode code = master_->CreateMoveTask(in.key, in.source, in.target, &result);
  if (code != ErrorCode::OK) return RefuseTask(code, "create_move_task");
  out->id_high = static_cast<uint64_t>(result.id_high);
  out->id_low = static_cast<uint64_t>(result.id_low);
  return ErrorCode::OK;
}

ErrorCode StoreService::OnQueryTask(ClientConnection* s, const uds::TaskIdArgs& in,
                                    uds::TaskReply* out) {
  rpc::QueryTaskResult result;
  ErrorCode code = master_->QueryTask(static_cast<int64_t>(in.id_high),
                                      static_cast<int64_t>(in.id_low), s->tenant(), &result);
  if (code == ErrorCode::OBJECT_NOT_FOUND) {
    return Refuse(code, "no such task: unknown, another tenant's, or finished long enough ago "
                        "to be forgotten (the master keeps --max_total_finished_tasks), or the "
                        "master restarted since");
  }
  if (code != ErrorCode::OK) return code;
  out->type = static_cast<uint64_t>(result.task.type);
  out->status = static_cast<uint64_t>(result.task.status);
  out->created_unix_ms = result.task.created_unix_ms;
  out->updated_unix_ms = result.task.updated_unix_ms;
  out->assigned_daemon = static_cast<uint64_t>(result.task.assigned_daemon);
  out->message = result.task.message;
  return ErrorCode::OK;
}

}  // namespace mooncake
