#include "master/directory/segment.h"

namespace mooncake {

Segment::Segment(uint32_t slot, rpc::SegmentInfo info, uint64_t alignment, bool attached)
    : slot_(slot),
      info_(std::move(info)),
      // Nothing is ever allocated in a daemon's SSD tier.
      allocator_(disk() ? 0 : static_cast<uint64_t>(info_.size), alignment),
      attached_(attached),
      adopts_(attached && disk()),
      // Mounted new: it has no replica to doubt. Restored: its replicas await a round.
      reconciled_(attached) {}

Segment::Segment(uint32_t slot, rpc::SegmentInfo info, Segment& replaced)
    : slot_(slot), info_(std::move(info)), allocator_(0), attached_(false) {
  absl::MutexLock lock(&replaced.mu_);
  allocator_ = std::move(replaced.allocator_);
  used_.store(allocator_.used(), std::memory_order_relaxed);
  allocating_ = replaced.allocating_;
  attached_ = replaced.attached();
  detach_deadline_ms_ = replaced.detach_deadline_ms();
  draining_ = replaced.draining_.load();
  held_ = replaced.held();
  adopts_ = replaced.adopts();
  unverified_ = replaced.unverified();
  round_ = replaced.round();
  reconciled_ = replaced.reconciled();
  token_ = replaced.token_;
  round_ended_ = replaced.round_ended_;
}

bool Segment::Allocate(uint64_t size, uint64_t* offset, uint32_t* node) {
  absl::MutexLock lock(&mu_);
  if (!allocating_ || !attached()) return false;
  OffsetAllocator::Allocation a = allocator_.Allocate(size);
  if (!a.ok()) return false;
  used_.store(allocator_.used(), std::memory_order_relaxed);
  *offset = a.offset;
  *node = a.node;
  return true;
}

bool Segment::Reserve(uint64_t offset, uint64_t size, uint32_t* node) {
  absl::MutexLock lock(&mu_);
  OffsetAllocator::Allocation a = allocator_.AllocateAt(offset, size);
  used_.store(allocator_.used(), std::memory_order_relaxed);
  *node = a.node;
  return a.ok();
}

void Segment::Attach(uint32_t round) {
  absl::MutexLock lock(&mu_);
  allocating_ = !draining();
  if (disk()) {
    // Before the segment is attached: nothing it held before is listed unvouched.
    reconciled_.store(false, std::memory_order_release);
    round_.store(round, std::memory_order_release);
    token_ = 0;
    round_ended_ = false;
  }
  attached_.store(true, std::memory_order_release);
  detach_deadline_ms_.store(0);
}

bool Segment::BeginRound(int64_t token, uint32_t round) {
  absl::MutexLock lock(&mu_);
  if (token_ == token) return false;
  token_ = token;
  round_ended_ = false;
  round_.store(round, std::memory_order_release);
  return true;
}

bool Segment::InRound(int64_t token) const {
  absl::MutexLock lock(&mu_);
  return token != 0 && token_ == token;
}

bool Segment::EndRound(int64_t token, bool* current, uint32_t* ended) {
  absl::MutexLock lock(&mu_);
  *current = token != 0 && token_ == token;
  if (!*current || round_ended_) return false;
  round_ended_ = true;
  *ended = round_.load(std::memory_order_relaxed);
  return true;
}

void Segment::MarkReconciled(int64_t token) {
  absl::MutexLock lock(&mu_);
  if (token_ == token) reconciled_.store(true, std::memory_order_release);
}

void Segment::Detach(int64_t deadline_ms) {
  // Under mu_, so that an Allocate that saw the segment attached has finished.
  absl::MutexLock lock(&mu_);
  attached_.store(false, std::memory_order_release);
  adopts_.store(false, std::memory_order_release);
  detach_deadline_ms_.store(deadline_ms);
}

void Segment::Free(uint32_t node) {
  absl::MutexLock lock(&mu_);
  allocator_.Free(node);
  used_.store(allocator_.used(), std::memory_order_relaxed);
}

void Segment::StopAllocating() {
  absl::MutexLock lock(&mu_);
  allocating_ = false;
}

void Segment::MarkDraining() {
  absl::MutexLock lock(&mu_);
  allocating_ = false;
  draining_.store(true, std::memory_order_release);
}

void Segment::Hold() {
  absl::MutexLock lock(&mu_);
  allocating_ = false;
  held_.store(true, std::memory_order_release);
}

void Segment::Release() {
  absl::MutexLock lock(&mu_);
  held_.store(false, std::memory_order_release);
  allocating_ = attached() && !draining_.load(std::memory_order_acquire);
}

uint64_t Segment::capacity() const { return allocator_.capacity(); }

double Segment::free_ratio() const {
  absl::MutexLock lock(&mu_);
  uint64_t cap = allocator_.capacity();
  return cap == 0 ? 0.0 : static_cast<double>(allocator_.free_bytes()) / static_cast<double>(cap);
}

}  // namespace mooncake
