// The batch forms of put, read and exist: the single calls key by key, under one hold of
// the state gate (StateGate::Shared nests: the single calls' own holds cost a thread-local
// counter then, not a lock of the gate's rwlock per key).
#include "master/service/master_service.h"

namespace mooncake {

void MasterService::BatchPutStart(int64_t writer, const std::vector<std::string>& keys,
                                  const std::vector<int64_t>& sizes,
                                  const rpc::ReplicateConfig& config,
                                  std::vector<rpc::PutStartResult>* out) {
  out->resize(keys.size());
  // Lists of different lengths (group ids: none, or one per key).
  if (sizes.size() != keys.size() || !ValidGroupIds(config, keys.size())) {
    for (rpc::PutStartResult& r : *out) r.code = ToInt(ErrorCode::INVALID_PARAMS);
    return;
  }
  StateGate::Shared gate(gate_);
  const bool grouped = !config.group_ids.empty();
  for (size_t i = 0; i < keys.size(); ++i) {
    (*out)[i] = PutStartOne(writer, keys[i], sizes[i], config,
                            grouped ? &config.group_ids[i] : nullptr);
  }
}

void MasterService::BatchPutEnd(int64_t writer, const std::vector<std::string>& keys,
                                const std::vector<int64_t>& checksums,
                                std::vector<int32_t>* out) {
  if (!checksums.empty() && checksums.size() != keys.size()) {  // lists of different lengths
    out->assign(keys.size(), ToInt(ErrorCode::INVALID_PARAMS));
    return;
  }
  out->resize(keys.size());
  StateGate::Shared gate(gate_);
  for (size_t i = 0; i < keys.size(); ++i) {
    int64_t checksum = checksums.empty() ? kNoChecksum : checksums[i];
    (*out)[i] = ToInt(PutEnd(writer, keys[i], checksum));
  }
}

void MasterService::BatchPutRevoke(int64_t writer, const std::vector<std::string>& keys,
                                   std::vector<int32_t>* out) {
  out->resize(keys.size());
  StateGate::Shared gate(gate_);
  for (size_t i = 0; i < keys.size(); ++i) (*out)[i] = ToInt(PutRevoke(writer, keys[i]));
}

void MasterService::BatchGetReplicaList(const std::vector<std::string>& keys, int64_t reader,
                                        std::vector<rpc::ReplicaListResult>* out) {
  out->resize(keys.size());
  StateGate::Shared gate(gate_);
  for (size_t i = 0; i < keys.size(); ++i) (*out)[i] = GetReplicaList(keys[i], reader);
}

void MasterService::BatchExistKey(const std::vector<std::string>& keys,
                                  std::vector<int32_t>* out) {
  out->resize(keys.size());
  StateGate::Shared gate(gate_);
  for (size_t i = 0; i < keys.size(); ++i) (*out)[i] = ExistKey(keys[i]);
}

}  // namespace mooncake
