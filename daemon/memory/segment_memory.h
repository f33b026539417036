// Memory this daemon lends to the cluster pool: one memfd, mapped read-write; or a view of
// a range of an application's pool (MOUNT_POOL_SEGMENT), mapped from the pool's memfd.
//
// A memfd (not anonymous memory) so that the same pages can later be handed to the
// transfer engine or registered with RDMA by descriptor. Huge pages are tried first
// (fewer TLB misses on multi-GiB segments); a host without reserved huge pages falls back
// to ordinary shared memory, saying so once in the log.
#ifndef MOONCAKE_DAEMON_SEGMENT_MEMORY_H_
#define MOONCAKE_DAEMON_SEGMENT_MEMORY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace mooncake {

class SegmentMemory {
 public:
  // Maps size bytes and faults them all in. nullptr with *error set when the memory cannot
  // be had (size 0, out of memory, ...). huge_pages_only: reserved huge pages or nothing,
  // for a size only they can back (HostMemory::Admits says when). populated, if set, hears
  // of each chunk faulted in (SharedMemoryOptions::populated).
  static std::unique_ptr<SegmentMemory> Create(
      uint64_t size, std::string* error, bool huge_pages_only = false,
      std::function<void(uint64_t bytes)> populated = nullptr);
  // A mapping of its own of [offset, offset + size) of fd (a pool memfd, or a file lent by
  // MOUNT_FILE_SEGMENT: sealed against shrinking or a device, so no access can fault with
  // SIGBUS), which stays valid however long a transfer holds it, after the owner's own
  // mapping is gone. fd is not kept (fd() is -1). nullptr with *error when it cannot be
  // mapped.
  static std::unique_ptr<SegmentMemory> MapView(int fd, uint64_t offset, uint64_t size,
                                                std::string* error);
  ~SegmentMemory();
  SegmentMemory(const SegmentMemory&) = delete;
  SegmentMemory& operator=(const SegmentMemory&) = delete;

  char* base() const { return base_; }
  uint64_t size() const { return size_; }  // as asked for; the mapping may be larger
  int fd() const { return fd_; }  // -1 for a view
  bool huge_pages() const { return huge_pages_; }

  // True when [offset, offset + length) lies inside the segment (no overflow).
  bool Contains(uint64_t offset, uint64_t length) const {
    return length <= size_ && offset <= size_ - length;
  }

 private:
  SegmentMemory() = default;
  char* base_ = nullptr;
  char* map_ = nullptr;  // the mapping's start: base_, or below it for a view
  uint64_t size_ = 0;
  uint64_t mapped_ = 0;
  int fd_ = -1;
  bool huge_pages_ = false;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_SEGMENT_MEMORY_H_
