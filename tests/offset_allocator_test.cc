// Tests for mooncake::OffsetAllocator: targeted edge cases plus randomized
// alloc/free sequences checked against a simple reference model.

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "common/offset_allocator.h"
#include "tests/cmocka_cpp.h"

using mooncake::OffsetAllocator;

namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kGiB = 1024 * kMiB;
constexpr uint64_t kTiB = 1024 * kGiB;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Reference model: live allocations by offset, plus handle -> offset.
struct Model {
  std::map<uint64_t, uint64_t> live;  // offset -> aligned length
  std::map<uint32_t, uint64_t> by_node;
  uint64_t used = 0;
};

// Checks a fresh allocation against the model (bounds, alignment, length,
// no overlap) and records it.
void ModelAdd(Model* m, const OffsetAllocator& a, uint64_t align,
              uint64_t size, const OffsetAllocator::Allocation& r) {
  const uint64_t len = AlignUp(size, align);
  assert_int_equal(a.allocation_size(r.node), len);
  assert_int_equal(r.offset % align, 0);
  assert_true(r.offset + len <= a.capacity());
  assert_true(m->by_node.find(r.node) == m->by_node.end());
  auto next = m->live.lower_bound(r.offset);
  if (next != m->live.end()) assert_true(r.offset + len <= next->first);
  if (next != m->live.begin()) {
    auto prev = std::prev(next);
    assert_true(prev->first + prev->second <= r.offset);
  }
  m->live[r.offset] = len;
  m->by_node[r.node] = r.offset;
  m->used += len;
}

// Full cross-check: accounting matches the model, and since Free coalesces
// completely, free ranges are exactly the maximal gaps between live blocks.
void CheckAgainstModel(const Model& m, const OffsetAllocator& a) {
  assert_int_equal(a.used(), m.used);
  assert_int_equal(a.allocations(), m.live.size());
  assert_int_equal(a.free_bytes(), a.capacity() - m.used);
  size_t gaps = 0;
  uint64_t largest = 0, cursor = 0;
  for (const auto& kv : m.live) {
    if (kv.first > cursor) {
      ++gaps;
      largest = std::max(largest, kv.first - cursor);
    }
    cursor = kv.first + kv.second;
  }
  if (a.capacity() > cursor) {
    ++gaps;
    largest = std::max(largest, a.capacity() - cursor);
  }
  assert_int_equal(a.free_ranges(), gaps);
  assert_int_equal(a.largest_free(), largest);
}

void CheckEmpty(const OffsetAllocator& a) {
  assert_int_equal(a.used(), 0);
  assert_int_equal(a.allocations(), 0);
  assert_int_equal(a.free_ranges(), 1);
  assert_int_equal(a.largest_free(), a.capacity());
  assert_int_equal(a.free_bytes(), a.capacity());
}

uint64_t RandomSize(std::mt19937_64& rng, uint64_t big_max) {
  const uint64_t kind = rng() % 100;
  if (kind < 50) return 1 + rng() % 4096;          // small
  if (kind < 90) return 1 + rng() % kMiB;          // medium
  return kMiB + rng() % (big_max - kMiB + 1);      // big
}

void RunRandom(uint64_t seed, uint64_t capacity, uint64_t align,
               uint64_t big_max, int ops) {
  std::mt19937_64 rng(seed);
  OffsetAllocator a(capacity, align);
  assert_int_equal(a.capacity(), capacity / align * align);
  CheckEmpty(a);
  Model m;
  std::vector<uint32_t> handles;
  int failures = 0;
  for (int i = 0; i < ops; ++i) {
    // Bias toward allocating so the allocator regularly runs full.
    if (handles.empty() || rng() % 100 < 55) {
      const uint64_t size = RandomSize(rng, big_max);
      const uint64_t largest_before = a.largest_free();
      OffsetAllocator::Allocation r = a.Allocate(size);
      // Good fit plus the lower-bin fallback make Allocate exact: it fails
      // if and only if no single free range is large enough.
      if (r.ok()) {
        assert_true(AlignUp(size, align) <= largest_before);
        ModelAdd(&m, a, align, size, r);
        handles.push_back(r.node);
      } else {
        assert_true(AlignUp(size, align) > largest_before);
        ++failures;
      }
    } else {
      const size_t idx = rng() % handles.size();
      const uint32_t node = handles[idx];
      handles[idx] = handles.back();
      handles.pop_back();
      const uint64_t off = m.by_node[node];
      m.used -= m.live[off];
      m.live.erase(off);
      m.by_node.erase(node);
      a.Free(node);
    }
    CheckAgainstModel(m, a);
  }
  // The sequence must have exercised the "full" path too.
  assert_true(failures > 0);
  std::shuffle(handles.begin(), handles.end(), rng);
  for (uint32_t node : handles) a.Free(node);
  CheckEmpty(a);
  // And the whole space is usable again in one piece.
  OffsetAllocator::Allocation all = a.Allocate(a.capacity());
  assert_true(all.ok());
  assert_int_equal(all.offset, 0);
}

void test_random_default_alignment(void** /*state*/) {
  RunRandom(1, 256 * kMiB, 64, 64 * kMiB, 20000);
  RunRandom(2, 256 * kMiB, 64, 64 * kMiB, 20000);
}

void test_random_odd_capacity(void** /*state*/) {
  // Capacity not a multiple of the alignment; alignment 1 and 4096.
  RunRandom(3, 128 * kMiB + 12345, 1, 16 * kMiB, 20000);
  RunRandom(4, 128 * kMiB + 12345, 4096, 16 * kMiB, 20000);
}

void test_random_tiny(void** /*state*/) {
  // Small sizes in a small space hit the exact (exponent 0) bins and the
  // lower-bin fallback constantly.
  std::mt19937_64 rng(5);
  OffsetAllocator a(1000, 1);
  Model m;
  std::vector<uint32_t> handles;
  for (int i = 0; i < 20000; ++i) {
    if (handles.empty() || rng() % 2 == 0) {
      const uint64_t size = 1 + rng() % 40;
      const uint64_t largest_before = a.largest_free();
      OffsetAllocator::Allocation r = a.Allocate(size);
      assert_int_equal(r.ok(), size <= largest_before);
      if (r.ok()) {
        ModelAdd(&m, a, 1, size, r);
        handles.push_back(r.node);
      }
    } else {
      const size_t idx = rng() % handles.size();
      const uint32_t node = handles[idx];
      handles[idx] = handles.back();
      handles.pop_back();
      const uint64_t off = m.by_node[node];
      m.used -= m.live[off];
      m.live.erase(off);
      m.by_node.erase(node);
      a.Free(node);
    }
    CheckAgainstModel(m, a);
  }
  for (uint32_t node : handles) a.Free(node);
  CheckEmpty(a);
}

void test_coalesce_orders(void** /*state*/) {
  // Five equal blocks; the fifth is a guard so block 3 has a used right side.
  OffsetAllocator a(5 * kKiB, 64);
  OffsetAllocator::Allocation b[5];
  for (int i = 0; i < 5; ++i) {
    b[i] = a.Allocate(kKiB);
    assert_true(b[i].ok());
    assert_int_equal(b[i].offset, i * kKiB);
  }
  assert_int_equal(a.free_ranges(), 0);
  assert_int_equal(a.largest_free(), 0);

  a.Free(b[2].node);  // middle: isolated hole
  assert_int_equal(a.free_ranges(), 1);
  a.Free(b[0].node);  // far left: second hole
  assert_int_equal(a.free_ranges(), 2);
  a.Free(b[1].node);  // bridges both holes: 3 ranges -> 1
  assert_int_equal(a.free_ranges(), 1);
  assert_int_equal(a.largest_free(), 3 * kKiB);
  a.Free(b[3].node);  // merges with the left run
  assert_int_equal(a.free_ranges(), 1);
  assert_int_equal(a.largest_free(), 4 * kKiB);
  a.Free(b[4].node);  // and the last one
  CheckEmpty(a);

  // Other order: middle, then left neighbour, then right neighbour, with
  // the tail of the space still free.
  OffsetAllocator c(8 * kKiB, 64);
  OffsetAllocator::Allocation x = c.Allocate(kKiB);
  OffsetAllocator::Allocation y = c.Allocate(kKiB);
  OffsetAllocator::Allocation z = c.Allocate(kKiB);
  assert_int_equal(c.free_ranges(), 1);  // the tail
  c.Free(y.node);
  assert_int_equal(c.free_ranges(), 2);
  c.Free(x.node);  // merges left of y
  assert_int_equal(c.free_ranges(), 2);
  assert_int_equal(c.largest_free(), 5 * kKiB);
  c.Free(z.node);  // merges both sides: everything
  CheckEmpty(c);
}

void test_exhaustion(void** /*state*/) {
  const uint64_t kBlock = 4 * kKiB;
  const int kCount = 256;
  OffsetAllocator a(kBlock * kCount, 64);
  std::vector<OffsetAllocator::Allocation> blocks;
  for (int i = 0; i < kCount; ++i) {
    blocks.push_back(a.Allocate(kBlock));
    assert_true(blocks.back().ok());
  }
  assert_int_equal(a.used(), a.capacity());
  assert_int_equal(a.free_bytes(), 0);
  assert_int_equal(a.free_ranges(), 0);
  assert_false(a.Allocate(1).ok());
  assert_false(a.Allocate(kBlock).ok());

  const uint64_t hole = blocks[100].offset;
  a.Free(blocks[100].node);
  assert_false(a.Allocate(kBlock + 1).ok());  // too big for the hole
  OffsetAllocator::Allocation again = a.Allocate(kBlock);
  assert_true(again.ok());
  assert_int_equal(again.offset, hole);
  assert_int_equal(a.free_bytes(), 0);
}

void test_fragmentation(void** /*state*/) {
  const int kCount = 1000;
  OffsetAllocator a(kCount * kKiB, 64);
  std::vector<OffsetAllocator::Allocation> blocks;
  for (int i = 0; i < kCount; ++i) blocks.push_back(a.Allocate(kKiB));
  for (int i = 0; i < kCount; i += 2) a.Free(blocks[i].node);
  assert_int_equal(a.free_ranges(), kCount / 2);
  assert_int_equal(a.free_bytes(), kCount / 2 * kKiB);
  assert_int_equal(a.largest_free(), kKiB);
  // Half the space is free, but no hole holds 2 KiB.
  assert_false(a.Allocate(2 * kKiB).ok());
  assert_false(a.Allocate(kKiB + 1).ok());
  // Freeing block 501 joins holes 500 and 502 into 3 KiB.
  a.Free(blocks[501].node);
  assert_int_equal(a.free_ranges(), kCount / 2 - 1);
  assert_int_equal(a.largest_free(), 3 * kKiB);
  OffsetAllocator::Allocation r = a.Allocate(3 * kKiB);
  assert_true(r.ok());
  assert_int_equal(r.offset, blocks[500].offset);
}

void test_edge_sizes(void** /*state*/) {
  OffsetAllocator a(10 * kMiB + 100, 64);  // 100 bytes lost to alignment
  assert_int_equal(a.capacity(), 10 * kMiB + 64);
  assert_false(a.Allocate(0).ok());
  assert_false(a.Allocate(a.capacity() + 1).ok());
  assert_false(a.Allocate(UINT64_MAX).ok());
  CheckEmpty(a);
  // The full space, not a bin boundary, in one call.
  OffsetAllocator::Allocation all = a.Allocate(a.capacity());
  assert_true(all.ok());
  assert_int_equal(all.offset, 0);
  assert_int_equal(a.free_ranges(), 0);
  a.Free(all.node);
  CheckEmpty(a);

  // Leaving a remainder that is not a bin boundary, then asking for it all.
  OffsetAllocator::Allocation head = a.Allocate(64);
  OffsetAllocator::Allocation rest = a.Allocate(a.free_bytes());
  assert_true(head.ok());
  assert_true(rest.ok());
  assert_int_equal(rest.offset, 64);
  assert_int_equal(a.allocation_size(head.node), 64);
  assert_int_equal(a.allocation_size(rest.node), 10 * kMiB);

  // Rounding to the alignment.
  OffsetAllocator b(kMiB, 4096);
  OffsetAllocator::Allocation one = b.Allocate(1);
  assert_true(one.ok());
  assert_int_equal(b.allocation_size(one.node), 4096);
  assert_int_equal(b.used(), 4096);

  // Nothing usable at all.
  OffsetAllocator empty(63, 64);
  assert_int_equal(empty.capacity(), 0);
  assert_int_equal(empty.free_ranges(), 0);
  assert_false(empty.Allocate(1).ok());
}

void test_huge(void** /*state*/) {
  // 1 TiB split into 4 GiB pieces exactly.
  OffsetAllocator a(kTiB, 64);
  std::vector<OffsetAllocator::Allocation> v;
  for (uint64_t i = 0; i < kTiB / (4 * kGiB); ++i) {
    v.push_back(a.Allocate(4 * kGiB));
    assert_true(v.back().ok());
    assert_int_equal(a.allocation_size(v.back().node), 4 * kGiB);
  }
  assert_int_equal(a.used(), kTiB);
  assert_false(a.Allocate(64).ok());
  for (size_t i = 0; i < v.size(); i += 2) a.Free(v[i].node);
  assert_int_equal(a.largest_free(), 4 * kGiB);
  assert_false(a.Allocate(4 * kGiB + 64).ok());
  for (size_t i = 1; i < v.size(); i += 2) a.Free(v[i].node);
  CheckEmpty(a);
  // Allocations larger than 4 GiB and not bin-aligned.
  OffsetAllocator::Allocation big = a.Allocate(5 * kGiB + 12345);
  assert_true(big.ok());
  assert_int_equal(a.allocation_size(big.node), AlignUp(5 * kGiB + 12345, 64));
  OffsetAllocator::Allocation rest = a.Allocate(a.free_bytes());
  assert_true(rest.ok());
  assert_int_equal(rest.offset, a.allocation_size(big.node));

  // The largest possible capacity: bins must cover the top of 64 bits.
  OffsetAllocator top(UINT64_MAX, 64);
  assert_int_equal(top.capacity(), UINT64_MAX & ~uint64_t{63});
  assert_false(top.Allocate(UINT64_MAX).ok());
  OffsetAllocator::Allocation half = top.Allocate(uint64_t{1} << 63);
  assert_true(half.ok());
  OffsetAllocator::Allocation other = top.Allocate(top.free_bytes());
  assert_true(other.ok());
  assert_int_equal(other.offset, uint64_t{1} << 63);
  top.Free(half.node);
  top.Free(other.node);
  CheckEmpty(top);
  assert_true(top.Allocate(top.capacity()).ok());
}

void test_double_free(void** /*state*/) {
  OffsetAllocator a(64 * kKiB, 64);
  OffsetAllocator::Allocation x = a.Allocate(kKiB);
  OffsetAllocator::Allocation y = a.Allocate(2 * kKiB);
  OffsetAllocator::Allocation z = a.Allocate(kKiB);
  a.Free(y.node);
  const uint64_t used = a.used();
  const size_t ranges = a.free_ranges();
  a.Free(y.node);  // double free
  a.Free(y.node);
  a.Free(OffsetAllocator::kNoNode);  // never valid
  a.Free(123456);                    // never handed out
  assert_int_equal(a.used(), used);
  assert_int_equal(a.used(), 2 * kKiB);
  assert_int_equal(a.allocations(), 2);
  assert_int_equal(a.free_ranges(), ranges);
  assert_int_equal(a.allocation_size(y.node), 0);
  // Freeing x merges y's hole; a stale free of the merged-away node (now a
  // spare) or of the free range node must also be ignored.
  a.Free(x.node);
  a.Free(x.node);
  a.Free(y.node);
  assert_int_equal(a.used(), kKiB);
  assert_int_equal(a.allocations(), 1);
  assert_int_equal(a.free_ranges(), 2);
  a.Free(z.node);
  a.Free(z.node);
  CheckEmpty(a);
  // Still fully usable.
  OffsetAllocator::Allocation all = a.Allocate(a.capacity());
  assert_true(all.ok());
  assert_int_equal(a.allocations(), 1);
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_default_alignment),
      cmocka_unit_test(test_random_odd_capacity),
      cmocka_unit_test(test_random_tiny),
      cmocka_unit_test(test_coalesce_orders),
      cmocka_unit_test(test_exhaustion),
      cmocka_unit_test(test_fragmentation),
      cmocka_unit_test(test_edge_sizes),
      cmocka_unit_test(test_huge),
      cmocka_unit_test(test_double_free),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
