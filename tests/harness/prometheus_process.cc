#include "tests/harness/prometheus_process.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

namespace mooncake {
namespace testing {

std::string PrometheusProcess::Binary() {
  const char* binary = std::getenv("MC_PROMETHEUS_BINARY");
  return binary != nullptr && *binary != '\0' ? binary : "/usr/bin/prometheus";
}

bool PrometheusProcess::Available() { return access(Binary().c_str(), X_OK) == 0; }

PrometheusProcess::~PrometheusProcess() {
  Stop();
  if (!dir_.empty() && !keep_dir_ && std::getenv("MC_KEEP_TEST_DIR") == nullptr) {
    RemoveTree(dir_);
  }
}

bool PrometheusProcess::WriteConfig(const std::vector<ScrapeTarget>& targets) const {
  // Jobs in a stable order, each with its targets; a scrape timeout as long as the
  // interval (Prometheus refuses a longer one), which a loaded machine may still exceed
  // now and then: the tests poll until a scrape has succeeded.
  std::map<std::string, std::vector<std::string>> jobs;
  for (const ScrapeTarget& t : targets) jobs[t.job].push_back(t.address);
  std::ofstream out(dir_ + "/prometheus.yml");
  out << "global:\n"
         "  scrape_interval: 1s\n"
         "  scrape_timeout: 1s\n"
         "  evaluation_interval: 1s\n"
         "scrape_configs:\n";
  for (const auto& [job, addresses] : jobs) {
    out << "  - job_name: \"" << job << "\"\n"
        << "    metrics_path: /metrics\n"
        << "    static_configs:\n"
        << "      - targets:\n";
    for (const std::string& a : addresses) out << "          - \"" << a << "\"\n";
  }
  out.close();
  return static_cast<bool>(out);
}

bool PrometheusProcess::Start(const std::vector<ScrapeTarget>& targets) {
  dir_ = MakeTempDir("mc-prometheus-");
  if (dir_.empty()) return false;
  log_path_ = dir_ + "/prometheus.log";
  if (!WriteConfig(targets)) {
    std::fprintf(stderr, "cannot write %s/prometheus.yml\n", dir_.c_str());
    KeepDir();
    return false;
  }
  for (int attempt = 0; attempt < 4; ++attempt) {
    port_ = FreeTcpPort();
    if (Launch()) return true;
  }
  std::fprintf(stderr, "prometheus did not start; log in %s\n", log_path_.c_str());
  KeepDir();
  return false;
}

bool PrometheusProcess::Launch() {
  std::vector<std::string> argv = {Binary(),
                                   "--config.file=" + dir_ + "/prometheus.yml",
                                   "--storage.tsdb.path=" + dir_ + "/tsdb",
                                   "--web.listen-address=127.0.0.1:" + std::to_string(port_),
                                   "--log.level=info"};
  if (!process_.Start(argv, log_path_)) return false;
  if (WaitReady(30000)) return true;
  process_.Stop(SIGKILL, 5000);  // exited (the port was taken) or never got ready
  return false;
}

bool PrometheusProcess::WaitReady(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (HttpGetLoopback(port_, "/-/ready", 1000).status == 200) return true;
    if (process_.Wait(0) != -1 || !process_.running()) return false;  // it exited
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

void PrometheusProcess::Stop() {
  if (!process_.running()) return;
  if (process_.Stop(SIGTERM, 10000) == -1) {
    std::fprintf(stderr, "prometheus did not stop on SIGTERM within 10 s; killed\n");
  }
}

HttpAnswer PrometheusProcess::Query(const std::string& promql) const {
  return HttpGetLoopback(port_, "/api/v1/query?query=" + UrlEncode(promql), 5000);
}

void PrometheusProcess::KeepDir() {
  if (!keep_dir_ && !dir_.empty()) {
    std::fprintf(stderr, "prometheus: config, TSDB and log kept in %s\n", dir_.c_str());
  }
  keep_dir_ = true;
}

}  // namespace testing
}  // namespace mooncake
