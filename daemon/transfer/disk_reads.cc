#include "daemon/transfer/disk_reads.h"

#include <cstdlib>

#include "daemon/transfer/transfer_protocol.h"

namespace mooncake {

ErrorCode ReadDiskReplica(SsdStore* store, const DiskAddress& object, uint64_t value_offset,
                          char* dest, uint64_t length) {
  if (store == nullptr) return ErrorCode::INTERNAL_ERROR;
  SsdObject held;
  if (!store->Find(object.key, &held) || held.size != object.value_size ||
      (held.checksum >= 0 && object.checksum >= 0 && held.checksum != object.checksum)) {
    return ErrorCode::OBJECT_NOT_FOUND;  // not the value the master listed
  }
  if (length == 0 || length > held.size || value_offset > held.size - length) {
    return ErrorCode::INVALID_PARAMS;
  }
  return store->Read(object.key, value_offset, dest, length);
}

DiskReadSlots::DiskReadSlots(size_t slots) : slots_(slots == 0 ? 1 : slots) {}

DiskReadSlots::~DiskReadSlots() {
  for (char* b : allocated_) std::free(b);
}

DiskReadSlots::Slot::~Slot() {
  if (buffer_ != nullptr) owner_->Release(buffer_);
}

DiskReadSlots::Slot DiskReadSlots::Acquire(std::chrono::steady_clock::time_point deadline) {
  absl::MutexLock lock(&mu_);
  while (busy_ >= slots_) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (cv_.WaitWithTimeout(&mu_, absl::FromChrono(left)) && busy_ >= slots_) {
      return Slot(this, nullptr);
    }
  }
  char* buffer = nullptr;
  if (!free_.empty()) {
    buffer = free_.back();
    free_.pop_back();
  } else {
    buffer = static_cast<char*>(std::aligned_alloc(4096, transfer::kMaxDiskRead));
    if (buffer == nullptr) return Slot(this, nullptr);
    allocated_.push_back(buffer);
  }
  ++busy_;
  return Slot(this, buffer);
}

void DiskReadSlots::Release(char* buffer) {
  absl::MutexLock lock(&mu_);
  free_.push_back(buffer);
  --busy_;
  cv_.Signal();
}

size_t DiskReadSlots::busy() const {
  absl::MutexLock lock(&mu_);
  return busy_;
}

}  // namespace mooncake
