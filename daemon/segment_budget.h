// How much memory clients may have this daemon mount for them (MOUNT_SEGMENT, which is
// what setup(global_segment_size) asks for): a budget for all clients together and a cap
// for any one connection, both taken before a byte is mapped. A request over either is
// refused with RESOURCE_LIMIT_EXCEEDED (-1300) and a log line, instead of growing the
// daemon until the kernel's OOM killer ends it, with every object it holds.
//
// Why before mapping: SegmentMemory faults every page in at once (MADV_POPULATE_WRITE),
// so a mount the host cannot afford kills a process while it is being created; and two
// concurrent requests must not both pass a check made against the same remaining budget
// (Reserve takes its bytes atomically).
//
// The rules (docs/daemon.md, "Client segments"):
//  - all clients together: --client_segment_budget; 0 (the default) is half of the
//    memory the kernel reports available (MemAvailable in /proc/meminfo, MemTotal when
//    absent) when the daemon starts, after its own global segment is in place;
//  - one connection: --client_segment_budget_per_client; 0 (the default) is a quarter of
//    the budget above;
//  - and whatever the budget says, one mount may take at most half of what is available at
//    that moment (MemAvailable plus free huge pages): the host may have filled up since
//    the daemon started.
//
// Bytes come back to the budget when the segment's memory is unmapped (by the deleter of
// the shared_ptr Map returns), not merely unmounted: a transfer may still hold it.
//
// Thread-safe.
#ifndef MOONCAKE_DAEMON_SEGMENT_BUDGET_H_
#define MOONCAKE_DAEMON_SEGMENT_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/error_code.h"
#include "daemon/segment_memory.h"

namespace mooncake {

class SegmentBudget : public std::enable_shared_from_this<SegmentBudget> {
 public:
  struct Limits {
    uint64_t total = 0;       // all clients together
    uint64_t per_client = 0;  // one connection
  };

  // The limits from the flags' values, 0 standing for the rules above; meminfo is the text
  // of /proc/meminfo ("" when unreadable: then physical_bytes stands for MemAvailable).
  static Limits Resolve(uint64_t total_flag, uint64_t per_client_flag, const std::string& meminfo,
                        uint64_t physical_bytes);
  // A field of /proc/meminfo's text in bytes ("MemAvailable"), 0 when absent.
  static uint64_t MeminfoBytes(const std::string& meminfo, const std::string& field);
  // /proc/meminfo's text now ("" when unreadable).
  static std::string ReadMeminfo();

  // meminfo is asked at every Reserve for the memory available at that moment.
  explicit SegmentBudget(Limits limits, std::function<std::string()> meminfo = ReadMeminfo);
  SegmentBudget(const SegmentBudget&) = delete;
  SegmentBudget& operator=(const SegmentBudget&) = delete;

  const Limits& limits() const { return limits_; }
  uint64_t used() const { return used_.load(); }

  // Takes size bytes out of the budget and maps them: the segment's memory, which gives
  // its bytes back when the last holder lets go of it. nullptr with *code and *why when
  // the budget or the memory available now refuses it (RESOURCE_LIMIT_EXCEEDED) or the
  // memory cannot be had (NO_AVAILABLE_HANDLE); nothing is kept then. The per-client cap
  // is the caller's (ClientConnection::ReserveSegmentBytes), checked first.
  std::shared_ptr<SegmentMemory> Map(uint64_t size, ErrorCode* code, std::string* why);

 private:
  // The checks of the rules above and the atomic take; false with *why.
  bool Reserve(uint64_t size, std::string* why);
  void Release(uint64_t size) { used_.fetch_sub(size); }

  const Limits limits_;
  const std::function<std::string()> meminfo_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_SEGMENT_BUDGET_H_
