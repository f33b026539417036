// The offload loop (docs/ssd.md, "The daemon"): copies the memory replicas the master
// queued for this daemon's SSD (offload at put, offload on eviction) into the SsdStore and
// reports what became of each.
//
// One thread. A round: FetchOffloads (up to Options::max_tasks tasks, each task's memory
// replica read-leased for lease_ttl_ms from the reply); the tasks in batches of at most
// Options::batch_bytes: each value memcpy'd from this daemon's own segment (Membership::
// Find, range checked, checksum checked when the master has one) into a staging buffer,
// then -- only if the copy ended within the lease and under the master that granted it,
// else the bytes may be torn and the task fails with LEASE_EXPIRED -- SsdStore::Write
// (strict mode: durable when it returns), then ReportOffloads for the batch. What the
// master answers -704 for (the object changed or went meanwhile) is forgotten.
// Failures are reported as such (FILE_WRITE_FAIL when the SSD is full, SEGMENT_NOT_FOUND,
// INVALID_PARAMS, CHECKSUM_MISMATCH, LEASE_EXPIRED): the master keeps the memory replica,
// except that a copy made within the lease whose bytes fail the checksum also reports that
// replica as bad (Options::reporter), which the master then drops.
// A report the master cannot be sent is retried before anything new is fetched.
//
// Pacing: the next round follows Options::busy_ms after a non-empty answer, idle_ms after
// an empty one; a master that does not know us (-103) is registered with again
// (Membership::Reregister), one that does not know the disk segment (-101) gets it mounted
// again, one that does not support offloads is asked again after a second.
//
// Thread roles: Start/Stop from main; the loop on its own thread. Stop returns once the
// round in progress has ended (its writes and report included).
#ifndef MOONCAKE_DAEMON_OFFLOADER_H_
#define MOONCAKE_DAEMON_OFFLOADER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/base/error_code.h"
#include "common/base/paced_loop.h"
#include "daemon/cluster/bad_replica_reporter.h"
#include "daemon/master_link/master_client.h"
#include "daemon/cluster/membership.h"
#include "daemon/ssd_tier/ssd_tier.h"

namespace mooncake {

class Offloader {
 public:
  struct Options {
    int32_t max_tasks = 64;
    uint64_t batch_bytes = 32ull << 20;  // staged per Write (one larger object: alone)
    int64_t busy_ms = 2;
    int64_t idle_ms = 25;
    // Hears of a memory replica whose copy failed the object's checksum (its bytes are not
    // the object's: the master should stop listing it); null: nobody. It must outlive this.
    BadReplicaReporter* reporter = nullptr;
  };
  // Since start; the shutdown line prints them.
  struct Stats {
    uint64_t offloaded = 0;  // tasks written and reported OK
    uint64_t bytes = 0;      // their values' bytes
    uint64_t failed = 0;     // tasks reported as failed
    uint64_t forgotten = 0;  // written, then answered -704
  };

  Offloader(MasterClient* master, Membership* membership, SsdTier* tier, Options options);
  ~Offloader();  // Stop()
  Offloader(const Offloader&) = delete;
  Offloader& operator=(const Offloader&) = delete;

  void Start();
  void Stop();
  Stats stats() const;

 private:
  // One task of a round and what became of it.
  struct Job {
    rpc::OffloadTask task;
    ErrorCode result = ErrorCode::OK;
  };
  // A report not yet answered by the master.
  struct Report {
    std::vector<std::string> keys;
    std::vector<int64_t> replica_ids;
    std::vector<ErrorCode> codes;
    std::vector<uint64_t> sizes;  // for the counters
  };

  // One fetch and its work; how long to wait before the next round.
  std::chrono::milliseconds RunRound();
  // Copies and writes jobs[begin, end), then reports them (with what was left unsent).
  void RunBatch(std::vector<Job>* jobs, size_t begin, size_t end, int64_t master_epoch,
                std::chrono::steady_clock::time_point lease_end);
  // Sends *report; on the master's answer forgets the keys it refused and clears *report
  // (true); false (report kept, the loop's next round sends it first) when the master
  // could not be told.
  bool SendReport(Report* report);
  char* Staging(uint64_t bytes);

  MasterClient* const master_;
  Membership* const membership_;
  SsdTier* const tier_;
  const Options options_;

  std::unique_ptr<char, void (*)(void*)> staging_{nullptr, nullptr};  // loop thread only
  uint64_t staging_size_ = 0;                                         // loop thread only
  Report unsent_;                                                      // loop thread only
  bool said_not_supported_ = false;                                    // loop thread only

  mutable std::mutex mu_;
  Stats stats_;  // guarded by mu_
  PacedLoop loop_;  // last: stopped (by ~PacedLoop) before the members its rounds use go
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_OFFLOADER_H_
