// A real Prometheus server scrapes a real master and two daemons on 127.0.0.1 (issue 16):
//  - the test puts objects through each daemon (a different number through each), then
//    asks Prometheus' HTTP API until every target is up, the master's key gauge equals
//    the keys put and each daemon's put counter equals the puts made through it: the
//    values went from the processes through a real scrape into a real TSDB;
//  - `promtool check metrics` accepts every live /metrics answer (names, types, HELP).
// Exits 77 (CTest's skip code), saying why, when the prometheus binary is absent.
//
// The admin ports are free ports the processes chose (--metrics_port 0, as every harness
// passes): the test reads them from the "admin HTTP listening on" line of their logs.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/http_test_util.h"
#include "tests/harness/prometheus_process.h"
extern "C" {
#include "tests/harness/cluster_test_util.h"
}

namespace {

namespace harness = mooncake::testing;
using Json = nlohmann::json;

// The series the test reads back (docs/operations.md, "Metrics"): the master's object
// count (Mooncake's master_key_count, which promtool refuses: a gauge named *_count) and
// the daemon's count of PUT requests answered 0 (a put of a small value is one PUT).
const char kMasterKeysQuery[] = "master_keys";
const char kDaemonPutsQuery[] = "mooncake_daemon_requests_total{op=\"put\",result=\"ok\"}";

constexpr int kDaemons = 2;
constexpr int kPutsThrough[kDaemons] = {7, 4};  // different, so a mix-up of targets shows
constexpr size_t kValueBytes = 4096;
constexpr double kDeadlineSeconds = 90;  // scrapes every second; a loaded machine is slow

mc_cluster* g_cluster = nullptr;
harness::PrometheusProcess* g_prometheus = nullptr;
int g_master_admin_port = -1;
int g_daemon_admin_port[kDaemons] = {-1, -1};

std::string Address(int port) { return "127.0.0.1:" + std::to_string(port); }

int GroupSetup(void**) {
  mc_cluster_options options{};
  options.daemons = kDaemons;
  options.segment_size = 64u << 20;
  g_cluster = mc_cluster_start_with(&options);
  if (g_cluster == nullptr) return -1;
  g_master_admin_port = harness::AdminPortFromLog(mc_cluster_master_log(g_cluster), "master");
  if (g_master_admin_port < 0) {
    std::fprintf(stderr, "no admin port in the master's log %s\n",
                 mc_cluster_master_log(g_cluster));
    return -1;
  }
  std::vector<harness::ScrapeTarget> targets = {
      {"mooncake-master", Address(g_master_admin_port)}};
  for (int i = 0; i < kDaemons; ++i) {
    g_daemon_admin_port[i] = harness::AdminPortFromLog(mc_cluster_log_at(g_cluster, i), "daemon");
    if (g_daemon_admin_port[i] < 0) {
      std::fprintf(stderr, "no admin port in daemon %d's log %s\n", i,
                   mc_cluster_log_at(g_cluster, i));
      return -1;
    }
    targets.push_back({"mooncaked", Address(g_daemon_admin_port[i])});
  }
  g_prometheus = new harness::PrometheusProcess;
  return g_prometheus->Start(targets) ? 0 : -1;
}

int GroupTeardown(void**) {
  delete g_prometheus;
  g_prometheus = nullptr;
  mc_cluster_stop(g_cluster);
  g_cluster = nullptr;
  return 0;
}

// An instant query's vector result as instance -> value; empty when Prometheus answers
// anything else (an error, no series yet). *raw keeps the answer for a failure message.
std::map<std::string, double> ValuesByInstance(const std::string& promql, std::string* raw) {
  std::map<std::string, double> values;
  harness::HttpAnswer answer = g_prometheus->Query(promql);
  *raw = promql + " -> " + std::to_string(answer.status) + " " + answer.body;
  if (answer.status != 200) return values;
  Json doc = Json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || doc.value("status", "") != "success") return values;
  const Json& data = doc["data"];
  if (data.value("resultType", "") != "vector") return values;
  for (const Json& sample : data["result"]) {
    const Json& value = sample["value"];
    if (!value.is_array() || value.size() != 2 || !value[1].is_string()) continue;
    values[sample["metric"].value("instance", "")] = std::stod(value[1].get<std::string>());
  }
  return values;
}

void PutThrough(int daemon, int count) {
  mooncake_store_t s = connect_app(g_cluster, daemon, 16u << 20);
  std::vector<char> value(kValueBytes);
  for (int k = 0; k < count; ++k) {
    std::string key = "prom-" + std::to_string(daemon) + "-" + std::to_string(k);
    fill_pattern(value.data(), value.size(), static_cast<uint64_t>(daemon * 100 + k));
    assert_int_equal(mooncake_store_put(s, key.c_str(), value.data(), value.size(), nullptr), 0);
  }
  mooncake_store_close(s);
  mooncake_store_destroy(s);
}

void test_prometheus_scrapes_the_values_the_test_caused(void**) {
  int keys = 0;
  for (int i = 0; i < kDaemons; ++i) {
    PutThrough(i, kPutsThrough[i]);
    keys += kPutsThrough[i];
  }
  const std::string master = Address(g_master_admin_port);
  std::string up_raw, keys_raw, puts_raw;
  bool all_up = false, keys_match = false, puts_match = false;
  double start = now_seconds();
  while (now_seconds() - start < kDeadlineSeconds) {
    std::map<std::string, double> up = ValuesByInstance("up", &up_raw);
    all_up = up.size() == 1 + kDaemons && up[master] == 1;
    for (int i = 0; i < kDaemons; ++i) all_up = all_up && up[Address(g_daemon_admin_port[i])] == 1;

    std::map<std::string, double> master_keys = ValuesByInstance(kMasterKeysQuery, &keys_raw);
    keys_match = master_keys.count(master) == 1 && master_keys[master] == keys;

    std::map<std::string, double> puts = ValuesByInstance(kDaemonPutsQuery, &puts_raw);
    puts_match = true;
    for (int i = 0; i < kDaemons; ++i) {
      const std::string daemon = Address(g_daemon_admin_port[i]);
      puts_match = puts_match && puts.count(daemon) == 1 && puts[daemon] == kPutsThrough[i];
    }
    if (all_up && keys_match && puts_match) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (!(all_up && keys_match && puts_match)) {
    std::fprintf(stderr, "after %.0f s:\n  %s\n  %s\n  %s\n", kDeadlineSeconds, up_raw.c_str(),
                 keys_raw.c_str(), puts_raw.c_str());
    g_prometheus->KeepDir();
  }
  assert_true(all_up);
  assert_true(keys_match);
  assert_true(puts_match);
}

// promtool reads the exposition on stdin; its findings go to this test's output. Its exit
// status (0: no problem).
int PromtoolCheckMetrics(const std::string& exposition) {
  FILE* promtool = popen("promtool check metrics", "w");
  if (promtool == nullptr) return -1;
  size_t written = fwrite(exposition.data(), 1, exposition.size(), promtool);
  int status = pclose(promtool);
  if (written != exposition.size()) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void CheckEndpoint(const char* what, int port) {
  harness::HttpAnswer answer = harness::HttpGetLoopback(port, "/metrics");
  std::printf("%s /metrics on %d: %d, %s, %zu bytes\n", what, port, answer.status,
              answer.content_type.c_str(), answer.body.size());
  assert_int_equal(answer.status, 200);
  assert_true(answer.content_type.rfind("text/plain", 0) == 0);
  assert_true(answer.body.find("# TYPE ") != std::string::npos);
  int rc = PromtoolCheckMetrics(answer.body);
  if (rc != 0) std::fprintf(stderr, "promtool check metrics refused %s's /metrics\n", what);
  assert_int_equal(rc, 0);
}

void test_promtool_accepts_every_live_metrics_endpoint(void**) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) skip();  // same package
  // After traffic (the other case ran first), so every labelled series has appeared.
  CheckEndpoint("master", g_master_admin_port);
  for (int i = 0; i < kDaemons; ++i) {
    CheckEndpoint(i == 0 ? "daemon 0" : "daemon 1", g_daemon_admin_port[i]);
  }
}

}  // namespace

int main() {
  if (!harness::PrometheusProcess::Available()) {
    std::printf("prometheus_scrape_test needs a Prometheus server (%s, Debian's prometheus "
                "package; or set MC_PROMETHEUS_BINARY): skipped\n",
                harness::PrometheusProcess::Binary().c_str());
    return 77;  // CTest's SKIP_RETURN_CODE
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prometheus_scrapes_the_values_the_test_caused),
      cmocka_unit_test(test_promtool_accepts_every_live_metrics_endpoint),
  };
  return cmocka_run_group_tests(tests, GroupSetup, GroupTeardown);
}
