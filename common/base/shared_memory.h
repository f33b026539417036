// Shared memory that mooncaked and its clients both map: a memfd, so that the same pages
// can be handed to another process (SCM_RIGHTS), to the transfer engine or to RDMA by
// descriptor. The daemon's segments and every client pool are made here.
//
// Page size. Object bytes are copied between a pool and a segment at memcpy speed only on
// huge pages: with 4 KiB pages a 1 MiB copy between two memfds pays the TLB walks of 512
// pages, and a get is then markedly slower (bench/README.md, "store_bench"). So:
//  1. hugetlbfs first (MFD_HUGETLB): pages the operator reserved (vm.nr_hugepages, see
//     docs/operations.md "Huge pages"); the size is rounded up to whole 2 MiB pages, and
//     the reservation is taken at mmap time, so a host without enough of them fails here,
//     not with SIGBUS on first touch;
//  2. else ordinary shared memory advised for transparent huge pages (MADV_HUGEPAGE),
//     which the kernel honours when /sys/kernel/mm/transparent_hugepage/shmem_enabled is
//     advise, within_size or always, and ignores (4 KiB pages) when it is never.
//
// Thread-safe (no state). Errors are values: nullptr / false with a reason.
#ifndef MOONCAKE_COMMON_SHARED_MEMORY_H_
#define MOONCAKE_COMMON_SHARED_MEMORY_H_

#include <cstdint>
#include <functional>
#include <string>

namespace mooncake {

// Which pages back a mapping.
enum class SharedPages {
  kHugeTlb,       // reserved 2 MiB pages (MFD_HUGETLB)
  kSmallAdvised,  // ordinary pages, MADV_HUGEPAGE given: huge if the host allows shmem THP
};

// "huge pages" / "ordinary pages (transparent huge pages where allowed)", for log lines.
const char* SharedPagesName(SharedPages pages);

struct SharedMemoryOptions {
  const char* name = "mooncake";  // the memfd's name (/proc/<pid>/fd shows it)
  bool sealed = false;   // seal the size (F_SEAL_SHRINK | F_SEAL_GROW): a peer that maps
                         // it can then never fault with SIGBUS
  bool populate = false; // fault every page in now (MADV_POPULATE_WRITE): the first write
                         // to a page then costs a memcpy, not a fault plus zeroing
  // With populate: called with the bytes of each chunk once it is faulted in (64 MiB, or
  // whole huge pages), in order, from the creating thread; for a caller that counts what
  // /proc/meminfo does not show yet.
  std::function<void(uint64_t bytes)> populated;
  bool huge_tlb = true;  // try hugetlbfs first
  bool ordinary = true;  // fall back to ordinary pages; false: huge pages or nothing (for a
                         // size the host can back only with its reserved huge pages)
};

// A created memfd and its mapping. The caller owns fd and the mapping (munmap(base,
// mapped); close(fd)).
struct SharedMemory {
  int fd = -1;
  char* base = nullptr;
  uint64_t mapped = 0;  // >= the size asked for (whole huge pages on hugetlbfs)
  SharedPages pages = SharedPages::kSmallAdvised;
};

// Creates and maps (MAP_SHARED, read-write) a memfd of at least size bytes, huge pages
// first as above. false with *error ("memfd of N bytes: <errno text>") when neither kind
// can be had. A failed populate is logged and not fatal (pages then fault in on use).
bool CreateSharedMemory(uint64_t size, const SharedMemoryOptions& options, SharedMemory* out,
                        std::string* error);

// The page size a mapping of fd must be aligned to: the huge page size for a hugetlbfs
// memfd (mmap there needs offsets and lengths in whole huge pages), else the base page.
uint64_t SharedMemoryPageSize(int fd);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_SHARED_MEMORY_H_
