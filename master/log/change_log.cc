#include "master/log/change_log.h"

#include "master/log/oplog.h"
#include "master/log/sync_set.h"

namespace mooncake {

namespace {

// As many as an object may have (MasterService::kMaxReplicaNum).
constexpr size_t kMaxRecordReplicas = 64;

// Records are built in one buffer per thread: the log copies them, and a put should not
// pay an allocation for its record.
std::string& RecordBuffer() {
  thread_local std::string buffer;
  buffer.clear();
  return buffer;
}

}  // namespace

SegmentRecord ChangeLog::ToRecord(const rpc::SegmentInfo& info) {
  SegmentRecord r;
  r.segment_id = info.segment_id;
  r.name = info.name;
  r.base = info.base;
  r.size = info.size;
  r.daemon_id = info.daemon_id;
  r.incarnation = info.incarnation;
  r.lent_by_client = info.lent_by_client;
  r.kind = static_cast<uint8_t>(info.kind);
  for (const rpc::TransportEndpoint& e : info.endpoints) {
    r.endpoints.push_back({e.protocol, e.address, e.descriptor});
  }
  return r;
}

rpc::SegmentInfo ChangeLog::ToInfo(const SegmentRecord& r) {
  rpc::SegmentInfo info;
  info.segment_id = r.segment_id;
  info.name = r.name;
  info.base = r.base;
  info.size = r.size;
  info.daemon_id = r.daemon_id;
  info.incarnation = r.incarnation;
  info.lent_by_client = r.lent_by_client;
  info.kind = static_cast<rpc::ReplicaKind::type>(r.kind);
  for (const EndpointRecord& e : r.endpoints) {
    rpc::TransportEndpoint endpoint;
    endpoint.protocol = e.protocol;
    endpoint.address = e.address;
    endpoint.descriptor = e.descriptor;
    info.endpoints.push_back(std::move(endpoint));
  }
  return info;
}

size_t ChangeLog::Describe(const ReplicaList& replicas, ReplicaRecord* out) const {
  size_t n = 0;
  for (size_t i = 0; i < replicas.size(); ++i) {
    std::shared_ptr<Segment> segment = segments_.Get(replicas[i].segment);
    if (!segment) continue;  // being dropped with its segment, whose unmount is logged
    out[n].segment_id = segment->info().segment_id;
    out[n].offset = replicas[i].offset;
    out[n].kind = static_cast<uint8_t>(replicas[i].kind);
    ++n;
  }
  return n;
}

uint64_t ChangeLog::Publish(std::string_view key, const ObjectMetadata& meta,
                            int64_t soft_pin_until_unix_ms, const std::string& group) {
  if (log_ == nullptr) return 0;
  ReplicaRecord replicas[kMaxRecordReplicas];
  size_t n = Describe(meta.replicas, replicas);
  std::string& record = RecordBuffer();
  AppendPublishRecord(&record, key, meta.size, meta.checksum_or_none(), meta.hard_pin, replicas, n,
                      soft_pin_until_unix_ms, group);
  return log_->Append(record);
}

uint64_t ChangeLog::Remove(std::string_view key) {
  if (log_ == nullptr) return 0;
  std::string& record = RecordBuffer();
  AppendRemoveRecord(&record, key);
  return log_->Append(record);
}

uint64_t ChangeLog::Mount(const rpc::SegmentInfo& segment) {
  if (log_ == nullptr) return 0;
  std::string& record = RecordBuffer();
  AppendMountRecord(&record, ToRecord(segment));
  return log_->Append(record);
}

uint64_t ChangeLog::Unmount(int64_t segment_id) {
  if (log_ == nullptr) return 0;
  std::string& record = RecordBuffer();
  AppendUnmountRecord(&record, segment_id);
  return log_->Append(record);
}

bool ChangeLog::Refusing() const { return log_ != nullptr && !log_->healthy(); }

ErrorCode ChangeLog::Sync() {
  if (log_ == nullptr || !strict_) return ErrorCode::OK;
  const uint64_t seq = OpLog::LastAppendedByThisThread();
  ErrorCode code = log_->Sync(seq);
  SyncSet* sync_set = sync_set_.load(std::memory_order_acquire);
  if (code == ErrorCode::OK && sync_set != nullptr) code = sync_set->Wait(seq);
  return code;
}

void ChangeLog::Flush() {
  if (log_ != nullptr && log_->healthy()) log_->Sync(log_->last());
}

uint64_t ChangeLog::synced() const { return log_ != nullptr ? log_->synced() : 0; }

bool ChangeLog::Figures(int64_t* last, int64_t* synced) const {
  if (log_ == nullptr) return false;
  *last = static_cast<int64_t>(log_->last());
  *synced = static_cast<int64_t>(log_->synced());
  return true;
}

}  // namespace mooncake
