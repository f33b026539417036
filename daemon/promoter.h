// Promotion on hit (the master's --promotion_on_hit, docs/ssd.md): when a get was served
// from a disk replica of an object the master marked `promote` (it has no memory replica),
// this daemon re-creates a memory replica in the background, so that the next reads are
// served from memory again: PromoteStart (the master reserves one memory replica), the
// bytes written to it (through ReplicaIO, as a put writes), PromoteEnd(ok) to publish it --
// or PromoteEnd(false) to free it when the write failed.
//
// The bytes. The get's answer goes to the client at once; the value lies in the client's
// pool, which the client may reuse as soon as it has the answer, so Offer copies it first
// (on the caller's thread). At most max_bytes of such copies are held at once; an offer
// over that, or of a key already queued, is dropped (counted): promotion is best effort,
// and a later hit offers it again.
//
// The value. A key re-written between the read and PromoteStart must not have the old bytes
// promoted as the new value: PromoteStart names a disk replica of the listing the value was
// read under, which the master checks the object still has (-704 otherwise), and the
// master answers PromoteEnd -704 for an object changed after PromoteStart.
//
// Threads: Offer from any thread; one thread of its own runs the promotions, one at a time.
#ifndef MOONCAKE_DAEMON_PROMOTER_H_
#define MOONCAKE_DAEMON_PROMOTER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "daemon/master_link/master_client.h"
#include "daemon/cluster/membership.h"
#include "daemon/replicas/replica_io.h"

namespace mooncake {

class Promoter {
 public:
  static constexpr uint64_t kDefaultMaxBytes = 256ull << 20;
  // A promotion's write gives up after this long (a dead owner fails it sooner).
  static constexpr std::chrono::seconds kWriteBudget{10};

  Promoter(MasterClient* master, Membership* membership, ReplicaIO* io,
           uint64_t max_bytes = kDefaultMaxBytes);
  ~Promoter();  // Stop()
  Promoter(const Promoter&) = delete;
  Promoter& operator=(const Promoter&) = delete;

  // Queues the promotion of key, whose value (size bytes) is at value now, read under a
  // listing with the LOCAL_DISK replica disk_replica_id; false when it was dropped (over
  // max_bytes, already queued, or stopping).
  bool Offer(const std::string& key, const char* value, uint64_t size, int64_t disk_replica_id);
  // Drops what is queued and waits for the promotion running, if any.
  void Stop();

  struct Stats {
    uint64_t promoted = 0;  // published
    uint64_t declined = 0;  // the master said no (it has a memory replica, no space, ...)
    uint64_t failed = 0;    // the write or the publish failed
    uint64_t dropped = 0;   // offers not taken
  };
  Stats stats() const;

 private:
  struct Item {
    std::string key;
    std::unique_ptr<char[]> value;
    uint64_t size = 0;
    int64_t disk_replica_id = 0;
  };
  void Run();
  void Promote(const Item& item);

  MasterClient* const master_;
  Membership* const membership_;
  ReplicaIO* const io_;
  const uint64_t max_bytes_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;     // guarded by mu_
  std::set<std::string> keys_;  // queued or running; guarded by mu_
  uint64_t bytes_ = 0;          // of the values queued or running; guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  std::thread thread_;

  std::atomic<uint64_t> promoted_{0}, declined_{0}, failed_{0}, dropped_{0};
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_PROMOTER_H_
