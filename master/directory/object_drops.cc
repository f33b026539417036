#include "master/directory/object_drops.h"

#include "common/base/logging.h"

namespace mooncake {

const char* ObjectDrops::Name(DropReason reason) {
  switch (reason) {
    case DropReason::kUnreadable: return "unreadable";
    case DropReason::kRestoreChecksum: return "restore_checksum";
    case DropReason::kRestoreUnverifiable: return "restore_unverifiable";
    case DropReason::kDiskReconcile: return "disk_reconcile";
    case DropReason::kParkedExpired: return "parked_expired";
    case DropReason::kCount: break;
  }
  return "unknown";
}

void ObjectDrops::Record(DropReason reason, int64_t n, const char* why) {
  if (n <= 0) return;
  const size_t i = static_cast<size_t>(reason);
  counts_[i].fetch_add(n, std::memory_order_relaxed);
  unlogged_[i].fetch_add(n, std::memory_order_relaxed);
  if (!throttles_[i].Due()) return;
  const int64_t since = unlogged_[i].exchange(0, std::memory_order_relaxed);
  MC_LOG_WARN("objects dropped (%s): %lld now, %lld since the last such line: %s", Name(reason),
              static_cast<long long>(n), static_cast<long long>(since), why);
}

}  // namespace mooncake
