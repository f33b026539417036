#include "master/server/master_admin.h"

#include <cinttypes>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_split.h"
#include "common/base/error_code.h"
#include "common/base/tenant_key.h"
#include "common/base/units.h"
#include "master/ha/master_role.h"
#include "master/service/master_service.h"
#include "master/snapshot/snapshotter.h"

namespace mooncake {

namespace {

using nlohmann::json;

// Keys are bytes: one that is not UTF-8 is shown with U+FFFD rather than failing the page.
void SetJson(HttpResponse* response, const json& body) {
  response->content_type = "application/json";
  response->body = body.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

void SetText(HttpResponse* response, std::string body) {
  response->content_type = "text/plain; charset=utf-8";
  response->body = std::move(body);
}

void BadRequest(HttpResponse* response, const std::string& message) {
  SetHttpError(response, 400, ToInt(ErrorCode::INVALID_PARAMS), message);
}

// GET and HEAD only (post_too: POST as well); false with 405 otherwise.
bool MethodAllowed(const HttpRequest& request, HttpResponse* response, bool post_too = false) {
  if (request.method == "GET" || request.method == "HEAD" ||
      (post_too && request.method == "POST")) {
    return true;
  }
  SetHttpError(response, 405, ToInt(ErrorCode::INVALID_PARAMS),
               "method " + request.method + " not allowed here");
  return false;
}

const char* KindName(ReplicaKind kind) {
  return kind == ReplicaKind::kMemory ? "memory" : "local_disk";
}

const char* StatusName(ReplicaStatus status) {
  switch (status) {
    case ReplicaStatus::kProcessing: return "processing";
    case ReplicaStatus::kComplete: return "complete";
    case ReplicaStatus::kFailed: return "failed";
    case ReplicaStatus::kRemoved: return "removed";
  }
  return "unknown";
}

std::string Hex(uint64_t value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%" PRIx64, value);
  return buf;
}

double UsagePercent(uint64_t used, uint64_t capacity) {
  return capacity > 0 ? 100.0 * static_cast<double>(used) / static_cast<double>(capacity) : 0.0;
}

// A strict decimal in [1, max]; false for anything else.
bool ParseLimit(const std::string& text, size_t max, size_t* out) {
  if (text.empty() || text.size() > 9) return false;
  size_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<size_t>(c - '0');
  }
  if (value == 0 || value > max) return false;
  *out = value;
  return true;
}

class Routes {
 public:
  Routes(const MasterMetrics* metrics, std::function<std::string()> self_address)
      : metrics_(metrics),
        sources_(metrics->sources()),
        service_(metrics->sources().service),
        self_address_(std::move(self_address)) {}

  // Every handler holds self: the routes live as long as the server's table of them.
  static void Register(AdminHttpServer* server, const std::shared_ptr<Routes>& self) {
    using Access = AdminHttpServer::Access;
    auto route = [server, self](const char* path, bool data, Access access,
                                void (Routes::*handler)(const HttpRequest&, HttpResponse*),
                                AdminHttpServer::Handler on_refusal = nullptr) {
      server->Handle(
          path,
          [self, data, handler](const HttpRequest& request, HttpResponse* response) {
            if (data && !self->Serving()) {
              SetHttpError(response, 503, ToInt(ErrorCode::NOT_LEADER),
                           std::string("this master is ") + RoleName(self->sources_) +
                               ": ask the leader");
              // SGLang's probe reads any non-empty answer as "the master is up" and never
              // looks at the status: a standby's segment list must look like a leader's
              // with none.
              if (handler == &Routes::AllSegments) response->body.clear();
              return;
            }
            (self.get()->*handler)(request, response);
          },
          access, std::move(on_refusal));
    };
    route("/metrics", false, Access::kOpen, &Routes::Metrics);
    route("/health", false, Access::kOpen, &Routes::Health);
    route("/role", false, Access::kOpen, &Routes::Role);
    route("/metrics/summary", false, Access::kAdmin, &Routes::Summary);
    // SGLang's probe sends no token and reads only whether the body is empty: a refusal
    // is empty while no segment is mounted, so that it still waits for the first daemon
    // (one bit, which /metrics' master_segments publishes anyway).
    route("/get_all_segments", true, Access::kAdmin, &Routes::AllSegments,
          [self](const HttpRequest&, HttpResponse* response) {
            if (!self->Serving() || self->service_->GetAllSegments().empty()) {
              response->body.clear();
            }
          });
    route("/get_segments_detail", true, Access::kAdmin, &Routes::SegmentsDetail);
    route("/query_key", true, Access::kAdmin, &Routes::QueryKey);
    route("/batch_query_keys", true, Access::kAdmin, &Routes::BatchQueryKeys);
    route("/get_all_keys", true, Access::kAdmin, &Routes::AllKeys);
    route("/stats", true, Access::kAdmin, &Routes::Stats);
    route("/snapshot", true, Access::kAdmin, &Routes::Snapshot);
    route("/api/v1/drain_jobs", true, Access::kAdmin, &Routes::CreateDrainJob);
    route("/api/v1/drain_jobs/query", true, Access::kAdmin, &Routes::QueryDrainJob);
    route("/api/v1/drain_jobs/cancel", true, Access::kAdmin, &Routes::CancelDrainJob);
    route("/api/v1/segments/status", true, Access::kAdmin, &Routes::SegmentStatus);
    RegisterLogLevelEndpoint(server);
  }

 private:
  bool Serving() const { return sources_.role == nullptr || sources_.role->Serving(); }

  void Metrics(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response)) return;
    response->content_type = "text/plain; version=0.0.4; charset=utf-8";
    response->body = metrics_->Render(/*detailed=*/request.admin);
  }

  void Summary(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response)) return;
    SetText(response, metrics_->Summary());
  }

  void Health(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response)) return;
    const RoleMachine* role = sources_.role;
    SetJson(response, {{"status", "ok"},
                       {"role", RoleName(sources_)},
                       {"ha_enabled", role != nullptr},
                       {"service_ready", Serving()},
                       {"term", role != nullptr ? role->term() : 0},
                       {"leader_address", role != nullptr ? role->leader() : self_address_()}});
  }

  void Role(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response)) return;
    SetText(response, RoleName(sources_));
  }

  // Mooncake's shape: segment names, one a line; a daemon's several segments (its own,
  // lent memory, its SSD) share its name and are listed once.
  void AllSegments(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response)) return;
    std::set<std::string> names;
    for (const auto& segment : service_->GetAllSegments()) names.insert(segment.name);
    std::string body;
    for (const std::string& name : names) body += name + "\n";
    SetText(response, std::move(body));
  }

  void SegmentsDetail(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response)) return;
    json segments = json::array();
    for (const MasterService::SegmentView& v : service_->SegmentDetails()) {
      const rpc::SegmentInfo& info = v.info;
      const bool disk = info.kind == rpc::ReplicaKind::LOCAL_DISK;
      const uint64_t used = static_cast<uint64_t>(info.used);
      const uint64_t size = static_cast<uint64_t>(info.size);
      json item = {{"segment_name", info.name},
                   {"segment_id", info.segment_id},
                   {"daemon_id", info.daemon_id},
                   {"kind", disk ? "local_disk" : "memory"},
                   {"base_address", Hex(static_cast<uint64_t>(info.base))},
                   {"size_bytes", size},
                   {"size_human", FormatSize(size)},
                   {"used_bytes", used},
                   {"usage_percent", UsagePercent(used, v.capacity)},
                   {"te_endpoint", info.endpoints.empty() ? "" : info.endpoints[0].address},
                   {"protocol", info.endpoints.empty() ? "" : info.endpoints[0].protocol},
                   {"status", v.status},
                   {"lent_by_client", info.lent_by_client},
                   {"lender_pid", info.lender},
                   {"allocator_used_bytes", used},
                   {"allocator_capacity_bytes", v.capacity},
                   {"allocator_usage_percent", UsagePercent(used, v.capacity)}};
      segments.push_back(std::move(item));
    }
    SetJson(response, {{"total_segments", segments.size()}, {"segments", std::move(segments)}});
  }

  // The tenant parameter, checked; false with 400 when malformed.
  static bool TenantOf(const HttpRequest& request, HttpResponse* response, std::string* tenant) {
    *tenant = request.Param("tenant");
    if (tenant_key::ValidTenantOrDefault(*tenant)) return true;
    BadRequest(response, "malformed tenant id");
    return false;
  }

  // One key's answer: {"ok":true,...} as /batch_query_keys has it, or the error code.
  ErrorCode Describe(const std::string& tenant, const std::string& key, json* out) {
    if (!tenant_key::ValidUserKey(key)) return ErrorCode::INVALID_PARAMS;
    MasterService::KeyDescription d;
    ErrorCode rc = service_->DescribeKey(tenant_key::Encode(tenant, key), &d);
    if (rc != ErrorCode::OK) return rc;
    json values = json::array();    // Mooncake's buffer descriptors of the memory replicas
    json replicas = json::array();
    for (const MasterService::ReplicaView& r : d.replicas) {
      replicas.push_back({{"replica_id", r.replica_id},
                          {"kind", KindName(r.kind)},
                          {"status", StatusName(r.status)},
                          {"segment_id", r.segment_id},
                          {"segment_name", r.segment_name},
                          {"segment_status", r.segment_status},
                          {"daemon_id", r.daemon_id},
                          {"offset", r.offset},
                          {"size", d.size},
                          {"protocol", r.protocol},
                          {"endpoint", r.endpoint}});
      if (r.kind == ReplicaKind::kMemory && r.status == ReplicaStatus::kComplete) {
        values.push_back({{"size_", d.size},
                          {"buffer_address_", r.base + r.offset},
                          {"protocol_", r.protocol},
                          {"transport_endpoint_", r.endpoint}});
      }
    }
    *out = {{"key", key},
            {"size", d.size},
            {"complete", d.complete},
            {"values", std::move(values)},
            {"replicas", std::move(replicas)},
            {"lease_remaining_ms", d.lease_remaining_ms},
            {"soft_pinned", d.soft_pinned},
            {"soft_pin_remaining_ms", d.soft_pin_remaining_ms},
            {"hard_pinned", d.hard_pinned},
            {"checksum", d.checksum >= 0 ? json(d.checksum) : json(nullptr)},
            {"group_id", d.group}};
    return ErrorCode::OK;
  }

  void QueryKey(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response)) return;
    std::string tenant;
    if (!TenantOf(request, response, &tenant)) return;
    auto it = request.query.find("key");
    if (it == request.query.end()) return BadRequest(response, "key=K is missing");
    json described;
    ErrorCode rc = Describe(tenant, it->second, &described);
    if (rc == ErrorCode::INVALID_PARAMS) return BadRequest(response, "malformed key");
    if (rc != ErrorCode::OK) {
      return SetHttpError(response, 404, ToInt(rc), ErrorText(ToInt(rc)));
    }
    described["success"] = true;
    described["data"] = described["values"];  // Mooncake's name for them
    described.erase("values");
    SetJson(response, described);
  }

  void BatchQueryKeys(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response, /*post_too=*/true)) return;
    std::string tenant;
    if (!TenantOf(request, response, &tenant)) return;
    std::vector<std::string> keys;
    if (request.method == "POST") {
      json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
      if (!body.is_object() || !body.contains("keys") || !body["keys"].is_array()) {
        return BadRequest(response, "the body must be {\"keys\":[...]}");
      }
      for (const json& key : body["keys"]) {
        if (!key.is_string()) return BadRequest(response, "every key must be a string");
        if (keys.size() == kMaxBatchKeys) break;  // refused below
        keys.push_back(key.get<std::string>());
      }
      if (body["keys"].size() > kMaxBatchKeys) keys.push_back("");
    } else {
      // Split as Mooncake splits: on every comma, nothing trimmed.
      const std::string list = request.Param("keys");
      if (!list.empty()) {
        for (absl::string_view key : absl::StrSplit(list, ',')) {
          keys.emplace_back(key);
          if (keys.size() > kMaxBatchKeys) break;  // refused below
        }
      }
    }
    if (keys.empty()) return BadRequest(response, "no keys given: ?keys=a,b or POST {\"keys\":[]}");
    if (keys.size() > kMaxBatchKeys) {
      return BadRequest(response, "at most " + std::to_string(kMaxBatchKeys) + " keys");
    }
    json data = json::object();
    for (const std::string& key : keys) {
      json described;
      ErrorCode rc = Describe(tenant, key, &described);
      if (rc != ErrorCode::OK) {
        data[key] = {{"ok", false}, {"error", ErrorName(rc)}, {"error_code", ToInt(rc)}};
        continue;
      }
      described["ok"] = true;
      data[key] = std::move(described);
    }
    SetJson(response, {{"success", true}, {"data", std::move(data)}});
  }

  void AllKeys(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response)) return;
    std::string tenant;
    if (!TenantOf(request, response, &tenant)) return;
    size_t limit = kDefaultKeyPage;
    if (request.query.count("limit") != 0 &&
        !ParseLimit(request.Param("limit"), kMaxKeyPage, &limit)) {
      return BadRequest(response, "limit must be 1.." + std::to_string(kMaxKeyPage));
    }
    const std::string format = request.Param("format", "text");
    if (format != "text" && format != "json") {
      return BadRequest(response, "format must be text or json");
    }
    MasterService::KeyPage page;
    std::string error;
    if (service_->ListKeys(tenant, request.Param("cursor"), limit, request.Param("regex"), &page,
                           &error) != ErrorCode::OK) {
      return BadRequest(response, error);
    }
    if (!page.next_cursor.empty()) response->headers.push_back({"X-Next-Cursor", page.next_cursor});
    if (format == "json") {
      SetJson(response, {{"keys", page.keys},
                         {"next_cursor", page.next_cursor.empty() ? json(nullptr)
                                                                  : json(page.next_cursor)}});
      return;
    }
    std::string body;
    for (const std::string& key : page.keys) body += key + "\n";
    SetText(response, std::move(body));
  }

  void Stats(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response)) return;
    const rpc::MasterStats s = CollectMasterStats(sources_);
    const rpc::EvictionStats& e = s.eviction;
    const rpc::DiskStats& d = s.disk;
    json tenants = json::array();
    for (const auto& t : s.tenants) {
      tenants.push_back({{"tenant", t.tenant},
                         {"objects", t.objects},
                         {"bytes", t.bytes},
                         {"quota_bytes", t.quota_bytes},
                         {"refused_puts", t.refused_puts}});
    }
    SetJson(response,
            {{"objects", s.objects},
             {"segments", s.segments},
             {"daemons", s.daemons},
             {"capacity_bytes", s.capacity_bytes},
             {"used_bytes", s.used_bytes},
             {"resident_bytes", s.resident_bytes},
             {"evicted_objects", s.evicted_objects},
             {"master_epoch", s.master_epoch},
             {"oplog_sequence", s.oplog_sequence},
             {"oplog_synced", s.oplog_synced},
             {"snapshot_sequence", s.snapshot_sequence},
             {"restore_ms", s.restore_ms},
             {"restored_objects", s.restored_objects},
             {"pending_segments", s.pending_segments},
             {"eviction",
              {{"rounds", e.rounds},
               {"put_rounds", e.put_rounds},
               {"short_rounds", e.short_rounds},
               {"evicted_bytes", e.evicted_bytes},
               {"total_us", e.total_us},
               {"max_us", e.max_us},
               {"last_us", e.last_us},
               {"last_used_bytes", e.last_used_bytes},
               {"no_space_puts", e.no_space_puts},
               {"exist_uses", e.exist_uses},
               {"exist_leases", e.exist_leases}}},
             {"tenants", std::move(tenants)},
             {"disk",
              {{"segments", d.segments},
               {"capacity_bytes", d.capacity_bytes},
               {"objects", d.objects},
               {"bytes", d.bytes},
               {"disk_only_objects", d.disk_only_objects},
               {"offloads_queued", d.offloads_queued},
               {"offloads_done", d.offloads_done},
               {"offloads_failed", d.offloads_failed},
               {"evict_offloads", d.evict_offloads},
               {"promotions", d.promotions},
               {"adopted", d.adopted},
               {"dropped", d.dropped},
               {"offloads_dropped", d.offloads_dropped}}},
             {"replication_lag", s.replication_lag},
             {"replication_bootstraps", s.replication_bootstraps},
             {"replication_applied", s.replication_applied},
             {"sync_set_size", s.sync_set_size},
             {"role", RoleName(sources_)}});
  }

  void Snapshot(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response)) return;
    SnapshotOutcome last;
    const bool enabled = sources_.snapshotter != nullptr;
    if (enabled) last = sources_.snapshotter->Last();
    SetJson(response, {{"enabled", enabled},
                       {"running", last.running},
                       {"ok", enabled && !last.name.empty() && last.code == ErrorCode::OK},
                       {"name", last.name},
                       {"sequence", last.sequence},
                       {"pause_us", last.pause_us},
                       {"duration_ms", last.duration_ms},
                       {"bytes", last.bytes},
                       {"objects", last.objects},
                       {"error", last.error}});
  }

  // ---- drain jobs (Mooncake's /api/v1 drain control; MasterService::CreateDrainJob) ----

  static int HttpStatusOf(ErrorCode code) {
    switch (code) {
      case ErrorCode::INVALID_PARAMS: return 400;
      case ErrorCode::OBJECT_NOT_FOUND:
      case ErrorCode::SEGMENT_NOT_FOUND: return 404;
      case ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS: return 409;
      default: return 500;
    }
  }

  static void Refused(HttpResponse* response, ErrorCode code, const std::string& what) {
    SetHttpError(response, HttpStatusOf(code), ToInt(code),
                 what + ": " + ErrorText(ToInt(code)));
  }

  // Mooncake's job id: its UUID as "high-low", in decimal.
  static std::string JobIdText(const TaskId& id) {
    return std::to_string(id.high) + "-" + std::to_string(id.low);
  }
  static bool ParseJobId(const std::string& text, TaskId* out) {
    size_t dash = text.find('-');
    if (dash == std::string::npos || dash == 0 || dash + 1 >= text.size() ||
        text.size() > 41) {
      return false;
    }
    auto part = [](const std::string& digits, uint64_t* v) {
      if (digits.empty() || digits.size() > 20) return false;
      *v = 0;
      for (char c : digits) {
        if (c < '0' || c > '9') return false;
        uint64_t next = *v * 10 + static_cast<uint64_t>(c - '0');
        if (next / 10 != *v) return false;  // overflow
        *v = next;
      }
      return true;
    };
    return part(text.substr(0, dash), &out->high) && part(text.substr(dash + 1), &out->low);
  }

  // POST {"segments": [names], "target_segments": [names], "max_concurrency": n (4)}.
  void CreateDrainJob(const HttpRequest& request, HttpResponse* response) {
    if (request.method != "POST") {
      SetHttpError(response, 405, ToInt(ErrorCode::INVALID_PARAMS), "POST a JSON body");
      return;
    }
    json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    std::vector<std::string> segments, targets;
    uint64_t concurrency = 4;  // Mooncake's default
    auto names = [&body](const char* field, std::vector<std::string>* out) {
      if (!body.contains(field)) return true;
      if (!body[field].is_array() || body[field].size() > kMaxBatchKeys) return false;
      for (const json& name : body[field]) {
        if (!name.is_string()) return false;
        out->push_back(name.get<std::string>());
      }
      return true;
    };
    if (!body.is_object() || !names("segments", &segments) ||
        !names("target_segments", &targets) ||
        (body.contains("max_concurrency") &&
         (!body["max_concurrency"].is_number_unsigned() ||
          (concurrency = body["max_concurrency"].get<uint64_t>()) > 1024))) {
      return BadRequest(response, "Invalid JSON body: {\"segments\": [names], "
                                  "\"target_segments\": [names], \"max_concurrency\": 1..1024}");
    }
    TaskId id;
    ErrorCode code = service_->CreateDrainJob(segments, targets,
                                              static_cast<uint32_t>(concurrency), &id);
    if (code != ErrorCode::OK) return Refused(response, code, "drain job refused");
    SetJson(response, {{"success", true},
                       {"job_id", JobIdText(id)},
                       {"status", "CREATED"},
                       {"error_code", 0},
                       {"error_message", ""}});
  }

  void QueryDrainJob(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response)) return;
    TaskId id;
    if (!ParseJobId(request.Param("job_id"), &id)) {
      return BadRequest(response, "Missing or invalid job_id");
    }
    MasterService::DrainJobView job;
    ErrorCode code = service_->QueryDrainJob(id, &job);
    if (code != ErrorCode::OK) return Refused(response, code, "no such drain job");
    static const char* const kNames[] = {"CREATED", "PLANNING", "RUNNING",
                                         "SUCCEEDED", "FAILED", "CANCELED"};
    SetJson(response, {{"success", true},
                       {"job_id", JobIdText(job.id)},
                       {"type", 0},
                       {"type_name", "DRAIN"},
                       {"status", static_cast<int>(job.status)},
                       {"status_name", kNames[static_cast<int>(job.status)]},
                       {"created_at_ms_epoch", job.created_unix_ms},
                       {"last_updated_at_ms_epoch", job.updated_unix_ms},
                       {"segments", job.segments},
                       {"succeeded_units", job.succeeded_units},
                       {"failed_units", job.failed_units},
                       {"blocked_units", job.blocked_units},
                       {"active_units", job.active_units},
                       {"migrated_bytes", job.migrated_bytes},
                       {"message", job.message},
                       {"error_code", 0},
                       {"error_message", ""}});
  }

  void CancelDrainJob(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response, /*post_too=*/true)) return;
    TaskId id;
    if (!ParseJobId(request.Param("job_id"), &id)) {
      return BadRequest(response, "Missing or invalid job_id");
    }
    ErrorCode code = service_->CancelDrainJob(id);
    if (code != ErrorCode::OK) return Refused(response, code, "drain job not canceled");
    SetJson(response, {{"success", true},
                       {"job_id", JobIdText(id)},
                       {"status", "CANCELED"},
                       {"error_code", 0},
                       {"error_message", ""}});
  }

  void SegmentStatus(const HttpRequest& request, HttpResponse* response) {
    if (!MethodAllowed(request, response)) return;
    const std::string name = request.Param("segment");
    if (name.empty()) return BadRequest(response, "Missing segment query parameter");
    int32_t status = 0;
    ErrorCode code = service_->SegmentStatusOf(name, &status);
    if (code != ErrorCode::OK) return Refused(response, code, "no segment named " + name);
    static const char* const kNames[] = {"UNDEFINED", "OK", "DRAINING", "DRAINED"};
    SetJson(response, {{"success", true},
                       {"segment", name},
                       {"status", status},
                       {"status_name", kNames[status]},
                       {"error_code", 0},
                       {"error_message", ""}});
  }

  const MasterMetrics* const metrics_;
  const MasterSources sources_;
  MasterService* const service_;
  const std::function<std::string()> self_address_;
};

}  // namespace

void RegisterMasterAdminRoutes(AdminHttpServer* server, const MasterMetrics* metrics,
                               std::function<std::string()> self_address) {
  Routes::Register(server, std::make_shared<Routes>(metrics, std::move(self_address)));
}

}  // namespace mooncake
