// common/metrics (the Prometheus text exposition) and the master's registry built on it
// (master/server/master_metrics.h): the exact format, escaping, cumulative histogram buckets,
// families grouped under one HELP/TYPE, and `promtool check metrics` accepting what is
// rendered (the naming rule of docs/operations.md).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "common/base/metrics.h"
#include "master/server/master_metrics.h"
#include "master/service/master_service.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/process_harness.h"

using namespace mooncake;
namespace harness = mooncake::testing;

namespace {

constexpr const char* kPromtool = "/usr/bin/promtool";

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// promtool's exit status on text (its findings on stderr, shown); -2 when it is absent.
int Promtool(const std::string& text) {
  if (access(kPromtool, X_OK) != 0) return -2;
  std::string dir = harness::MakeTempDir("mc-metrics-test-");
  std::string path = dir + "/metrics.txt";
  std::ofstream(path) << text;
  std::string command = std::string(kPromtool) + " check metrics < " + path;
  int status = std::system(command.c_str());
  harness::RemoveTree(dir);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void test_render_format(void**) {
  MetricsRegistry r;
  Counter* c = r.AddCounter("x_requests_total", "Requests.");
  Gauge* g = r.AddGauge("x_queue_depth", "Queue depth.", {{"queue", "a"}});
  c->Add(3);
  g->Set(-7);
  r.AddCollector([](MetricsWriter* out) {
    out->Family("x_collected_bytes", "gauge", "From a collector.");
    out->Sample(1.5);
  });
  const std::string want =
      "# HELP x_queue_depth Queue depth.\n"
      "# TYPE x_queue_depth gauge\n"
      "x_queue_depth{queue=\"a\"} -7\n"
      "# HELP x_requests_total Requests.\n"
      "# TYPE x_requests_total counter\n"
      "x_requests_total 3\n"
      "# HELP x_collected_bytes From a collector.\n"
      "# TYPE x_collected_bytes gauge\n"
      "x_collected_bytes 1.5\n";
  assert_string_equal(r.Render().c_str(), want.c_str());
}

void test_escaping(void**) {
  MetricsRegistry r;
  r.AddGauge("x_g", "help with \\ and\nnewline", {{"path", "a\"b\\c\nd"}})->Set(1);
  std::string text = r.Render();
  assert_non_null(std::strstr(text.c_str(), "# HELP x_g help with \\\\ and\\nnewline\n"));
  assert_non_null(std::strstr(text.c_str(), "x_g{path=\"a\\\"b\\\\c\\nd\"} 1\n"));
}

void test_histogram_cumulative_buckets(void**) {
  MetricsRegistry r;
  Histogram* h = r.AddHistogram("x_latency_seconds", "Latency.", {0.1, 1, 10}, {{"op", "get"}});
  h->Observe(0.05);
  h->Observe(0.5);
  h->Observe(0.5);
  h->Observe(100);  // above every bound: only +Inf
  std::string text = r.Render();
  assert_non_null(std::strstr(text.c_str(), "# TYPE x_latency_seconds histogram\n"));
  assert_non_null(std::strstr(text.c_str(), "x_latency_seconds_bucket{op=\"get\",le=\"0.1\"} 1\n"));
  assert_non_null(std::strstr(text.c_str(), "x_latency_seconds_bucket{op=\"get\",le=\"1\"} 3\n"));
  assert_non_null(std::strstr(text.c_str(), "x_latency_seconds_bucket{op=\"get\",le=\"10\"} 3\n"));
  assert_non_null(std::strstr(text.c_str(), "x_latency_seconds_bucket{op=\"get\",le=\"+Inf\"} 4\n"));
  assert_non_null(std::strstr(text.c_str(), "x_latency_seconds_sum{op=\"get\"} 101.05\n"));
  assert_non_null(std::strstr(text.c_str(), "x_latency_seconds_count{op=\"get\"} 4\n"));
  assert_int_equal(h->cumulative(1), 3);
}

void test_families_grouped(void**) {
  MetricsRegistry r;
  r.AddCounter("x_ops_total", "Ops.", {{"op", "put"}})->Add(1);
  r.AddGauge("x_between", "Registered between the two.")->Set(0);
  r.AddCounter("x_ops_total", "Ops.", {{"op", "get"}})->Add(2);
  std::string text = r.Render();
  assert_int_equal(Count(text, "# TYPE x_ops_total counter"), 1);
  assert_int_equal(Count(text, "# HELP x_ops_total"), 1);
  // Both samples right after the family's TYPE line, in registration order.
  assert_non_null(std::strstr(text.c_str(),
                              "# TYPE x_ops_total counter\n"
                              "x_ops_total{op=\"put\"} 1\n"
                              "x_ops_total{op=\"get\"} 2\n"));
}

void test_promtool_accepts_a_registry(void**) {
  MetricsRegistry r;
  r.AddCounter("x_ops_total", "Ops.", {{"op", "put"}})->Add(1);
  r.AddGauge("x_used_bytes", "Used.", {{"path", "we\"ird\\"}})->Set(5);
  r.AddHistogram("x_latency_seconds", "Latency.", LatencyBuckets())->Observe(0.003);
  int rc = Promtool(r.Render());
  if (rc == -2) {
    std::fprintf(stderr, "SKIPPED: %s is absent (install Debian's prometheus package)\n", kPromtool);
    skip();
  }
  assert_int_equal(rc, 0);
  // And it does refuse what breaks the naming rule, so the check above means something.
  MetricsRegistry bad;
  bad.AddCounter("x_evicted_key_count", "A counter without _total.")->Add(1);
  assert_int_not_equal(Promtool(bad.Render()), 0);
}

// The master's whole registry, its collectors included, on a service with a segment, an
// object, and a call counted of each kind.
void test_master_registry_passes_promtool(void**) {
  MasterOptions o;
  MasterService service(o);
  MasterMetrics metrics({&service, nullptr, nullptr, nullptr});
  assert_int_equal(ToInt(service.RegisterDaemon(1, "127.0.0.1:1")), 0);
  rpc::SegmentInfo seg;
  seg.segment_id = 11;
  seg.name = "127.0.0.1:1";
  seg.size = 64 << 20;
  seg.daemon_id = 1;
  assert_int_equal(ToInt(service.MountSegment(seg)), 0);
  assert_int_equal(service.PutStart(1, "k", 4096, rpc::ReplicateConfig()).code, 0);
  assert_int_equal(ToInt(service.PutEnd(1, "k")), 0);
  for (int i = 0; i < static_cast<int>(MasterMetrics::Rpc::kCount); ++i) {
    auto rpc = static_cast<MasterMetrics::Rpc>(i);
    RpcCall call(&metrics, rpc);
    call.Code(i % 2 == 0 ? 0 : -704);
    if (MasterMetrics::IsBatch(rpc)) metrics.RecordItems(rpc, 4, 1);
  }
  assert_int_equal(metrics.requests(MasterMetrics::Rpc::kPutStart), 1);
  assert_int_equal(metrics.failures(MasterMetrics::Rpc::kPutEnd), 1);
  // A replica a reader found bad, dropped: counted by reason.
  assert_int_equal(service.PutStart(1, "bad", 4096, rpc::ReplicateConfig()).code, 0);
  assert_int_equal(ToInt(service.PutEnd(1, "bad", 7)), 0);
  rpc::BadReplica bad;
  bad.key = "bad";
  bad.reason = rpc::BadReplicaReason::CHECKSUM_MISMATCH;
  bad.replica_id = service.GetReplicaList("bad").replicas[0].replica_id;
  bad.size = 4096;
  bad.checksum = 7;
  assert_int_equal(service.ReportBadReplicas(1, {bad})[0], 0);

  std::string text = metrics.Render();
  assert_non_null(std::strstr(text.c_str(), "\nmaster_put_start_requests_total 1\n"));
  assert_non_null(std::strstr(text.c_str(), "\nmaster_keys 1\n"));
  assert_non_null(std::strstr(text.c_str(), "\nmaster_total_capacity_bytes 67108864\n"));
  assert_non_null(std::strstr(text.c_str(), "\nmaster_batch_put_start_items_total 4\n"));
  assert_non_null(std::strstr(text.c_str(), "\nmaster_batch_put_start_partial_successes_total 1\n"));
  assert_non_null(std::strstr(
      text.c_str(), "master_rpc_duration_seconds_count{rpc=\"exist_key\"} 1\n"));
  assert_non_null(std::strstr(
      text.c_str(), "segment_total_capacity_bytes{segment=\"127.0.0.1:1\",segment_id=\"11\"} 67108864\n"));
  assert_non_null(std::strstr(text.c_str(), "master_role{role=\"leader\"} 1\n"));
  assert_non_null(std::strstr(
      text.c_str(), "\nmooncake_master_objects_dropped_total{reason=\"unreadable\"} 1\n"));
  // For a caller without the admin token: the aggregates, no segment address, no tenant.
  std::string open = metrics.Render(/*detailed=*/false);
  assert_non_null(std::strstr(open.c_str(), "\nmaster_total_capacity_bytes 67108864\n"));
  assert_non_null(std::strstr(open.c_str(), "\nmaster_segments 1\n"));
  assert_null(std::strstr(open.c_str(), "127.0.0.1:1"));
  assert_null(std::strstr(open.c_str(), "segment_total_capacity_bytes"));
  assert_null(std::strstr(open.c_str(), "tenant_id="));
  assert_non_null(std::strstr(text.c_str(), "master_tenant_keys{tenant_id=\"\"} 1\n"));
  assert_int_equal(Promtool(open) == -2 ? 0 : Promtool(open), 0);
  int rc = Promtool(text);
  if (rc == -2) {
    std::fprintf(stderr, "SKIPPED: %s is absent\n", kPromtool);
    skip();
  }
  assert_int_equal(rc, 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_render_format),
      cmocka_unit_test(test_escaping),
      cmocka_unit_test(test_histogram_cumulative_buckets),
      cmocka_unit_test(test_families_grouped),
      cmocka_unit_test(test_promtool_accepts_a_registry),
      cmocka_unit_test(test_master_registry_passes_promtool),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
