// The standby's side of replication (docs/ha.md, "Replication"): one thread that keeps
// this master's state a copy of the leader's.
//
//   connect  a Thrift connection to the leader (framed, binary, the cluster key's
//            handshake when there is a key), with bounded timeouts; any failure closes it
//            and the next round, after retry_interval, opens a new one.
//   pull     FollowLog(name, applied + 1, durable, prev_crc): the records after the last
//            one applied, reporting the last one durable in our own log (what the leader's
//            strict acknowledgements wait for) and the CRC of our last record's payload
//            (the leader tells a standby that followed another history to bootstrap).
//   apply    each record, in order, with the restore's apply (MasterService::
//            ApplyLogRecord), and appended to our OWN operation log under the same seq
//            (checked: a mismatch is a bug and bootstraps), both under the state gate held
//            shared, so a snapshot of ours (our snapshotter forks under the gate held
//            exclusively) holds exactly the records up to its sequence. Then one fdatasync
//            for the batch; its seq is reported on the next pull, which follows at once.
//            A pull with nothing new waits before the next: kHotPollUs while records came
//            within the last kHotWindowMs (a strict leader's acknowledgements wait for our
//            next pull: it must come soon), poll_interval once the log has gone quiet.
//   bootstrap when the leader says so, or at the start of a standby with no state: asks
//            the leader for a snapshot (FetchSnapshot), downloads its files in chunks into
//            <snapshot_dir>/bootstrap/<name>/, fsyncs them, moves the directory into
//            snapshots/, points latest at it and deletes our other snapshots (they hold
//            another history); then, under the gate held exclusively, clears the service,
//            loads the snapshot with the restore's code and rebases our log on its seq
//            (OpLog::Rebase: the old files renamed *.discarded).
//
// Terms: an answer carrying a lower term than the highest seen is ignored (a deposed
// leader still answering), and the connection is dropped.
//
// The service is kept in the restore's state (no FinishRestore: allocators are rebuilt
// and segments detached when this master takes over, Replication::StartAsLeader).
//
// Thread roles: Start/Stop and the getters from any thread; everything else runs on the
// follower's own thread. Stop is bounded by the connection's timeouts.
#ifndef MOONCAKE_MASTER_LOG_FOLLOWER_H_
#define MOONCAKE_MASTER_LOG_FOLLOWER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/auth/cluster_key.h"
#include "master/service/master_service.h"
#include "master/log/oplog.h"

namespace mooncake {

namespace rpc {
class MasterServiceClient;
}

struct LogFollowerOptions {
  std::string name;              // this master's rpc address "host:port", sent with every pull
  std::string leader_host;       // whom to follow
  int leader_port = 0;
  std::string snapshot_dir;      // ours: bootstraps are written here
  std::shared_ptr<const ClusterKey> cluster_key;  // null: none
  int64_t poll_interval_ms = 2;     // after a pull with nothing new, the log quiet
  int64_t retry_interval_ms = 200;  // after a failed connection or call
  int64_t rpc_timeout_ms = 5000;    // connect, send and receive
  int32_t max_pull_bytes = 1 << 20;
  int32_t chunk_bytes = 1 << 20;
  int64_t snapshot_wait_ms = 300000;  // a bootstrap's snapshot must be published by then
  bool bootstrap_first = false;  // start with a bootstrap (a standby that has no state)
};

class LogFollower {
 public:
  // service and oplog (started) are not owned and outlive the follower.
  LogFollower(MasterService* service, OpLog* oplog, LogFollowerOptions options);
  ~LogFollower();  // Stop()
  LogFollower(const LogFollower&) = delete;
  LogFollower& operator=(const LogFollower&) = delete;

  void Start();
  void Stop();

  // Tests: while paused the follower makes no call (a standby that stopped confirming).
  void SetPaused(bool paused);

  uint64_t applied_seq() const { return oplog_->last(); }
  uint64_t leader_last_seq() const { return leader_last_.load(); }
  int64_t highest_term() const { return highest_term_.load(); }
  uint64_t bootstraps() const { return bootstraps_.load(); }
  uint64_t records_applied() const { return records_applied_.load(); }

 private:
  struct Connection;
  void Loop();
  // One pull and what follows it. False when the connection must go (after a failure).
  bool PullOnce(Connection* c);
  // False when it failed (logged); the next round tries again.
  bool Bootstrap(Connection* c);
  // Downloads snapshot `name`'s files into tmp_dir.
  bool Download(Connection* c, const std::string& name, const std::string& tmp_dir);
  // Installs the downloaded snapshot and loads it. False: logged.
  bool Install(const std::string& name, uint64_t sequence, const std::string& tmp_dir);
  // True when the answer's term is acceptable (and remembers a higher one).
  bool AcceptTerm(int64_t term);
  // Sleeps up to ms (us), returning early (false) when stopping; then waits while paused.
  bool Pause(int64_t ms) { return PauseUs(ms * 1000); }
  bool PauseUs(int64_t us);
  // How soon an empty pull is followed by the next while the log is busy, and for how
  // long after the last records it counts as busy.
  static constexpr int64_t kHotPollUs = 100;
  static constexpr int64_t kHotWindowMs = 20;
  std::unique_ptr<Connection> Connect();

  MasterService* const service_;
  OpLog* const oplog_;
  const LogFollowerOptions options_;

  absl::Mutex mu_;
  absl::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;

  bool need_bootstrap_;  // the follower thread's
  std::atomic<uint64_t> leader_last_{0};
  std::atomic<int64_t> highest_term_{0};
  std::atomic<uint64_t> bootstraps_{0};
  std::atomic<uint64_t> records_applied_{0};
  std::chrono::steady_clock::time_point last_records_;  // the loop's: the last pull with records
  std::thread thread_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_LOG_FOLLOWER_H_
