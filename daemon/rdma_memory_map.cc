#include "daemon/transfer/rdma_memory_map.h"

#include <utility>

namespace mooncake {

bool RdmaMemoryMap::Insert(const char* base, uint64_t size, std::vector<ibv_mr*> mrs,
                           bool for_peers) {
  uintptr_t start = reinterpret_cast<uintptr_t>(base);
  if (size == 0 || size - 1 > UINTPTR_MAX - start) return false;
  auto next = regions_.lower_bound(start);
  if (next != regions_.end() && next->first - start < size) return false;
  if (next != regions_.begin()) {
    const Region& prev = std::prev(next)->second;
    if (start - prev.base < prev.size) return false;
  }
  regions_.emplace(start, Region{start, size, std::move(mrs), for_peers});
  return true;
}

std::vector<ibv_mr*> RdmaMemoryMap::Remove(const char* base) {
  auto it = regions_.find(reinterpret_cast<uintptr_t>(base));
  if (it == regions_.end()) return {};
  std::vector<ibv_mr*> mrs = std::move(it->second.mrs);
  regions_.erase(it);
  return mrs;
}

const RdmaMemoryMap::Region* RdmaMemoryMap::Find(const char* addr, uint64_t length) const {
  uintptr_t start = reinterpret_cast<uintptr_t>(addr);
  auto it = regions_.upper_bound(start);  // the first region starting after addr
  if (it == regions_.begin()) return nullptr;
  const Region& r = std::prev(it)->second;
  uint64_t offset = start - r.base;
  if (offset >= r.size || length > r.size - offset) return nullptr;
  return &r;
}

std::vector<ibv_mr*> RdmaMemoryMap::TakeAll() {
  std::vector<ibv_mr*> all;
  for (auto& entry : regions_) {
    all.insert(all.end(), entry.second.mrs.begin(), entry.second.mrs.end());
  }
  regions_.clear();
  return all;
}

}  // namespace mooncake
