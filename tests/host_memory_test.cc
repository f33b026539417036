// Issue 30, the rule for the memory a segment may take, unit by unit (no master, no daemon
// process):
//  - HostMemory (daemon/memory/host_memory.h): /proc/meminfo text in, the decision and its exact
//    message out: MemAvailable less the reserve (a tenth of MemTotal, at least 512 MiB),
//    or free huge pages (then huge pages only), less what other mounts were promised;
//    the engines' default segments admitted on the issue's host; unreadable meminfo admits
//    nothing;
//  - SegmentBudget (daemon/memory/segment_budget.h): no cap by default; the operator's caps and
//    their messages; a refusal maps nothing; concurrent mounts never both pass against the
//    same free memory, and leave nothing promised once mapped (measured: the test
//    process's own resident shared memory stands for what the kernel shows); bytes given
//    back when the memory is unmapped; a segment reports each chunk it faults in.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/memory/host_memory.h"
#include "daemon/memory/segment_budget.h"
#include "tests/cmocka_cpp.h"

using namespace mooncake;

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// /proc/meminfo's text with these fields (kB, as the kernel writes them; huge pages in
// pages of 2 MiB).
std::string Meminfo(uint64_t total, uint64_t available, uint64_t huge_free = 0,
                    uint64_t huge_rsvd = 0) {
  return "MemTotal:       " + std::to_string(total / 1024) + " kB\n" +
         "MemFree:        " + std::to_string(available / 2048) + " kB\n" +
         "MemAvailable:   " + std::to_string(available / 1024) + " kB\n" +
         "HugePages_Total:   " + std::to_string(huge_free) + "\n" +
         "HugePages_Free:    " + std::to_string(huge_free) + "\n" +
         "HugePages_Rsvd:    " + std::to_string(huge_rsvd) + "\n" +
         "HugePages_Surp:        0\n" +
         "Hugepagesize:       2048 kB\n";
}

// A 24 GiB host with 5.5 GiB available: reserve 2.4 GiB, so 3.1 GiB can be backed.
const std::string kSmall = Meminfo(24 * kGiB, 5 * kGiB + 512 * kMiB);

// ---- HostMemory ----

void test_meminfo_fields(void**) {
  const HostMemory m = HostMemory::Parse(kSmall);
  assert_true(m.known());
  assert_int_equal(m.total(), 24 * kGiB);
  assert_int_equal(m.available(), 5 * kGiB + 512 * kMiB);
  assert_int_equal(m.free_huge_pages(), 0);
  assert_int_equal(m.reserve(), 24 * kGiB / 10);
  assert_int_equal(m.ordinary(), 5 * kGiB + 512 * kMiB - 24 * kGiB / 10);
  assert_int_equal(HostMemory::MeminfoBytes(kSmall, "Hugepagesize"), 2 * kMiB);
  assert_int_equal(HostMemory::MeminfoBytes(kSmall, "Nonexistent"), 0);
  // The reserve's floor on a small host; MemFree where a kernel has no MemAvailable.
  const HostMemory tiny =
      HostMemory::Parse("MemTotal:        2097152 kB\nMemFree:        1048576 kB\n");
  assert_int_equal(tiny.reserve(), 512 * kMiB);
  assert_int_equal(tiny.available(), 1 * kGiB);
  assert_int_equal(tiny.ordinary(), 512 * kMiB);
}

void test_segment_over_what_the_host_can_back_is_refused_with_the_numbers(void**) {
  const HostMemory m = HostMemory::Parse(kSmall);
  bool huge_only = true;
  std::string why;
  assert_true(m.Admits(3 * kGiB, 0, &huge_only, &why));
  assert_false(huge_only);
  assert_true(m.Admits(m.ordinary(), 0, &huge_only, &why));
  assert_false(m.Admits(m.ordinary() + 1, 0, &huge_only, &why));
  assert_false(m.Admits(4 * kGiB, 0, &huge_only, &why));
  assert_string_equal(why.c_str(),
                      "segment 4.0 GiB over the 3.1 GiB this host can back now (MemAvailable "
                      "5.5 GiB - reserve 2.4 GiB; free huge pages 0 B)");
  // What other mounts were promised and have not faulted in yet is not free, though
  // meminfo does not show it.
  assert_true(m.Admits(1 * kGiB, 2 * kGiB, &huge_only, &why));
  assert_false(m.Admits(2 * kGiB, 2 * kGiB, &huge_only, &why));
  assert_string_equal(why.c_str(),
                      "segment 2.0 GiB over the 1.1 GiB this host can back now (MemAvailable "
                      "5.5 GiB - reserve 2.4 GiB; free huge pages 0 B; 2.0 GiB promised to "
                      "mounts being mapped)");
}

void test_engine_defaults_are_admitted_on_the_issues_host(void**) {
  // The issue's host: 23 GiB, 22 GiB available before the daemon's own 1 GiB segment.
  const HostMemory m = HostMemory::Parse(Meminfo(23 * kGiB, 21 * kGiB));
  bool huge_only = false;
  std::string why;
  for (uint64_t size : {4 * kGiB,               // SGLang (MOONCAKE_GLOBAL_SEGMENT_SIZE), vLLM
                        uint64_t{3355443200},   // LMCache
                        3200 * kMiB}) {         // Mooncake's test_distributed_object_store.py
    assert_true(m.Admits(size, 0, &huge_only, &why));
    assert_false(huge_only);
  }
  // A host that cannot: the issue's 64 GB on 23 GB.
  assert_false(m.Admits(64 * kGiB, 0, &huge_only, &why));
}

void test_huge_pages_back_what_ordinary_memory_cannot(void**) {
  // Most of the host reserved as huge pages: 8 GiB of them free, 2 GiB of those promised
  // to mappings already (HugePages_Rsvd), 3 GiB of ordinary memory available.
  const HostMemory m = HostMemory::Parse(Meminfo(24 * kGiB, 3 * kGiB, 4096, 1024));
  assert_int_equal(m.free_huge_pages(), 6 * kGiB);
  assert_int_equal(m.backable(0), 6 * kGiB);
  bool huge_only = true;
  std::string why;
  assert_true(m.Admits(512 * kMiB, 0, &huge_only, &why));  // fits ordinary memory too
  assert_false(huge_only);
  assert_true(m.Admits(5 * kGiB, 0, &huge_only, &why));
  assert_true(huge_only);  // so it must not fall back to ordinary pages
  assert_true(m.Admits(6 * kGiB - 1, 0, &huge_only, &why));  // rounded up: whole pages
  assert_false(m.Admits(6 * kGiB + 1, 0, &huge_only, &why));
  assert_true(why.find("free huge pages 6.0 GiB") != std::string::npos);
}

void test_unreadable_meminfo_admits_nothing(void**) {
  const HostMemory m = HostMemory::Parse("");
  assert_false(m.known());
  bool huge_only = false;
  std::string why;
  assert_false(m.Admits(1, 0, &huge_only, &why));
  assert_string_equal(why.c_str(),
                      "segment 1 B over the 0 B this host can back now (/proc/meminfo "
                      "unreadable: this host's memory is unknown)");
}

// ---- SegmentBudget ----

void test_budget_has_no_cap_by_default_and_the_operators_caps(void**) {
  auto ample = [] { return Meminfo(24 * kGiB, 20 * kGiB); };
  SegmentBudget none(SegmentBudget::Limits{}, ample);
  assert_int_equal(none.PerClientCap(), UINT64_MAX);
  assert_true(none.Describe().find(", no cap in all, no cap per connection") != std::string::npos);

  auto capped = std::make_shared<SegmentBudget>(SegmentBudget::Limits{64 * kMiB, 32 * kMiB}, ample);
  assert_int_equal(capped->PerClientCap(), 32 * kMiB);
  assert_string_equal(capped->PerClientRefusal(16 * kMiB, 24 * kMiB).c_str(),
                      "segment 16.0 MiB over --client_segment_budget_per_client (24.0 MiB of "
                      "its 32.0 MiB already mounted for this connection): lend a smaller "
                      "segment, or raise --client_segment_budget_per_client");
  std::vector<std::shared_ptr<SegmentMemory>> held;
  ErrorCode code = ErrorCode::OK;
  std::string why;
  for (int i = 0; i < 4; ++i) {
    held.push_back(capped->Map(16 * kMiB, &code, &why));
    assert_non_null(held.back().get());
  }
  assert_null(capped->Map(16 * kMiB, &code, &why).get());
  assert_int_equal(ToInt(code), ToInt(ErrorCode::RESOURCE_LIMIT_EXCEEDED));
  assert_string_equal(why.c_str(),
                      "segment 16.0 MiB over --client_segment_budget (64.0 MiB of its 64.0 MiB "
                      "already mounted for clients): lend a smaller segment, or raise "
                      "--client_segment_budget");
  assert_int_equal(capped->used(), 64 * kMiB);
  // Bytes come back when the memory is unmapped, i.e. when its last holder lets go.
  held.pop_back();
  assert_int_equal(capped->used(), 48 * kMiB);
  assert_non_null(capped->Map(16 * kMiB, &code, &why).get());  // taken and let go at once
  assert_int_equal(capped->used(), 48 * kMiB);
}

void test_budget_refuses_what_the_host_cannot_back_before_mapping(void**) {
  auto budget = std::make_shared<SegmentBudget>(SegmentBudget::Limits{},
                                                [] { return kSmall; });
  ErrorCode code = ErrorCode::OK;
  std::string why;
  assert_null(budget->Map(4 * kGiB, &code, &why).get());
  assert_int_equal(ToInt(code), ToInt(ErrorCode::RESOURCE_LIMIT_EXCEEDED));
  assert_string_equal(why.c_str(),
                      "segment 4.0 GiB over the 3.1 GiB this host can back now (MemAvailable "
                      "5.5 GiB - reserve 2.4 GiB; free huge pages 0 B): lend a smaller "
                      "segment, or free memory on this host");
  assert_int_equal(budget->used(), 0);
}

// This process's resident shared memory and huge pages (the segments it maps), in bytes.
uint64_t ResidentSegments() {
  std::ifstream in("/proc/self/status");
  std::string line;
  uint64_t kb = 0;
  while (std::getline(in, line)) {
    if (line.rfind("RssShmem:", 0) == 0 || line.rfind("HugetlbPages:", 0) == 0) {
      kb += std::stoull(line.substr(line.find(':') + 1));
    }
  }
  return kb * 1024;
}

void test_segment_reports_each_chunk_faulted_in(void**) {
  // What lets the budget drop a mount's promise as its memory shows in /proc/meminfo.
  std::vector<uint64_t> chunks;
  std::string error;
  auto memory = SegmentMemory::Create(130 * kMiB, &error, false,
                                      [&](uint64_t bytes) { chunks.push_back(bytes); });
  assert_non_null(memory.get());
  uint64_t sum = 0;
  for (uint64_t c : chunks) sum += c;
  assert_true(sum >= 130 * kMiB);  // the whole mapping (whole huge pages on hugetlbfs)
  // 64 MiB at a time (a chunk is whole huge pages on hugetlbfs, which may be 1 GiB).
  assert_true(chunks.size() >= 3 || memory->huge_pages());
}

// A mount held in the middle of being faulted in, step by step: the promise of its bytes
// and their leaving it as they are faulted in, against a meminfo that shows exactly what
// has been faulted in so far.
void test_a_mount_being_mapped_is_counted_once(void**) {
  std::mutex mu;
  std::condition_variable cv;
  int step = 0;                   // the test moves it; the slow mapping follows
  std::atomic<uint64_t> faulted{0};  // what "the kernel" shows as taken
  auto meminfo = [&] { return Meminfo(1 * kGiB, 512 * kMiB + 80 * kMiB - faulted.load()); };
  auto wait_for = [&](int s) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return step >= s; });
  };
  auto set_step = [&](int s) {
    std::lock_guard<std::mutex> lock(mu);
    step = s;
    cv.notify_all();
  };
  // 48 MiB mounts are slow: faulted in 32 MiB at step 2, the rest at step 3. Others at once.
  auto map = [&](uint64_t size, bool, std::function<void(uint64_t)> populated,
                 std::string* why) {
    std::vector<uint64_t> chunks = {size};
    if (size == 48 * kMiB) {
      set_step(1);
      wait_for(2);
      faulted += 32 * kMiB;
      populated(32 * kMiB);
      set_step(3);
      wait_for(4);
      chunks = {16 * kMiB};
    }
    for (uint64_t c : chunks) {
      faulted += c;
      populated(c);
    }
    return SegmentMemory::Create(4096, why);  // the bytes stand in for size
  };
  auto budget = std::make_shared<SegmentBudget>(SegmentBudget::Limits{}, meminfo, map);
  ErrorCode code = ErrorCode::OK;
  std::string why;
  std::shared_ptr<SegmentMemory> slow;
  std::thread mounting([&] {
    ErrorCode c;
    std::string w;
    slow = budget->Map(48 * kMiB, &c, &w);
  });
  wait_for(1);
  // 48 of 80 MiB promised, none faulted in yet: 33 MiB is over what is left.
  assert_null(budget->Map(33 * kMiB, &code, &why).get());
  assert_true(why.find("48.0 MiB promised to mounts being mapped") != std::string::npos);
  std::shared_ptr<SegmentMemory> quick = budget->Map(16 * kMiB, &code, &why);
  assert_non_null(quick.get());  // 48 promised + 16 = 64 of 80
  // 32 MiB of the slow one faulted in: counted once (48 shown + 16 promised = 64), so
  // 16 MiB more fits; counted twice, it would not.
  set_step(2);
  wait_for(3);
  std::shared_ptr<SegmentMemory> third = budget->Map(16 * kMiB, &code, &why);
  assert_non_null(third.get());
  assert_null(budget->Map(1 * kMiB, &code, &why).get());  // all 80 MiB taken
  set_step(4);
  mounting.join();
  assert_non_null(slow.get());
  assert_int_equal(budget->used(), 80 * kMiB);
  assert_null(budget->Map(1 * kMiB, &code, &why).get());
  assert_true(why.find("promised") == std::string::npos);  // nothing is left promised
}

void test_concurrent_mounts_do_not_share_free_memory(void**) {
  // A 1 GiB host (reserve: the 512 MiB floor) with 65 MiB above the reserve, less what
  // this process has faulted in since, as the kernel would show it: a segment being
  // faulted in page by page. The spare MiB absorbs the kernel's approximate counters.
  const uint64_t base = ResidentSegments();
  auto meminfo = [base] {
    uint64_t resident = ResidentSegments();
    uint64_t taken = resident > base ? resident - base : 0;
    return Meminfo(1 * kGiB, 512 * kMiB + 65 * kMiB - taken);
  };
  auto budget = std::make_shared<SegmentBudget>(SegmentBudget::Limits{}, meminfo);
  // Eight concurrent mounts of 16 MiB against 65 MiB: four at most succeed (a mount whose
  // chunk was being faulted in meanwhile may count twice, refusing one more).
  std::vector<std::shared_ptr<SegmentMemory>> got(8);
  std::vector<std::string> whys(8);
  std::vector<ErrorCode> codes(8, ErrorCode::OK);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      got[i] = budget->Map(16 * kMiB, &codes[i], &whys[i]);
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  size_t mapped = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != nullptr) {
      ++mapped;
    } else {
      assert_int_equal(ToInt(codes[i]), ToInt(ErrorCode::RESOURCE_LIMIT_EXCEEDED));
      assert_true(whys[i].find("this host can back now") != std::string::npos);
    }
  }
  assert_true(mapped >= 1 && mapped <= 4);
  // Nothing is left promised: one at a time, mounts fill exactly what is left.
  ErrorCode code = ErrorCode::OK;
  std::string why;
  while (mapped < 4) {
    got.push_back(budget->Map(16 * kMiB, &code, &why));
    assert_non_null(got.back().get());
    ++mapped;
  }
  assert_null(budget->Map(16 * kMiB, &code, &why).get());
  assert_int_equal(budget->used(), 64 * kMiB);
  got.clear();
  assert_int_equal(budget->used(), 0);
  assert_non_null(budget->Map(64 * kMiB, &code, &why).get());
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_meminfo_fields),
      cmocka_unit_test(test_segment_over_what_the_host_can_back_is_refused_with_the_numbers),
      cmocka_unit_test(test_engine_defaults_are_admitted_on_the_issues_host),
      cmocka_unit_test(test_huge_pages_back_what_ordinary_memory_cannot),
      cmocka_unit_test(test_unreadable_meminfo_admits_nothing),
      cmocka_unit_test(test_budget_has_no_cap_by_default_and_the_operators_caps),
      cmocka_unit_test(test_budget_refuses_what_the_host_cannot_back_before_mapping),
      cmocka_unit_test(test_segment_reports_each_chunk_faulted_in),
      cmocka_unit_test(test_a_mount_being_mapped_is_counted_once),
      cmocka_unit_test(test_concurrent_mounts_do_not_share_free_memory),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
