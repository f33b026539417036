// The daemon's SSD tier (docs/ssd.md, "The daemon"): owns the SsdStore, the LOCAL_DISK
// segment's identity, its mount through Membership, and the reconciliation with the master
// after every (re-)mount.
//
// Start-up, in order: Open (the store: rebuilt from `.meta`, or wiped in disabled mode;
// then the identity: reused from <ssd_path>/IDENTITY in relaxed/strict mode, drawn afresh
// and persisted otherwise), Start (the registrar thread), Mount. In disabled mode the file
// names the previous run's segment, which Mount first releases at the master
// (Membership::RetireDisk): its files are gone, so its objects must go now, not after the
// grace period the master keeps a dead daemon's disk segment for. A master that refuses the
// persisted identity (another daemon's name: the daemon moved to another port) gets a
// fresh one, persisted: the master then adopts or drops what the SSD holds like any other
// daemon's.
//
// Reconciliation: each (re-)mount of the disk segment wakes the registrar, which begins a
// round at the master (BeginDiskReconciliation, named by a token it draws), sends
// SsdStore::List() to RegisterDiskReplicas in batches of kRegisterBatch, forgets what the
// master answers -704 (or -600) for, and ends the round (EndDiskReconciliation): the
// master then drops every disk replica of the segment the round did not vouch for (what
// this SSD no longer holds: a relaxed-mode crash, a restore to an older point), and lists
// the segment's replicas again. A round that cannot be completed (a call the master
// cannot be asked, or answers -1010 for a round it no longer has) is begun anew with
// back-off (the next re-mount wakes it again anyway).
//
// Drops: SsdStore's DropFn lands in Drop(): DropDiskReplicas for the keys, true only when
// the master answered every key (0 or -704); the store deletes files only then.
//
// Serialization: offload writes and their reports (daemon/ssd_tier/offloader.h) and registration
// batches exclude each other (ReconcileLock), so that a batch never compares the master's
// view of a key with a value the offloader has just replaced.
//
// Thread roles: Open/Mount/Stop from main; Drop from the store's callers (offloader,
// workers, transfer-port threads); the registrar thread. Lock order: reconcile_mu_, then
// mu_; neither is held while Drop runs.
#ifndef MOONCAKE_DAEMON_SSD_TIER_H_
#define MOONCAKE_DAEMON_SSD_TIER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/base/error_code.h"
#include "daemon/master_link/master_client.h"
#include "daemon/cluster/membership.h"
#include "daemon/ssd_store/ssd_identity.h"
#include "daemon/ssd_store/ssd_options.h"
#include "daemon/ssd_store/ssd_store.h"

namespace mooncake {

class SsdTier {
 public:
  static constexpr size_t kRegisterBatch = 1024;

  // Counters since start (docs/ssd.md); read by the start line and the shutdown line.
  struct Stats {
    uint64_t rebuilt = 0;     // objects the store rebuilt at Open
    uint64_t registered = 0;  // objects the master kept or adopted at a registration
    uint64_t refused = 0;     // ... answered -704 / -600, forgotten
    uint64_t registrations = 0;
    uint64_t dropped = 0;     // keys Drop told the master to drop
    uint64_t drop_failures = 0;  // Drop calls the master could not be told
  };

  SsdTier(const SsdOptions& options, MasterClient* master, Membership* membership);
  ~SsdTier();  // Stop()
  SsdTier(const SsdTier&) = delete;
  SsdTier& operator=(const SsdTier&) = delete;

  // Opens the store and settles the identity, logging one line (mode, capacity, direct
  // I/O, what was rebuilt or wiped). FILE_OPEN_FAIL / INVALID_PARAMS / FILE_WRITE_FAIL
  // with *error: the daemon must not start.
  ErrorCode Open(std::string* error);
  // Starts the registrar thread (before the first Mount: that mount wakes it).
  void Start();
  // Mounts the disk segment (Membership::MountDisk; SEGMENT_ALREADY_EXISTS is OK). On a
  // refusal other than RPC_FAIL / CLIENT_NOT_FOUND, draws a fresh identity once and tries
  // it. Returns the mount's code; the caller retries RPC_FAIL and CLIENT_NOT_FOUND.
  ErrorCode Mount();
  // Mounts again after the master said it does not know the segment (-101).
  void MountAgain();
  // Stops the registrar; in disabled mode unmounts the segment (nothing of it survives),
  // otherwise leaves it to the master, which detaches it and re-attaches it for the next
  // start of this daemon with the same directory.
  void Stop();

  SsdStore* store() const { return store_.get(); }
  const SsdOptions& options() const { return options_; }
  // The identity Open settled on (main's thread): ReclaimPredecessors leaves that segment.
  int64_t persisted_segment_id() const { return identity_.segment_id; }
  // The disk segment's id once mounted (Membership's), 0 before.
  int64_t segment_id() const { return membership_->disk_segment_id(); }
  Stats stats() const;

  // The store's DropFn.
  bool Drop(const std::vector<std::string>& keys);

  // Held by the offloader from a batch's Write to the handling of its report.
  std::unique_lock<std::mutex> ReconcileLock() { return std::unique_lock<std::mutex>(reconcile_mu_); }

 private:
  void RegistrarLoop();
  // One full round: begin, List() in batches, end; false when a call did not succeed.
  bool RegisterAll();
  ErrorCode MountWith(const SsdIdentity& identity);

  const SsdOptions options_;
  MasterClient* const master_;
  Membership* const membership_;
  std::unique_ptr<SsdStore> store_;
  SsdIdentity identity_;  // set by Open and Mount (main's thread); others ask membership_
  SsdIdentity retired_;   // disabled mode: the previous run's, released by Mount (0: none)

  std::mutex reconcile_mu_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool register_wanted_ = false;  // guarded by mu_
  bool stop_ = false;             // guarded by mu_
  Stats stats_;                   // guarded by mu_
  std::thread registrar_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_SSD_TIER_H_
