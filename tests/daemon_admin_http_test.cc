// The daemon's admin HTTP port (daemon/server/daemon_admin.h, docs/operations.md) against a real
// master and real daemons: the counters and byte totals of /metrics move by exactly what
// the test did through the C ABI, histograms count every request, /health has its shape
// (and turns 503 "degraded" when the master goes), promtool accepts /metrics, with
// --ssd_path the SSD tier's figures appear, and an admin port taken stops the daemon.
#include <curl/curl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "include/mooncake_store.h"
#include "tests/cmocka_cpp.h"
#include "tests/cluster.h"
#include "tests/http_test_util.h"
extern "C" {
#include "tests/cluster_ssd_util.h"
#include "tests/cluster_test_util.h"
}

namespace {

constexpr uint64_t kMiB = 1ull << 20;

size_t Collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// GET http://127.0.0.1:port/path: the status (-1 when there was no answer), body in *body.
long HttpGet(int port, const std::string& path, std::string* body) {
  body->clear();
  CURL* curl = curl_easy_init();
  std::string url = "http://127.0.0.1:" + std::to_string(port) + path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  long status = -1;
  if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  return status;
}

// Daemon i's admin port, from its log line "daemon: admin HTTP listening on A:P".
int AdminPort(const mc_cluster* c, int i) {
  int port = mooncake::testing::AdminPortFromLog(mc_cluster_log_at(c, i), "daemon", 20000);
  if (port < 0) fail_msg("daemon %d logged no admin port (%s)", i, mc_cluster_log_at(c, i));
  return port;
}

// /metrics as "name{labels}" -> value.
using Samples = std::map<std::string, double>;

Samples Scrape(int port) {
  std::string body;
  assert_int_equal(HttpGet(port, "/metrics", &body), 200);
  Samples samples;
  std::istringstream lines(body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.rfind(' ');
    assert_true(space != std::string::npos);
    samples[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return samples;
}

double Value(const Samples& s, const std::string& name) {
  auto it = s.find(name);
  if (it == s.end()) fail_msg("no sample %s in /metrics", name.c_str());
  return it->second;
}

// How far name moved from before to after.
double Moved(const Samples& before, const Samples& after, const std::string& name) {
  return Value(after, name) - Value(before, name);
}

void ExpectMoved(const Samples& before, const Samples& after, const std::string& name,
                 double by) {
  double moved = Moved(before, after, name);
  if (moved != by) fail_msg("%s moved by %.0f, expected %.0f", name.c_str(), moved, by);
}

// promtool check metrics on the port's /metrics: its exit status (0: accepted).
int Promtool(int port) {
  std::string body;
  assert_int_equal(HttpGet(port, "/metrics", &body), 200);
  char path[] = "/tmp/mc-daemon-metrics-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, body.data(), body.size()), static_cast<ssize_t>(body.size()));
  close(fd);
  std::string command = std::string("/usr/bin/promtool check metrics < ") + path;
  int status = std::system(command.c_str());
  unlink(path);
  return status;
}

std::string Ops(const char* op, const char* result) {
  return std::string("mooncake_daemon_requests_total{op=\"") + op + "\",result=\"" + result +
         "\"}";
}
std::string OpCount(const char* op) {
  return std::string("mooncake_daemon_request_duration_seconds_count{op=\"") + op + "\"}";
}
std::string ReadBytes(const char* tier) {
  return std::string("mooncake_transfer_read_bytes_total{tier=\"") + tier + "\"}";
}
std::string WriteBytes(const char* tier) {
  return std::string("mooncake_transfer_write_bytes_total{tier=\"") + tier + "\"}";
}
std::string Transfers(const char* kind, const char* result) {
  return std::string("mooncake_daemon_transfers_total{kind=\"") + kind +
         "\",transport=\"tcp\",result=\"" + result + "\"}";
}

void Put(mooncake_store_t s, const char* key, size_t size, const placement* where) {
  std::vector<char> value(size);
  fill_pattern(value.data(), size, seed_of(key, 0));
  assert_int_equal(mooncake_store_put(s, key, value.data(), size, &where->config), 0);
}

void Get(mooncake_store_t s, const char* key, size_t size) {
  std::vector<char> value(size);
  assert_int_equal(mooncake_store_get_into(s, key, value.data(), size), static_cast<int64_t>(size));
  assert_int_equal(check_pattern(value.data(), size, seed_of(key, 0)), -1);
}

void test_counters_move_by_what_the_test_did(void**) {
  // A long lease: the re-read must find the read cache's entry alive on a loaded machine.
  mc_cluster_options options = {2, 64 * kMiB, 30000, nullptr, nullptr};
  mc_cluster* c = mc_cluster_start_with(&options);
  assert_non_null(c);
  const int port0 = AdminPort(c, 0), port1 = AdminPort(c, 1);
  mooncake_store_t a = connect_app(c, 0, 16 * kMiB);
  mooncake_store_t b = connect_app(c, 1, 16 * kMiB);
  placement on0, on1;
  const int d0 = 0, d1 = 1;
  steer(&on0, c, &d0, 1, 1);
  steer(&on1, c, &d1, 1, 1);

  const Samples before0 = Scrape(port0), before1 = Scrape(port1);
  // Three puts through daemon 0 into its own segment, two into daemon 1's.
  const size_t sizes[] = {1000, 20000, 300000, 4096, 100000};
  const char* keys[] = {"local/0", "local/1", "local/2", "remote/0", "remote/1"};
  for (int i = 0; i < 5; ++i) Put(a, keys[i], sizes[i], i < 3 ? &on0 : &on1);
  // Gets through daemon 0: a local one, a remote one, the local one again (a read-cache
  // hit, answered on the event loop), a missing key.
  Get(a, "local/0", sizes[0]);
  Get(a, "remote/0", sizes[3]);
  Get(a, "local/0", sizes[0]);
  std::vector<char> buffer(4096);
  assert_int_equal(mooncake_store_get_into(a, "missing", buffer.data(), buffer.size()),
                   MOONCAKE_STORE_OBJECT_NOT_FOUND);
  // Through daemon 1: daemon 0's object, remote there.
  Get(b, "local/1", sizes[1]);
  const Samples after0 = Scrape(port0), after1 = Scrape(port1);

  ExpectMoved(before0, after0, Ops("put", "ok"), 5);
  ExpectMoved(before0, after0, Ops("put", "error"), 0);
  ExpectMoved(before0, after0, OpCount("put"), 5);
  ExpectMoved(before0, after0, Ops("get", "ok"), 3);
  ExpectMoved(before0, after0, Ops("get", "error"), 1);
  ExpectMoved(before0, after0, OpCount("get"), 4);
  ExpectMoved(before0, after0, WriteBytes("local_memory"), 1000 + 20000 + 300000);
  ExpectMoved(before0, after0, WriteBytes("remote_memory"), 4096 + 100000);
  ExpectMoved(before0, after0, ReadBytes("local_memory"), 2 * 1000);
  ExpectMoved(before0, after0, ReadBytes("remote_memory"), 4096);
  ExpectMoved(before0, after0, "mooncake_daemon_read_cache_hits_total", 1);
  ExpectMoved(before0, after0, "mooncake_daemon_read_cache_misses_total", 3);
  ExpectMoved(before0, after0, Transfers("write", "ok"), 2);
  ExpectMoved(before0, after0, Transfers("read", "ok"), 1);
  ExpectMoved(before0, after0, Transfers("write", "error"), 0);
  ExpectMoved(before0, after0,
              "mooncake_daemon_transfer_bytes_total{kind=\"write\",transport=\"tcp\"}",
              4096 + 100000);
  ExpectMoved(before0, after0,
              "mooncake_daemon_transfer_duration_seconds_count{kind=\"read\",transport=\"tcp\"}",
              1);
  assert_true(Value(after0, "mooncake_daemon_connected_clients") == 1);
  assert_true(Value(after0, "mooncake_daemon_master_connected") == 1);
  // Every value read back whole and good: no replica reported bad.
  assert_true(Value(after0, "mooncake_daemon_bad_replicas_reported_total{result=\"dropped\"}") == 0);
  assert_true(Value(after0, "mooncake_daemon_segments{kind=\"memory\"}") == 1);
  assert_true(Value(after0, "mooncake_daemon_segment_capacity_bytes{kind=\"memory\"}") ==
              64.0 * kMiB);
  // The master allocates whole blocks: at least what was put there.
  assert_true(Value(after0, "mooncake_daemon_segment_used_bytes{kind=\"memory\"}") >=
              1000 + 20000 + 300000);

  ExpectMoved(before1, after1, Ops("get", "ok"), 1);
  ExpectMoved(before1, after1, OpCount("get"), 1);
  ExpectMoved(before1, after1, Ops("put", "ok"), 0);
  ExpectMoved(before1, after1, ReadBytes("remote_memory"), 20000);
  ExpectMoved(before1, after1, "mooncake_daemon_read_cache_misses_total", 1);
  assert_true(Value(after1, "mooncake_daemon_connected_clients") == 1);

  assert_int_equal(Promtool(port0), 0);
  assert_int_equal(Promtool(port1), 0);

  std::string body;
  assert_int_equal(HttpGet(port0, "/health", &body), 200);
  assert_non_null(std::strstr(body.c_str(), "\"status\":\"ok\""));
  assert_non_null(std::strstr(body.c_str(), "\"master_connected\":true"));
  assert_non_null(std::strstr(body.c_str(), "\"segments\":1,"));
  assert_non_null(std::strstr(body.c_str(), "\"clients\":1,"));
  assert_non_null(std::strstr(body.c_str(), "\"ssd\":false"));
  const char* id = std::strstr(body.c_str(), "\"daemon_id\":");
  assert_non_null(id);
  assert_true(std::strtoll(id + std::strlen("\"daemon_id\":"), nullptr, 10) > 0);
  assert_int_equal(HttpGet(port0, "/log_level", &body), 200);
  assert_non_null(std::strstr(body.c_str(), "\"level\":\"info\""));
  assert_int_equal(HttpGet(port0, "/no_such_path", &body), 404);

  // A client gone: one fewer.
  mooncake_store_destroy(b);
  double until = now_seconds() + 10;
  while (Value(Scrape(port1), "mooncake_daemon_connected_clients") != 0 && now_seconds() < until) {
    usleep(20 * 1000);
  }
  assert_true(Value(Scrape(port1), "mooncake_daemon_connected_clients") == 0);

  // The master gone: degraded once a heartbeat goes unanswered.
  mc_cluster_kill_master(c, SIGKILL);
  long status = 0;
  until = now_seconds() + 20;
  while ((status = HttpGet(port0, "/health", &body)) != 503 && now_seconds() < until) {
    usleep(50 * 1000);
  }
  assert_int_equal(status, 503);
  assert_non_null(std::strstr(body.c_str(), "\"status\":\"degraded\""));
  assert_non_null(std::strstr(body.c_str(), "\"master_connected\":false"));
  const Samples down = Scrape(port0);
  assert_true(Value(down, "mooncake_daemon_master_connected") == 0);
  assert_true(Value(down, "mooncake_daemon_master_rpc_failures_total") >= 1);
  assert_int_equal(Promtool(port0), 0);

  mooncake_store_destroy(a);
  mc_cluster_stop(c);
}

void test_ssd_figures_appear_with_ssd_path(void**) {
  static const char* const master[] = {"--enable_offload", nullptr};
  static const char* const daemon[] = {"--ssd_path", "{ssd}", "--ssd_capacity", "64m",
                                       "--ssd_bucket_size", "8m", nullptr};
  mc_cluster_options options = {1, 16 * kMiB, 1000, master, daemon};
  mc_cluster* c = mc_cluster_start_with(&options);
  assert_non_null(c);
  const int port = AdminPort(c, 0);
  mooncake_store_t s = connect_app(c, 0, 4 * kMiB);
  const Samples before = Scrape(port);
  assert_true(Value(before, "mooncake_daemon_ssd_capacity_bytes") == 64.0 * kMiB);
  assert_true(Value(before, "mooncake_daemon_segments{kind=\"disk\"}") == 1);
  const size_t size = 200000;
  put_series(s, "ssd", 0, 3, size, nullptr);
  await_offloads_done(c, 3, 20);
  // The daemon counts an offload once the master took its report: look until it has.
  Samples after = Scrape(port);
  double until = now_seconds() + 10;
  while (Value(after, "mooncake_daemon_ssd_offloads_total{result=\"ok\"}") < 3 &&
         now_seconds() < until) {
    usleep(20 * 1000);
    after = Scrape(port);
  }
  ExpectMoved(before, after, "mooncake_daemon_ssd_offloads_total{result=\"ok\"}", 3);
  ExpectMoved(before, after, "mooncake_ssd_write_ops_total", 3);
  ExpectMoved(before, after, "mooncake_ssd_write_bytes_total", 3.0 * size);
  ExpectMoved(before, after, "mooncake_daemon_ssd_offloaded_bytes_total", 3.0 * size);
  assert_true(Value(after, "mooncake_daemon_ssd_objects") == 3);
  assert_true(Value(after, "mooncake_daemon_ssd_live_bytes") == 3.0 * size);
  assert_true(Value(after, "mooncake_daemon_ssd_used_bytes") >= 3.0 * size);
  assert_true(Value(after, "mooncake_daemon_ssd_read_errors_total{kind=\"corrupt\"}") == 0);
  Value(after, "mooncake_daemon_ssd_promotions_total{result=\"promoted\"}");
  assert_int_equal(Promtool(port), 0);
  std::string body;
  assert_int_equal(HttpGet(port, "/health", &body), 200);
  assert_non_null(std::strstr(body.c_str(), "\"ssd\":true"));
  assert_non_null(std::strstr(body.c_str(), "\"segments\":2,"));
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

// A port that cannot be bound stops the daemon: a log line, exit status 1.
void test_a_taken_admin_port_stops_the_daemon(void**) {
  mc_cluster* c = mc_cluster_start(16 * kMiB);
  assert_non_null(c);
  const std::string taken = std::to_string(AdminPort(c, 0));
  const char* const flags[] = {"--metrics_port", taken.c_str(), "--metrics_host", "127.0.0.1",
                               nullptr};
  int i = mc_cluster_add_daemon(c, flags);
  assert_true(i > 0);
  int status = mc_cluster_wait_daemon_at(c, i, 30000);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 1);
  assert_true(count_log_lines(mc_cluster_log_at(c, i), "cannot listen on", nullptr) >= 1);
  mc_cluster_stop(c);
}

}  // namespace

int main() {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_counters_move_by_what_the_test_did),
      cmocka_unit_test(test_ssd_figures_appear_with_ssd_path),
      cmocka_unit_test(test_a_taken_admin_port_stops_the_daemon),
  };
  int failed = cmocka_run_group_tests(tests, nullptr, nullptr);
  curl_global_cleanup();
  return failed;
}
