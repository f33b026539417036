// The offloads waiting for each daemon's FetchOffloads (docs/ssd.md): keys, per daemon, in
// the order they were queued. Only the keys wait here; what became of each task (queued,
// fetched, failed) is the OffloadState beside its object in its shard
// (master/service/master_service.h), which a fetch checks first: an entry whose state has gone or
// changed since is stale and skipped.
//
// Bounded: at most kMaxPerDaemon keys wait for one daemon. Push refuses more (the caller
// drops the task and counts it: an offload at put is then not made, an eviction round
// treats the object as one whose offload cannot proceed).
//
// Thread-safety: one mutex, a leaf in the master's lock order (taken under shard locks).
#ifndef MOONCAKE_MASTER_OFFLOAD_QUEUES_H_
#define MOONCAKE_MASTER_OFFLOAD_QUEUES_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace mooncake {

class OffloadQueues {
 public:
  static constexpr size_t kMaxPerDaemon = 4096;

  // False when daemon's queue is full.
  bool Push(int64_t daemon_id, std::string_view key);
  // Takes up to max keys from the front of daemon's queue.
  std::vector<std::string> Pop(int64_t daemon_id, size_t max);
  // Forgets daemon's queue (it is dead, or lost its SSD tier).
  void Drop(int64_t daemon_id);
  void Clear();

 private:
  absl::Mutex mu_;
  std::unordered_map<int64_t, std::deque<std::string>> queues_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_OFFLOAD_QUEUES_H_
