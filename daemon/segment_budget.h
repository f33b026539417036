// The memory clients have this daemon map for them (MOUNT_SEGMENT, which is what
// setup(global_segment_size) asks for, and ALLOCATE_SEGMENT): every mount is checked
// before a byte is mapped, and one refused is answered RESOURCE_LIMIT_EXCEEDED (-1300)
// with a reason naming the numbers and the fix, instead of growing the daemon until the
// kernel's OOM killer ends it with every object it holds.
//
// A mount is refused only when (docs/daemon.md, "Client segments"):
//  - this host cannot back it now (daemon/memory/host_memory.h: MemAvailable less a reserve for
//    the host, or free huge pages; the one rule, the same as for the daemon's own
//    --global_segment_size at start); or
//  - it is over a cap the operator set: --client_segment_budget, all clients together,
//    or --client_segment_budget_per_client, one connection (ClientConnection counts its
//    own, checked first). Both default to 0: no cap, whatever the host can back.
//
// Two concurrent mounts must not both pass against the same free memory: the check and
// the promise of a mount's bytes are one step under a lock, and promised bytes count as
// taken until they show in /proc/meminfo. A segment is faulted in a chunk at a time
// (64 MiB, SharedMemoryOptions::populated), each chunk leaving the promise once it is
// faulted in; so a mount being mapped is counted once, not twice (at worst its chunk in
// progress is), and mounts still fault their memory in side by side (on a many-core host
// eight TP ranks' segments fill faster together than in turn).
//
// Bytes come back to --client_segment_budget when the segment's memory is unmapped (by
// the deleter of the shared_ptr Map returns), not merely unmounted: a transfer may still
// hold it.
//
// Thread-safe.
#ifndef MOONCAKE_DAEMON_SEGMENT_BUDGET_H_
#define MOONCAKE_DAEMON_SEGMENT_BUDGET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/base/error_code.h"
#include "daemon/memory/host_memory.h"
#include "daemon/memory/segment_memory.h"

namespace mooncake {

class SegmentBudget : public std::enable_shared_from_this<SegmentBudget> {
 public:
  struct Limits {
    uint64_t total = 0;       // --client_segment_budget, all clients together; 0: no cap
    uint64_t per_client = 0;  // --client_segment_budget_per_client; 0: no cap
  };

  // How a segment is mapped and faulted in, reporting each chunk faulted in to populated:
  // CreateSegment (SegmentMemory::Create), or a test's own.
  using MapFn = std::function<std::unique_ptr<SegmentMemory>(
      uint64_t size, bool huge_pages_only, std::function<void(uint64_t bytes)> populated,
      std::string* why)>;
  static std::unique_ptr<SegmentMemory> CreateSegment(
      uint64_t size, bool huge_pages_only, std::function<void(uint64_t bytes)> populated,
      std::string* why);

  // meminfo gives the text of /proc/meminfo, asked at every mount.
  explicit SegmentBudget(Limits limits,
                         std::function<std::string()> meminfo = HostMemory::ReadMeminfo,
                         MapFn map = CreateSegment);
  SegmentBudget(const SegmentBudget&) = delete;
  SegmentBudget& operator=(const SegmentBudget&) = delete;

  const Limits& limits() const { return limits_; }
  uint64_t used() const;  // bytes mapped (or being mapped) for clients now

  // The per-connection cap as ClientConnection::ReserveSegmentBytes takes it (no cap:
  // UINT64_MAX), and the reason for a refusal by it: size asked, mounted already.
  uint64_t PerClientCap() const;
  std::string PerClientRefusal(uint64_t size, uint64_t mounted) const;

  // Checks size against --client_segment_budget and the host, then maps it: the
  // segment's memory, which gives its bytes back when the last holder lets go of it.
  // nullptr with *code and *why when refused (RESOURCE_LIMIT_EXCEEDED) or when the memory
  // cannot be had after all (NO_AVAILABLE_HANDLE); nothing is kept then.
  std::shared_ptr<SegmentMemory> Map(uint64_t size, ErrorCode* code, std::string* why);

  // "whatever this host can back at each mount (now 18.6 GiB: ...)" and the caps, for the
  // log line at start.
  std::string Describe() const;

 private:
  // The checks and the promise of size bytes; false with *why.
  bool Reserve(uint64_t size, bool* huge_pages_only, std::string* why);
  void Faulted(uint64_t bytes);  // promised bytes now faulted in (or given up)
  void Release(uint64_t size);   // a segment's memory is unmapped, or never was

  const Limits limits_;
  const std::function<std::string()> meminfo_;
  const MapFn map_;
  mutable std::mutex mu_;
  uint64_t used_ = 0;     // mapped or being mapped; guarded by mu_
  uint64_t pending_ = 0;  // promised, not yet faulted in; guarded by mu_
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_SEGMENT_BUDGET_H_
