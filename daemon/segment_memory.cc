#include "daemon/memory/segment_memory.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "common/base/logging.h"
#include "common/base/shared_memory.h"

namespace mooncake {

std::unique_ptr<SegmentMemory> SegmentMemory::Create(
    uint64_t size, std::string* error, bool huge_pages_only,
    std::function<void(uint64_t bytes)> populated) {
  SharedMemoryOptions options;
  options.name = "mooncake-segment";
  options.ordinary = !huge_pages_only;
  // A lent segment is meant to be resident (RDMA registration pins it anyway), and a put
  // should cost a memcpy, not a page fault plus zeroing per page -- measured, first-touch
  // puts ran at a fifth of the speed of later ones (and at a hundredth on huge pages,
  // where a fault zeroes 2 MiB).
  options.populate = true;
  options.populated = std::move(populated);
  SharedMemory shm;
  if (!CreateSharedMemory(size, options, &shm, error)) return nullptr;
  if (shm.pages != SharedPages::kHugeTlb) {
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) {
      MC_LOG_INFO("no free reserved huge pages for a %llu-byte segment; segments use %s",
                  static_cast<unsigned long long>(size), SharedPagesName(shm.pages));
    }
  }
  std::unique_ptr<SegmentMemory> m(new SegmentMemory);
  m->size_ = size;
  m->fd_ = shm.fd;
  m->base_ = m->map_ = shm.base;
  m->mapped_ = shm.mapped;
  m->huge_pages_ = shm.pages == SharedPages::kHugeTlb;
  return m;
}

std::unique_ptr<SegmentMemory> SegmentMemory::MapView(int fd, uint64_t offset, uint64_t size,
                                                      std::string* error) {
  // A pool on huge pages maps only in whole huge pages.
  const uint64_t page = SharedMemoryPageSize(fd);
  const uint64_t start = offset / page * page;
  if (size == 0 || offset + size < offset) {
    *error = "an empty or overflowing range";
    return nullptr;
  }
  const uint64_t end = offset + size;
  const uint64_t length = (end + page - 1) / page * page - start;
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                 static_cast<off_t>(start));
  if (p == MAP_FAILED) {
    *error = std::string("mmap: ") + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<SegmentMemory> m(new SegmentMemory);
  m->map_ = static_cast<char*>(p);
  m->base_ = m->map_ + (offset - start);
  m->size_ = size;
  m->mapped_ = length;
  return m;
}

SegmentMemory::~SegmentMemory() {
  if (map_ != nullptr) munmap(map_, mapped_);
  if (fd_ >= 0) close(fd_);
}

}  // namespace mooncake
