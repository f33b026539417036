#include "daemon/base/chunked_checksum.h"

#include "common/base/crc32c.h"

namespace mooncake {

void ChunkedChecksum::Add(uint64_t offset, const char* data, uint64_t length) {
  AddCrc(offset, length, Crc32c(data, length));  // outside the lock: the expensive part
}

void ChunkedChecksum::AddCrc(uint64_t offset, uint64_t length, uint32_t crc) {
  std::lock_guard<std::mutex> lock(mu_);
  chunks_.emplace(offset, Chunk{length, crc});
  bytes_ += length;
}

uint64_t ChunkedChecksum::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

bool ChunkedChecksum::Total(uint64_t size, uint32_t* crc) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t covered = 0;
  uint32_t total = 0;
  for (const auto& c : chunks_) {
    if (c.first != covered || c.second.length > size - covered) return false;
    total = Crc32cCombine(total, c.second.crc, c.second.length);
    covered += c.second.length;
  }
  *crc = total;
  return covered == size;
}

}  // namespace mooncake
