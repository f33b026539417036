// What the master dropped because its bytes could not be trusted, by reason: the figures
// behind mooncake_master_objects_dropped_total{reason} (docs/operations.md) and the log
// lines that say so. A drop turns a read that would fail for good (or, worse, answer
// another object's bytes) into a miss (-704) that a put can fill again; an operator must
// still hear of it, since it is data lost.
//
// Each reason logs through its own throttle (common/log_throttle.h): a peer can cause
// drops at will (a daemon's reports), and a restore can cause millions at once.
//
// Thread-safety: every method may be called from any thread (atomics).
#ifndef MOONCAKE_MASTER_DROPPED_OBJECTS_H_
#define MOONCAKE_MASTER_DROPPED_OBJECTS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <string>

#include "common/log_throttle.h"

namespace mooncake {

// Why (the metric's reason label). Parts of the master add theirs here.
enum class DropReason : uint8_t {
  // A daemon reported a replica it could not read correctly (ReportBadReplicas): its
  // bytes failed the object's checksum, or its owner's SSD does not hold it.
  kUnreadable,
  kCount
};

inline const char* DropReasonName(DropReason reason) {
  switch (reason) {
    case DropReason::kUnreadable:
      return "unreadable";
    case DropReason::kCount:
      break;
  }
  return "?";
}

class DroppedObjects {
 public:
  // Counts n drops for reason; true when a log line about them is due now (then
  // *passed_over, when given, says how many calls went unlogged since the last line).
  bool Count(DropReason reason, int64_t n, uint64_t* passed_over = nullptr) {
    size_t i = static_cast<size_t>(reason);
    counts_[i].fetch_add(n, std::memory_order_relaxed);
    return throttles_[i].Due(passed_over);
  }
  int64_t count(DropReason reason) const {
    return counts_[static_cast<size_t>(reason)].load(std::memory_order_relaxed);
  }
  // Every reason with its count (zeros too: a scrape shows the series before any drop).
  std::map<std::string, int64_t> Figures() const {
    std::map<std::string, int64_t> out;
    for (size_t i = 0; i < kReasons; ++i) {
      out[DropReasonName(static_cast<DropReason>(i))] = counts_[i].load();
    }
    return out;
  }

 private:
  static constexpr size_t kReasons = static_cast<size_t>(DropReason::kCount);
  std::array<std::atomic<int64_t>, kReasons> counts_{};
  std::array<LogThrottle, kReasons> throttles_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_DROPPED_OBJECTS_H_
