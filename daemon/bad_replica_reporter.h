// Tells the master of replicas this daemon found unreadable, so that it stops listing
// them (ReportBadReplicas, docs/master.md "Checksums"): a replica whose bytes failed the
// object's checksum on a read (ReplicaIO, a staged get), or a disk replica this daemon's
// own SSD tier does not hold (its own gets, other daemons' READ_DISK). Without it, such a
// replica stays listed: every read of the key fails over to it or fails for good (-801,
// -800), and a put of the key answers "already exists" and changes nothing.
//
// Off the reader's path: Report* only queue (a mutex, a push); one thread sends what is
// queued in batches of up to kMaxBatch, as soon as there is any. The reader still answers
// -801 (or -800) for its own get; once the master has dropped the replica, the next get
// answers -704 (or reads another replica) and a put stores the key afresh.
//
// Bounded: at most kMaxQueued reports wait (more are dropped, counted; the replica stays
// listed until a later read reports it again), and a replica already waiting is not
// queued twice, so a hot bad key read by many clients costs one report. A batch the
// master could not be sent is kept and retried a second later (the RPC is safe to repeat).
//
// Thread roles: Report* from any thread; Start/Stop from main. Stop sends nothing more.
#ifndef MOONCAKE_DAEMON_BAD_REPLICA_REPORTER_H_
#define MOONCAKE_DAEMON_BAD_REPLICA_REPORTER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "MasterService.h"
#include "daemon/transfer/transport.h"

namespace mooncake {

class MasterClient;
class Membership;

class BadReplicaReporter {
 public:
  static constexpr size_t kMaxBatch = 1024;
  static constexpr size_t kMaxQueued = 16384;

  struct Stats {
    uint64_t reported = 0;  // replicas sent to the master
    uint64_t dropped = 0;   // of those, dropped by the master (the rest had changed: -704)
    uint64_t overflow = 0;  // not queued: the queue was full
  };

  BadReplicaReporter(MasterClient* master, Membership* membership)
      : master_(master), membership_(membership) {}
  ~BadReplicaReporter() { Stop(); }
  BadReplicaReporter(const BadReplicaReporter&) = delete;
  BadReplicaReporter& operator=(const BadReplicaReporter&) = delete;

  void Start();
  void Stop();

  // A whole value of key (size bytes, checksum as its replica list gave it) read from the
  // replica replica_id did not match checksum.
  void ReportMismatch(const std::string& key, int64_t replica_id, uint64_t size,
                      uint32_t checksum);
  // This daemon's SSD (its LOCAL_DISK segment disk_segment_id) does not hold object as the
  // master listed it.
  void ReportNotHeld(const DiskAddress& object, int64_t disk_segment_id);

  Stats stats() const;

 private:
  void Queue(rpc::BadReplica bad);
  void Run();
  // Sends batch; false when the master could not be told.
  bool Send(const std::vector<rpc::BadReplica>& batch);

  MasterClient* const master_;
  Membership* const membership_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<rpc::BadReplica> queue_;                   // guarded by mu_
  std::set<std::pair<std::string, int64_t>> waiting_;  // (key, replica or segment) in queue_
  bool stop_ = false;                                   // guarded by mu_
  Stats stats_;                                         // guarded by mu_
  std::thread thread_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_BAD_REPLICA_REPORTER_H_
