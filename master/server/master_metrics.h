// The master's metrics (docs/operations.md, "Metrics"): a MetricsRegistry holding, per
// Thrift call, Mooncake's counters master_<rpc>_requests_total and
// master_<rpc>_failures_total (batches also count their items), one latency histogram
// master_rpc_duration_seconds{rpc=...}, and collectors that read the rest at scrape time
// from where it lives: MasterStats (objects, memory, segments, daemons, eviction, tenants,
// the SSD tier, the log, replication), each segment's use, the last snapshot and the role,
// and the Thrift server's connections (WatchRpcServer).
//
// Counting is the request path's: RpcHandler starts an RpcCall per call (two clock reads,
// one relaxed add, a histogram observation; bench/master_bench measures the cost). A call
// fails when its code (or every item's code, for a batch) is negative.
//
// Thread roles: built before the server starts; RpcCall from every I/O thread; Render,
// Summary and ReportLine from the admin HTTP thread and the report thread.
#ifndef MOONCAKE_MASTER_MASTER_METRICS_H_
#define MOONCAKE_MASTER_MASTER_METRICS_H_

#include <array>
#include <cstdint>
#include <string>

#include "common/base/metrics.h"
#include "common/master_link/master_rpcs.h"
#include "master_types.h"

namespace mooncake {

class AuthenticatedProcessorFactory;
class MasterService;
class Replication;
class RpcServer;
class RoleMachine;
class Snapshotter;

// Where the master's figures come from; any but service may be null (snapshots off, no
// HA: a non-HA master is the leader of term 0).
struct MasterSources {
  MasterService* service = nullptr;
  Snapshotter* snapshotter = nullptr;
  Replication* replication = nullptr;
  const RoleMachine* role = nullptr;
};

// GetStats as the RPC answers it: the service's figures with the snapshot's sequence and
// the replication figures filled in.
rpc::MasterStats CollectMasterStats(const MasterSources& sources);
// "leader", "standby" or "deposed".
const char* RoleName(const MasterSources& sources);

class MasterMetrics {
 public:
  // Every call of common/master_link/master.thrift, as its row of MC_MASTER_RPCS (common/master_link/master_rpcs.h)
  // names it; the handshake's calls have no name and are not counted.
  using Rpc = MasterRpc;
  static const char* Name(Rpc rpc) { return InfoOf(rpc).metric; }
  static bool IsBatch(Rpc rpc) { return InfoOf(rpc).shape == RpcShape::kBatch; }

  explicit MasterMetrics(const MasterSources& sources);
  MasterMetrics(const MasterMetrics&) = delete;
  MasterMetrics& operator=(const MasterMetrics&) = delete;

  // Adds the Thrift server's figures, read at scrape time: its connections, admitted and
  // not yet, those it closed by reason, and the calls refused for want of admission. Once,
  // before the admin HTTP serves; both outlive this.
  void WatchRpcServer(const RpcServer* server, const AuthenticatedProcessorFactory* processors);

  // One call ended: started at start_ns (MonotonicNanos), failed or not.
  void Record(Rpc rpc, int64_t start_ns, bool failed) {
    PerRpc& r = rpcs_[static_cast<size_t>(rpc)];
    if (r.requests == nullptr) return;  // not counted (no name)
    r.requests->Add();
    if (failed) r.failures->Add();
    r.latency->ObserveSince(start_ns);
  }
  // A batch call's items: how many, how many failed (and so whether it partly succeeded).
  void RecordItems(Rpc rpc, uint64_t items, uint64_t failed_items);

  const MasterSources& sources() const { return sources_; }
  // The Prometheus exposition of everything above; without detailed, the series labelled
  // with a segment's address or a tenant's id are left out (what /metrics answers a caller
  // without the admin token: master/server/master_admin.h).
  std::string Render(bool detailed = true) const { return registry_.Render(detailed); }
  // /metrics/summary: "name: value" lines for people (human sizes).
  std::string Summary() const;
  // The one line --enable_metric_reporting logs every --metrics_report_interval.
  std::string ReportLine() const;

  // Calls and failures so far (tests and the report line).
  uint64_t requests(Rpc rpc) const { return Value(rpcs_[static_cast<size_t>(rpc)].requests); }
  uint64_t failures(Rpc rpc) const { return Value(rpcs_[static_cast<size_t>(rpc)].failures); }

 private:
  struct PerRpc {
    // Counted calls only (null for the handshake's).
    Counter* requests = nullptr;
    Counter* failures = nullptr;
    Histogram* latency = nullptr;
    // Batches only.
    Counter* items = nullptr;
    Counter* failed_items = nullptr;
    Counter* partial_successes = nullptr;
  };
  static uint64_t Value(const Counter* c) { return c == nullptr ? 0 : c->value(); }
  void CollectStats(MetricsWriter* out) const;
  void CollectSegments(MetricsWriter* out) const;
  void CollectSnapshotAndRole(MetricsWriter* out) const;

  const MasterSources sources_;
  MetricsRegistry registry_;
  std::array<PerRpc, static_cast<size_t>(Rpc::kCount)> rpcs_;
};

// One Thrift call's measurement, on the handler's stack: the clock read at construction,
// the outcome recorded at destruction. metrics null: nothing is read or counted.
class RpcCall {
 public:
  RpcCall(MasterMetrics* metrics, MasterMetrics::Rpc rpc)
      : metrics_(metrics), rpc_(rpc), start_ns_(metrics != nullptr ? MonotonicNanos() : 0) {}
  ~RpcCall() {
    if (metrics_ != nullptr) metrics_->Record(rpc_, start_ns_, failed_);
  }
  RpcCall(const RpcCall&) = delete;
  RpcCall& operator=(const RpcCall&) = delete;

  // Passes code through, noting a negative one as the call's failure.
  template <typename T>
  T Code(T code) {
    failed_ = code < 0;
    return code;
  }
  // A batch's results: code_of(result) per item; the call failed when every item did.
  template <typename List, typename CodeOf>
  void Items(const List& results, CodeOf code_of) {
    if (metrics_ == nullptr) return;
    uint64_t failed = 0;
    for (const auto& r : results) failed += code_of(r) < 0;
    failed_ = !results.empty() && failed == results.size();
    metrics_->RecordItems(rpc_, results.size(), failed);
  }

 private:
  MasterMetrics* const metrics_;
  const MasterMetrics::Rpc rpc_;
  const int64_t start_ns_;
  bool failed_ = false;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_MASTER_METRICS_H_
