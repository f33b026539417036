// StoreClient's segment calls (Mooncake's mount_segment family; docs/mooncake-api.md,
// "segments"). A segment lent here is the connection's: the daemon drains and unmounts it
// on UnmountSegment, on Close, or when the connection goes (then a reconnect does not
// bring it back: only setup()'s global segment is mounted again after every HELLO).
#include "common/logging.h"
#include "libmc/store_client.h"

namespace mooncake {
namespace client {

ErrorCode StoreClient::MountPoolSegment(void* buffer, uint64_t size, uint64_t* segment_id) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  uint64_t offset = 0;
  if (size == 0 || !c.pool || !c.pool->Contains(buffer, size, &offset)) {
    MC_LOG_WARN("mooncake_store: mount_segment: [%p, +%llu) is not inside the handle's pool: "
                "only memory shared with the daemon can be lent (mooncake_store_alloc, or "
                "allocate_and_mount_segment)",
                buffer, static_cast<unsigned long long>(size));
    return ErrorCode::INVALID_PARAMS;
  }
  uds::MountedSegmentReply mounted;
  // The pool block stays the application's: it must not free it while the segment lives.
  rc = c.conn->Invoke<uds::Op::kMountPoolSegment>(uds::MountPoolSegmentArgs{offset, size},
                                                  &mounted);
  if (rc != ErrorCode::OK) return rc;
  *segment_id = mounted.segment_id;
  return ErrorCode::OK;
}

ErrorCode StoreClient::AllocateSegment(uint64_t size, uint64_t* segment_id, uint64_t* allocated) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  uds::MountedSegmentReply mounted;
  rc = c.conn->Invoke<uds::Op::kAllocateSegment>(uds::MountSegmentArgs{size}, &mounted);
  if (rc != ErrorCode::OK) return rc;
  *segment_id = mounted.segment_id;
  *allocated = mounted.size;
  return ErrorCode::OK;
}

ErrorCode StoreClient::UnmountSegment(uint64_t segment_id, uds::UnmountSegmentsReply* drained) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  return c.conn->Invoke<uds::Op::kUnmountSegment>(uds::UnmountSegmentArgs{segment_id}, drained);
}

ErrorCode StoreClient::UnmountLocalDiskSegment() {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  uds::NoReply none;
  return c.conn->Invoke<uds::Op::kUnmountLocalDiskSegment>(uds::NoArgs(), &none);
}

}  // namespace client
}  // namespace mooncake
