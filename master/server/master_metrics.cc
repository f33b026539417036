#include "master/server/master_metrics.h"

#include <cstdio>

#include "common/base/units.h"
#include "master/server/authenticated_processor.h"
#include "master/ha/master_role.h"
#include "master/service/master_service.h"
#include "master/ha/replication.h"
#include "master/server/rpc_server.h"
#include "master/snapshot/snapshotter.h"

namespace mooncake {

namespace {

void GaugeFamily(MetricsWriter* out, const std::string& name, const std::string& help, double value,
           const MetricLabels& labels = {}) {
  out->Family(name, "gauge", help);
  out->Sample(value, labels);
}

void CounterFamily(MetricsWriter* out, const std::string& name, const std::string& help,
                   double value) {
  out->Family(name, "counter", help);
  out->Sample(value);
}

double D(int64_t v) { return static_cast<double>(v); }

std::string Percent(int64_t part, int64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", whole > 0 ? 100.0 * D(part) / D(whole) : 0.0);
  return buf;
}

}  // namespace

rpc::MasterStats CollectMasterStats(const MasterSources& sources) {
  rpc::MasterStats stats = sources.service->GetStats();
  if (sources.snapshotter != nullptr) {
    stats.snapshot_sequence = static_cast<int64_t>(sources.snapshotter->last_sequence());
  }
  if (sources.replication != nullptr) sources.replication->FillStats(&stats);
  return stats;
}

const char* RoleName(const MasterSources& sources) {
  if (sources.role == nullptr) return "leader";
  switch (sources.role->role()) {
    case RoleMachine::Role::kLeader: return "leader";
    case RoleMachine::Role::kStandby: return "standby";
    case RoleMachine::Role::kDeposed: return "deposed";
  }
  return "deposed";
}

MasterMetrics::MasterMetrics(const MasterSources& sources) : sources_(sources) {
  for (size_t i = 0; i < rpcs_.size(); ++i) {
    const MasterRpcInfo& info = kMasterRpcs[i];
    if (info.metric == nullptr) continue;
    const bool batch = info.shape == RpcShape::kBatch;
    const std::string base = std::string("master_") + info.metric;
    PerRpc& r = rpcs_[i];
    r.requests = registry_.AddCounter(base + "_requests_total",
                                      std::string("Total number of ") + info.metric + " requests");
    r.failures = registry_.AddCounter(
        base + "_failures_total",
        std::string("Total number of failed ") + info.metric +
            (batch ? " requests (every item failed)" : " requests (a negative code)"));
    r.latency = registry_.AddHistogram(
        "master_rpc_duration_seconds",
        "Time the master took to answer a call, from its handler's start to its result, by rpc",
        LatencyBuckets(), {{"rpc", info.metric}});
    if (batch) {
      r.items = registry_.AddCounter(base + "_items_total",
                                     std::string("Total number of items in ") + info.metric +
                                         " requests");
      r.failed_items = registry_.AddCounter(
          base + "_failed_items_total",
          std::string("Total number of failed items in ") + info.metric + " requests");
      r.partial_successes = registry_.AddCounter(
          base + "_partial_successes_total",
          std::string("Total number of ") + info.metric + " requests where some items failed");
    }
  }
  registry_.AddCollector([this](MetricsWriter* out) { CollectStats(out); });
  registry_.AddCollector([this](MetricsWriter* out) { CollectSegments(out); });
  registry_.AddCollector([this](MetricsWriter* out) { CollectSnapshotAndRole(out); });
}

void MasterMetrics::RecordItems(Rpc rpc, uint64_t items, uint64_t failed_items) {
  PerRpc& r = rpcs_[static_cast<size_t>(rpc)];
  if (r.items == nullptr) return;
  r.items->Add(items);
  r.failed_items->Add(failed_items);
  if (failed_items > 0 && failed_items < items) r.partial_successes->Add();
}

void MasterMetrics::CollectStats(MetricsWriter* out) const {
  const rpc::MasterStats s = CollectMasterStats(sources_);
  GaugeFamily(out, "master_keys", "Objects the master holds, those being written included", D(s.objects));
  GaugeFamily(out, "master_allocated_bytes", "Memory bytes allocated across all segments",
        D(s.used_bytes));
  GaugeFamily(out, "master_total_capacity_bytes", "Memory capacity across all mounted segments",
        D(s.capacity_bytes));
  GaugeFamily(out, "master_segments", "Memory segments mounted", D(s.segments));
  GaugeFamily(out, "master_detached_segments",
        "Segments detached (restored, or of a silent daemon) until their daemon re-attaches",
        D(s.pending_segments));
  GaugeFamily(out, "master_active_clients", "Daemons registered with the master", D(s.daemons));
  GaugeFamily(out, "process_resident_memory_bytes", "Resident memory of the master process",
        D(s.resident_bytes));

  const rpc::EvictionStats& e = s.eviction;
  CounterFamily(out, "master_evicted_keys_total", "Objects evicted", D(s.evicted_objects));
  CounterFamily(out, "master_evicted_bytes_total", "Bytes evicted, every replica counted",
                D(e.evicted_bytes));
  CounterFamily(out, "master_attempted_evictions_total", "Eviction rounds run", D(e.rounds));
  CounterFamily(out, "master_successful_evictions_total",
                "Eviction rounds that freed what they were asked to", D(e.rounds - e.short_rounds));
  CounterFamily(out, "master_eviction_put_rounds_total", "Eviction rounds a put ran",
                D(e.put_rounds));
  CounterFamily(out, "master_eviction_seconds_total", "Time spent in eviction rounds",
                D(e.total_us) / 1e6);
  GaugeFamily(out, "master_eviction_last_round_seconds", "How long the latest eviction round took",
        D(e.last_us) / 1e6);
  GaugeFamily(out, "master_eviction_max_round_seconds", "How long the longest eviction round took",
        D(e.max_us) / 1e6);
  CounterFamily(out, "master_no_space_puts_total", "Puts answered -200 (no space)",
                D(e.no_space_puts));
  CounterFamily(out, "master_exist_uses_total", "Existence hits counted as a use",
                D(e.exist_uses));
  CounterFamily(out, "master_exist_leases_total", "Exist leases granted", D(e.exist_leases));

  // Tenant ids name tenants: for an admin's render only.
  if (out->detailed()) {
    out->Family("master_tenant_keys", "gauge", "A tenant's objects (tenant \"\": the default)");
    for (const auto& t : s.tenants) out->Sample(D(t.objects), {{"tenant_id", t.tenant}});
    out->Family("master_tenant_allocated_bytes", "gauge", "Memory a tenant's objects take");
    for (const auto& t : s.tenants) out->Sample(D(t.bytes), {{"tenant_id", t.tenant}});
    out->Family("master_tenant_quota_bytes", "gauge", "A tenant's quota (0: none)");
    for (const auto& t : s.tenants) out->Sample(D(t.quota_bytes), {{"tenant_id", t.tenant}});
    out->Family("mooncake_tenant_quota_reject_total", "counter",
                "Puts refused because they would take their tenant over its quota");
    for (const auto& t : s.tenants) {
      out->Sample(D(t.refused_puts), {{"tenant_id", t.tenant}, {"reason", "quota"}});
    }
  }

  const rpc::DiskStats& d = s.disk;
  GaugeFamily(out, "master_disk_segments", "LOCAL_DISK (SSD tier) segments mounted", D(d.segments));
  GaugeFamily(out, "master_disk_capacity_bytes", "Capacity of the LOCAL_DISK segments",
        D(d.capacity_bytes));
  GaugeFamily(out, "master_disk_keys", "Objects with a LOCAL_DISK replica", D(d.objects));
  GaugeFamily(out, "master_disk_allocated_bytes", "Bytes held on SSD (size x disk replicas)",
        D(d.bytes));
  GaugeFamily(out, "master_disk_only_keys", "Objects with no memory replica", D(d.disk_only_objects));
  GaugeFamily(out, "master_offloads_queued", "Offload tasks waiting for their daemon",
        D(d.offloads_queued));
  CounterFamily(out, "master_offloads_done_total", "Disk replicas registered by offload reports",
                D(d.offloads_done));
  CounterFamily(out, "master_offloads_failed_total", "Offloads that failed or timed out",
                D(d.offloads_failed));
  CounterFamily(out, "master_offloads_dropped_total", "Offloads not queued: the queue was full",
                D(d.offloads_dropped));
  CounterFamily(out, "master_evict_offloads_total", "Offload tasks an eviction round queued",
                D(d.evict_offloads));
  CounterFamily(out, "master_promotion_completed_total",
                "Memory replicas re-created from disk", D(d.promotions));
  CounterFamily(out, "master_disk_adopted_total", "Disk replicas RegisterDiskReplicas added",
                D(d.adopted));
  CounterFamily(out, "master_disk_dropped_total", "Disk replicas DropDiskReplicas removed",
                D(d.dropped));

  out->Family("mooncake_master_objects_dropped_total", "counter",
              "Objects (or their replicas) dropped because what the master listed could not be "
              "read back as the object's bytes, by reason (restore_unverifiable: kept, "
              "counted)");
  for (const auto& [reason, n] : s.objects_dropped) out->Sample(D(n), {{"reason", reason}});
  GaugeFamily(out, "master_unverified_replicas",
              "Restored memory replicas waiting for their daemon's checksum check",
              D(s.unverified_replicas));
  GaugeFamily(out, "master_parked_keys",
              "Objects of segments dropped past their grace, kept aside for their daemon",
              D(s.parked_objects));
  CounterFamily(out, "master_parked_adopted_total",
                "Parked objects adopted back after their daemon verified them",
                D(s.parked_adopted));

  GaugeFamily(out, "master_oplog_sequence", "Last operation-log record appended (0: no log)",
        D(s.oplog_sequence));
  GaugeFamily(out, "master_oplog_synced_sequence", "Last operation-log record on disk",
        D(s.oplog_synced));
  GaugeFamily(out, "master_snapshot_sequence", "Log sequence of the newest snapshot (0: none)",
        D(s.snapshot_sequence));
  GaugeFamily(out, "master_restore_seconds", "How long the restore at start took", D(s.restore_ms) / 1e3);
  GaugeFamily(out, "master_restored_keys", "Objects the restore at start brought back",
        D(s.restored_objects));
  GaugeFamily(out, "master_replication_lag_records",
        "Standby: records the leader has that this master has not applied", D(s.replication_lag));
  CounterFamily(out, "master_replication_bootstraps_total",
                "Standby: snapshots fetched from the leader and loaded",
                D(s.replication_bootstraps));
  CounterFamily(out, "master_replication_applied_total", "Standby: log records applied",
                D(s.replication_applied));
  GaugeFamily(out, "master_sync_set_size", "Leader: standbys a strict acknowledgement waits for",
        D(s.sync_set_size));
}

void MasterMetrics::CollectSegments(MetricsWriter* out) const {
  if (!out->detailed()) return;  // a segment's name is its daemon's address
  const auto segments = sources_.service->SegmentDetails();
  auto labels = [](const MasterService::SegmentView& v) {
    return MetricLabels{{"segment", v.info.name},
                        {"segment_id", std::to_string(v.info.segment_id)}};
  };
  out->Family("segment_allocated_bytes", "gauge", "Memory bytes allocated in the segment");
  for (const auto& v : segments) {
    if (v.info.kind == rpc::ReplicaKind::MEMORY) out->Sample(D(v.info.used), labels(v));
  }
  out->Family("segment_total_capacity_bytes", "gauge", "Memory capacity of the segment");
  for (const auto& v : segments) {
    if (v.info.kind == rpc::ReplicaKind::MEMORY) out->Sample(D(static_cast<int64_t>(v.capacity)), labels(v));
  }
}

void MasterMetrics::CollectSnapshotAndRole(MetricsWriter* out) const {
  const char* role = RoleName(sources_);
  out->Family("master_role", "gauge", "1 for the role this master has now");
  for (const char* r : {"leader", "standby", "deposed"}) {
    out->Sample(std::string(r) == role ? 1 : 0, {{"role", r}});
  }
  GaugeFamily(out, "master_term", "The leader's term (0 without HA)",
        D(sources_.role != nullptr ? sources_.role->term() : 0));
  if (sources_.snapshotter == nullptr) return;
  const SnapshotOutcome last = sources_.snapshotter->Last();
  GaugeFamily(out, "master_snapshot_running", "1 while a snapshot is being written", last.running);
  GaugeFamily(out, "master_last_snapshot_ok", "1 when the newest snapshot that ended succeeded",
        !last.name.empty() && last.code == ErrorCode::OK);
  GaugeFamily(out, "master_last_snapshot_duration_seconds", "Fork to published, of the newest snapshot",
        D(last.duration_ms) / 1e3);
  GaugeFamily(out, "master_last_snapshot_pause_seconds", "How long the newest snapshot held requests",
        D(last.pause_us) / 1e6);
  GaugeFamily(out, "master_last_snapshot_bytes", "Size of the newest snapshot", D(last.bytes));
  GaugeFamily(out, "master_last_snapshot_keys", "Objects in the newest snapshot", D(last.objects));
}

void MasterMetrics::WatchRpcServer(const RpcServer* server,
                                   const AuthenticatedProcessorFactory* processors) {
  registry_.AddCollector([server, processors](MetricsWriter* out) {
    out->Family("master_rpc_connections", "gauge",
                "Thrift connections open, by state: admitted, or still in their handshake");
    out->Sample(D(static_cast<int64_t>(server->admitted_connections())),
                {{"state", "admitted"}});
    out->Sample(D(static_cast<int64_t>(server->unadmitted_connections())),
                {{"state", "handshake"}});
    out->Family("master_rpc_connections_closed_total", "counter",
                "Thrift connections the master closed itself, by reason");
    for (size_t i = 0; i < static_cast<size_t>(RpcClosure::kCount); ++i) {
      const auto why = static_cast<RpcClosure>(i);
      out->Sample(D(static_cast<int64_t>(server->closed(why))),
                  {{"reason", RpcClosureName(why)}});
    }
    CounterFamily(out, "master_rpc_unauthenticated_calls_total",
                  "Thrift calls answered -1400: refused before admission, or a failed "
                  "handshake step",
                  D(static_cast<int64_t>(processors->refused_calls())));
  });
}

std::string MasterMetrics::Summary() const {
  const rpc::MasterStats s = CollectMasterStats(sources_);
  std::string text;
  auto line = [&text](const std::string& name, const std::string& value) {
    text += name + ": " + value + "\n";
  };
  line("role", std::string(RoleName(sources_)) + " (term " +
                   std::to_string(sources_.role != nullptr ? sources_.role->term() : 0) + ")");
  line("keys", std::to_string(s.objects));
  line("memory used", FormatSize(static_cast<uint64_t>(s.used_bytes)) + " of " +
                          FormatSize(static_cast<uint64_t>(s.capacity_bytes)) + " (" +
                          Percent(s.used_bytes, s.capacity_bytes) + ")");
  line("segments", std::to_string(s.segments) + " (detached: " +
                       std::to_string(s.pending_segments) + ")");
  line("daemons", std::to_string(s.daemons));
  line("evictions", std::to_string(s.eviction.rounds) + " rounds, " +
                        std::to_string(s.evicted_objects) + " keys, " +
                        FormatSize(static_cast<uint64_t>(s.eviction.evicted_bytes)));
  line("tenants", std::to_string(s.tenants.size()));
  line("disk tier", std::to_string(s.disk.segments) + " segments, " +
                        std::to_string(s.disk.objects) + " keys, " +
                        FormatSize(static_cast<uint64_t>(s.disk.bytes)) + " of " +
                        FormatSize(static_cast<uint64_t>(s.disk.capacity_bytes)));
  line("oplog", "sequence " + std::to_string(s.oplog_sequence) + ", synced " +
                    std::to_string(s.oplog_synced));
  if (sources_.snapshotter == nullptr) {
    line("snapshot", "off");
  } else {
    const SnapshotOutcome last = sources_.snapshotter->Last();
    line("snapshot", last.name.empty() ? std::string(last.running ? "running" : "none")
                                       : last.name + " (sequence " +
                                             std::to_string(last.sequence) + ", " +
                                             FormatSize(static_cast<uint64_t>(last.bytes)) +
                                             (last.code == ErrorCode::OK ? "" : ", failed") + ")");
  }
  line("replication", "lag " + std::to_string(s.replication_lag) + " records, sync set " +
                          std::to_string(s.sync_set_size));
  uint64_t calls = 0, failed = 0;
  for (const PerRpc& r : rpcs_) {
    calls += Value(r.requests);
    failed += Value(r.failures);
  }
  line("rpc calls", std::to_string(calls) + " (failed: " + std::to_string(failed) + ")");
  for (size_t i = 0; i < rpcs_.size(); ++i) {
    uint64_t n = Value(rpcs_[i].requests);
    if (n == 0) continue;
    line(std::string("rpc ") + kMasterRpcs[i].metric,
         std::to_string(n) + " (failed: " + std::to_string(Value(rpcs_[i].failures)) + ")");
  }
  return text;
}

std::string MasterMetrics::ReportLine() const {
  const rpc::MasterStats s = CollectMasterStats(sources_);
  uint64_t calls = 0, failed = 0;
  for (const PerRpc& r : rpcs_) {
    calls += Value(r.requests);
    failed += Value(r.failures);
  }
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "metrics: role=%s keys=%lld memory=%s/%s segments=%lld daemons=%lld "
                "evicted_keys=%lld rpc_calls=%llu rpc_failures=%llu",
                RoleName(sources_), static_cast<long long>(s.objects),
                FormatSize(static_cast<uint64_t>(s.used_bytes)).c_str(),
                FormatSize(static_cast<uint64_t>(s.capacity_bytes)).c_str(),
                static_cast<long long>(s.segments), static_cast<long long>(s.daemons),
                static_cast<long long>(s.evicted_objects), static_cast<unsigned long long>(calls),
                static_cast<unsigned long long>(failed));
  return buf;
}

}  // namespace mooncake
