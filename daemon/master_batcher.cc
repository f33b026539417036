#include "daemon/cluster/master_batcher.h"

#include "daemon/transfer/daemon_metrics.h"
#include "daemon/base/group_ids.h"

namespace mooncake {

struct MasterBatcher::StartCall {
  int64_t writer;
  const std::string* key;
  int64_t size;
  const rpc::ReplicateConfig* config;
  rpc::PutStartResult* out;
  ErrorCode code = ErrorCode::RPC_FAIL;
};

struct MasterBatcher::EndCall {
  int64_t writer;
  const std::string* key;
  int64_t checksum;
  ErrorCode code = ErrorCode::RPC_FAIL;
};

struct MasterBatcher::ListCall {
  const std::string* key;
  int64_t reader;
  rpc::ReplicaListResult* out;
  ErrorCode code = ErrorCode::RPC_FAIL;
};

MasterBatcher::MasterBatcher(MasterClient* master, size_t max_group, int64_t spin_ns)
    : master_(master), grouped_(max_group > 0) {
  if (!grouped_) return;
  starts_ = std::make_unique<GroupCommit<StartCall>>(
      max_group, [this](const std::vector<StartCall*>& group) { RunStarts(group); },
      [](const StartCall& leader, const StartCall& other) {
        // Each put's group id goes as its own entry of the batch's (daemon/base/group_ids.h).
        return leader.writer == other.writer && SameButGroups(*leader.config, *other.config);
      },
      kLeaders, spin_ns);
  ends_ = std::make_unique<GroupCommit<EndCall>>(
      max_group, [this](const std::vector<EndCall*>& group) { RunEnds(group); },
      [](const EndCall& leader, const EndCall& other) { return leader.writer == other.writer; },
      kLeaders, spin_ns);
  lists_ = std::make_unique<GroupCommit<ListCall>>(
      max_group, [this](const std::vector<ListCall*>& group) { RunLists(group); },
      [](const ListCall& leader, const ListCall& other) { return leader.reader == other.reader; },
      kLeaders, spin_ns);
}

MasterBatcher::~MasterBatcher() = default;

ErrorCode MasterBatcher::PutStart(int64_t writer, const std::string& key, int64_t size,
                                  const rpc::ReplicateConfig& config, rpc::PutStartResult* out) {
  StartCall call{writer, &key, size, &config, out};
  if (grouped_) {
    starts_->Submit(&call);
  } else {
    RunStarts({&call});
  }
  return call.code;
}

ErrorCode MasterBatcher::PutEnd(int64_t writer, const std::string& key, int64_t checksum) {
  EndCall call{writer, &key, checksum};
  if (grouped_) {
    ends_->Submit(&call);
  } else {
    RunEnds({&call});
  }
  return call.code;
}

ErrorCode MasterBatcher::GetReplicaList(const std::string& key, int64_t reader,
                                        rpc::ReplicaListResult* out) {
  ListCall call{&key, reader, out};
  if (grouped_) {
    lists_->Submit(&call);
  } else {
    RunLists({&call});
  }
  return call.code;
}

// A group of one goes as the single form: the same effect, and less to encode and run.

void MasterBatcher::RunStarts(const std::vector<StartCall*>& group) {
  DaemonMetrics::Get().CountGroup(GroupedCall::kPutStart, group.size());
  const StartCall& lead = *group[0];
  if (group.size() == 1) {
    group[0]->code = master_->PutStart(lead.writer, *lead.key, lead.size, *lead.config, lead.out);
    return;
  }
  std::vector<std::string> keys;
  std::vector<int64_t> sizes;
  std::vector<const rpc::ReplicateConfig*> configs;
  keys.reserve(group.size());
  sizes.reserve(group.size());
  configs.reserve(group.size());
  for (const StartCall* c : group) {
    keys.push_back(*c->key);
    sizes.push_back(c->size);
    configs.push_back(c->config);
  }
  std::vector<std::string> group_ids = JoinGroups(configs);
  std::vector<rpc::PutStartResult> started;
  ErrorCode rc;
  if (group_ids.empty()) {
    rc = master_->BatchPutStart(lead.writer, keys, sizes, *lead.config, &started);
  } else {
    rpc::ReplicateConfig config = *lead.config;
    config.group_ids = std::move(group_ids);
    rc = master_->BatchPutStart(lead.writer, keys, sizes, config, &started);
  }
  for (size_t i = 0; i < group.size(); ++i) {
    if (rc != ErrorCode::OK) {
      group[i]->code = rc;
      continue;
    }
    *group[i]->out = std::move(started[i]);
    group[i]->code = FromWire(group[i]->out->code);
  }
}

void MasterBatcher::RunEnds(const std::vector<EndCall*>& group) {
  DaemonMetrics::Get().CountGroup(GroupedCall::kPutEnd, group.size());
  const EndCall& lead = *group[0];
  if (group.size() == 1) {
    group[0]->code = master_->PutEnd(lead.writer, *lead.key, lead.checksum);
    return;
  }
  std::vector<std::string> keys;
  std::vector<int64_t> checksums;  // -1 (none) is the master's kNoChecksum per entry too
  keys.reserve(group.size());
  checksums.reserve(group.size());
  for (const EndCall* c : group) {
    keys.push_back(*c->key);
    checksums.push_back(c->checksum);
  }
  std::vector<ErrorCode> codes;
  ErrorCode rc = master_->BatchPutEnd(lead.writer, keys, &codes, checksums);
  for (size_t i = 0; i < group.size(); ++i) group[i]->code = rc != ErrorCode::OK ? rc : codes[i];
}

void MasterBatcher::RunLists(const std::vector<ListCall*>& group) {
  DaemonMetrics::Get().CountGroup(GroupedCall::kGetReplicaList, group.size());
  const ListCall& lead = *group[0];
  if (group.size() == 1) {
    group[0]->code = master_->GetReplicaList(*lead.key, lead.reader, lead.out);
    return;
  }
  std::vector<std::string> keys;
  keys.reserve(group.size());
  for (const ListCall* c : group) keys.push_back(*c->key);
  std::vector<rpc::ReplicaListResult> lists;
  ErrorCode rc = master_->BatchGetReplicaList(keys, lead.reader, &lists);
  for (size_t i = 0; i < group.size(); ++i) {
    if (rc != ErrorCode::OK) {
      group[i]->code = rc;
      continue;
    }
    *group[i]->out = std::move(lists[i]);
    group[i]->code = FromWire(group[i]->out->code);
  }
}

}  // namespace mooncake
