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
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/base/logging.h"
#include "common/base/units.h"
#include "daemon/service/store_service.h"

namespace mooncake {

using namespace store_detail;

namespace {

// Larger than any memory a host has; a size past it is a mistake, not a request.
constexpr uint64_t kMaxSegmentBytes = 1ull << 46;

// Who lends what s mounts: the client under its name (SET_CLIENT_NAME), else under this
// daemon's.
Membership::Lender LenderOf(const ClientConnection* s) {
  Membership::Lender lender;
  lender.name = s->client_name();
  if (!lender.name.empty()) lender.pid = s->peer_pid() > 0 ? s->peer_pid() : 1;
  return lender;
}

// A mount the master refused, said so: -102 is a name another client holds.
ErrorCode RefuseMount(const ClientConnection* s, ErrorCode code, const char* op) {
  if (code != ErrorCode::SEGMENT_ALREADY_EXISTS) return code;
  std::string name = s->client_name();
  MC_LOG_WARN("connection %llu (pid %d): %s refused: the name %s is another client's",
              static_cast<unsigned long long>(s->id()), static_cast<int>(s->peer_pid()), op,
              name.c_str());
  return Refuse(code, "local_hostname " + name + " already names memory another client lends "
                      "(another process, or memory lent at another daemon), or a daemon: give "
                      "each client a name of its own (a host without a port gets a free one)");
}

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
  // Every limit before a byte is mapped (daemon/memory/segment_budget.h), the connection's first.
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
  code = membership_->Mount(std::move(memory), segment_id, /*lent=*/true, LenderOf(s));
  if (code != ErrorCode::OK) {
    s->ReturnSegmentBytes(size);
    return RefuseMount(s, code, op);
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
  ErrorCode code = membership_->Mount(std::move(view), &segment_id, /*lent=*/true, LenderOf(s));
  if (code != ErrorCode::OK) return RefuseMount(s, code, "MOUNT_POOL_SEGMENT");
  s->AddSegment(segment_id);  // the application's memory: no part of the daemon's budget
  out->segment_id = static_cast<uint64_t>(segment_id);
  out->size = in.size;
  return ErrorCode::OK;
}

ErrorCode StoreService::OnMountFileSegment(ClientConnection* s,
                                           const uds::MountFileSegmentArgs& in,
                                           uds::MountedSegmentReply* out) {
  const int fd = s->TakeFileFd();
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) close(fd);
    }
  } closer{fd};
  auto refuse = [s](ErrorCode code, const std::string& why) {
    MC_LOG_WARN("connection %llu (pid %d): MOUNT_FILE_SEGMENT refused (%s): %s",
                static_cast<unsigned long long>(s->id()), static_cast<int>(s->peer_pid()),
                ErrorName(code), why.c_str());
    return Refuse(code, why);
  };
  if (fd < 0) return refuse(ErrorCode::INVALID_PARAMS, "no file descriptor came with it");
  // As for pool memory: the lender can read and write its file, so whatever the cluster
  // stores there is open to it.
  if (!tenants_.empty()) {
    return refuse(ErrorCode::PERMISSION_DENIED,
                  "with --tenant_uids, a file is not lent (its owner could read other tenants' "
                  "objects in it); allocate_and_mount_segment lends daemon memory instead");
  }
  struct stat st;
  if (fstat(fd, &st) != 0) return refuse(ErrorCode::FILE_OPEN_FAIL, std::strerror(errno));
  // The daemon reads and writes the file's pages for as long as the segment lives: a file
  // truncated under it would kill it (SIGBUS). Devices cannot shrink; a regular file must
  // be sealed against it (a memfd: the seal is added here when the file allows sealing).
  bool fixed = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode);
  if (S_ISREG(st.st_mode)) {
    int seals = fcntl(fd, F_GET_SEALS);
    fixed = (seals >= 0 && (seals & F_SEAL_SHRINK) != 0) ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0;
  }
  if (!fixed) {
    return refuse(ErrorCode::NOT_SUPPORTED,
                  "the file can be truncated while the daemon maps it (a regular file that "
                  "allows no F_SEAL_SHRINK: tmpfs, hugetlbfs or disk), which would crash the "
                  "daemon: lend a memfd (memfd_create with MFD_ALLOW_SEALING; "
                  "/proc/self/fd/N names it), a device (DAX), pool memory "
                  "(alloc_from_mem_pool) or daemon memory (allocate_and_mount_segment)");
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (in.size == 0 || in.size > kMaxSegmentBytes || in.offset % page != 0 ||
      (S_ISREG(st.st_mode) && (in.offset > static_cast<uint64_t>(st.st_size) ||
                               in.size > static_cast<uint64_t>(st.st_size) - in.offset))) {
    return refuse(ErrorCode::INVALID_PARAMS,
                  "the range is empty, runs past the file, or starts off a page boundary");
  }
  std::string why;
  std::unique_ptr<SegmentMemory> view = SegmentMemory::MapView(fd, in.offset, in.size, &why);
  if (view == nullptr) return refuse(ErrorCode::INTERNAL_ERROR, why);
  int64_t segment_id = 0;
  ErrorCode code = membership_->Mount(std::move(view), &segment_id, /*lent=*/true, LenderOf(s));
  if (code != ErrorCode::OK) return RefuseMount(s, code, "MOUNT_FILE_SEGMENT");
  s->AddSegment(segment_id);  // the application's file: no part of the daemon's budget
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
