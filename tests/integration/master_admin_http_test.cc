// The master's admin HTTP (master/server/master_admin.h) on a real mooncake-master: every endpoint
// answers its documented shape; /query_key takes no lease; /get_all_keys pages through
// every key exactly once and honours limit and regex; promtool accepts the real /metrics;
// and hostile HTTP (huge headers, bad paths, 200 connections held open and trickled)
// never stalls the Thrift service; with HA, a standby answers 503 -1600 on the data endpoints.
#include <curl/curl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thrift/transport/TBufferTransports.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "MasterService.h"
#include "common/base/error_code.h"
#include "common/base/tenant_key.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/etcd_process.h"
#include "tests/harness/http_test_util.h"
#include "tests/harness/process_harness.h"

using mooncake::ErrorCode;
using mooncake::ToInt;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace rpc = mooncake::rpc;
namespace harness = mooncake::testing;

namespace {

constexpr int64_t kDaemon = 4242;
constexpr int64_t kSegment = 777;
constexpr int kKeys = 2500;
const char* const kDaemonName = "127.0.0.1:12345";

std::string PageKey(int i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "page-%05d", i);
  return buf;
}

struct Fixture {
  harness::ChildProcess master;
  std::string dir;
  int rpc_port = 0;
  int http_port = 0;
  std::shared_ptr<apache::thrift::transport::TTransport> transport;
  std::unique_ptr<rpc::MasterServiceClient> client;
};


// ---- an HTTP client (libcurl) --------------------------------------------------------

struct Answer {
  long status = 0;
  std::string body;
  std::string content_type;
  std::string next_cursor;  // X-Next-Cursor, "" when absent
};

size_t OnBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

size_t OnHeader(char* data, size_t size, size_t n, void* out) {
  std::string line(data, size * n);
  const std::string name = "x-next-cursor:";
  std::string lower = line;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.compare(0, name.size(), name) == 0) {
    std::string value = line.substr(name.size());
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n')) value.pop_back();
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    static_cast<Answer*>(out)->next_cursor = value;
  }
  return size * n;
}

// Every request carries the admin token of the harness's key, which the masters here run
// with (tests/integration/admin_auth_test.cc tests the refusals).
Answer Http(int port, const std::string& target, const std::string* post_body = nullptr) {
  static const std::string authorization = harness::AdminAuthorization();
  Answer a;
  CURL* curl = curl_easy_init();
  std::string url = "http://127.0.0.1:" + std::to_string(port) + target;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &a.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &a);
  curl_slist* headers = curl_slist_append(nullptr, authorization.c_str());
  if (post_body != nullptr) {
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, post_body->c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (curl_easy_perform(curl) == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &a.status);
    char* type = nullptr;
    curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
    if (type != nullptr) a.content_type = type;
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return a;
}

std::string Escape(const std::string& text) {
  CURL* curl = curl_easy_init();
  char* e = curl_easy_escape(curl, text.data(), static_cast<int>(text.size()));
  std::string out = e;
  curl_free(e);
  curl_easy_cleanup(curl);
  return out;
}

json Json(const Answer& a) {
  json j = json::parse(a.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) std::fprintf(stderr, "not JSON: %s\n", a.body.c_str());
  assert_false(j.is_discarded());
  return j;
}

void AssertError(const Answer& a, long status, int code) {
  assert_int_equal(a.status, status);
  json j = Json(a);
  assert_true(j["success"] == false);
  assert_int_equal(j["error_code"].get<int>(), code);
  assert_true(j["error_message"].is_string());
}

// ---- the cluster's content -----------------------------------------------------------

void Put(rpc::MasterServiceClient* c, const std::vector<std::string>& keys) {
  std::vector<rpc::PutStartResult> started;
  c->BatchPutStart(started, kDaemon, keys, std::vector<int64_t>(keys.size(), 4096),
                   rpc::ReplicateConfig());
  for (const auto& r : started) assert_int_equal(r.code, 0);
  std::vector<int32_t> codes;
  c->BatchPutEnd(codes, kDaemon, keys, std::vector<int64_t>(keys.size(), 1234));
  for (int32_t code : codes) assert_int_equal(code, 0);
}

int Setup(void** state) {
  auto* f = new Fixture;
  f->dir = harness::MakeTempDir("mc-master-admin-http-");
  const std::string log = f->dir + "/master.log";
  // A long lease: the lease test must see one granted by GetReplicaList still running.
  if (!harness::StartMaster(&f->master, &f->rpc_port, log,
                            {"--default_kv_lease_ttl", "30s", "--metrics_report_interval", "1s"})) {
    delete f;
    return -1;
  }
  f->http_port = harness::AdminPortFromLog(log, "master");
  std::string error;
  f->client = harness::ConnectMasterClient(f->rpc_port, &f->transport, &error);
  if (!f->client) std::fprintf(stderr, "cannot connect to the master: %s\n", error.c_str());
  if (f->http_port <= 0 || f->client == nullptr) {
    delete f;
    return -1;
  }
  rpc::MasterServiceClient* c = f->client.get();
  if (c->RegisterDaemon(kDaemon, kDaemonName) != 0) return -1;
  rpc::SegmentInfo info;
  info.segment_id = kSegment;
  info.name = kDaemonName;
  info.base = 0x7f0000000000;
  info.size = int64_t{1} << 30;
  info.daemon_id = kDaemon;
  rpc::TransportEndpoint tcp;
  tcp.protocol = "tcp";
  tcp.address = kDaemonName;
  info.endpoints.push_back(tcp);
  if (c->MountSegment(info) != 0) return -1;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) {
    keys.push_back(PageKey(i));
    if (keys.size() == 500) {
      Put(c, keys);
      keys.clear();
    }
  }
  *state = f;
  return 0;
}

int Teardown(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->transport->close();
  int status = f->master.Stop(SIGTERM, 10000);
  bool clean = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (getenv("MC_KEEP_TEST_DIR") == nullptr) harness::RemoveTree(f->dir);
  delete f;
  return clean ? 0 : -1;
}

// ---- the tests -----------------------------------------------------------------------

void test_health_role_segments_stats(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Answer a = Http(f->http_port, "/health");
  assert_int_equal(a.status, 200);
  json j = Json(a);
  assert_true(j["status"] == "ok");
  assert_true(j["role"] == "leader");
  assert_true(j["ha_enabled"] == false);
  assert_true(j["service_ready"] == true);
  assert_int_equal(j["term"].get<int64_t>(), 0);
  assert_string_equal(j["leader_address"].get<std::string>().c_str(),
                      ("127.0.0.1:" + std::to_string(f->rpc_port)).c_str());

  a = Http(f->http_port, "/role");
  assert_int_equal(a.status, 200);
  assert_non_null(std::strstr(a.content_type.c_str(), "text/plain"));
  assert_string_equal(a.body.c_str(), "leader");

  // SGLang's probe: names, one a line.
  a = Http(f->http_port, "/get_all_segments");
  assert_int_equal(a.status, 200);
  assert_non_null(std::strstr(a.content_type.c_str(), "text/plain"));
  assert_string_equal(a.body.c_str(), (std::string(kDaemonName) + "\n").c_str());

  a = Http(f->http_port, "/get_segments_detail");
  assert_int_equal(a.status, 200);
  j = Json(a);
  assert_int_equal(j["total_segments"].get<int>(), 1);
  json s = j["segments"][0];
  for (const char* field :
       {"segment_name", "segment_id", "daemon_id", "kind", "base_address", "size_bytes",
        "size_human", "used_bytes", "usage_percent", "te_endpoint", "protocol", "status",
        "lent_by_client", "allocator_used_bytes", "allocator_capacity_bytes",
        "allocator_usage_percent"}) {
    if (!s.contains(field)) std::fprintf(stderr, "missing %s\n", field);
    assert_true(s.contains(field));
  }
  assert_true(s["segment_name"] == kDaemonName);
  assert_int_equal(s["segment_id"].get<int64_t>(), kSegment);
  assert_int_equal(s["daemon_id"].get<int64_t>(), kDaemon);
  assert_true(s["kind"] == "memory");
  assert_true(s["base_address"] == "0x7f0000000000");
  assert_int_equal(s["size_bytes"].get<int64_t>(), int64_t{1} << 30);
  assert_true(s["status"] == "attached");
  assert_true(s["te_endpoint"] == kDaemonName);
  assert_true(s["protocol"] == "tcp");
  assert_true(s["lent_by_client"] == false);
  assert_true(s["used_bytes"].get<int64_t>() >= int64_t{kKeys} * 4096);

  a = Http(f->http_port, "/stats");
  assert_int_equal(a.status, 200);
  j = Json(a);
  assert_true(j["objects"].get<int64_t>() >= kKeys);
  assert_int_equal(j["daemons"].get<int64_t>(), 1);
  assert_true(j["eviction"].is_object() && j["eviction"].contains("rounds"));
  assert_true(j["disk"].is_object() && j["disk"].contains("offloads_done"));
  assert_true(j["tenants"].is_array());

  a = Http(f->http_port, "/snapshot");
  assert_int_equal(a.status, 200);
  j = Json(a);
  assert_true(j["enabled"] == false);
  for (const char* field : {"running", "name", "sequence", "duration_ms", "bytes", "objects", "error"}) {
    assert_true(j.contains(field));
  }

  a = Http(f->http_port, "/metrics/summary");
  assert_int_equal(a.status, 200);
  assert_non_null(std::strstr(a.body.c_str(), "role: leader"));
  assert_non_null(std::strstr(a.body.c_str(), "daemons: 1\n"));

  a = Http(f->http_port, "/log_level");
  assert_int_equal(a.status, 200);
  assert_true(Json(a)["level"] == "info");

  AssertError(Http(f->http_port, "/no/such/endpoint"), 404, -600);
}

void test_query_key_shapes(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Answer a = Http(f->http_port, "/query_key?key=" + PageKey(7));
  assert_int_equal(a.status, 200);
  json j = Json(a);
  assert_true(j["success"] == true);
  assert_true(j["key"] == PageKey(7));
  assert_int_equal(j["size"].get<int64_t>(), 4096);
  assert_int_equal(j["checksum"].get<int64_t>(), 1234);
  assert_int_equal(j["data"].size(), 1);
  assert_int_equal(j["data"][0]["size_"].get<int64_t>(), 4096);
  assert_true(j["data"][0]["transport_endpoint_"] == kDaemonName);
  assert_true(j["data"][0]["buffer_address_"].get<uint64_t>() >= 0x7f0000000000ull);
  assert_int_equal(j["replicas"].size(), 1);
  json r = j["replicas"][0];
  for (const char* field : {"replica_id", "kind", "status", "segment_id", "segment_name", "offset",
                            "size", "endpoint"}) {
    assert_true(r.contains(field));
  }
  assert_true(r["kind"] == "memory");
  assert_true(r["status"] == "complete");
  assert_int_equal(r["segment_id"].get<int64_t>(), kSegment);
  for (const char* field : {"lease_remaining_ms", "soft_pinned", "soft_pin_remaining_ms"}) {
    assert_true(j.contains(field));
  }

  AssertError(Http(f->http_port, "/query_key?key=absent"), 404, ToInt(ErrorCode::OBJECT_NOT_FOUND));
  AssertError(Http(f->http_port, "/query_key?key="), 400, -600);
  AssertError(Http(f->http_port, "/query_key"), 400, -600);
  AssertError(Http(f->http_port, "/query_key?key=x&tenant=" + Escape("no spaces")), 400, -600);

  // A tenant's key is found under its tenant only; nothing shows the stored key.
  Put(f->client.get(), {mooncake::tenant_key::Encode("t1", "secret")});
  a = Http(f->http_port, "/query_key?key=secret&tenant=t1");
  assert_int_equal(a.status, 200);
  assert_true(Json(a)["key"] == "secret");
  AssertError(Http(f->http_port, "/query_key?key=secret"), 404, -704);

  // Batches: GET with commas, POST for a key that has one; per-key errors.
  Put(f->client.get(), {"with,comma"});
  a = Http(f->http_port, "/batch_query_keys?keys=" + PageKey(1) + ",absent");
  assert_int_equal(a.status, 200);
  j = Json(a);
  assert_true(j["success"] == true);
  assert_true(j["data"][PageKey(1)]["ok"] == true);
  assert_int_equal(j["data"][PageKey(1)]["values"].size(), 1);
  assert_int_equal(j["data"][PageKey(1)]["replicas"].size(), 1);
  assert_true(j["data"]["absent"]["ok"] == false);
  assert_true(j["data"]["absent"]["error"].is_string());
  std::string body = R"({"keys":["with,comma","page-00002"]})";
  a = Http(f->http_port, "/batch_query_keys", &body);
  assert_int_equal(a.status, 200);
  j = Json(a);
  assert_true(j["data"]["with,comma"]["ok"] == true);
  assert_true(j["data"]["page-00002"]["ok"] == true);
  std::string many = "x";
  for (int i = 0; i < 1000; ++i) many += ",x";
  AssertError(Http(f->http_port, "/batch_query_keys?keys=" + many), 400, -600);
  body = "{not json";
  AssertError(Http(f->http_port, "/batch_query_keys", &body), 400, -600);
  AssertError(Http(f->http_port, "/batch_query_keys"), 400, -600);
}

// Mooncake's drain control (/api/v1): its shapes and refusals, leaving the segment as it
// was (a job's run is master_tasks_test's, and Mooncake's scripts/test_drain_http_api.py's).
void test_drain_job_refusals(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Answer a = Http(f->http_port, std::string("/api/v1/segments/status?segment=") + kDaemonName);
  assert_int_equal(a.status, 200);
  json j = Json(a);
  assert_true(j["success"] == true);
  assert_true(j["status_name"] == "OK");
  assert_int_equal(j["status"].get<int>(), 1);
  a = Http(f->http_port, "/api/v1/segments/status?segment=nobody:1");
  assert_int_equal(a.status, 404);
  assert_int_equal(Json(a)["error_code"].get<int>(), ToInt(ErrorCode::SEGMENT_NOT_FOUND));
  const std::string unknown = R"({"segments": ["nobody:1"]})";
  a = Http(f->http_port, "/api/v1/drain_jobs", &unknown);
  assert_int_equal(a.status, 404);
  assert_true(Json(a)["success"] == false);
  const std::string bad = R"({"segments": "not a list"})";
  assert_int_equal(Http(f->http_port, "/api/v1/drain_jobs", &bad).status, 400);
  const std::string none = R"({"segments": []})";
  assert_int_equal(Http(f->http_port, "/api/v1/drain_jobs", &none).status, 400);
  const std::string self = std::string(R"({"segments": [")") + kDaemonName +
                           R"("], "target_segments": [")" + kDaemonName + R"("]})";
  assert_int_equal(Http(f->http_port, "/api/v1/drain_jobs", &self).status, 400);
  assert_int_equal(Http(f->http_port, "/api/v1/drain_jobs").status, 405);  // a GET
  a = Http(f->http_port, "/api/v1/drain_jobs/query?job_id=1-2");
  assert_int_equal(a.status, 404);
  assert_int_equal(Http(f->http_port, "/api/v1/drain_jobs/query?job_id=x").status, 400);
  assert_int_equal(Http(f->http_port, "/api/v1/drain_jobs/cancel?job_id=1-2").status, 404);
  // Still taking allocations.
  a = Http(f->http_port, std::string("/api/v1/segments/status?segment=") + kDaemonName);
  assert_true(Json(a)["status_name"] == "OK");
}

void test_query_key_takes_no_lease(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  rpc::MasterServiceClient* c = f->client.get();
  Put(c, {"lease-a", "lease-b"});
  // Looked at through the admin port: no lease, so a plain Remove goes through.
  assert_int_equal(Http(f->http_port, "/query_key?key=lease-a").status, 200);
  assert_int_equal(Http(f->http_port, "/batch_query_keys?keys=lease-a").status, 200);
  Answer a = Http(f->http_port, "/query_key?key=lease-a");
  assert_int_equal(Json(a)["lease_remaining_ms"].get<int64_t>(), 0);
  rpc::ChangeResult removed;
  c->Remove(removed, "lease-a", false, 0);
  assert_int_equal(removed.code, 0);
  // Read through Thrift: leased, and the same Remove is refused.
  rpc::ReplicaListResult list;
  c->GetReplicaList(list, "lease-b", 0);
  assert_int_equal(list.code, 0);
  a = Http(f->http_port, "/query_key?key=lease-b");
  assert_true(Json(a)["lease_remaining_ms"].get<int64_t>() > 0);
  c->Remove(removed, "lease-b", false, 0);
  assert_int_equal(removed.code, ToInt(ErrorCode::OBJECT_HAS_LEASE));
}

void test_get_all_keys_paging(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  // JSON pages of 700: every page-* key exactly once.
  std::multiset<std::string> seen;
  std::string cursor;
  int pages = 0;
  for (;;) {
    std::string target = "/get_all_keys?format=json&limit=700&regex=" + Escape("^page-");
    if (!cursor.empty()) target += "&cursor=" + Escape(cursor);
    Answer a = Http(f->http_port, target);
    assert_int_equal(a.status, 200);
    json j = Json(a);
    assert_true(j["keys"].size() <= 700);
    for (const auto& k : j["keys"]) seen.insert(k.get<std::string>());
    ++pages;
    assert_true(pages < 100);
    if (j["next_cursor"].is_null()) {
      assert_string_equal(a.next_cursor.c_str(), "");
      break;
    }
    cursor = j["next_cursor"].get<std::string>();
    assert_string_equal(a.next_cursor.c_str(), cursor.c_str());
  }
  assert_int_equal(seen.size(), kKeys);
  for (int i = 0; i < kKeys; ++i) assert_int_equal(seen.count(PageKey(i)), 1);
  assert_true(pages >= 4);

  // The text form (Mooncake's): one key a line, the cursor in X-Next-Cursor.
  Answer a = Http(f->http_port, "/get_all_keys?limit=10");
  assert_int_equal(a.status, 200);
  assert_non_null(std::strstr(a.content_type.c_str(), "text/plain"));
  int lines = 0;
  for (char ch : a.body) lines += ch == '\n';
  assert_int_equal(lines, 10);
  assert_true(!a.next_cursor.empty());
  // Default page: 1000 keys.
  a = Http(f->http_port, "/get_all_keys");
  lines = 0;
  for (char ch : a.body) lines += ch == '\n';
  assert_int_equal(lines, 1000);

  // The regex: page-00010 .. page-00019, and never the tenant's key.
  a = Http(f->http_port, "/get_all_keys?format=json&regex=" + Escape("^page-0001[0-9]$"));
  json j = Json(a);
  assert_int_equal(j["keys"].size(), 10);
  assert_true(j["next_cursor"].is_null());
  a = Http(f->http_port, "/get_all_keys?format=json&limit=100000&regex=secret");
  assert_int_equal(Json(a)["keys"].size(), 0);
  a = Http(f->http_port, "/get_all_keys?format=json&tenant=t1");
  j = Json(a);
  assert_int_equal(j["keys"].size(), 1);
  assert_true(j["keys"][0] == "secret");

  AssertError(Http(f->http_port, "/get_all_keys?regex=" + Escape("(unclosed")), 400, -600);
  AssertError(Http(f->http_port, "/get_all_keys?limit=0"), 400, -600);
  AssertError(Http(f->http_port, "/get_all_keys?limit=100001"), 400, -600);
  AssertError(Http(f->http_port, "/get_all_keys?limit=-5"), 400, -600);
  AssertError(Http(f->http_port, "/get_all_keys?cursor=nonsense"), 400, -600);
  AssertError(Http(f->http_port, "/get_all_keys?cursor=99999.0.0"), 400, -600);
  AssertError(Http(f->http_port, "/get_all_keys?format=xml"), 400, -600);
}

void test_promtool_accepts_metrics(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  Answer a = Http(f->http_port, "/metrics");
  assert_int_equal(a.status, 200);
  assert_non_null(std::strstr(a.content_type.c_str(), "text/plain; version=0.0.4"));
  // Counted by what the fixture did: five batches of puts.
  assert_non_null(std::strstr(a.body.c_str(), "\nmaster_batch_put_start_requests_total "));
  assert_null(std::strstr(a.body.c_str(), "\nmaster_batch_put_start_requests_total 0\n"));
  assert_non_null(std::strstr(a.body.c_str(), "\nmaster_active_clients 1\n"));
  assert_non_null(std::strstr(a.body.c_str(), "master_rpc_duration_seconds_bucket{rpc=\"put_start\""));
  if (access("/usr/bin/promtool", X_OK) != 0) {
    std::fprintf(stderr, "SKIPPED: /usr/bin/promtool is absent\n");
    skip();
  }
  const std::string path = f->dir + "/metrics.txt";
  std::ofstream(path) << a.body;
  int status = std::system(("/usr/bin/promtool check metrics < " + path).c_str());
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// --enable_metric_reporting (on by default): one summary line every interval (1 s here).
void test_report_line(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (ReadFile(f->dir + "/master.log").find("metrics: role=leader keys=") == std::string::npos) {
    assert_true(Clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// An admin port that cannot be had is fatal: "cannot listen on ...", exit status 1.
void test_busy_admin_port_exits_1(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  harness::ChildProcess second;
  const std::string log = f->dir + "/second.log";
  assert_true(second.Start({harness::BuildPath("master/mooncake-master"), "--rpc_address",
                            "127.0.0.1", "--rpc_port", "0", "--metrics_port",
                            std::to_string(f->http_port), "--cluster_key_file",
                            harness::ClusterKeyFile()},
                           log));
  int status = second.Wait(20000);
  assert_true(status != -1 && WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 1);
  assert_true(ReadFile(log).find("cannot listen on 127.0.0.1:" + std::to_string(f->http_port)) !=
              std::string::npos);
}

// Sends request, returns the start of the answer (or "" when the server closed).
std::string RawExchange(int port, const std::string& request) {
  int fd = harness::ConnectLoopback(port);
  if (fd < 0) return "";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[512];
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 3000) > 0) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n > 0) out.assign(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

void test_hostile_http_never_stalls_thrift(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  // 200 connections held open, each with half a request, trickled a byte at a time.
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    int fd = harness::ConnectLoopback(f->http_port);
    assert_true(fd >= 0);
    send(fd, "GET /health HTTP/1.1\r\nX-Slow: ", 30, MSG_NOSIGNAL);
    slow.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::atomic<int> hostile_requests{0};
  std::atomic<int> hostile_served{0};  // answered 200: must stay 0
  std::thread trickler([&] {
    while (!stop.load()) {
      for (int fd : slow) send(fd, "s", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  // Huge headers and bad paths, back to back.
  std::thread attacker([&] {
    const std::string huge = "GET /health HTTP/1.1\r\nX-Big: " + std::string(64 * 1024, 'h') + "\r\n\r\n";
    const std::vector<std::string> bad = {
        huge,
        "GET /query_key?key=%00 HTTP/1.1\r\n\r\n",
        "GET /%00%00 HTTP/1.1\r\n\r\n",
        "GET /" + std::string(6000, 'p') + " HTTP/1.1\r\n\r\n",
        "GET /get_all_keys?limit=99999999999999999999 HTTP/1.1\r\n\r\n",
        "\x16\x03\x01\x02\x00 a TLS hello\r\n\r\n",
        "BREW /coffee HTTP/1.1\r\n\r\n",
    };
    while (!stop.load()) {
      for (const std::string& request : bad) {
        std::string answer = RawExchange(f->http_port, request);
        if (answer.compare(0, 12, "HTTP/1.1 200") == 0) ++hostile_served;
        ++hostile_requests;
      }
    }
  });

  // Meanwhile the Thrift service answers promptly, for 7 s: past the admin deadline.
  int64_t worst_us = 0;
  int calls = 0;
  const auto end = Clock::now() + std::chrono::seconds(7);
  while (Clock::now() < end) {
    auto t0 = Clock::now();
    assert_int_equal(f->client->ExistKey(PageKey(calls % kKeys)), 1);
    rpc::RoleResult role;
    f->client->GetRole(role);
    assert_int_equal(role.code, 0);
    int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
    worst_us = std::max(worst_us, us);
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  trickler.join();
  attacker.join();
  std::fprintf(stderr, "%d Thrift call pairs, the slowest %lld us, %d hostile requests\n", calls,
               static_cast<long long>(worst_us), hostile_requests.load());
  // A Thrift loop held up by the admin server would stall for its 5 s deadline: the bounds
  // leave a loaded machine room and still tell that apart.
  assert_true(calls >= 10);
  assert_true(worst_us < 2000 * 1000);
  assert_true(hostile_requests.load() > 10);
  assert_int_equal(hostile_served.load(), 0);

  // The held connections were closed by the deadline: each reads as closed now.
  int closed = 0;
  for (int fd : slow) {
    pollfd p{fd, POLLIN, 0};
    char c;
    if (poll(&p, 1, 0) > 0 && recv(fd, &c, 1, MSG_DONTWAIT) <= 0) ++closed;
    close(fd);
  }
  assert_int_equal(closed, 200);
  // And the admin port still serves.
  assert_int_equal(Http(f->http_port, "/health").status, 200);
}

// With HA: a standby answers /health, /role and /metrics, and 503 -1600 on the data
// endpoints; /health names the leader once the standby has seen it.
void test_standby_answers_503(void**) {
  const std::string dir = harness::MakeTempDir("mc-master-admin-ha-");
  mooncake::testing::EtcdProcess etcd;
  assert_int_equal(mkdir((dir + "/etcd").c_str(), 0700), 0);
  assert_true(etcd.Start(dir + "/etcd"));
  harness::ChildProcess masters[2];
  int rpc_ports[2], http_ports[2];
  for (int i = 0; i < 2; ++i) {
    const std::string own = dir + "/m" + std::to_string(i);
    rpc_ports[i] = harness::FreeTcpPort();
    assert_true(harness::StartMasterOnPort(
        &masters[i], rpc_ports[i], own + ".log",
        {"--enable_ha", "--etcd_endpoints", etcd.endpoint(), "--cluster_id", "admin",
         "--enable_snapshot", "--snapshot_dir", own, "--oplog_mode", "relaxed"}));
    http_ports[i] = harness::AdminPortFromLog(own + ".log", "master");
    assert_true(http_ports[i] > 0);
  }
  // One leads (elected), the other stands by and has learnt who leads.
  int leader = -1;
  json standby_health;
  for (auto deadline = Clock::now() + std::chrono::seconds(20); Clock::now() < deadline;) {
    json h0 = Json(Http(http_ports[0], "/health"));
    json h1 = Json(Http(http_ports[1], "/health"));
    if (h0["role"] == "leader" && h1["role"] == "standby") leader = 0;
    if (h1["role"] == "leader" && h0["role"] == "standby") leader = 1;
    if (leader >= 0) {
      standby_health = leader == 0 ? h1 : h0;
      if (!standby_health["leader_address"].get<std::string>().empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  assert_true(leader >= 0);
  const int standby = 1 - leader;
  assert_true(standby_health["ha_enabled"] == true);
  assert_true(standby_health["service_ready"] == false);
  assert_string_equal(standby_health["leader_address"].get<std::string>().c_str(),
                      ("127.0.0.1:" + std::to_string(rpc_ports[leader])).c_str());
  json leader_health = Json(Http(http_ports[leader], "/health"));
  assert_true(leader_health["service_ready"] == true);
  assert_true(leader_health["term"].get<int64_t>() > 0);

  assert_string_equal(Http(http_ports[standby], "/role").body.c_str(), "standby");
  Answer metrics = Http(http_ports[standby], "/metrics");
  assert_int_equal(metrics.status, 200);
  assert_non_null(std::strstr(metrics.body.c_str(), "master_role{role=\"standby\"} 1\n"));
  assert_int_equal(Http(http_ports[standby], "/metrics/summary").status, 200);
  assert_int_equal(Http(http_ports[standby], "/log_level").status, 200);
  // SGLang's probe takes any non-empty body for "started": a standby's list is empty.
  Answer segments = Http(http_ports[standby], "/get_all_segments");
  assert_int_equal(segments.status, 503);
  assert_string_equal(segments.body.c_str(), "");
  for (const char* target : {"/get_segments_detail", "/query_key?key=a",
                             "/batch_query_keys?keys=a", "/get_all_keys", "/stats", "/snapshot"}) {
    AssertError(Http(http_ports[standby], target), 503, ToInt(ErrorCode::NOT_LEADER));
    assert_int_equal(Http(http_ports[leader], target).status,
                     std::string(target).find("query_key?") != std::string::npos ? 404 : 200);
  }
  for (auto& m : masters) m.Stop(SIGTERM, 10000);
  etcd.Stop();
  if (getenv("MC_KEEP_TEST_DIR") == nullptr) harness::RemoveTree(dir);
}

}  // namespace

int main() {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_health_role_segments_stats),
      cmocka_unit_test(test_query_key_shapes),
      cmocka_unit_test(test_drain_job_refusals),
      cmocka_unit_test(test_query_key_takes_no_lease),
      cmocka_unit_test(test_get_all_keys_paging),
      cmocka_unit_test(test_promtool_accepts_metrics),
      cmocka_unit_test(test_report_line),
      cmocka_unit_test(test_busy_admin_port_exits_1),
      cmocka_unit_test(test_hostile_http_never_stalls_thrift),
  };
  int rc = cmocka_run_group_tests(tests, Setup, Teardown);
  const struct CMUnitTest ha_tests[] = {
      cmocka_unit_test(test_standby_answers_503),
  };
  rc |= cmocka_run_group_tests(ha_tests, nullptr, nullptr);
  curl_global_cleanup();
  return rc;
}
