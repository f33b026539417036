// StoreClient's replica descriptors (Mooncake's get_replica_desc family; docs/mooncake-api.md):
// where each replica of a key lies, as the daemon's master lists it.
#include <algorithm>

#include "common/uds/uds_ops.h"
#include "libmc/store_client.h"

namespace mooncake {
namespace client {

ErrorCode StoreClient::GetReplicaDesc(const std::string& key,
                                      std::vector<uds::WireReplica>* replicas) {
  replicas->clear();
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  uds::ReplicaDescReply reply;
  rc = c.conn->Invoke<uds::Op::kGetReplicaDesc>(uds::KeyArgs{key}, &reply);
  if (rc == ErrorCode::OK) *replicas = std::move(reply.replicas);
  return rc;
}

void StoreClient::BatchGetReplicaDesc(const std::vector<std::string>& keys,
                                      std::vector<ErrorCode>* codes,
                                      std::vector<std::vector<uds::WireReplica>>* replicas) {
  replicas->assign(keys.size(), {});
  Context c;
  ErrorCode rc = Acquire(&c);
  codes->assign(keys.size(), rc);
  if (rc != ErrorCode::OK) return;
  // Frames of at most uds::kMaxReplicaDescBatch keys: the daemon refuses more, since the
  // reply lists every replica of every key.
  for (size_t first = 0; first < keys.size(); first += uds::kMaxReplicaDescBatch) {
    size_t n = std::min(uds::kMaxReplicaDescBatch, keys.size() - first);
    uds::BatchExistArgs args{std::vector<std::string>(keys.begin() + first,
                                                      keys.begin() + first + n)};
    uds::BatchReplicaDescReply reply;
    ErrorCode code = c.conn->Invoke<uds::Op::kBatchGetReplicaDesc>(args, &reply);
    if (code == ErrorCode::OK && reply.entries.size() != n) code = ErrorCode::INTERNAL_ERROR;
    for (size_t i = 0; i < n; ++i) {
      if (code != ErrorCode::OK) {
        (*codes)[first + i] = code;
        continue;
      }
      uds::ReplicaDescEntry& entry = reply.entries[i];
      (*codes)[first + i] = entry.code > 0 ? ErrorCode::INTERNAL_ERROR : FromWire(entry.code);
      if (entry.code == 0) (*replicas)[first + i] = std::move(entry.replicas);
    }
  }
}

}  // namespace client
}  // namespace mooncake
