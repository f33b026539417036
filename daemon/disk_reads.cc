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
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, deadline, [this] { return busy_ < slots_; })) {
    return Slot(this, nullptr);
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
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(buffer);
  --busy_;
  cv_.notify_one();
}

size_t DiskReadSlots::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

}  // namespace mooncake
