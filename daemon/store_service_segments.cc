// Mooncake's segment calls and replica clearing (issue 17; docs/mooncake-api.md,
// "segments"): BATCH_REPLICA_CLEAR, MOUNT_POOL_SEGMENT, ALLOCATE_SEGMENT, UNMOUNT_SEGMENT,
// UNMOUNT_LOCAL_DISK_SEGMENT, and the mapping of daemon memory MOUNT_SEGMENT shares.
//
// Our daemon is what Mooncake calls the "real client": it owns the memory the cluster
// reads and writes. So a segment an application lends is memory the daemon can map for
// as long as any transfer holds it: memory it maps itself (ALLOCATE_SEGMENT, and
// MOUNT_SEGMENT at setup), or a range of the application's pool, which is a memfd sealed
// against shrinking, mapped here a second time (MOUNT_POOL_SEGMENT). Either way the
// segment is the connection's: drained (its objects moved to other segments) and unmounted
// on UNMOUNT_SEGMENT, on close, or when the connection goes.
#include "common/logging.h"
#include "common/units.h"
#include "daemon/store_service.h"

namespace mooncake {

using namespace store_detail;

namespace {

// Larger than any memory a host has; a size past it is a mistake, not a request.
constexpr uint64_t kMaxSegmentBytes = 1ull << 46;

}  // namespace

ErrorCode StoreService::OnBatchReplicaClear(ClientConnection* s,
                                            const uds::BatchReplicaClearArgs& in,
                                            uds::BatchReplicaClearReply* out) {
  out->values.assign(in.keys.size(), ToInt(ErrorCode::INVALID_PARAMS));
  ValidKeys valid = PickValidKeys(in.keys);
  if (valid.keys.empty()) return ErrorCode::OK;
  std::vector<ErrorCode> codes;
  StaleCaches stale;  // its key indices are into valid.keys
  ErrorCode rc = master_->BatchReplicaClear(valid.keys, in.segment_name,
                                            membership_->daemon_id(), &codes, &stale);
  ForgetEverywhere(stale, valid.keys, false);
  for (size_t j = 0; j < valid.index.size(); ++j) {
    out->values[valid.index[j]] = ToInt(rc != ErrorCode::OK ? rc : codes[j]);
  }
  if (rc != ErrorCode::OK) {
    MC_LOG_WARN("connection %llu: BATCH_REPLICA_CLEAR of %zu keys: %s",
                static_cast<unsigned long long>(s->id()), valid.keys.size(), ErrorName(rc));
  }
  return ErrorCode::OK;
}

ErrorCode StoreService::MountDaemonMemory(ClientConnection* s, uint64_t size, const char* op,
                                          int64_t* segment_id) {
  if (size == 0 || size > kMaxSegmentBytes) {
    return Refuse(ErrorCode::INVALID_PARAMS, "segment size " + std::to_string(size) +
                                                 " is not 1 byte to " +
                                                 FormatSize(kMaxSegmentBytes));
  }
  // Every limit before a byte is mapped (daemon/segment_budget.h), the connection's first.
  ErrorCode code = ErrorCode::OK;
  std::string why;
  std::shared_ptr<SegmentMemory> memory;
  if (!s->ReserveSegmentBytes(size, segment_budget_->PerClientCap())) {
    code = ErrorCode::RESOURCE_LIMIT_EXCEEDED;
    why = segment_budget_->PerClientRefusal(size, s->segment_bytes());
  } else if ((memory = segment_budget_->Map(size, &code, &why)) == nullptr) {
    s->ReturnSegmentBytes(size);
  }
  if (memory == nullptr) {
    MC_LOG_WARN("connection %llu (pid %d): %s of %s refused (%s): %s",
                static_cast<unsigned long long>(s->id()), static_cast<int>(s->peer_pid()), op,
                FormatSize(size).c_str(), ErrorName(code), why.c_str());
    return Refuse(code, why);  // the application sees the reason too
  }
  // Marked lent: placement uses it last. Mount frees the memory when refused.
  code = membership_->Mount(std::move(memory), segment_id, /*lent=*/true);
  if (code != ErrorCode::OK) {
    s->ReturnSegmentBytes(size);
    return code;
  }
  s->AddSegment(*segment_id, size);
  return ErrorCode::OK;
}

ErrorCode StoreService::OnAllocateSegment(ClientConnection* s, const uds::MountSegmentArgs& in,
                                          uds::MountedSegmentReply* out) {
  int64_t segment_id = 0;
  ErrorCode code = MountDaemonMemory(s, in.size, "ALLOCATE_SEGMENT", &segment_id);
  if (code != ErrorCode::OK) return code;
  out->segment_id = static_cast<uint64_t>(segment_id);
  out->size = in.size;
  return ErrorCode::OK;
}

ErrorCode StoreService::OnMountPoolSegment(ClientConnection* s,
                                           const uds::MountPoolSegmentArgs& in,
                                           uds::MountedSegmentReply* out) {
  auto refuse = [s](ErrorCode code, const std::string& why) {
    MC_LOG_WARN("connection %llu (pid %d): MOUNT_POOL_SEGMENT refused (%s): %s",
                static_cast<unsigned long long>(s->id()), static_cast<int>(s->peer_pid()),
                ErrorName(code), why.c_str());
    return Refuse(code, why);
  };
  if (in.size == 0 || in.size > kMaxSegmentBytes || s->PoolRange(in.pool_offset, in.size) == nullptr) {
    return refuse(ErrorCode::INVALID_PARAMS, "the range is empty or not inside the pool");
  }
  // The lender keeps reading and writing its pool: whatever the cluster stores in it is
  // open to the lending process. Tenants exist so that no process reads another's.
  if (!tenants_.empty()) {
    return refuse(ErrorCode::PERMISSION_DENIED,
                  "with --tenant_uids, pool memory is not lent (its owner could read other "
                  "tenants' objects in it); ALLOCATE_SEGMENT lends daemon memory instead");
  }
  std::string why;
  std::unique_ptr<SegmentMemory> view = SegmentMemory::MapView(s->pool_fd(), in.pool_offset,
                                                               in.size, &why);
  if (view == nullptr) return refuse(ErrorCode::INTERNAL_ERROR, why);
  int64_t segment_id = 0;
  ErrorCode code = membership_->Mount(std::move(view), &segment_id, /*lent=*/true);
  if (code != ErrorCode::OK) return code;
  s->AddSegment(segment_id);  // the application's memory: no part of the daemon's budget
  out->segment_id = static_cast<uint64_t>(segment_id);
  out->size = in.size;
  return ErrorCode::OK;
}

ErrorCode StoreService::OnUnmountSegment(ClientConnection* s, const uds::UnmountSegmentArgs& in,
                                         uds::UnmountSegmentsReply* out) {
  const int64_t segment_id = static_cast<int64_t>(in.segment_id);
  if (!s->TakeSegment(segment_id)) {
    MC_LOG_WARN("connection %llu: UNMOUNT_SEGMENT of %lld refused: not one of its segments",
                static_cast<unsigned long long>(s->id()), static_cast<long long>(segment_id));
    return Refuse(ErrorCode::SEGMENT_NOT_FOUND,
                  "segment " + std::to_string(segment_id) +
                      " is not one this connection mounted (or it is gone with a lost "
                      "connection)");
  }
  SegmentDrainer::Outcome drained = DrainSegments({segment_id});
  out->moved = drained.moved;
  out->dropped = drained.dropped;
  return ErrorCode::OK;
}

ErrorCode StoreService::OnUnmountLocalDiskSegment(ClientConnection* s, const uds::NoArgs&,
                                                  uds::NoReply*) {
  if (membership_->disk_segment_id() == 0) return ErrorCode::OK;  // nothing to unmount
  MC_LOG_WARN("connection %llu (pid %d): UNMOUNT_LOCAL_DISK_SEGMENT refused: the SSD tier "
              "is the daemon's (--ssd_path), shared by every application on this host",
              static_cast<unsigned long long>(s->id()), static_cast<int>(s->peer_pid()));
  return Refuse(ErrorCode::NOT_SUPPORTED,
                "the SSD tier is the daemon's (--ssd_path), shared by every application on "
                "this host: it is not an application's to unmount");
}

}  // namespace mooncake
