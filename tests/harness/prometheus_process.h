// A real Prometheus server (Debian's /usr/bin/prometheus, or $MC_PROMETHEUS_BINARY) for
// tests, like tests/harness/etcd_process.h for etcd: it listens on 127.0.0.1 at a free port and
// scrapes the static targets a test names every second. Everything lives in one temp dir:
// prometheus.yml (written by Start), the TSDB (tsdb/) and its output (prometheus.log).
// The dir is removed by the destructor unless MC_KEEP_TEST_DIR is set or KeepDir() was
// called (a test that fails calls it, so the log survives; Start does when it fails).
//
// Thread roles: one thread (the test's) uses an instance; children die with the thread
// that forked them (tests/harness/process_harness.h), so that is the thread that calls Start.
#ifndef MOONCAKE_TESTS_PROMETHEUS_PROCESS_H_
#define MOONCAKE_TESTS_PROMETHEUS_PROCESS_H_

#include <string>
#include <vector>

#include "tests/harness/http_test_util.h"
#include "tests/harness/process_harness.h"

namespace mooncake {
namespace testing {

// One scrape target: the job label Prometheus gives its series, and "127.0.0.1:<port>".
struct ScrapeTarget {
  std::string job;
  std::string address;
};

class PrometheusProcess {
 public:
  // The binary Start runs: $MC_PROMETHEUS_BINARY, else /usr/bin/prometheus.
  static std::string Binary();
  // Whether Binary() exists and is executable (tests skip, saying so, when it is not).
  static bool Available();

  PrometheusProcess() = default;
  ~PrometheusProcess();  // Stop(); removes the dir unless kept
  PrometheusProcess(const PrometheusProcess&) = delete;
  PrometheusProcess& operator=(const PrometheusProcess&) = delete;

  // Writes prometheus.yml (scrape and evaluation interval 1 s, one scrape config per job,
  // /metrics on each target) and starts Prometheus; true once GET /-/ready answers 200
  // (30 s at most: it replays an empty TSDB first). The port was free a moment ago; when
  // Prometheus exits at once (it was taken since) others are tried. On failure it prints
  // why and where the log is, and keeps the dir.
  bool Start(const std::vector<ScrapeTarget>& targets);
  // SIGTERM, then SIGKILL when it has not exited within 10 s. No-op when not running.
  void Stop();

  // GET /api/v1/query?query=<promql> (an instant query, now): the answer (JSON).
  HttpAnswer Query(const std::string& promql) const;

  // Keeps the dir (log, config, TSDB) for a post-mortem, printing where it is.
  void KeepDir();

  bool running() const { return process_.running(); }
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  const std::string& log_path() const { return log_path_; }

 private:
  bool WriteConfig(const std::vector<ScrapeTarget>& targets) const;
  bool Launch();
  bool WaitReady(int timeout_ms);

  ChildProcess process_;
  std::string dir_, log_path_;
  int port_ = 0;
  bool keep_dir_ = false;
};

}  // namespace testing
}  // namespace mooncake

#endif  // MOONCAKE_TESTS_PROMETHEUS_PROCESS_H_
