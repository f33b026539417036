#include "master/rpc_handler.h"

namespace mooncake {

int32_t RpcHandler::RegisterDaemon(int64_t daemon_id, const std::string& name) {
  return ToInt(service_->RegisterDaemon(daemon_id, name));
}

void RpcHandler::Heartbeat(rpc::HeartbeatResult& out, int64_t daemon_id) {
  out = service_->Heartbeat(daemon_id);
}

int32_t RpcHandler::MountSegment(const rpc::SegmentInfo& segment) {
  return ToInt(service_->MountSegment(segment));
}

int32_t RpcHandler::UnmountSegment(int64_t daemon_id, int64_t segment_id) {
  return ToInt(service_->UnmountSegment(daemon_id, segment_id));
}

void RpcHandler::GetAllSegments(std::vector<rpc::SegmentInfo>& out) {
  out = service_->GetAllSegments();
}

void RpcHandler::PutStart(rpc::PutStartResult& out, int64_t writer, const std::string& key,
                          int64_t size, const rpc::ReplicateConfig& config) {
  out = service_->PutStart(writer, key, size, config);
}

int32_t RpcHandler::PutEnd(int64_t writer, const std::string& key, int64_t checksum) {
  return ToInt(service_->PutEnd(writer, key, checksum));
}

int32_t RpcHandler::PutRevoke(int64_t writer, const std::string& key) {
  return ToInt(service_->PutRevoke(writer, key));
}

void RpcHandler::BatchPutStart(std::vector<rpc::PutStartResult>& out, int64_t writer,
                               const std::vector<std::string>& keys,
                               const std::vector<int64_t>& sizes,
                               const rpc::ReplicateConfig& config) {
  out.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (sizes.size() != keys.size()) {
      out[i].code = ToInt(ErrorCode::INVALID_PARAMS);  // lists of different lengths
    } else {
      out[i] = service_->PutStart(writer, keys[i], sizes[i], config);
    }
  }
}

void RpcHandler::BatchPutEnd(std::vector<int32_t>& out, int64_t writer,
                             const std::vector<std::string>& keys,
                             const std::vector<int64_t>& checksums) {
  if (!checksums.empty() && checksums.size() != keys.size()) {  // lists of different lengths
    out.assign(keys.size(), ToInt(ErrorCode::INVALID_PARAMS));
    return;
  }
  out.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    int64_t checksum = checksums.empty() ? MasterService::kNoChecksum : checksums[i];
    out[i] = ToInt(service_->PutEnd(writer, keys[i], checksum));
  }
}

void RpcHandler::BatchPutRevoke(std::vector<int32_t>& out, int64_t writer,
                                const std::vector<std::string>& keys) {
  out.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) out[i] = ToInt(service_->PutRevoke(writer, keys[i]));
}

void RpcHandler::UpsertStart(rpc::PutStartResult& out, int64_t writer, const std::string& key,
                             int64_t size, const rpc::ReplicateConfig& config) {
  out = service_->UpsertStart(writer, key, size, config);
}

int32_t RpcHandler::UpsertEnd(int64_t writer, const std::string& key, int64_t checksum) {
  return ToInt(service_->UpsertEnd(writer, key, checksum));
}

int32_t RpcHandler::UpsertRevoke(int64_t writer, const std::string& key) {
  return ToInt(service_->UpsertRevoke(writer, key));
}

void RpcHandler::GetReplicaList(rpc::ReplicaListResult& out, const std::string& key) {
  out = service_->GetReplicaList(key);
}

void RpcHandler::BatchGetReplicaList(std::vector<rpc::ReplicaListResult>& out,
                                     const std::vector<std::string>& keys) {
  out.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) out[i] = service_->GetReplicaList(keys[i]);
}

int32_t RpcHandler::ExistKey(const std::string& key) { return service_->ExistKey(key); }

void RpcHandler::BatchExistKey(std::vector<int32_t>& out, const std::vector<std::string>& keys) {
  out.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) out[i] = service_->ExistKey(keys[i]);
}

int32_t RpcHandler::Remove(const std::string& key, bool force) {
  return ToInt(service_->Remove(key, force));
}

void RpcHandler::BatchRemove(std::vector<int32_t>& out, const std::vector<std::string>& keys,
                             bool force) {
  out.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) out[i] = ToInt(service_->Remove(keys[i], force));
}

int64_t RpcHandler::RemoveByRegex(const std::string& pattern, bool force) {
  return service_->RemoveByRegex(pattern, force);
}

int64_t RpcHandler::RemoveAll(bool force) { return service_->RemoveAll(force); }

void RpcHandler::GetStats(rpc::MasterStats& out) { out = service_->GetStats(); }

}  // namespace mooncake
