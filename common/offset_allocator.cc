#include "common/base/offset_allocator.h"

#include <algorithm>

namespace mooncake {

namespace {

inline uint32_t HighestBit(uint64_t v) {  // v != 0
  return 63u - static_cast<uint32_t>(__builtin_clzll(v));
}

inline uint32_t LowestBit(uint64_t v) {  // v != 0
  return static_cast<uint32_t>(__builtin_ctzll(v));
}

}  // namespace

// Bin layout: sizes 0..7 map to bins 0..7 one-to-one (exponent 0). A larger
// size with highest set bit h keeps the 3 bits below h as its mantissa and
// gets exponent h - 2, so bin (e, m) starts at (8 + m) << (e - 1). The
// largest 64-bit value lands in bin 495, rounding it up gives 496; both fit
// in the 512 bins.
uint32_t OffsetAllocator::BinRoundDown(uint64_t units) {
  if (units < kMantissaValue) return static_cast<uint32_t>(units);
  const uint32_t mantissa_shift = HighestBit(units) - kMantissaBits;
  const uint32_t exponent = mantissa_shift + 1;
  const uint32_t mantissa =
      static_cast<uint32_t>(units >> mantissa_shift) & kMantissaMask;
  return (exponent << kMantissaBits) | mantissa;
}

// Smallest bin whose every range is >= units. Incrementing the bin index
// carries a mantissa overflow into the exponent, which is exactly the next
// bin boundary.
uint32_t OffsetAllocator::BinRoundUp(uint64_t units) {
  if (units < kMantissaValue) return static_cast<uint32_t>(units);
  const uint32_t mantissa_shift = HighestBit(units) - kMantissaBits;
  const uint64_t low_bits = units & ((uint64_t{1} << mantissa_shift) - 1);
  return BinRoundDown(units) + (low_bits != 0 ? 1 : 0);
}

OffsetAllocator::OffsetAllocator(uint64_t capacity, uint64_t alignment) {
  // Alignment is applied as a shift, so it must be a power of two.
  while (shift_ < 63 && (uint64_t{1} << shift_) < alignment) ++shift_;
  capacity_units_ = capacity >> shift_;
  std::fill(bin_heads_, bin_heads_ + kNumBins, kNoNode);
  if (capacity_units_ == 0) return;  // Nothing to hand out, ever.
  const uint32_t n = NewNode();
  nodes_[n].offset = 0;
  nodes_[n].size = capacity_units_;
  InsertFree(n);
}

uint32_t OffsetAllocator::NewNode() {
  if (spare_head_ != kNoNode) {
    const uint32_t n = spare_head_;
    spare_head_ = nodes_[n].bin_next;
    nodes_[n] = Node();
    return n;
  }
  if (nodes_.size() >= kNoNode) return kNoNode;  // Handle space exhausted.
  nodes_.emplace_back();
  return static_cast<uint32_t>(nodes_.size() - 1);
}

void OffsetAllocator::ReleaseNode(uint32_t n) {
  nodes_[n] = Node();  // used = false, so a stale Free() of it is ignored.
  nodes_[n].bin_next = spare_head_;
  spare_head_ = n;
}

void OffsetAllocator::InsertFree(uint32_t n) {
  Node& node = nodes_[n];
  const uint32_t bin = BinRoundDown(node.size);
  node.used = false;
  node.bin_prev = kNoNode;
  node.bin_next = bin_heads_[bin];
  if (node.bin_next != kNoNode) nodes_[node.bin_next].bin_prev = n;
  bin_heads_[bin] = n;
  const uint32_t exponent = bin >> kMantissaBits;
  bin_bitmaps_[exponent] |= static_cast<uint8_t>(1u << (bin & kMantissaMask));
  top_bitmap_ |= uint64_t{1} << exponent;
  ++free_ranges_;
}

void OffsetAllocator::RemoveFree(uint32_t n) {
  Node& node = nodes_[n];
  if (node.bin_prev != kNoNode) {
    nodes_[node.bin_prev].bin_next = node.bin_next;
  } else {
    // Head of its bin: the bin may become empty, so maintain the bitmaps.
    const uint32_t bin = BinRoundDown(node.size);
    bin_heads_[bin] = node.bin_next;
    if (node.bin_next == kNoNode) {
      const uint32_t exponent = bin >> kMantissaBits;
      bin_bitmaps_[exponent] &=
          static_cast<uint8_t>(~(1u << (bin & kMantissaMask)));
      if (bin_bitmaps_[exponent] == 0) {
        top_bitmap_ &= ~(uint64_t{1} << exponent);
      }
    }
  }
  if (node.bin_next != kNoNode) nodes_[node.bin_next].bin_prev = node.bin_prev;
  node.bin_prev = node.bin_next = kNoNode;
  --free_ranges_;
}

// Puts node r into the address list right before n.
void OffsetAllocator::LinkBefore(uint32_t n, uint32_t r) {
  nodes_[r].addr_next = n;
  nodes_[r].addr_prev = nodes_[n].addr_prev;
  if (nodes_[r].addr_prev != kNoNode) nodes_[nodes_[r].addr_prev].addr_next = r;
  nodes_[n].addr_prev = r;
}

// Puts node r into the address list right after n.
void OffsetAllocator::LinkAfter(uint32_t n, uint32_t r) {
  nodes_[r].addr_prev = n;
  nodes_[r].addr_next = nodes_[n].addr_next;
  if (nodes_[r].addr_next != kNoNode) nodes_[nodes_[r].addr_next].addr_prev = r;
  nodes_[n].addr_next = r;
}

// First non-empty bin with index >= bin, or kNoNode.
uint32_t OffsetAllocator::FindBinAtLeast(uint32_t bin) const {
  const uint32_t exponent = bin >> kMantissaBits;
  if (exponent >= kNumExponents) return kNoNode;
  // Same exponent, mantissa >= requested.
  const uint32_t same =
      bin_bitmaps_[exponent] & (0xffu << (bin & kMantissaMask)) & 0xffu;
  if (same != 0) return (exponent << kMantissaBits) | LowestBit(same);
  // Any bin of a strictly larger exponent fits; take the smallest.
  if (exponent + 1 >= kNumExponents) return kNoNode;
  const uint64_t higher = top_bitmap_ & (~uint64_t{0} << (exponent + 1));
  if (higher == 0) return kNoNode;
  const uint32_t e = LowestBit(higher);
  return (e << kMantissaBits) | LowestBit(bin_bitmaps_[e]);
}

// A free node in `bin` with size >= units, or kNoNode. Linear in the bin's
// length; only used for the bin just below the rounded-up search bin.
uint32_t OffsetAllocator::ScanBin(uint32_t bin, uint64_t units) const {
  for (uint32_t n = bin_heads_[bin]; n != kNoNode; n = nodes_[n].bin_next) {
    if (nodes_[n].size >= units) return n;
  }
  return kNoNode;
}

OffsetAllocator::Allocation OffsetAllocator::Allocate(uint64_t size) {
  Allocation result;
  // Checking against capacity first also keeps the round-up below from
  // overflowing: capacity is already a multiple of the alignment.
  if (size == 0 || size > capacity()) return result;
  const uint64_t align_mask = (uint64_t{1} << shift_) - 1;
  const uint64_t units = (size + align_mask) >> shift_;

  // Good fit: every range in the rounded-up bin or above is large enough.
  uint32_t n = kNoNode;
  const uint32_t bin = FindBinAtLeast(BinRoundUp(units));
  if (bin != kNoNode) {
    n = bin_heads_[bin];
  } else if (BinRoundDown(units) != BinRoundUp(units)) {
    // The bin below holds ranges straddling the request size (e.g. the whole
    // remaining capacity when asked for exactly that); some may fit.
    n = ScanBin(BinRoundDown(units), units);
  }
  if (n == kNoNode) return result;

  // Take the remainder's node before touching lists, so failing to get one
  // leaves the allocator unchanged.
  const uint64_t remainder = nodes_[n].size - units;
  uint32_t rest = kNoNode;
  if (remainder != 0) {
    rest = NewNode();
    if (rest == kNoNode) return result;
  }

  RemoveFree(n);
  Node& node = nodes_[n];
  node.size = units;
  node.used = true;
  if (rest != kNoNode) {
    // The remainder sits right after the allocation in address order.
    nodes_[rest].offset = node.offset + units;
    nodes_[rest].size = remainder;
    LinkAfter(n, rest);
    InsertFree(rest);
  }
  used_units_ += units;
  ++allocations_;
  result.offset = node.offset << shift_;
  result.node = n;
  return result;
}

// The range, free or allocated, holding `unit` (< capacity_units_); kNoNode
// only when there is neither a hint nor a free range to start from.
uint32_t OffsetAllocator::FindRange(uint64_t unit) const {
  uint32_t n = at_hint_;
  // Every range has at least one unit and ReleaseNode() resets spares to size
  // 0, so this tells a hint merged away from one that is still a range.
  if (n == kNoNode || (!nodes_[n].used && nodes_[n].size == 0)) {
    // Any range is a valid start and the bitmaps find a free one in O(1). With
    // no free range left, AllocateAt() has to fail anyway.
    if (top_bitmap_ == 0) return kNoNode;
    const uint32_t e = LowestBit(top_bitmap_);
    n = bin_heads_[(e << kMantissaBits) | LowestBit(bin_bitmaps_[e])];
  }
  // The ranges tile [0, capacity) in address order, so both walks end.
  while (unit < nodes_[n].offset) n = nodes_[n].addr_prev;
  while (unit >= nodes_[n].offset + nodes_[n].size) n = nodes_[n].addr_next;
  return n;
}

OffsetAllocator::Allocation OffsetAllocator::AllocateAt(uint64_t offset,
                                                        uint64_t size) {
  Allocation result;
  const uint64_t align_mask = (uint64_t{1} << shift_) - 1;
  // Comparing with what is left after offset cannot overflow, and since
  // capacity is a multiple of the alignment the round-up below cannot either.
  if (size == 0 || (offset & align_mask) != 0 || offset >= capacity() ||
      size > capacity() - offset) {
    return result;
  }
  const uint64_t first = offset >> shift_;
  const uint64_t units = (size + align_mask) >> shift_;
  const uint32_t n = FindRange(first);
  // Free() merges free neighbours, so a free range is always followed by an
  // allocation (or the end): a request running past it overlaps that one.
  if (n == kNoNode || nodes_[n].used ||
      first + units > nodes_[n].offset + nodes_[n].size) {
    return result;
  }

  // Take the nodes of the free parts left before and after the request before
  // touching lists, as Allocate() does; handing back the first when the second
  // cannot be had leaves the allocator as it was.
  const uint64_t head = first - nodes_[n].offset;
  const uint64_t tail = nodes_[n].offset + nodes_[n].size - (first + units);
  uint32_t before = kNoNode;
  if (head != 0) {
    before = NewNode();
    if (before == kNoNode) return result;
  }
  uint32_t after = kNoNode;
  if (tail != 0) {
    after = NewNode();
    if (after == kNoNode) {
      if (before != kNoNode) ReleaseNode(before);
      return result;
    }
  }

  RemoveFree(n);
  if (before != kNoNode) {
    nodes_[before].offset = nodes_[n].offset;
    nodes_[before].size = head;
    LinkBefore(n, before);
    InsertFree(before);
  }
  if (after != kNoNode) {
    nodes_[after].offset = first + units;
    nodes_[after].size = tail;
    LinkAfter(n, after);
    InsertFree(after);
  }
  nodes_[n].offset = first;
  nodes_[n].size = units;
  nodes_[n].used = true;
  used_units_ += units;
  ++allocations_;
  at_hint_ = n;
  result.offset = offset;
  result.node = n;
  return result;
}

void OffsetAllocator::Free(uint32_t n) {
  // Unknown, spare, free-range and already-freed nodes all have used == false.
  if (n >= nodes_.size() || !nodes_[n].used) return;
  nodes_[n].used = false;
  used_units_ -= nodes_[n].size;
  --allocations_;

  // Absorb the left neighbour: this range now starts where it started.
  const uint32_t left = nodes_[n].addr_prev;
  if (left != kNoNode && !nodes_[left].used) {
    RemoveFree(left);
    nodes_[n].offset = nodes_[left].offset;
    nodes_[n].size += nodes_[left].size;
    const uint32_t before = nodes_[left].addr_prev;
    nodes_[n].addr_prev = before;
    if (before != kNoNode) nodes_[before].addr_next = n;
    ReleaseNode(left);
  }
  // Absorb the right neighbour.
  const uint32_t right = nodes_[n].addr_next;
  if (right != kNoNode && !nodes_[right].used) {
    RemoveFree(right);
    nodes_[n].size += nodes_[right].size;
    const uint32_t after = nodes_[right].addr_next;
    nodes_[n].addr_next = after;
    if (after != kNoNode) nodes_[after].addr_prev = n;
    ReleaseNode(right);
  }
  InsertFree(n);
}

uint64_t OffsetAllocator::capacity() const { return capacity_units_ << shift_; }

uint64_t OffsetAllocator::used() const { return used_units_ << shift_; }

uint64_t OffsetAllocator::free_bytes() const {
  return (capacity_units_ - used_units_) << shift_;
}

// The largest range lives in the highest non-empty bin, but ranges inside
// one bin differ by up to 12.5%, so that bin's list is scanned.
uint64_t OffsetAllocator::largest_free() const {
  if (top_bitmap_ == 0) return 0;
  const uint32_t e = HighestBit(top_bitmap_);
  const uint32_t bin = (e << kMantissaBits) | HighestBit(bin_bitmaps_[e]);
  uint64_t best = 0;
  for (uint32_t n = bin_heads_[bin]; n != kNoNode; n = nodes_[n].bin_next) {
    best = std::max(best, nodes_[n].size);
  }
  return best << shift_;
}

size_t OffsetAllocator::free_ranges() const { return free_ranges_; }

size_t OffsetAllocator::allocations() const { return allocations_; }

uint64_t OffsetAllocator::allocation_size(uint32_t n) const {
  if (n >= nodes_.size() || !nodes_[n].used) return 0;
  return nodes_[n].size << shift_;
}

}  // namespace mooncake
