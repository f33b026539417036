// OffsetAllocator hands out non-overlapping ranges of [0, capacity): the
// address space inside one memory segment. It never touches the memory
// itself; callers add the returned offset to the segment's base address.
//
// Design (TLSF-style, in the spirit of Sebastian Aaltonen's OffsetAllocator):
//
//  * Free ranges are kept in size bins. A bin index is a tiny floating-point
//    number: a 6-bit exponent and a 3-bit mantissa, so 64 x 8 = 512 bins cover
//    every 64-bit size with at most 12.5% spread inside one bin.
//  * A 64-bit top bitmap (one bit per exponent) plus one 8-bit bitmap per
//    exponent (one bit per bin) find the first non-empty bin >= a request in
//    O(1) with two count-trailing-zero instructions.
//  * Every range, free or allocated, is a node linked to its address
//    neighbours, so Free() merges with free neighbours in O(1) and freeing
//    everything always leaves exactly one free range.
//  * Nodes live in one std::vector and are recycled through an intrusive
//    free-list; once the vector has grown, Allocate/Free never touch the heap.
//
// Allocate() is a "good fit": the request is rounded up to the next bin
// boundary so that any range in the found bin is large enough. If that fails,
// the single bin just below (whose ranges may or may not fit) is scanned
// linearly, so Allocate() fails only when no free range is large enough.
//
// AllocateAt() instead reserves a range the caller names: a restored master
// rebuilds a segment's allocator from the replica ranges it reloaded. It walks
// the address links to the range holding the offset, starting from the range
// the previous AllocateAt() reserved, so a restore made in increasing offset
// order costs O(1) per call.
//
// Not thread-safe: the owner (a segment) serialises all calls.

#ifndef MOONCAKE_COMMON_OFFSET_ALLOCATOR_H_
#define MOONCAKE_COMMON_OFFSET_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mooncake {

class OffsetAllocator {
 public:
  static constexpr uint32_t kNoNode = 0xffffffffu;

  struct Allocation {
    uint64_t offset = 0;
    uint32_t node = kNoNode;  // Handle for Free(); kNoNode means failure.
    bool ok() const { return node != kNoNode; }
  };

  // Manages [0, capacity) rounded down to a multiple of `alignment`. Every
  // returned offset and every allocated length is a multiple of `alignment`.
  // `alignment` should be a power of two; 0 is treated as 1 and any other
  // value is rounded up to the next power of two.
  explicit OffsetAllocator(uint64_t capacity, uint64_t alignment = 64);

  // Returns a range of at least `size` bytes (exactly `size` rounded up to the
  // alignment). Fails (!ok()) for size 0 or when no free range is big enough.
  Allocation Allocate(uint64_t size);

  // Reserves exactly [offset, offset + size rounded up to the alignment): the
  // range a previous Allocate() returned before the process restarted. Fails
  // (!ok()), changing nothing, for size 0, an offset that is not a multiple of
  // the alignment, a range that does not lie inside capacity(), or one that
  // overlaps a live allocation. The handle is freed with Free() like any other;
  // allocation_size() is the aligned length.
  // Cost: the walk from the previously reserved range to the one holding
  // `offset`, so O(1) amortized for calls in increasing (or decreasing) offset
  // order, as a restore makes them after sorting; linear in the ranges passed
  // otherwise.
  Allocation AllocateAt(uint64_t offset, uint64_t size);

  // Returns the range of a successful Allocate() or AllocateAt() to the free
  // pool, merging it with free address neighbours. Unknown handles and double frees are
  // ignored. (A handle that has since been reused by a newer allocation cannot
  // be told apart from that allocation: do not free stale handles.)
  void Free(uint32_t node);

  // Usable capacity in bytes (constructor capacity rounded down to alignment).
  uint64_t capacity() const;
  // Sum of the aligned lengths of all live allocations.
  uint64_t used() const;
  // capacity() - used().
  uint64_t free_bytes() const;
  // Size of the largest single free range; 0 when full.
  uint64_t largest_free() const;
  // Number of free ranges: 1 for an empty allocator (0 if capacity() is 0).
  size_t free_ranges() const;
  // Number of live allocations.
  size_t allocations() const;
  // Aligned length of a live allocation; 0 for an unknown or freed handle.
  uint64_t allocation_size(uint32_t node) const;

 private:
  static constexpr uint32_t kMantissaBits = 3;
  static constexpr uint32_t kMantissaValue = 1u << kMantissaBits;  // 8
  static constexpr uint32_t kMantissaMask = kMantissaValue - 1;
  static constexpr uint32_t kNumExponents = 64;
  static constexpr uint32_t kNumBins = kNumExponents * kMantissaValue;  // 512

  // One contiguous range. Offsets and sizes are stored in alignment units.
  struct Node {
    // One node per live allocation, so every byte counts: 32 bytes with the flag packed
    // into the size word.
    uint64_t offset = 0;
    uint64_t size : 63;
    uint64_t used : 1;             // True only for a live allocation.
    uint32_t bin_prev = kNoNode;   // Free ranges: doubly linked list per bin.
    uint32_t bin_next = kNoNode;   // Spare nodes: next spare node.
    uint32_t addr_prev = kNoNode;  // Range ending right where this one starts.
    uint32_t addr_next = kNoNode;  // Range starting right where this one ends.
    Node() : size(0), used(0) {}
  };

  static uint32_t BinRoundDown(uint64_t units);
  static uint32_t BinRoundUp(uint64_t units);

  uint32_t NewNode();
  void ReleaseNode(uint32_t n);
  void InsertFree(uint32_t n);
  void RemoveFree(uint32_t n);
  uint32_t FindBinAtLeast(uint32_t bin) const;
  uint32_t ScanBin(uint32_t bin, uint64_t units) const;
  uint32_t FindRange(uint64_t unit) const;
  void LinkBefore(uint32_t n, uint32_t r);
  void LinkAfter(uint32_t n, uint32_t r);

  uint64_t capacity_units_ = 0;
  uint32_t shift_ = 0;  // log2(alignment)

  std::vector<Node> nodes_;
  uint32_t spare_head_ = kNoNode;  // Intrusive list of recyclable nodes.
  // Where AllocateAt() starts its walk: the node of its last success. Frees
  // since may have merged it away (it is then a spare) or recycled it for a
  // range elsewhere (still a valid, if distant, start).
  uint32_t at_hint_ = kNoNode;

  uint64_t top_bitmap_ = 0;               // Bit e: some bin of exponent e set.
  uint8_t bin_bitmaps_[kNumExponents] = {};  // Bit m: bin (e, m) non-empty.
  uint32_t bin_heads_[kNumBins];

  uint64_t used_units_ = 0;
  size_t free_ranges_ = 0;
  size_t allocations_ = 0;
};

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_OFFSET_ALLOCATOR_H_
