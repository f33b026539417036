// Objects the master dropped, or replicas it took from them, because what it listed could
// not be read back as the object's bytes (a read fails rather than answer another key's
// bytes; the loss is counted and logged). One counter per reason, exported
// as mooncake_master_objects_dropped_total{reason} (docs/operations.md, "Metrics"), and one
// log line a second at most per reason (common/base/log_throttle.h), with the count since the
// previous line, so that a daemon that keeps reporting cannot flood the log.
//
// Reasons: unreadable (a daemon reported a replica it could not read correctly),
// restore_checksum (a restored or re-attached replica failed verification),
// restore_unverifiable, disk_reconcile (a disk replica the daemon's SSD no longer holds,
// found by the reconciliation after a (re-)mount: docs/ssd.md), parked_expired.
//
// Thread safety: any thread (lock-free counters; the throttle is lock-free too).
#ifndef MOONCAKE_MASTER_OBJECT_DROPS_H_
#define MOONCAKE_MASTER_OBJECT_DROPS_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "common/base/log_throttle.h"

namespace mooncake {

enum class DropReason : uint8_t {
  kUnreadable,
  kRestoreChecksum,
  kRestoreUnverifiable,
  kDiskReconcile,
  kParkedExpired,
  kCount
};

class ObjectDrops {
 public:
  // The label value of reason.
  static const char* Name(DropReason reason);

  // n more dropped for reason; logs "<n> objects dropped (<reason>): <why>" (a warning),
  // with what was dropped since the last line it wrote, when a line is due. n 0: nothing.
  void Record(DropReason reason, int64_t n, const char* why);
  int64_t value(DropReason reason) const {
    return counts_[static_cast<size_t>(reason)].load(std::memory_order_relaxed);
  }

 private:
  static constexpr size_t kReasons = static_cast<size_t>(DropReason::kCount);
  std::array<std::atomic<int64_t>, kReasons> counts_{};
  std::array<std::atomic<int64_t>, kReasons> unlogged_{};  // counted, not yet in a line
  std::array<LogThrottle, kReasons> throttles_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_OBJECT_DROPS_H_
