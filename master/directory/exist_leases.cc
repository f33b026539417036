#include "master/directory/exist_leases.h"

#include <algorithm>

namespace mooncake {

bool ExistLeaseTable::Grant(const ObjectMetadata* object, int64_t until_ms, int64_t now_ms) {
  if (until_.size() >= std::min(prune_at_, kMaxPerShard)) {
    Prune(now_ms);
    prune_at_ = std::max(kMinPruneAt, 2 * until_.size());
  }
  auto it = until_.find(object);
  if (it != until_.end()) {
    it->second = std::max(it->second, until_ms);
    return true;
  }
  if (until_.size() >= kMaxPerShard) return false;
  until_.emplace(object, until_ms);
  return true;
}

bool ExistLeaseTable::Live(const ObjectMetadata* object, int64_t now_ms) const {
  auto it = until_.find(object);
  return it != until_.end() && it->second > now_ms;
}

void ExistLeaseTable::Prune(int64_t now_ms) {
  for (auto it = until_.begin(); it != until_.end();) {
    it = it->second > now_ms ? std::next(it) : until_.erase(it);
  }
}

}  // namespace mooncake
