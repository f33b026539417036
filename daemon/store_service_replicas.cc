// GET_REPLICA_DESC and BATCH_GET_REPLICA_DESC: which replicas of an object exist, of which
// kind (memory, or a daemon's SSD tier), on which daemon, as the master lists them.
//
// The master's GetReplicaList (and its batch) is the only RPC that lists replicas, and it
// grants a read lease as it answers (a remove without force meanwhile answers -706, and the
// object counts as used in eviction's order). The lease is asked for with reader 0, so the
// master names this daemon to no writer, and the answer never fills the read cache: the
// cache holds the one replica a read used, not the list, and a lookup here must show every
// replica as the master sees it now. No bytes are read.
#include "daemon/service/store_service.h"

#include "common/base/logging.h"

namespace mooncake {

using namespace store_detail;

namespace {

// The replicas of a listed object as the socket carries them.
std::vector<uds::WireReplica> WireReplicas(const rpc::ReplicaListResult& list) {
  std::vector<uds::WireReplica> out;
  out.reserve(list.replicas.size());
  for (const rpc::ReplicaDescriptor& d : list.replicas) {
    uds::WireReplica r;
    r.kind = static_cast<uint64_t>(d.kind);
    r.status = static_cast<uint64_t>(d.status);
    r.location = d.segment_name;
    // A replica holds the whole value; the object's size stands in for a descriptor that
    // does not say.
    int64_t size = d.size > 0 ? d.size : list.size;
    r.size = size > 0 ? static_cast<uint64_t>(size) : 0;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

ErrorCode StoreService::OnGetReplicaDesc(ClientConnection*, const uds::KeyArgs& in,
                                         uds::ReplicaDescReply* out) {
  if (!ValidKey(in.key)) return ErrorCode::INVALID_PARAMS;
  rpc::ReplicaListResult list;
  ErrorCode code = master_->GetReplicaList(in.key, /*reader=*/0, &list);
  if (code != ErrorCode::OK) return code;
  out->replicas = WireReplicas(list);
  return ErrorCode::OK;
}

ErrorCode StoreService::OnBatchGetReplicaDesc(ClientConnection* s, const uds::BatchExistArgs& in,
                                              uds::BatchReplicaDescReply* out) {
  if (in.keys.size() > uds::kMaxReplicaDescBatch) {
    MC_LOG_WARN("connection %llu: BATCH_GET_REPLICA_DESC refused: %zu keys, more than %zu",
                static_cast<unsigned long long>(s->id()), in.keys.size(),
                uds::kMaxReplicaDescBatch);
    return Refuse(ErrorCode::INVALID_PARAMS, "more than " +
                                                 std::to_string(uds::kMaxReplicaDescBatch) +
                                                 " keys in one request");
  }
  out->entries.assign(in.keys.size(), uds::ReplicaDescEntry{ToInt(ErrorCode::INVALID_PARAMS), {}});
  ValidKeys valid = PickValidKeys(in.keys);
  if (valid.keys.empty()) return ErrorCode::OK;
  std::vector<rpc::ReplicaListResult> lists;
  ErrorCode rc = master_->BatchGetReplicaList(valid.keys, /*reader=*/0, &lists);
  for (size_t j = 0; j < valid.index.size(); ++j) {
    uds::ReplicaDescEntry& entry = out->entries[valid.index[j]];
    if (rc != ErrorCode::OK) {
      entry.code = ToInt(rc);
    } else if (lists[j].code != 0) {
      entry.code = ToInt(FromWire(lists[j].code));
    } else {
      entry.code = 0;
      entry.replicas = WireReplicas(lists[j]);
    }
  }
  return ErrorCode::OK;
}

}  // namespace mooncake
