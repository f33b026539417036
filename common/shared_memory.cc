#include "common/base/shared_memory.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/base/logging.h"

namespace mooncake {

namespace {

constexpr uint64_t kHugePage = 2ull << 20;
// Populate faults this much in per call, so that a caller hears of its progress.
constexpr uint64_t kPopulateChunk = 64ull << 20;

// Creates, sizes, seals (when asked) and maps a memfd; false (errno kept) on any failure.
bool MapMemfd(uint64_t size, unsigned flags, const SharedMemoryOptions& options,
              SharedMemory* out) {
  int fd = memfd_create(options.name, MFD_CLOEXEC | flags |
                                          (options.sealed ? MFD_ALLOW_SEALING : 0u));
  if (fd < 0) return false;
  void* p = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(size)) == 0 &&
      (!options.sealed || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0)) {
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (p == MAP_FAILED) {
    int saved = errno;
    close(fd);
    errno = saved;
    return false;
  }
  out->fd = fd;
  out->base = static_cast<char*>(p);
  out->mapped = size;
  return true;
}

}  // namespace

const char* SharedPagesName(SharedPages pages) {
  return pages == SharedPages::kHugeTlb
             ? "huge pages"
             : "ordinary pages (transparent huge pages where shmem_enabled allows)";
}

bool CreateSharedMemory(uint64_t size, const SharedMemoryOptions& options, SharedMemory* out,
                        std::string* error) {
  if (size == 0) {
    *error = "shared memory of 0 bytes";
    return false;
  }
  const uint64_t huge_size = (size + kHugePage - 1) / kHugePage * kHugePage;
  if (options.huge_tlb && huge_size >= size && MapMemfd(huge_size, MFD_HUGETLB, options, out)) {
    out->pages = SharedPages::kHugeTlb;
  } else if (options.ordinary && MapMemfd(size, 0, options, out)) {
    out->pages = SharedPages::kSmallAdvised;
    // Only a hint: with shmem_enabled=never the kernel keeps 4 KiB pages and says OK.
    madvise(out->base, size, MADV_HUGEPAGE);
  } else {
    *error = std::string("memfd of ") + std::to_string(size) + " bytes" +
             (options.ordinary ? "" : " on huge pages") + ": " + std::strerror(errno);
    return false;
  }
  if (!options.populate) return true;
  const uint64_t page = SharedMemoryPageSize(out->fd);
  const uint64_t chunk = (kPopulateChunk + page - 1) / page * page;
  for (uint64_t at = 0; at < out->mapped; at += chunk) {
    const uint64_t n = std::min(chunk, out->mapped - at);
    if (madvise(out->base + at, n, MADV_POPULATE_WRITE) != 0) {
      MC_LOG_WARN("could not pre-fault %llu bytes of %s (%s); pages fault in on first use",
                  static_cast<unsigned long long>(out->mapped - at), options.name,
                  std::strerror(errno));
      break;
    }
    if (options.populated) options.populated(n);
  }
  return true;
}

uint64_t SharedMemoryPageSize(int fd) {
  const uint64_t base_page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  struct stat st;
  // hugetlbfs reports its page size as the block size; tmpfs (an ordinary memfd) the
  // base page.
  if (fstat(fd, &st) != 0 || st.st_blksize <= 0) return base_page;
  uint64_t block = static_cast<uint64_t>(st.st_blksize);
  return block > base_page ? block : base_page;
}

}  // namespace mooncake
