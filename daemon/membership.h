// This daemon's standing with the master: who it is, which segments it has mounted, and
// the heartbeat that keeps both alive.
//
// Identity: a random 63-bit daemon id (also the "writer" of every put this daemon makes)
// and the name "host:port" of its transfer endpoint. Each mounted segment gets a random
// segment id and is announced with that name, its base address, its size and the
// endpoints the transfer engine reaches it by (registering it with RDMA first, when RDMA
// is in use).
//
// Each segment is also mounted with an incarnation: a random secret drawn once per process,
// which the master never lists. When a heartbeat is answered with -103 the master has
// forgotten us (it restarted), or found us silent for its TTL (we were stopped or starved:
// it detached our segments for a grace period, or declared us dead after it): we register
// again under the same id and mount every segment again under the same ids and
// incarnation. A master that restored its directory (docs/durability.md), or detached our
// segments, takes that as proof that the memory its replicas point into is still ours,
// and re-attaches the segment: the objects in it are readable again without a byte moved.
// A master that knows nothing of them simply sees new segments, and new puts work at once.
// The same happens when a heartbeat is answered under another master epoch than the one
// our segments were mounted at (a standby took over and may know us, but holds our
// segments detached), and a change of leader reported by the master client (through etcd:
// docs/ha.md, "Daemons") sends the next heartbeat at once instead of after the interval,
// so a failover is followed within one round trip of the new leader, not a heartbeat
// timeout.
//
// The SSD tier's LOCAL_DISK segment (docs/ssd.md) is mounted here too, so that it comes
// back with the memory segments after every re-registration; it holds no memory (base 0,
// its size the tier's capacity, reached through the TCP endpoint alone) and keeps an
// identity of its own -- id and incarnation chosen by daemon/ssd_tier/ssd_tier.h, persisted across
// restarts -- because its replicas outlive this process. After each (re-)mount of it the
// hook set with SetAfterDiskMount runs (the tier re-registers what its SSD holds).
//
// After each re-mount of a memory segment, daemon/cluster/segment_verifier.h checks (in its own
// thread) the replicas there the master cannot vouch for: those a restore brought back,
// and the objects it parked when it dropped the segment while we were away.
//
// Thread-safety: all methods may be called from any thread. The master client's
// leader-change handler takes heartbeat_mu_ (under the client's handler lock); nothing
// here holds heartbeat_mu_ while calling the master.
#ifndef MOONCAKE_DAEMON_MEMBERSHIP_H_
#define MOONCAKE_DAEMON_MEMBERSHIP_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>

#include "daemon/base/epoch_gate.h"
#include "daemon/master_link/master_client.h"
#include "daemon/memory/segment_memory.h"
#include "daemon/cluster/segment_verifier.h"
#include "daemon/transfer/transfer_engine.h"

namespace mooncake {

// Who lends a segment: an application's connection (MOUNT_SEGMENT and its family), under
// the name its client gave (Mooncake's local_hostname, docs/mooncake-api.md "naming"), or
// under the daemon's name when it gave none (name "", pid 0).
struct SegmentLender {
  std::string name;
  int64_t pid = 0;  // the lending process; with name, SegmentInfo.lender
};

class Membership {
 public:
  Membership(MasterClient* master, TransferEngine* engine, std::string name,
             int64_t heartbeat_interval_ms);
  ~Membership();  // stops the heartbeat
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  int64_t daemon_id() const { return daemon_id_; }
  const std::string& name() const { return name_; }  // "host:port"

  // Registers with the master, retrying with exponential back-off (capped at 2 s) and a
  // log line per failure, until it succeeds (true) or stop becomes true (false).
  bool RegisterWithRetry(const std::atomic<bool>& stop);

  // Unmounts segments that carry this daemon's name but belong to another daemon id: a
  // predecessor on this host that died (kill -9) before the master noticed. Sound because
  // the name holds our port, which no live daemon on this host can hold. Without this, the
  // master would keep placing puts on the dead segment until client_live_ttl runs out.
  // keep_disk_segment: the LOCAL_DISK segment id this daemon will mount again (its SSD's
  // persisted identity; 0: none) is left for that re-mount, which re-attaches its replicas.
  void ReclaimPredecessors(int64_t keep_disk_segment = 0);

  using Lender = SegmentLender;
  // Mounts memory at the master under a fresh segment id (*segment_id) and makes it
  // visible to Find(). lent: an application's connection lends it, so it leaves with that
  // client; the master places objects there last (and knows it again after every
  // re-mount), under lender's name when it has one. Returns MountSegment's code (-102 for
  // a name another client holds); on failure nothing is kept.
  ErrorCode Mount(std::shared_ptr<SegmentMemory> memory, int64_t* segment_id,
                  bool lent = false, Lender lender = {});
  // Unmounts at the master (which drops the objects in it: drain it first, see
  // daemon/replicas/segment_drainer.h) and forgets it here. The memory itself lives until the last
  // request copying from it lets go.
  ErrorCode Unmount(int64_t segment_id);
  void UnmountAll();

  // The segment with this id if this daemon owns it, else null. Hot path: a shared lock.
  std::shared_ptr<SegmentMemory> Find(int64_t segment_id) const;

  // The SSD tier's segment: id and incarnation as the tier chose them, size its capacity.
  struct DiskSegment {
    int64_t id = 0;
    int64_t incarnation = 0;
    uint64_t size = 0;
  };
  // Mounts it at the master and remembers it (Reregister mounts it again), whatever the
  // answer; runs the after-disk-mount hook when the master took it. Returns MountSegment's
  // code: SEGMENT_ALREADY_EXISTS when the master knows the id under another name or
  // incarnation, or still attached to another daemon.
  ErrorCode MountDisk(const DiskSegment& disk);
  // Unmounts it at the master (which drops its replicas) and forgets it here.
  ErrorCode UnmountDisk();
  // Releases a disk segment of an earlier run of this daemon whose files are gone (the
  // SSD tier in disabled mode wiped them): mounts it under its old identity -- which takes
  // it back from the dead predecessor, whose segment the master keeps detached for its
  // restart -- and unmounts it at once, so that the master drops its replicas now (its
  // objects answer -704) instead of after the grace period. Neither remembered here nor
  // followed by the after-disk-mount hook. Returns the first failing call's code.
  ErrorCode RetireDisk(const DiskSegment& old);
  // The id of the disk segment, 0 while none.
  int64_t disk_segment_id() const;

  // What is mounted now, for /metrics and /health: memory segments (lent: by a client)
  // and the disk segment (disk: size is the SSD's capacity).
  struct MountedSegment {
    int64_t id = 0;
    uint64_t size = 0;
    bool lent = false;
    bool disk = false;
  };
  std::vector<MountedSegment> Mounted() const;
  // Runs after every successful (re-)mount of the disk segment, on the thread that mounted
  // it: it must not block (it hands the work to another thread). Set once, before MountDisk.
  void SetAfterDiskMount(std::function<void()> hook) { after_disk_mount_ = std::move(hook); }

  // Registers and mounts everything again; called on -103 from a heartbeat or a put.
  // Serialized; callers that queue up behind a registration that just succeeded (within
  // 200 ms) return OK without repeating it. Returns the registration code.
  ErrorCode Reregister();
  // Runs in Reregister after the registration and before any segment is mounted again:
  // from then on the master may hand our segments' ranges to new objects, so whatever
  // was learnt from the old master (the read cache) must be forgotten first. Set once,
  // before the heartbeat starts.
  void SetBeforeRemount(std::function<void()> hook) { before_remount_ = std::move(hook); }

  void StartHeartbeat();
  void StopHeartbeat();
  // True while the last heartbeat was answered.
  bool healthy() const { return healthy_.load(); }
  // The epoch of the master our segments are mounted at now, learnt before mounting them;
  // -1 while unknown (the heartbeat after a registration failed). Reads and writes of our
  // segments under another master's grant are refused (daemon/base/epoch_gate.h).
  int64_t master_epoch() const { return gate_.epoch(); }
  EpochGate* epoch_gate() { return &gate_; }

 private:
  rpc::SegmentInfo Describe(int64_t segment_id, const SegmentMemory& memory) const;
  rpc::SegmentInfo DescribeDisk(const DiskSegment& disk) const;
  // Right after a registration: asks the registering master's epoch (-1 if it won't say).
  int64_t LearnEpoch();
  void HeartbeatLoop();

  MasterClient* const master_;
  TransferEngine* const engine_;
  const std::string name_;
  const int64_t daemon_id_;
  const int64_t incarnation_;  // never logged: it is what proves a re-mount is ours
  const int64_t heartbeat_interval_ms_;

  mutable std::shared_mutex segments_mu_;
  std::map<int64_t, std::shared_ptr<SegmentMemory>> segments_;  // guarded by segments_mu_
  // The segments_ that clients lent, and by whom; guarded by segments_mu_.
  std::map<int64_t, Lender> lent_;

  DiskSegment disk_;  // id 0: none; guarded by segments_mu_

  std::function<void()> before_remount_;
  std::function<void()> after_disk_mount_;
  std::mutex reregister_mu_;  // one re-registration at a time
  std::chrono::steady_clock::time_point last_registered_;  // guarded by reregister_mu_

  std::atomic<bool> healthy_{false};
  EpochGate gate_;
  std::mutex heartbeat_mu_;
  std::condition_variable heartbeat_cv_;
  bool heartbeat_stop_ = false;  // guarded by heartbeat_mu_
  bool heartbeat_now_ = false;   // a leader change: beat without waiting; guarded by heartbeat_mu_
  std::thread heartbeat_;
  // Last: stopped first, while what it reads (Find) is still there.
  std::unique_ptr<SegmentVerifier> verifier_;
};

// A random positive 63-bit id (never 0).
int64_t RandomId();

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_MEMBERSHIP_H_
