#include "daemon/transfer/daemon_metrics.h"

#include <cctype>
#include <string>

#include "common/uds/uds_ops.h"

namespace mooncake {
namespace {

// "BATCH_GET" -> "batch_get": the op label.
std::string OpLabel(const char* wire) {
  std::string label(wire);
  for (char& c : label) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return label;
}

const char* TierLabel(ReplicaTier tier) {
  switch (tier) {
    case ReplicaTier::kLocalMemory:
      return "local_memory";
    case ReplicaTier::kRemoteMemory:
      return "remote_memory";
    case ReplicaTier::kLocalDisk:
      return "local_disk";
    case ReplicaTier::kRemoteDisk:
      return "remote_disk";
  }
  return "unknown";
}

}  // namespace

DaemonMetrics& DaemonMetrics::Get() {
  static DaemonMetrics* metrics = new DaemonMetrics();  // never destroyed: threads outlive main
  return *metrics;
}

DaemonMetrics::DaemonMetrics() {
  const std::string requests_help =
      "Unix-socket requests answered, by op and result (ok: code 0; error: any other code)";
  const std::string latency_help =
      "Time from a Unix-socket request's parse to its answer being sent, by op";
#define MC_METRICS_OP_(name, wire, code, args, reply, note)                                   \
  static_assert(code < kOpSlots, "op code above DaemonMetrics::kOpSlots");                    \
  ops_[code].ok = registry_.AddCounter("mooncake_daemon_requests_total", requests_help,       \
                                       {{"op", OpLabel(wire)}, {"result", "ok"}});            \
  ops_[code].error = registry_.AddCounter("mooncake_daemon_requests_total", requests_help,    \
                                          {{"op", OpLabel(wire)}, {"result", "error"}});      \
  ops_[code].latency = registry_.AddHistogram("mooncake_daemon_request_duration_seconds",     \
                                              latency_help, LatencyBuckets(),                 \
                                              {{"op", OpLabel(wire)}});
  MC_UDS_OPS(MC_METRICS_OP_)
#undef MC_METRICS_OP_

  for (ReplicaTier tier : {ReplicaTier::kLocalMemory, ReplicaTier::kRemoteMemory,
                           ReplicaTier::kLocalDisk, ReplicaTier::kRemoteDisk}) {
    size_t t = static_cast<size_t>(tier);
    bytes_[Index(TransferKind::kRead)][t] = registry_.AddCounter(
        "mooncake_transfer_read_bytes_total",
        "Bytes read into applications' pools (gets), by the tier of the replica read",
        {{"tier", TierLabel(tier)}});
    if (tier == ReplicaTier::kLocalDisk || tier == ReplicaTier::kRemoteDisk) continue;
    bytes_[Index(TransferKind::kWrite)][t] = registry_.AddCounter(
        "mooncake_transfer_write_bytes_total",
        "Bytes written from applications' pools to replicas (puts), by the replica's tier",
        {{"tier", TierLabel(tier)}});
  }

  const std::string transfers_help =
      "Transfers to or from other daemons' segments, by kind, transport and result";
  const std::string transfer_bytes_help =
      "Bytes of the transfers that succeeded, by kind and transport";
  const std::string transfer_latency_help =
      "Time of the transfer batch each transfer ran in, by kind and transport";
  for (TransferKind kind : {TransferKind::kRead, TransferKind::kWrite}) {
    for (int rdma = 0; rdma < 2; ++rdma) {
      MetricLabels labels = {{"kind", kind == TransferKind::kRead ? "read" : "write"},
                             {"transport", rdma ? "rdma" : "tcp"}};
      TransferHandles& h = transfers_[Index(kind)][rdma];
      MetricLabels ok = labels, error = labels;
      ok.emplace_back("result", "ok");
      error.emplace_back("result", "error");
      h.ok = registry_.AddCounter("mooncake_daemon_transfers_total", transfers_help, ok);
      h.error = registry_.AddCounter("mooncake_daemon_transfers_total", transfers_help, error);
      h.bytes = registry_.AddCounter("mooncake_daemon_transfer_bytes_total",
                                     transfer_bytes_help, labels);
      h.latency = registry_.AddHistogram("mooncake_daemon_transfer_duration_seconds",
                                         transfer_latency_help, LatencyBuckets(), labels);
    }
  }

  cache_hits_ = registry_.AddCounter(
      "mooncake_daemon_read_cache_hits_total",
      "Reads (GET, BATCH_GET entries, GET_BEGIN) the read cache answered without the master");
  cache_misses_ = registry_.AddCounter("mooncake_daemon_read_cache_misses_total",
                                       "Reads that asked the master where the object is");
  clients_ = registry_.AddGauge("mooncake_daemon_connected_clients",
                                "Applications connected over the Unix socket (past HELLO)");

  const std::string group_calls_help =
      "Single-key master calls the daemon made for its requests, by call (group commit: "
      "daemon/cluster/master_batcher.h)";
  const std::string group_rpcs_help =
      "Master RPCs those calls were sent in (fewer than the calls when concurrent ones "
      "shared a batch RPC), by call";
  const char* const group_labels[kGroupedCalls] = {"put_start", "put_end", "get_replica_list"};
  for (size_t k = 0; k < kGroupedCalls; ++k) {
    groups_[k].calls = registry_.AddCounter("mooncake_daemon_master_grouped_calls_total",
                                            group_calls_help, {{"call", group_labels[k]}});
    groups_[k].rpcs = registry_.AddCounter("mooncake_daemon_master_grouped_rpcs_total",
                                           group_rpcs_help, {{"call", group_labels[k]}});
  }
}

}  // namespace mooncake
