#include "bench/spawned_master.h"

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "bench/master_bench_util.h"

namespace mooncake {
namespace bench {

namespace {

std::mutex g_running_mu;
SpawnedMaster* g_running = nullptr;  // g_running_mu

void PrintLogTail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  if (all.empty()) return;
  std::fprintf(stderr, "last lines of the master's log %s:\n", path.c_str());
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    std::fprintf(stderr, "  | %s\n", all[i].c_str());
  }
}

}  // namespace

SpawnedMaster::SpawnedMaster(std::string binary, std::vector<std::string> flags,
                             std::string log_path, int64_t start_timeout_ms)
    : binary_(std::move(binary)), flags_(std::move(flags)), log_path_(std::move(log_path)),
      start_timeout_ms_(start_timeout_ms) {}

SpawnedMaster::~SpawnedMaster() {
  std::lock_guard<std::mutex> lock(g_running_mu);
  if (g_running == this) g_running = nullptr;
}

double SpawnedMaster::Start(int port) {
  bool fresh_port = port == 0;
  for (int attempt = 0;; ++attempt) {
    port_ = fresh_port ? testing::FreeTcpPort() : port;
    std::vector<std::string> argv = {binary_,         "--rpc_address",       "127.0.0.1",
                                     "--rpc_port",    std::to_string(port_), "--cluster_key_file",
                                     testing::ClusterKeyFile(), "--metrics_port", "0"};
    argv.insert(argv.end(), flags_.begin(), flags_.end());
    testing::MakeFlagDirectories(argv);  // --snapshot_dir must exist
    std::error_code missing;  // no log yet: it starts at 0
    uintmax_t size = std::filesystem::file_size(log_path_, missing);
    log_start_ = missing ? 0 : size;
    {
      std::lock_guard<std::mutex> lock(g_running_mu);
      g_running = this;
    }
    auto t0 = Clock::now();
    if (!process_.Start(argv, log_path_)) Die("cannot fork to start %s", binary_.c_str());
    while (!testing::WaitForTcpPort(port_, 100)) {
      if (process_.Wait(0) != -1) break;
      if (Clock::now() - t0 > std::chrono::milliseconds(start_timeout_ms_)) {
        Die("the master on port %d did not accept connections within %" PRId64 " ms", port_,
            start_timeout_ms_);
      }
    }
    if (process_.running()) return std::chrono::duration<double>(Clock::now() - t0).count();
    // Exit code 1 may be a failed bind: another process can take a fresh port before the
    // master binds it. Any other end (2: flags refused) would only repeat.
    int status = process_.exit_status();
    bool bind_failed = WIFEXITED(status) && WEXITSTATUS(status) == 1;
    if (!fresh_port || !bind_failed || attempt == 4) {
      Die("the master exited before serving (status 0x%x)", status);
    }
  }
}

void SpawnedMaster::Kill() {
  int status = process_.Stop(SIGKILL, 10000);
  if (status == -1 || !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
    Die("the master did not die of SIGKILL (status 0x%x)", status);
  }
}

void SpawnedMaster::Stop() {
  {
    std::lock_guard<std::mutex> lock(g_running_mu);
    if (g_running == this) g_running = nullptr;  // what it logged is no longer news
  }
  int status = process_.Stop(SIGTERM, 30000);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "warning: the master did not exit cleanly (status 0x%x); see %s\n",
                 status, log_path_.c_str());
  }
}

std::vector<std::string> SpawnedMaster::LogLines(const std::string& needle) const {
  std::ifstream in(log_path_);
  in.seekg(static_cast<std::streamoff>(log_start_));
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

void SpawnedMaster::KillRunning() {
  std::lock_guard<std::mutex> lock(g_running_mu);
  if (g_running == nullptr) return;
  if (g_running->process_.running()) g_running->process_.Stop(SIGKILL, 5000);
  PrintLogTail(g_running->log_path_, 15);
}

}  // namespace bench
}  // namespace mooncake
