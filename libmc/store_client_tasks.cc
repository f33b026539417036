// StoreClient's copy and move tasks (Mooncake's create_copy_task, create_move_task and
// query_task; docs/mooncake-api.md, "tasks"): one request each, answered by the master
// through the daemon. The copy itself runs later, on the daemon holding the source.
#include "libmc/last_error.h"
#include "libmc/store_client.h"

namespace mooncake {
namespace client {

ErrorCode StoreClient::CreateCopyTask(const std::string& key,
                                      const std::vector<std::string>& targets,
                                      uds::TaskIdReply* id) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  if (targets.empty()) {
    return Refused(ErrorCode::INVALID_PARAMS,
                   "create_copy_task with no target: name at least one segment");
  }
  return c.conn->Invoke<uds::Op::kCreateCopyTask>(uds::CopyTaskArgs{key, targets}, id);
}

ErrorCode StoreClient::CreateMoveTask(const std::string& key, const std::string& source,
                                      const std::string& target, uds::TaskIdReply* id) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  return c.conn->Invoke<uds::Op::kCreateMoveTask>(uds::MoveTaskArgs{key, source, target}, id);
}

ErrorCode StoreClient::QueryTask(const uds::TaskIdArgs& id, uds::TaskReply* task) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  return c.conn->Invoke<uds::Op::kQueryTask>(id, task);
}

}  // namespace client
}  // namespace mooncake
