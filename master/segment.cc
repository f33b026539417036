#include "master/segment.h"

namespace mooncake {

Segment::Segment(uint32_t slot, rpc::SegmentInfo info, uint64_t alignment)
    : slot_(slot), info_(std::move(info)), allocator_(static_cast<uint64_t>(info_.size), alignment) {}

bool Segment::Allocate(uint64_t size, uint64_t* offset, uint32_t* node) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!allocating_) return false;
  OffsetAllocator::Allocation a = allocator_.Allocate(size);
  if (!a.ok()) return false;
  *offset = a.offset;
  *node = a.node;
  return true;
}

void Segment::Free(uint32_t node) {
  std::lock_guard<std::mutex> lock(mu_);
  allocator_.Free(node);
}

void Segment::StopAllocating() {
  std::lock_guard<std::mutex> lock(mu_);
  allocating_ = false;
}

uint64_t Segment::capacity() const { return allocator_.capacity(); }

uint64_t Segment::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocator_.used();
}

double Segment::free_ratio() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t cap = allocator_.capacity();
  return cap == 0 ? 0.0 : static_cast<double>(allocator_.free_bytes()) / static_cast<double>(cap);
}

}  // namespace mooncake
