// The daemon's metrics (docs/operations.md, "The daemon's admin HTTP"): the registry its
// /metrics renders, and the handles the request path updates.
//
// One per process, reached through DaemonMetrics::Get(), like the log level: the request
// path updates it from wherever the figure arises (the Unix-socket dispatch, ReplicaIO,
// the transfer engine, the read cache's callers) without every constructor on the way
// taking one, and unit tests that build those pieces by hand count into it harmlessly.
// Figures that live in some component (segments mounted, the SSD store's use, the master
// client's failures) are not copied here: main adds collectors that read them at scrape
// time (daemon/server/daemon_admin.h).
//
// Cost on the hot path: every handle is created at construction, so an update is an
// array index and a relaxed atomic add (a histogram: a short bucket search, two adds and
// a compare-and-swap); no lock, no allocation, no map lookup.
//
// Thread roles: the handles are updated from any thread; registry() is given collectors
// by main before the admin server starts, and rendered on its thread.
#ifndef MOONCAKE_DAEMON_DAEMON_METRICS_H_
#define MOONCAKE_DAEMON_DAEMON_METRICS_H_

#include <cstdint>

#include "common/base/error_code.h"
#include "common/base/metrics.h"
#include "daemon/transfer/replica_target.h"
#include "daemon/transfer/transport.h"

namespace mooncake {

// The single-key master calls group commit shares among concurrent requests
// (daemon/cluster/master_batcher.h).
enum class GroupedCall { kPutStart, kPutEnd, kGetReplicaList };

class DaemonMetrics {
 public:
  // The process's.
  static DaemonMetrics& Get();

  DaemonMetrics();
  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  MetricsRegistry* registry() { return &registry_; }

  // One Unix-socket request of op (a uds::Op code of MC_UDS_OPS) answered with code,
  // started at start_ns (MonotonicNanos). Codes outside the table are not counted.
  void CountRequest(int64_t op, ErrorCode code, int64_t start_ns) {
    if (op < 0 || op >= kOpSlots || ops_[op].latency == nullptr) return;
    const OpHandles& h = ops_[op];
    (code == ErrorCode::OK ? h.ok : h.error)->Add();
    h.latency->ObserveSince(start_ns);
  }

  // Bytes ReplicaIO moved between memory of this daemon (an application's pool; a drained
  // or promoted value) and a replica: kRead into the pool (a get), kWrite out of it (a
  // put), by the replica's tier; writes go to memory tiers only (the offloader writes
  // the SSD).
  void CountBytes(TransferKind direction, ReplicaTier tier, uint64_t bytes) {
    bytes_[Index(direction)][static_cast<size_t>(tier)]->Add(bytes);
  }

  // Transfers the engine ran over a transport (rdma: else TCP), each one op that took
  // seconds (its batch's time) and moved bytes when ok.
  void CountTransfer(TransferKind kind, bool rdma, bool ok, uint64_t bytes, double seconds) {
    const TransferHandles& h = transfers_[Index(kind)][rdma ? 1 : 0];
    if (ok) {
      h.ok->Add();
      h.bytes->Add(bytes);
    } else {
      h.error->Add();
    }
    h.latency->Observe(seconds);
  }

  // A read (GET, an entry of BATCH_GET, GET_BEGIN) the read cache answered without the
  // master, or one that had to ask the master.
  void CountCacheHit(uint64_t n = 1) { cache_hits_->Add(n); }
  void CountCacheMiss(uint64_t n = 1) { cache_misses_->Add(n); }

  // Connections that completed HELLO and are not torn down yet.
  Gauge* clients() { return clients_; }

  // One master RPC sent for that many single-key calls of kind call (1: alone; more: as the
  // batch form, daemon/cluster/master_batcher.h).
  void CountGroup(GroupedCall call, uint64_t calls) {
    const GroupHandles& h = groups_[static_cast<size_t>(call)];
    h.calls->Add(calls);
    h.rpcs->Add();
  }

 private:
  static constexpr int64_t kOpSlots = 128;  // every op code of common/uds/uds_ops.h is below
  static constexpr size_t kTiers = 4;      // ReplicaTier's values
  static constexpr size_t kGroupedCalls = 3;  // GroupedCall's values
  static size_t Index(TransferKind kind) { return kind == TransferKind::kRead ? 0 : 1; }

  struct OpHandles {
    Counter* ok = nullptr;
    Counter* error = nullptr;
    Histogram* latency = nullptr;  // null: no such op
  };
  struct TransferHandles {
    Counter* ok = nullptr;
    Counter* error = nullptr;
    Counter* bytes = nullptr;
    Histogram* latency = nullptr;
  };

  struct GroupHandles {
    Counter* calls = nullptr;
    Counter* rpcs = nullptr;
  };

  MetricsRegistry registry_;
  OpHandles ops_[kOpSlots];
  Counter* bytes_[2][kTiers] = {};
  TransferHandles transfers_[2][2];  // [kind][tcp, rdma]
  Counter* cache_hits_ = nullptr;
  Counter* cache_misses_ = nullptr;
  Gauge* clients_ = nullptr;
  GroupHandles groups_[kGroupedCalls];
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_DAEMON_METRICS_H_
