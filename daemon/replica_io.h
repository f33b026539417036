// Moving an object's bytes between an application's pool and its replicas, wherever they
// live: a replica in this daemon's segments is a memcpy, one in another daemon's goes
// through the transfer engine (daemon/transfer/transfer_engine.h), straight from or into the pool.
//
// Writes go to every replica of a put, the remote ones in parallel; the put is published
// only if all of them succeeded. Writes never target a disk replica (the SSD tier is
// written by the offloader, daemon/ssd_store/ssd_store.h). Reads choose by priority: local memory,
// remote memory, local disk (this daemon's SsdStore, straight into the pool), remote disk
// (its owner reads its SSD: READ_DISK over TCP), with remote owners the engine suspects
// dead after all of those (memory, then disk); and move on to the next replica when one
// fails (a dead owner, a refused range, a value the SSD no longer holds, a corrupt SSD
// copy) or its bytes do not match the object's checksum: at most one failed attempt per
// replica, and the error of the last one when none is left.
//
// The local copies of one call (every slice's memcpy to or from this daemon's segments)
// are made together, through a ParallelCopy when one is given: a big value or a big batch
// is then copied by two threads (daemon/base/parallel_copy.h).
//
// Thread-safety: every method may be called from any thread; SetDiskTier too (atomics).
#ifndef MOONCAKE_DAEMON_REPLICA_IO_H_
#define MOONCAKE_DAEMON_REPLICA_IO_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "MasterService.h"
#include "common/base/error_code.h"
#include "daemon/cluster/bad_replica_reporter.h"
#include "daemon/cluster/membership.h"
#include "daemon/base/parallel_copy.h"
#include "daemon/transfer/replica_target.h"
#include "daemon/memory/segment_memory.h"
#include "daemon/ssd_store/ssd_store.h"
#include "daemon/transfer/transfer_engine.h"

namespace mooncake {

// A slice of a value, for the ops that move many at once.
struct ValueSlice {
  const std::vector<ReplicaTarget>* targets;  // every replica (writes) or the candidates (reads)
  uint64_t value_offset;                      // inside the value
  char* pool;                                 // the application's side
  uint64_t length;
  ErrorCode result = ErrorCode::OK;
  size_t served = 0;  // reads: the candidate the bytes came from, when result is 0
  ReplicaTier served_tier = ReplicaTier::kLocalMemory;  // reads: that candidate's tier
  // Writes: set want_crc to have crc set to the bytes' CRC32C if a transport computed it
  // on the way (it stays -1 otherwise: compute it yourself).
  bool want_crc = false;
  int64_t crc = -1;
  // Reads: the key, under which a replica found bad is reported to the master (null: none
  // is, as for a read-cache entry's read, which a read of the master's list follows).
  const std::string* key = nullptr;
};

class ReplicaIO {
 public:
  // copier: shares big local copies with its helper thread (null: the caller copies
  // alone); it must outlive this.
  ReplicaIO(Membership* membership, TransferEngine* engine, ParallelCopy* copier = nullptr)
      : membership_(membership), engine_(engine), copier_(copier) {}

  TransferEngine* engine() const { return engine_; }

  // Where reads report replicas they find bad (daemon/cluster/bad_replica_reporter.h): a whole
  // value whose bytes fail its checksum, a disk replica this daemon's SSD does not hold.
  // Until set (null), nothing is reported; it must outlive this.
  void SetReporter(BadReplicaReporter* reporter) { reporter_.store(reporter); }
  BadReplicaReporter* reporter() const { return reporter_.load(); }

  // This daemon's SSD tier: its store (null: none) and the id of its LOCAL_DISK segment,
  // which names the disk replicas it holds itself. Until set, disk replicas listed under
  // that id are not candidates; the store must outlive this.
  void SetDiskTier(SsdStore* store, int64_t disk_segment_id) {
    disk_segment_id_.store(disk_segment_id);
    ssd_.store(store);
  }

  // Reads served from a disk replica since the start: this daemon's SSD, another's.
  struct DiskReadStats {
    uint64_t local = 0;
    uint64_t remote = 0;
  };
  DiskReadStats disk_reads() const { return {disk_reads_local_.load(), disk_reads_remote_.load()}; }
  // While one lives on a thread, the reads that thread serves from an SSD replica are
  // counted in *sink too (a connection's count, for CLIENT_STATS): StoreService sets one
  // around each request it runs.
  class DiskReadSink {
   public:
    explicit DiskReadSink(std::atomic<uint64_t>* sink) : previous_(t_sink_) { t_sink_ = sink; }
    ~DiskReadSink() { t_sink_ = previous_; }
    DiskReadSink(const DiskReadSink&) = delete;
    DiskReadSink& operator=(const DiskReadSink&) = delete;

   private:
    friend class ReplicaIO;
    static inline thread_local std::atomic<uint64_t>* t_sink_ = nullptr;
    std::atomic<uint64_t>* previous_;
  };

  // Every replica of a put (all memory replicas, which the writer must fill): TRANSFER_FAIL
  // when one is neither ours nor a segment the master published, or its range is outside.
  // master_epoch: of the master that reserved them, which the owners check.
  ErrorCode ResolveAll(const std::vector<rpc::ReplicaDescriptor>& replicas, uint64_t size,
                       int64_t master_epoch, std::vector<ReplicaTarget>* out);
  // The replicas a read of key (a value of size bytes, checksum as listed, -1: none) may
  // use, best first (Order). Empty when none. A memory replica must lie inside a memory
  // segment; a disk replica must be of this daemon's disk segment (with a store) or of a
  // LOCAL_DISK segment the master published.
  // master_epoch: of the master that listed them, which the owners check.
  std::vector<ReplicaTarget> Candidates(const std::string& key,
                                        const std::vector<rpc::ReplicaDescriptor>& replicas,
                                        uint64_t size, int64_t checksum, int64_t master_epoch);
  // Sorts candidates best first: by tier (local memory, remote memory, local disk, remote
  // disk), except that remote ones whose owner is suspect (suspect(name)) go after every
  // other, memory before disk; stable otherwise.
  static void Order(std::vector<ReplicaTarget>* candidates,
                    const std::function<bool(const std::string& daemon)>& suspect);

  // Writes each slice's bytes to all its targets (local copies, then the remote ones, all
  // slices in parallel); each slice's result is OK or TRANSFER_FAIL (also when an owner,
  // this daemon included, is mounted at another master than the one that reserved it).
  void WriteAll(std::vector<ValueSlice>* slices, std::chrono::steady_clock::time_point deadline);

  // Reads each slice from its first candidate (the remote ones in parallel); a slice whose
  // read failed, or whose whole-value checksum (expected[i] >= 0, slices covering whole
  // values only) does not match, is read again from the next candidate. results: OK,
  // TRANSFER_FAIL when no candidate could be read, CHECKSUM_MISMATCH when none matched.
  // A candidate whose bytes did not match is reported (when the slice names its key), and
  // so is a local disk replica the SSD does not hold.
  void ReadAny(std::vector<ValueSlice>* slices, const std::vector<int64_t>& expected,
               std::chrono::steady_clock::time_point deadline);

  // Makes copies between memory of this process (the read cache's hits), through the
  // copier when there is one.
  void CopyAll(const std::vector<ParallelCopy::Piece>& pieces);

  // Reads one slice from candidate `first` onwards; the index that served it (>= first),
  // or TRANSFER_FAIL (no checksum: a caller reading a part of a value checks nothing).
  Result<size_t> ReadFrom(const std::vector<ReplicaTarget>& candidates, size_t first,
                          uint64_t value_offset, char* pool, uint64_t length,
                          std::chrono::steady_clock::time_point deadline);

 private:
  // Builds the transfer of slice bytes [value_offset, +length) to or from target t.
  static TransferOp MakeOp(TransferKind kind, const ReplicaTarget& t, uint64_t value_offset,
                           char* pool, uint64_t length);
  static void CopyLocal(TransferKind kind, const ReplicaTarget& t, uint64_t value_offset,
                        char* pool, uint64_t length);
  // The copy of CopyLocal, added to pieces to be made by CopyAll.
  static void AddLocal(TransferKind kind, const ReplicaTarget& t, uint64_t value_offset,
                       char* pool, uint64_t length, std::vector<ParallelCopy::Piece>* pieces);
  // Counts a read of length bytes served from candidate t (DaemonMetrics too).
  void CountServed(const ReplicaTarget& t, uint64_t length);

  Membership* const membership_;
  TransferEngine* const engine_;
  ParallelCopy* const copier_;
  // A local disk replica read answered code: reports it when the SSD does not hold it.
  void CheckDiskRead(const ReplicaTarget& t, ErrorCode code);

  std::atomic<SsdStore*> ssd_{nullptr};
  std::atomic<BadReplicaReporter*> reporter_{nullptr};
  std::atomic<int64_t> disk_segment_id_{0};
  std::atomic<uint64_t> disk_reads_local_{0};
  std::atomic<uint64_t> disk_reads_remote_{0};
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_REPLICA_IO_H_
