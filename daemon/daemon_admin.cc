#include "daemon/server/daemon_admin.h"

#include <map>
#include <utility>
#include <vector>

#include "daemon/transfer/daemon_metrics.h"

namespace mooncake {
namespace {

const char* SegmentKind(const Membership::MountedSegment& s) {
  return s.disk ? "disk" : s.lent ? "lent" : "memory";
}

}  // namespace

DaemonAdmin::DaemonAdmin(const Sources& sources, std::vector<std::string> tokens)
    : sources_(sources), server_("daemon") {
  server_.AcceptTokens(std::move(tokens));
  // The registry outlives this object, and only this object's server renders it: one
  // DaemonAdmin per process (main's).
  MetricsRegistry* registry = DaemonMetrics::Get().registry();
  registry->AddCollector([this](MetricsWriter* out) { CollectSegments(out); });
  registry->AddCollector([this](MetricsWriter* out) { CollectMaster(out); });
  if (sources_.ssd != nullptr) {
    registry->AddCollector([this](MetricsWriter* out) { CollectSsd(out); });
  }
  // Open: aggregate figures (by op, tier, kind, transport), no key, address or tenant.
  server_.Handle(
      "/metrics",
      [registry](const HttpRequest& request, HttpResponse* response) {
        response->content_type = "text/plain; version=0.0.4";
        response->body = registry->Render(/*detailed=*/request.admin);
      },
      AdminHttpServer::Access::kOpen);
  server_.Handle(
      "/health", [this](const HttpRequest&, HttpResponse* response) { Health(response); },
      AdminHttpServer::Access::kOpen);
  RegisterLogLevelEndpoint(&server_);
}

void DaemonAdmin::CollectSegments(MetricsWriter* out) const {
  const std::vector<Membership::MountedSegment> mounted = sources_.membership->Mounted();
  // Every kind is written, 0 when none: a series that comes and goes is hard to alert on.
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_kind = {
      {"memory", {0, 0}}, {"lent", {0, 0}}, {"disk", {0, 0}}};  // kind -> (count, bytes)
  for (const auto& s : mounted) {
    auto& figures = by_kind[SegmentKind(s)];
    ++figures.first;
    figures.second += s.size;
  }
  out->Family("mooncake_daemon_segments", "gauge",
              "Segments this daemon has mounted at the master, by kind (memory: its own; "
              "lent: applications' MOUNT_SEGMENT; disk: the SSD tier's)");
  for (const auto& [kind, figures] : by_kind) {
    out->Sample(static_cast<double>(figures.first), {{"kind", kind}});
  }
  out->Family("mooncake_daemon_segment_capacity_bytes", "gauge",
              "Bytes of the segments mounted, by kind (disk: the SSD tier's capacity)");
  for (const auto& [kind, figures] : by_kind) {
    out->Sample(static_cast<double>(figures.second), {{"kind", kind}});
  }

  // Allocation is the master's: asked only while it answers heartbeats.
  std::vector<rpc::SegmentInfo> listed;
  if (!sources_.membership->healthy() ||
      sources_.master->GetAllSegments(&listed) != ErrorCode::OK) {
    return;
  }
  std::map<int64_t, const char*> ours;
  for (const auto& s : mounted) {
    if (!s.disk) ours[s.id] = SegmentKind(s);
  }
  std::map<std::string, uint64_t> used = {{"memory", 0}, {"lent", 0}};
  for (const rpc::SegmentInfo& info : listed) {
    auto it = ours.find(info.segment_id);
    if (it != ours.end() && info.used > 0) used[it->second] += static_cast<uint64_t>(info.used);
  }
  out->Family("mooncake_daemon_segment_used_bytes", "gauge",
              "Bytes the master has allocated to replicas in this daemon's memory segments, "
              "by kind (absent while the master is unreachable)");
  for (const auto& [kind, bytes] : used) {
    out->Sample(static_cast<double>(bytes), {{"kind", kind}});
  }
}

void DaemonAdmin::CollectMaster(MetricsWriter* out) const {
  out->Family("mooncake_daemon_master_connected", "gauge",
              "1 while the master answers this daemon's heartbeats, else 0");
  out->Sample(sources_.membership->healthy() ? 1 : 0);
  out->Family("mooncake_daemon_master_rpcs_total", "counter", "Calls to the master");
  out->Sample(static_cast<double>(sources_.master->calls()));
  out->Family("mooncake_daemon_master_rpc_failures_total", "counter",
              "Calls to the master that could not reach it (RPC_FAIL, NOT_LEADER)");
  out->Sample(static_cast<double>(sources_.master->failed_calls()));
  if (sources_.reporter != nullptr) {
    const BadReplicaReporter::Stats r = sources_.reporter->stats();
    out->Family("mooncake_daemon_bad_replicas_reported_total", "counter",
                "Replicas this daemon's reads found unreadable, reported to the master, by "
                "outcome (dropped by the master; changed: no longer the value read; "
                "not_queued: the report queue was full)");
    out->Sample(static_cast<double>(r.dropped), {{"result", "dropped"}});
    out->Sample(static_cast<double>(r.reported - r.dropped), {{"result", "changed"}});
    out->Sample(static_cast<double>(r.overflow), {{"result", "not_queued"}});
  }
}

void DaemonAdmin::CollectSsd(MetricsWriter* out) const {
  const SsdStats s = sources_.ssd->store()->Stats();
  auto gauge = [out](const char* name, const char* help, uint64_t value) {
    out->Family(name, "gauge", help);
    out->Sample(static_cast<double>(value));
  };
  auto counter = [out](const char* name, const char* help, uint64_t value) {
    out->Family(name, "counter", help);
    out->Sample(static_cast<double>(value));
  };
  gauge("mooncake_daemon_ssd_capacity_bytes", "The SSD tier's capacity (--ssd_capacity)",
        s.capacity);
  gauge("mooncake_daemon_ssd_used_bytes",
        "Bytes of the SSD tier's bucket files: live objects and dead space", s.used_bytes);
  gauge("mooncake_daemon_ssd_live_bytes", "Bytes of the objects the SSD tier holds",
        s.live_bytes);
  gauge("mooncake_daemon_ssd_objects", "Objects the SSD tier holds", s.objects);
  gauge("mooncake_daemon_ssd_buckets", "Bucket files of the SSD tier", s.buckets);
  counter("mooncake_daemon_ssd_evicted_buckets_total", "Buckets the SSD tier evicted",
          s.evicted_buckets);
  counter("mooncake_ssd_read_bytes_total", "Total bytes read from SSD", s.read_bytes);
  counter("mooncake_ssd_read_ops_total",
          "SSD reads that succeeded (whole values or chunks, for this daemon or its peers)",
          s.read_objects);
  counter("mooncake_ssd_write_bytes_total", "Total bytes written to SSD", s.written_bytes);
  counter("mooncake_ssd_write_ops_total", "Objects written to SSD", s.written_objects);
  counter("mooncake_daemon_ssd_write_failures_total", "Objects the SSD tier could not store",
          s.write_failures);
  out->Family("mooncake_daemon_ssd_read_errors_total", "counter",
              "SSD reads that failed, by kind (corrupt: a checksum mismatch, the object "
              "dropped; io: the disk failed)");
  out->Sample(static_cast<double>(s.corrupt_reads), {{"kind", "corrupt"}});
  out->Sample(static_cast<double>(s.read_failures), {{"kind", "io"}});

  if (sources_.offloader != nullptr) {
    const Offloader::Stats o = sources_.offloader->stats();
    out->Family("mooncake_daemon_ssd_offloads_total", "counter",
                "Offload tasks of the master this daemon ran, by result (ok: written and "
                "reported; failed; forgotten: written, then the master no longer wanted it)");
    out->Sample(static_cast<double>(o.offloaded), {{"result", "ok"}});
    out->Sample(static_cast<double>(o.failed), {{"result", "failed"}});
    out->Sample(static_cast<double>(o.forgotten), {{"result", "forgotten"}});
    counter("mooncake_daemon_ssd_offloaded_bytes_total", "Bytes of the offloads reported ok",
            o.bytes);
  }
  const Promoter::Stats p = sources_.service->promotions();
  out->Family("mooncake_daemon_ssd_promotions_total", "counter",
              "Objects read from disk that were offered for a memory replica, by outcome "
              "(promoted; declined by the master; failed; dropped: not queued)");
  out->Sample(static_cast<double>(p.promoted), {{"result", "promoted"}});
  out->Sample(static_cast<double>(p.declined), {{"result", "declined"}});
  out->Sample(static_cast<double>(p.failed), {{"result", "failed"}});
  out->Sample(static_cast<double>(p.dropped), {{"result", "dropped"}});
}

void DaemonAdmin::Health(HttpResponse* response) const {
  const bool connected = sources_.membership->healthy();
  const size_t segments = sources_.membership->Mounted().size();
  response->status = connected ? 200 : 503;
  response->body = std::string("{\"status\":\"") + (connected ? "ok" : "degraded") +
                   "\",\"master_connected\":" + (connected ? "true" : "false") +
                   ",\"daemon_id\":" + std::to_string(sources_.membership->daemon_id()) +
                   ",\"segments\":" + std::to_string(segments) +
                   ",\"clients\":" + std::to_string(DaemonMetrics::Get().clients()->value()) +
                   ",\"ssd\":" + (sources_.ssd != nullptr ? "true" : "false") + "}\n";
}

}  // namespace mooncake
