// Shared memory for segments and pools (common/base/shared_memory.h) and the daemon's and the
// library's use of it (daemon/memory/segment_memory.h, libmc/pool.h), in process:
//  - without hugetlbfs (asked for none, or none reserved): an ordinary memfd of exactly the
//    size, pages of the base size, sealed when asked, pre-faulted when asked;
//  - on hugetlbfs (when the host has free reserved huge pages, or the test runs as root
//    and can reserve 8 for itself; otherwise that part is skipped): the size rounded up to
//    whole huge pages, the huge page size reported, and a view of an unaligned range of a
//    huge-page pool (MOUNT_POOL_SEGMENT) mapped and sharing the pool's bytes;
//  - a view of an ordinary pool at an unaligned offset shares its bytes too;
//  - a client pool is sealed against resizing whichever pages back it, and
//    MOONCAKE_STORE_HUGE_PAGES=0 keeps it off huge pages;
//  - size 0 is an error with a reason.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "common/base/shared_memory.h"
#include "daemon/memory/segment_memory.h"
#include "libmc/pool.h"
#include "tests/cmocka_cpp.h"

namespace {

using mooncake::CreateSharedMemory;
using mooncake::SegmentMemory;
using mooncake::SharedMemory;
using mooncake::SharedMemoryOptions;
using mooncake::SharedMemoryPageSize;
using mooncake::SharedPages;

constexpr uint64_t kHuge = 2ull << 20;

uint64_t MeminfoValue(const char* field) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  uint64_t value = 0;
  std::string rest;
  while (in >> name >> value) {
    std::getline(in, rest);
    if (name == std::string(field) + ":") return value;
  }
  return 0;
}

// Free huge pages nobody has reserved yet.
uint64_t UnreservedHugePages() {
  uint64_t free_pages = MeminfoValue("HugePages_Free");
  uint64_t reserved = MeminfoValue("HugePages_Rsvd");
  return free_pages > reserved ? free_pages - reserved : 0;
}

void Release(const SharedMemory& m) {
  munmap(m.base, m.mapped);
  close(m.fd);
}

bool Sealed(int fd) {
  int seals = fcntl(fd, F_GET_SEALS);
  return seals >= 0 && (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW);
}

void TestOrdinaryPages(void**) {
  SharedMemoryOptions options;
  options.huge_tlb = false;
  options.sealed = true;
  options.populate = true;
  SharedMemory m;
  std::string error;
  const uint64_t size = (3ull << 20) + 100;  // not a whole number of pages
  assert_true(CreateSharedMemory(size, options, &m, &error));
  assert_int_equal(static_cast<int>(m.pages), static_cast<int>(SharedPages::kSmallAdvised));
  assert_int_equal(m.mapped, size);
  struct stat st;
  assert_int_equal(fstat(m.fd, &st), 0);
  assert_int_equal(static_cast<uint64_t>(st.st_size), size);
  assert_int_equal(SharedMemoryPageSize(m.fd), static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  assert_true(Sealed(m.fd));
  assert_int_not_equal(ftruncate(m.fd, 2 * size), 0);  // the seal holds
  // Pre-faulted: every page is resident before anyone writes.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  std::unique_ptr<unsigned char[]> vec(new unsigned char[(size + page - 1) / page]);
  assert_int_equal(mincore(m.base, size, vec.get()), 0);
  for (uint64_t i = 0; i < (size + page - 1) / page; ++i) assert_true(vec[i] & 1);
  m.base[size - 1] = 'z';
  Release(m);

  SharedMemoryOptions unsealed;
  unsealed.huge_tlb = false;
  assert_true(CreateSharedMemory(4096, unsealed, &m, &error));
  assert_false(Sealed(m.fd));
  Release(m);
}

void TestZeroSizeIsAnError(void**) {
  SharedMemory m;
  std::string error;
  assert_false(CreateSharedMemory(0, SharedMemoryOptions(), &m, &error));
  assert_false(error.empty());
  assert_int_equal(m.fd, -1);
}

// A view of [offset, offset + size) of a pool fd sees the pool's bytes, and the pool sees
// the view's writes (one set of pages).
void CheckViewSharesBytes(int fd, char* pool, uint64_t offset, uint64_t size) {
  std::memset(pool + offset, 'p', size);
  std::string error;
  std::unique_ptr<SegmentMemory> view = SegmentMemory::MapView(fd, offset, size, &error);
  assert_non_null(view.get());
  assert_int_equal(view->size(), size);
  assert_int_equal(view->base()[0], 'p');
  assert_int_equal(view->base()[size - 1], 'p');
  view->base()[0] = 'v';
  view->base()[size - 1] = 'w';
  assert_int_equal(pool[offset], 'v');
  assert_int_equal(pool[offset + size - 1], 'w');
}

void TestViewOfOrdinaryPool(void**) {
  SharedMemoryOptions options;
  options.huge_tlb = false;
  options.sealed = true;
  SharedMemory m;
  std::string error;
  assert_true(CreateSharedMemory(8ull << 20, options, &m, &error));
  CheckViewSharesBytes(m.fd, m.base, 12345, 1 << 20);
  Release(m);
}

// Setup and teardown of TestHugePages (a teardown runs even when an assertion failed): as
// root on a host with too few free huge pages, reserves 8 more for the test and gives them
// back afterwards (CI runs as root on a fresh VM with none reserved); elsewhere it leaves
// vm.nr_hugepages alone.
constexpr const char* kNrHugePages = "/proc/sys/vm/nr_hugepages";
uint64_t nr_huge_pages_before = 0;
bool nr_huge_pages_raised = false;

int ReserveHugePages(void**) {
  if (UnreservedHugePages() >= 6 || geteuid() != 0) return 0;
  std::ifstream in(kNrHugePages);
  if (!(in >> nr_huge_pages_before)) return 0;
  std::ofstream(kNrHugePages) << nr_huge_pages_before + 8 << "\n";
  nr_huge_pages_raised = true;
  return 0;
}

int ReleaseHugePages(void**) {
  if (nr_huge_pages_raised) std::ofstream(kNrHugePages) << nr_huge_pages_before << "\n";
  nr_huge_pages_raised = false;
  return 0;
}

void TestHugePages(void**) {
  // 4 pages for the pool below plus 2 for the segment (another test's process may have
  // taken what was reserved meanwhile).
  if (UnreservedHugePages() < 6) {
    skip();  // none to be had here (vm.nr_hugepages); the fallback is tested above
  }
  SharedMemoryOptions options;
  options.sealed = true;
  SharedMemory m;
  std::string error;
  const uint64_t size = 3 * kHuge + 1;
  assert_true(CreateSharedMemory(size, options, &m, &error));
  assert_int_equal(static_cast<int>(m.pages), static_cast<int>(SharedPages::kHugeTlb));
  assert_int_equal(m.mapped, 4 * kHuge);
  assert_int_equal(SharedMemoryPageSize(m.fd), kHuge);
  assert_true(Sealed(m.fd));
  // A range that starts and ends inside huge pages: the view maps whole pages around it.
  CheckViewSharesBytes(m.fd, m.base, kHuge + 4096 + 64, kHuge + 100);
  Release(m);

  std::unique_ptr<SegmentMemory> segment = SegmentMemory::Create(kHuge + 1, &error);
  assert_non_null(segment.get());
  assert_true(segment->huge_pages());
  assert_int_equal(segment->size(), kHuge + 1);
  segment->base()[kHuge] = 'x';  // inside the rounded-up mapping
}

void TestClientPool(void**) {
  std::shared_ptr<mooncake::client::Pool> pool;
  assert_int_equal(static_cast<int>(mooncake::client::Pool::Create(5 << 20, &pool)),
                   static_cast<int>(mooncake::ErrorCode::OK));
  assert_true(Sealed(pool->fd()));
  struct stat st;
  assert_int_equal(fstat(pool->fd(), &st), 0);
  // The size mooncaked is told (pool->size()) is the memfd's, which it checks.
  assert_int_equal(static_cast<uint64_t>(st.st_size), pool->size());
  assert_true(pool->size() >= (5u << 20));
  void* block = pool->Allocate(5 << 20);
  assert_non_null(block);
  std::memset(block, 1, 5 << 20);
  pool->Free(block);
  pool.reset();

  setenv("MOONCAKE_STORE_HUGE_PAGES", "0", 1);
  assert_int_equal(static_cast<int>(mooncake::client::Pool::Create(5 << 20, &pool)),
                   static_cast<int>(mooncake::ErrorCode::OK));
  unsetenv("MOONCAKE_STORE_HUGE_PAGES");
  assert_int_equal(SharedMemoryPageSize(pool->fd()),
                   static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  assert_int_equal(pool->size(), 5u << 20);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(TestOrdinaryPages),
      cmocka_unit_test(TestZeroSizeIsAnError),
      cmocka_unit_test(TestViewOfOrdinaryPool),
      cmocka_unit_test_setup_teardown(TestHugePages, ReserveHugePages, ReleaseHugePages),
      cmocka_unit_test(TestClientPool),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
