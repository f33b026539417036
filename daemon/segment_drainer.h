// Draining a segment before it is unmounted (what Mooncake calls draining): the objects
// that live only in it are moved to other segments first, so that an application that lent
// memory (MOUNT_SEGMENT) and leaves takes nobody's acknowledged objects with it.
//
// A drain is a few walks over the segment's objects at the master (DrainSegment, in
// batches of kBatch; the first call stops all allocation in the segment). For each batch
// the master reserves a new place per object; the bytes are copied straight from the
// segment by the put path's own transfer code (ReplicaIO::ResolveAll + WriteAll: a memcpy
// into a segment of this daemon, a transfer-engine WRITE into another daemon's, the whole
// batch in parallel), and each copy is committed (CommitMoves: the master swaps the
// object's replica) or, when it failed, revoked. An object removed or replaced meanwhile
// fails its commit cleanly and is left to whoever changed it.
//
// Another walk follows while one found objects still being written into the segment
// (busy) or copies that failed (retried elsewhere: the daemons that failed are avoided),
// up to kMaxWalks walks within kBudget; then the segment is unmounted. What is still only
// in it then is dropped with it, as before draining existed: objects no other segment had
// room for (stranded: a drain uses free space only, it never evicts), and objects whose
// writers were still busy (not acknowledged yet: their put fails). The outcome is logged
// and returned. Objects that keep a complete replica elsewhere simply lose this one (shed).
//
// Reads meanwhile: an object stays readable at its old place until its move commits, then
// at the new one. A read handed the old place just before the commit and copying after the
// unmount fails over like a read of any vanished replica (-800 when it had no other).
//
// The memory stays mapped throughout: a drain needs nothing from the client that lent it,
// so a client that crashed is drained like one that closed (docs/daemon.md).
//
// Thread roles: Drain runs on the calling thread (a worker: UNMOUNT_SEGMENTS, or the
// teardown of a connection) and blocks it for the drain. Stop (daemon shutdown) makes
// running and later drains give up at their next batch and unmount at once.
#ifndef MOONCAKE_DAEMON_SEGMENT_DRAINER_H_
#define MOONCAKE_DAEMON_SEGMENT_DRAINER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "daemon/master_link/master_client.h"
#include "daemon/cluster/membership.h"
#include "daemon/replicas/replica_io.h"

namespace mooncake {

class SegmentDrainer {
 public:
  static constexpr int32_t kBatch = 256;  // moves asked per DrainSegment
  static constexpr int kMaxWalks = 8;
  static constexpr std::chrono::seconds kBudget{60};
  // Between walks that moved nothing while writers were still busy in the segment.
  static constexpr std::chrono::milliseconds kSettle{100};

  struct Outcome {
    uint64_t moved = 0;    // objects now elsewhere
    uint64_t shed = 0;     // objects that kept another replica and lost this one
    uint64_t dropped = 0;  // complete objects the last walk left in it: gone with it
  };

  SegmentDrainer(MasterClient* master, Membership* membership, ReplicaIO* io)
      : master_(master), membership_(membership), io_(io) {}
  SegmentDrainer(const SegmentDrainer&) = delete;
  SegmentDrainer& operator=(const SegmentDrainer&) = delete;

  // Drains this daemon's segment, then unmounts it (Membership::Unmount). A segment that
  // is not ours any more is left alone (an empty outcome).
  Outcome DrainAndUnmount(int64_t segment_id);

  void Stop() { stopping_.store(true); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Walk {
    uint64_t moved = 0;
    uint64_t failed = 0;  // copies or commits that did not happen
    uint64_t stranded = 0;
    uint64_t shed = 0;
    uint64_t busy = 0;
    bool complete = false;  // reached the end of the segment's objects
  };

  // One walk from cursor 0; OK, or the master's code that ended it early.
  ErrorCode RunWalk(int64_t segment_id, const SegmentMemory& memory, Clock::time_point deadline,
                    Walk* walk);
  // Copies, commits and revokes one batch's moves.
  void MoveBatch(int64_t segment_id, const SegmentMemory& memory,
                 const rpc::DrainBatchResult& batch, Clock::time_point deadline, Walk* walk);
  // CommitMoves or RevokeMoves, asked again once when the master cannot be reached (a
  // move left pending holds its object until the master's release timeout).
  ErrorCode EndMoves(bool commit, int64_t segment_id, const std::vector<std::string>& keys,
                     std::vector<ErrorCode>* codes);
  bool GivingUp(Clock::time_point deadline) const {
    return stopping_.load() || Clock::now() >= deadline;
  }

  MasterClient* const master_;
  Membership* const membership_;
  ReplicaIO* const io_;
  std::atomic<bool> stopping_{false};
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_SEGMENT_DRAINER_H_
