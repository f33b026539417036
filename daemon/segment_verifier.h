// Checks, after a memory segment was mounted again, the replicas in it the master cannot
// vouch for: after a master restore (or a standby's takeover) every restored replica, and
// after a return past the grace period the objects the master parked when it dropped the
// segment (docs/durability.md, "Verification after restore", "A daemon that returns
// late"). For each segment queued, a background thread pages through them
// (ListUnverified), computes the CRC-32C of each range in this daemon's own memory, and
// reports which match the checksum the object was published with (ReportVerified); the
// master keeps or adopts the good ones and drops the bad. One log line per segment says
// how many, how many bad, and how long it took.
//
// Off the request path: reads go on meanwhile (a whole-value read checks the CRC itself;
// a fragment read is not served from an unverified replica: docs/mooncake-api.md).
//
// Thread safety: Enqueue from any thread; Stop (also the destructor) joins the thread.
#ifndef MOONCAKE_DAEMON_SEGMENT_VERIFIER_H_
#define MOONCAKE_DAEMON_SEGMENT_VERIFIER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "daemon/master_link/master_client.h"
#include "daemon/memory/segment_memory.h"

namespace mooncake {

class SegmentVerifier {
 public:
  // find: the memory of one of this daemon's segments by id (null once unmounted).
  using Finder = std::function<std::shared_ptr<SegmentMemory>(int64_t segment_id)>;
  SegmentVerifier(MasterClient* master, int64_t daemon_id, Finder find);
  ~SegmentVerifier();
  SegmentVerifier(const SegmentVerifier&) = delete;
  SegmentVerifier& operator=(const SegmentVerifier&) = delete;

  // Queues a walk of the segment (a segment queued already is walked once more after).
  void Enqueue(int64_t segment_id);
  void Stop();

  // Replicas asked for per page.
  static constexpr int32_t kPageSize = 4096;

 private:
  void Loop();
  // One segment's walk; false when the master could not be asked (it is queued again).
  bool Verify(int64_t segment_id);

  MasterClient* const master_;
  const int64_t daemon_id_;
  const Finder find_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int64_t> queue_;  // guarded by mu_
  bool stop_ = false;          // guarded by mu_
  std::thread thread_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_SEGMENT_VERIFIER_H_
