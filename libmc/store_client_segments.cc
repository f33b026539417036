// StoreClient's segment calls (Mooncake's mount_segment family; docs/mooncake-api.md,
// "segments"). A segment lent here is the connection's: the daemon drains and unmounts it
// on UnmountSegment, on Close, or when the connection goes (then a reconnect does not
// bring it back: only setup()'s global segment is mounted again after every HELLO).
#include <cstdio>
#include <mutex>

#include "common/base/units.h"
#include "libmc/last_error.h"
#include "libmc/store_client.h"

namespace mooncake {
namespace client {

ErrorCode StoreClient::MountPoolSegment(void* buffer, uint64_t size, uint64_t* segment_id) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  uint64_t offset = 0;
  if (size == 0 || !c.pool || !c.pool->Contains(buffer, size, &offset)) {
    char range[64];
    std::snprintf(range, sizeof(range), "[%p, +%llu)", buffer,
                  static_cast<unsigned long long>(size));
    Explain(ErrorCode::INVALID_PARAMS,
            std::string(range) + " is not inside the handle's pool: only memory shared with "
            "the daemon can be lent (mooncake_store_alloc, or allocate_and_mount_segment)",
            Blame::kArgument);
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
  if (rc != ErrorCode::OK) {
    const std::string* reason = Explained(rc);
    Explain(rc, "mooncaked at " + c.conn->socket_path() + " refused to mount a segment of " +
                    FormatSize(size) + " (" + ErrorName(rc) +
                    "): " + (reason != nullptr ? *reason : ErrorText(ToInt(rc))));
    return rc;
  }
  *segment_id = mounted.segment_id;
  *allocated = mounted.size;
  return ErrorCode::OK;
}

ErrorCode StoreClient::MountFileSegment(int fd, uint64_t offset, uint64_t size,
                                        uint64_t* segment_id) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  // One at a time on a connection: the daemon matches a descriptor with the one request
  // of the kind in flight.
  static std::mutex one_at_a_time;
  std::lock_guard<std::mutex> lock(one_at_a_time);
  Request request(uds::Op::kMountFileSegment, uds::MountFileSegmentArgs{offset, size});
  Reply reply;
  rc = c.conn->Call(request, &reply, nullptr, fd);
  if (rc != ErrorCode::OK) return rc;
  uds::MountedSegmentReply mounted;
  if (!uds::ParseFields(reply.message.args, &mounted)) return ErrorCode::INTERNAL_ERROR;
  *segment_id = mounted.segment_id;
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
