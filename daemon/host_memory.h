// How much memory this host can back now, and the one rule every segment the daemon maps
// for itself or for a client must pass before a byte of it is mapped (docs/daemon.md,
// "Client segments"): its own --global_segment_size at start, and each client's mount
// (setup's global_segment_size, MOUNT_SEGMENT, ALLOCATE_SEGMENT).
//
// Why a rule at all: a segment is faulted in whole when it is made (SegmentMemory,
// MADV_POPULATE_WRITE), so a segment the host cannot back does not fail politely: the
// kernel's OOM killer ends the daemon, or an application, with every object it held.
// Refused before mapping, it costs a code and a log line.
//
// The rule. A segment lives on one kind of page, never on both (common/base/shared_memory.h:
// reserved huge pages when enough are free, else ordinary shared memory), so it fits when
// either kind can hold all of it:
//   - ordinary pages:  size <= MemAvailable - reserve
//   - huge pages:      size, rounded up to whole huge pages, <= free huge pages
//                      ((HugePages_Free - HugePages_Rsvd) x Hugepagesize)
// less what other mounts have been promised and not yet faulted in (a segment shows in
// /proc/meminfo only as its pages are; SegmentBudget counts the rest). What the host "can
// back now" is the larger of the two. A segment that fits only on huge pages must get
// huge pages: falling back to ordinary ones would be the OOM the rule is there to prevent.
//
// The reserve is what a segment may never take from the host: a tenth of MemTotal, and at
// least 512 MiB. The applications beside the daemon (the inference engine itself) keep
// allocating after a mount; the kernel, sshd and the page cache of the binaries need
// room; and a tenth of memory is where OOM daemons start killing by default (earlyoom's
// threshold), which a mount must never be what pushes the host past. Huge pages need no
// reserve: nothing but hugetlbfs mappings can use them.
//
// MemAvailable is the kernel's own estimate of what can be allocated without swapping
// (page cache it can drop included); a kernel without it (before 3.14) gives MemFree.
// Unreadable /proc/meminfo reads as no memory at all: nothing is mapped on a guess.
//
// A value type; Parse and ReadMeminfo are thread-safe.
#ifndef MOONCAKE_DAEMON_HOST_MEMORY_H_
#define MOONCAKE_DAEMON_HOST_MEMORY_H_

#include <cstdint>
#include <string>

namespace mooncake {

class HostMemory {
 public:
  static constexpr uint64_t kReserveFloor = 512ull << 20;
  static constexpr uint64_t kReserveDivisor = 10;  // the reserve is MemTotal / this

  // From the text of /proc/meminfo ("" when unreadable).
  static HostMemory Parse(const std::string& meminfo);
  // /proc/meminfo's text now ("" when unreadable).
  static std::string ReadMeminfo();
  // A field of /proc/meminfo's text in bytes ("MemAvailable"; HugePages_* are counts), 0
  // when absent.
  static uint64_t MeminfoBytes(const std::string& meminfo, const std::string& field);

  bool known() const { return total_ > 0; }
  uint64_t total() const { return total_; }
  uint64_t available() const { return available_; }
  uint64_t free_huge_pages() const { return free_huge_; }  // bytes
  uint64_t reserve() const;
  // What ordinary pages can take: available - reserve, 0 below it.
  uint64_t ordinary() const;
  // The larger of ordinary() and free_huge_pages(), less pending (never below 0).
  uint64_t backable(uint64_t pending) const;

  // Whether a segment of size bytes can be backed now, pending bytes being promised to
  // other mounts and not yet faulted in. *huge_pages_only is set when only huge pages can
  // hold it (SegmentMemory::Create must then not fall back to ordinary ones). false with
  // *why naming the numbers: "segment 4.0 GiB over the 3.1 GiB this host can back now
  // (MemAvailable 5.5 GiB - reserve 2.4 GiB; free huge pages 0 B)". The caller adds the
  // fix.
  bool Admits(uint64_t size, uint64_t pending, bool* huge_pages_only, std::string* why) const;

  // "MemAvailable 5.5 GiB - reserve 2.4 GiB; free huge pages 0 B", for log lines.
  std::string Describe() const;

 private:
  uint64_t total_ = 0;
  uint64_t available_ = 0;
  uint64_t free_huge_ = 0;
  uint64_t huge_page_size_ = 0;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_HOST_MEMORY_H_
