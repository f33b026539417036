// Tests for mooncake::OffsetAllocator: targeted edge cases plus randomized
// alloc/free sequences checked against a simple reference model.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "common/base/offset_allocator.h"
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

// Whether [offset, offset + len) lies inside capacity and overlaps no live
// allocation: exactly when AllocateAt() of an aligned offset must succeed.
bool ModelFits(const Model& m, uint64_t capacity, uint64_t offset,
               uint64_t len) {
  if (offset >= capacity || len > capacity - offset) return false;
  auto next = m.live.lower_bound(offset);
  if (next != m.live.end() && next->first < offset + len) return false;
  if (next == m.live.begin()) return true;
  auto prev = std::prev(next);
  return prev->first + prev->second <= offset;
}

// Frees a live allocation in the allocator and the model.
void ModelFreeNode(Model* m, OffsetAllocator* a, uint32_t node) {
  const uint64_t off = m->by_node[node];
  m->used -= m->live[off];
  m->live.erase(off);
  m->by_node.erase(node);
  a->Free(node);
}

// Frees handles[idx], dropping it from handles.
void ModelFree(Model* m, OffsetAllocator* a, std::vector<uint32_t>* handles,
               size_t idx) {
  const uint32_t node = (*handles)[idx];
  (*handles)[idx] = handles->back();
  handles->pop_back();
  ModelFreeNode(m, a, node);
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
      ModelFree(&m, &a, &handles, rng() % handles.size());
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
      ModelFree(&m, &a, &handles, rng() % handles.size());
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

// Counters AllocateAt() must leave alone when it fails.
struct Counters {
  uint64_t used;
  size_t free_ranges;
  size_t allocations;
  uint64_t largest_free;
};

Counters Snapshot(const OffsetAllocator& a) {
  return {a.used(), a.free_ranges(), a.allocations(), a.largest_free()};
}

void ExpectAtFails(OffsetAllocator* a, uint64_t offset, uint64_t size) {
  const Counters before = Snapshot(*a);
  assert_false(a->AllocateAt(offset, size).ok());
  const Counters after = Snapshot(*a);
  assert_int_equal(after.used, before.used);
  assert_int_equal(after.free_ranges, before.free_ranges);
  assert_int_equal(after.allocations, before.allocations);
  assert_int_equal(after.largest_free, before.largest_free);
}

// AllocateAt() that must succeed at exactly `offset`; recorded in the model.
uint32_t ExpectAt(Model* m, OffsetAllocator* a, uint64_t align, uint64_t offset,
                  uint64_t size) {
  OffsetAllocator::Allocation r = a->AllocateAt(offset, size);
  assert_true(r.ok());
  assert_int_equal(r.offset, offset);
  ModelAdd(m, *a, align, size, r);
  CheckAgainstModel(*m, *a);
  return r.node;
}

void test_allocate_at_edges(void** /*state*/) {
  const uint64_t cap = kMiB;
  OffsetAllocator a(cap, 64);
  Model m;
  ExpectAtFails(&a, 0, 0);   // size 0
  ExpectAtFails(&a, 1, 64);  // misaligned
  ExpectAtFails(&a, 32, 1);
  ExpectAtFails(&a, cap, 64);  // starts at the end
  ExpectAtFails(&a, cap + 64, 64);
  ExpectAtFails(&a, 0, cap + 1);      // one byte too long
  ExpectAtFails(&a, cap - 64, 65);    // rounds up past the end
  ExpectAtFails(&a, 64, UINT64_MAX);  // offset + size overflows
  ExpectAtFails(&a, UINT64_MAX & ~uint64_t{63}, 64);
  CheckEmpty(a);

  // At offset 0 and at the very end; the length rounds up to the alignment.
  const uint32_t x = ExpectAt(&m, &a, 64, 0, 100);
  assert_int_equal(a.allocation_size(x), 128);
  ExpectAt(&m, &a, 64, cap - 64, 1);
  assert_int_equal(a.free_ranges(), 1);
  assert_int_equal(a.largest_free(), cap - 192);
  // In the middle of a free range: free before and after.
  const uint32_t z = ExpectAt(&m, &a, 64, 64 * kKiB, 4 * kKiB);
  assert_int_equal(a.free_ranges(), 2);

  // Overlapping z = [64 KiB, 68 KiB) exactly, partly from either side, by
  // one rounded-up unit, from inside, and containing it.
  ExpectAtFails(&a, 64 * kKiB, 4 * kKiB);
  ExpectAtFails(&a, 60 * kKiB, 4 * kKiB + 64);
  ExpectAtFails(&a, 64 * kKiB - 64, 65);
  ExpectAtFails(&a, 66 * kKiB, 4 * kKiB);
  ExpectAtFails(&a, 68 * kKiB - 64, 64 * kKiB);
  ExpectAtFails(&a, 65 * kKiB, 64);
  ExpectAtFails(&a, 32 * kKiB, 64 * kKiB);
  ExpectAtFails(&a, 0, cap);
  // And the ones at the ends of the space.
  ExpectAtFails(&a, 64, 64);
  ExpectAtFails(&a, cap - 128, 128);
  ExpectAtFails(&a, cap - 64, 64);

  // Touching ends are fine: right after x, right before y, on both sides of
  // z (each of these leaves free space on its other side).
  ExpectAt(&m, &a, 64, 128, 64);
  ExpectAt(&m, &a, 64, cap - 128, 64);
  ExpectAt(&m, &a, 64, 60 * kKiB, 4 * kKiB);
  ExpectAt(&m, &a, 64, 68 * kKiB, 4 * kKiB);
  assert_int_equal(a.free_ranges(), 2);
  // Filling a gap exactly removes that free range.
  ExpectAt(&m, &a, 64, 192, 60 * kKiB - 192);
  assert_int_equal(a.free_ranges(), 1);
  ExpectAt(&m, &a, 64, 72 * kKiB, cap - 128 - 72 * kKiB);
  assert_int_equal(a.free_ranges(), 0);
  assert_int_equal(a.used(), cap);
  ExpectAtFails(&a, 0, 64);
  assert_false(a.Allocate(64).ok());

  // A freed range is reusable by both entry points.
  ModelFreeNode(&m, &a, z);
  ExpectAtFails(&a, 64 * kKiB, 4 * kKiB + 64);
  ExpectAt(&m, &a, 64, 66 * kKiB, kKiB);
  OffsetAllocator::Allocation r = a.Allocate(2 * kKiB);
  assert_true(r.ok());
  assert_int_equal(r.offset, 64 * kKiB);
  ModelAdd(&m, a, 64, 2 * kKiB, r);
  CheckAgainstModel(m, a);
  assert_int_equal(a.free_ranges(), 1);  // [67 KiB, 68 KiB) is left
  // Freeing everything leaves one range.
  while (!m.by_node.empty()) {
    ModelFreeNode(&m, &a, m.by_node.begin()->first);
    CheckAgainstModel(m, a);
  }
  CheckEmpty(a);

  // Alignment 4096.
  OffsetAllocator b(kMiB, 4096);
  ExpectAtFails(&b, 4096 + 64, 64);
  OffsetAllocator::Allocation one = b.AllocateAt(4096, 1);
  assert_true(one.ok());
  assert_int_equal(b.allocation_size(one.node), 4096);
  OffsetAllocator::Allocation two = b.AllocateAt(8192, 4097);
  assert_true(two.ok());
  assert_int_equal(b.allocation_size(two.node), 8192);
  ExpectAtFails(&b, 12288, 1);
  b.Free(one.node);
  b.Free(two.node);
  CheckEmpty(b);

  // Nothing usable at all; the whole space in one call.
  OffsetAllocator empty(63, 64);
  assert_false(empty.AllocateAt(0, 1).ok());
  OffsetAllocator c(10 * kMiB + 100, 64);
  OffsetAllocator::Allocation all = c.AllocateAt(0, c.capacity());
  assert_true(all.ok());
  assert_int_equal(c.free_ranges(), 0);
  ExpectAtFails(&c, c.capacity() - 64, 64);
  c.Free(all.node);
  CheckEmpty(c);
}

void test_allocate_at_stale_hint(void** /*state*/) {
  // The hint is the node of the last AllocateAt(); Free() can merge that node
  // away (leaving a spare) and NewNode() can recycle it for another range.
  OffsetAllocator a(64 * kKiB, 64);
  Model m;
  std::vector<uint32_t> handles;
  handles.push_back(ExpectAt(&m, &a, 64, 0, 4 * kKiB));
  handles.push_back(ExpectAt(&m, &a, 64, 8 * kKiB, 4 * kKiB));
  ModelFree(&m, &a, &handles, 1);  // the hint becomes [4 KiB, 64 KiB)
  CheckAgainstModel(m, a);
  ModelFree(&m, &a, &handles, 0);  // ...and is merged away into a spare
  CheckEmpty(a);
  // With the hint a spare, the search starts from a free range instead.
  handles.push_back(ExpectAt(&m, &a, 64, 16 * kKiB, 4 * kKiB));
  handles.push_back(ExpectAt(&m, &a, 64, 32 * kKiB, 4 * kKiB));
  ModelFree(&m, &a, &handles, 1);  // the hint becomes [20 KiB, 64 KiB)
  ModelFree(&m, &a, &handles, 0);  // ...and is merged away again
  CheckEmpty(a);
  // Allocate() recycles the last spare, the hint, for its remainder
  // [4 KiB, 64 KiB).
  OffsetAllocator::Allocation r = a.Allocate(4 * kKiB);
  assert_true(r.ok());
  ModelAdd(&m, a, 64, 4 * kKiB, r);
  handles.push_back(r.node);
  // Walks in both directions from wherever the hint now is.
  handles.push_back(ExpectAt(&m, &a, 64, 40 * kKiB, kKiB));
  handles.push_back(ExpectAt(&m, &a, 64, 8 * kKiB, kKiB));
  handles.push_back(ExpectAt(&m, &a, 64, 60 * kKiB, 4 * kKiB));
  handles.push_back(ExpectAt(&m, &a, 64, 4 * kKiB, kKiB));
  while (!handles.empty()) {
    ModelFree(&m, &a, &handles, handles.size() - 1);
    CheckAgainstModel(m, a);
  }
  CheckEmpty(a);
}

// Allocate / AllocateAt / Free at random, checked against the model after
// every step. AllocateAt offsets are mostly aligned points in the space, with
// sizes that often fit the gap there exactly or inside it, so both successes
// and every kind of failure are frequent.
void RunRandomMixed(uint64_t seed, uint64_t capacity, uint64_t align,
                    uint64_t big_max, int ops) {
  std::mt19937_64 rng(seed);
  OffsetAllocator a(capacity, align);
  const uint64_t cap = a.capacity();
  Model m;
  std::vector<uint32_t> handles;
  int at_ok = 0, at_failed = 0;
  for (int i = 0; i < ops; ++i) {
    const uint64_t kind = rng() % 100;
    if (handles.empty() || kind < 30) {
      const uint64_t size = RandomSize(rng, big_max);
      const uint64_t largest_before = a.largest_free();
      OffsetAllocator::Allocation r = a.Allocate(size);
      assert_int_equal(r.ok(), AlignUp(size, align) <= largest_before);
      if (r.ok()) {
        ModelAdd(&m, a, align, size, r);
        handles.push_back(r.node);
      }
    } else if (kind < 70) {
      uint64_t offset = rng() % (cap + cap / 16) / align * align;
      if (align > 1 && rng() % 10 == 0) offset += 1 + rng() % (align - 1);
      // The gap at offset, if it is in one, to pick sizes that fit.
      uint64_t gap = 0;
      if (offset < cap && ModelFits(m, cap, offset, 1)) {
        auto next = m.live.lower_bound(offset);
        gap = (next == m.live.end() ? cap : next->first) - offset;
      }
      uint64_t size;
      const uint64_t pick = rng() % 10;
      if (gap != 0 && pick < 3) {
        size = gap - rng() % std::min<uint64_t>(gap, align);  // to the end
      } else if (gap != 0 && pick < 7) {
        size = 1 + rng() % gap;
      } else if (pick == 7) {
        size = 0;
      } else {
        size = RandomSize(rng, big_max);
      }
      const bool fits = size != 0 && offset % align == 0 &&
                        ModelFits(m, cap, offset, AlignUp(size, align));
      OffsetAllocator::Allocation r = a.AllocateAt(offset, size);
      assert_int_equal(r.ok(), fits);
      if (r.ok()) {
        assert_int_equal(r.offset, offset);
        ModelAdd(&m, a, align, size, r);
        handles.push_back(r.node);
        ++at_ok;
      } else {
        ++at_failed;
      }
    } else {
      ModelFree(&m, &a, &handles, rng() % handles.size());
    }
    CheckAgainstModel(m, a);
  }
  assert_true(at_ok > ops / 20);
  assert_true(at_failed > ops / 20);
  std::shuffle(handles.begin(), handles.end(), rng);
  for (uint32_t node : handles) a.Free(node);
  CheckEmpty(a);
  OffsetAllocator::Allocation all = a.AllocateAt(0, a.capacity());
  assert_true(all.ok());
}

void test_random_allocate_at(void** /*state*/) {
  RunRandomMixed(11, 256 * kMiB, 64, 64 * kMiB, 20000);
  RunRandomMixed(12, 128 * kMiB + 12345, 4096, 16 * kMiB, 20000);
  RunRandomMixed(13, 64 * kMiB + 7, 1, 8 * kMiB, 20000);
}

enum class Order { kAscending, kDescending, kShuffled };

// A restart: fragment an allocator with Allocate/Free, then rebuild a fresh
// one from the surviving (offset, requested size) pairs in `order`. The
// rebuilt allocator must hold the same ranges, and free back to one range.
void RunRebuild(uint64_t seed, uint64_t capacity, uint64_t align, Order order) {
  std::mt19937_64 rng(seed);
  OffsetAllocator a(capacity, align);
  struct Range {
    uint64_t offset;
    uint64_t size;  // as requested, before rounding
    uint32_t node;
  };
  std::vector<Range> live;
  for (int i = 0; i < 20000; ++i) {
    if (live.empty() || rng() % 100 < 60) {
      const uint64_t size = RandomSize(rng, 8 * kMiB);
      OffsetAllocator::Allocation r = a.Allocate(size);
      if (r.ok()) live.push_back({r.offset, size, r.node});
    } else {
      const size_t idx = rng() % live.size();
      a.Free(live[idx].node);
      live[idx] = live.back();
      live.pop_back();
    }
  }
  assert_true(live.size() > 100);
  assert_true(a.free_ranges() > 10);

  switch (order) {
    case Order::kAscending:
      std::sort(live.begin(), live.end(), [](const Range& l, const Range& r) {
        return l.offset < r.offset;
      });
      break;
    case Order::kDescending:
      std::sort(live.begin(), live.end(), [](const Range& l, const Range& r) {
        return l.offset > r.offset;
      });
      break;
    case Order::kShuffled:
      std::shuffle(live.begin(), live.end(), rng);
      break;
  }
  OffsetAllocator b(capacity, align);
  std::vector<uint32_t> handles;
  for (const Range& range : live) {
    OffsetAllocator::Allocation r = b.AllocateAt(range.offset, range.size);
    assert_true(r.ok());
    assert_int_equal(r.offset, range.offset);
    assert_int_equal(b.allocation_size(r.node), a.allocation_size(range.node));
    // Restoring the same range twice is refused.
    assert_false(b.AllocateAt(range.offset, range.size).ok());
    handles.push_back(r.node);
  }
  assert_int_equal(b.used(), a.used());
  assert_int_equal(b.allocations(), a.allocations());
  assert_int_equal(b.free_ranges(), a.free_ranges());
  assert_int_equal(b.largest_free(), a.largest_free());
  std::shuffle(handles.begin(), handles.end(), rng);
  for (uint32_t node : handles) b.Free(node);
  CheckEmpty(b);
  assert_true(b.Allocate(b.capacity()).ok());
}

void test_rebuild_sorted(void** /*state*/) {
  RunRebuild(21, 4 * kGiB, 64, Order::kAscending);
  RunRebuild(22, 2 * kGiB + 12345, 4096, Order::kAscending);
  RunRebuild(23, 3 * kGiB, 1, Order::kAscending);
}

void test_rebuild_unsorted(void** /*state*/) {
  RunRebuild(31, 4 * kGiB, 64, Order::kDescending);
  RunRebuild(32, 4 * kGiB, 64, Order::kShuffled);
  RunRebuild(33, 2 * kGiB + 12345, 4096, Order::kShuffled);
}

void test_rebuild_million(void** /*state*/) {
  // A restore's worst case on one segment: 1M replicas of 4 KiB..1 MiB,
  // mostly back to back with some free gaps, reserved in increasing order.
  const size_t kCount = 1000000;
  std::mt19937_64 rng(41);
  struct Range {
    uint64_t offset;
    uint64_t size;
  };
  std::vector<Range> ranges;
  ranges.reserve(kCount);
  uint64_t cursor = 0, used = 0;
  size_t gaps = 0;
  for (size_t i = 0; i < kCount; ++i) {
    if (rng() % 4 == 0) {
      cursor += 64 * (1 + rng() % (kMiB / 64));
      ++gaps;
    }
    const uint64_t size = 4 * kKiB + rng() % (kMiB - 4 * kKiB + 1);
    ranges.push_back({cursor, size});
    cursor += AlignUp(size, 64);
    used += AlignUp(size, 64);
  }
  OffsetAllocator a(8 * kTiB, 64);
  assert_true(cursor < a.capacity());
  std::vector<uint32_t> handles(kCount);
  bool all_ok = true;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < kCount; ++i) {
    OffsetAllocator::Allocation r =
        a.AllocateAt(ranges[i].offset, ranges[i].size);
    all_ok &= r.ok();
    handles[i] = r.node;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  printf("1M ascending AllocateAt calls on 8 TiB: %.3f s (%.0f ns per call)\n",
         seconds, seconds * 1e9 / kCount);
  assert_true(all_ok);
  assert_int_equal(a.used(), used);
  assert_int_equal(a.allocations(), kCount);
  assert_int_equal(a.free_ranges(), gaps + 1);  // and the tail
  assert_int_equal(a.largest_free(), a.capacity() - cursor);
  for (size_t i = 0; i < kCount; ++i) {
    assert_int_equal(a.allocation_size(handles[i]),
                     AlignUp(ranges[i].size, 64));
  }
  for (uint32_t node : handles) a.Free(node);
  CheckEmpty(a);
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
      cmocka_unit_test(test_allocate_at_edges),
      cmocka_unit_test(test_allocate_at_stale_hint),
      cmocka_unit_test(test_random_allocate_at),
      cmocka_unit_test(test_rebuild_sorted),
      cmocka_unit_test(test_rebuild_unsorted),
      cmocka_unit_test(test_rebuild_million),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
