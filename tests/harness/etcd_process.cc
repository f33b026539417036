#include "tests/harness/etcd_process.h"


#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tests/harness/http_test_util.h"

namespace mooncake {
namespace testing {

namespace {

std::string EtcdBinary() {
  const char* binary = std::getenv("MC_ETCD_BINARY");
  return binary != nullptr ? binary : "/usr/bin/etcd";
}

// One GET /health on 127.0.0.1:port within about a second: true when etcd says it is
// healthy (it answers {"health":"true"} once it has a leader and serves requests).
bool HealthOnce(int port) {
  return HttpGetLoopback(port, "/health", 1000).body.find("\"health\":\"true\"") !=
         std::string::npos;
}

}  // namespace

EtcdProcess::~EtcdProcess() {
  Resume();  // a stopped etcd still dies of SIGKILL, but be plain about it
  Stop(SIGKILL);
  if (own_dir_ && std::getenv("MC_KEEP_TEST_DIR") == nullptr) RemoveTree(dir_);
}

bool EtcdProcess::Start(const std::string& dir) {
  own_dir_ = dir.empty();
  dir_ = own_dir_ ? MakeTempDir("mc-etcd-") : dir;
  if (dir_.empty()) return false;
  log_path_ = dir_ + "/etcd.log";
  for (int attempt = 0; attempt < 4; ++attempt) {
    client_port_ = FreeTcpPort();
    do {
      peer_port_ = FreeTcpPort();
    } while (peer_port_ == client_port_);
    endpoint_ = "127.0.0.1:" + std::to_string(client_port_);
    if (Launch()) return true;
  }
  std::fprintf(stderr, "etcd did not start; log in %s\n", log_path_.c_str());
  return false;
}

bool EtcdProcess::Launch() {
  const std::string client = "http://" + endpoint_;
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  std::vector<std::string> argv = {EtcdBinary(),
                                   "--name", "t",
                                   "--data-dir", dir_ + "/etcd-data",
                                   "--listen-client-urls", client,
                                   "--advertise-client-urls", client,
                                   "--listen-peer-urls", peer,
                                   "--initial-advertise-peer-urls", peer,
                                   "--initial-cluster", "t=" + peer,
                                   "--logger", "zap"};
  if (!process_.Start(argv, log_path_)) return false;
  if (WaitHealthy(30000)) return true;  // a loaded machine starts it slowly
  process_.Stop(SIGKILL, 5000);  // exited (a port was taken) or never got healthy
  return false;
}

bool EtcdProcess::Restart() {
  if (process_.running()) Stop(SIGTERM);
  // The same ports: the old sockets are gone once the process has exited, but a port may
  // still be taken by something else for a moment; try for a few seconds.
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (Launch()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::fprintf(stderr, "etcd did not restart; log in %s\n", log_path_.c_str());
  return false;
}

int EtcdProcess::Stop(int sig) {
  if (!process_.running()) return -1;
  if (sig != SIGKILL) Resume();  // a stopped etcd would not act on SIGTERM
  return process_.Stop(sig, 10000);
}

bool EtcdProcess::WaitHealthy(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (HealthOnce(client_port_)) return true;
    if (process_.Wait(0) != -1 || !process_.running()) return false;  // it exited
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace testing
}  // namespace mooncake

struct mc_etcd {
  mooncake::testing::EtcdProcess process;
};

extern "C" {

mc_etcd* mc_etcd_start(const char* dir) {
  auto* e = new mc_etcd;
  if (!e->process.Start(dir != nullptr ? dir : "")) {
    delete e;
    return nullptr;
  }
  return e;
}

const char* mc_etcd_endpoint(const mc_etcd* e) { return e->process.endpoint().c_str(); }
int mc_etcd_client_port(const mc_etcd* e) { return e->process.client_port(); }
const char* mc_etcd_log(const mc_etcd* e) { return e->process.log_path().c_str(); }

int mc_etcd_stop(mc_etcd* e) {
  if (!e->process.running()) return -1;
  e->process.Stop(SIGTERM);
  return 0;
}

int mc_etcd_kill9(mc_etcd* e) {
  if (!e->process.running()) return -1;
  e->process.Stop(SIGKILL);
  return 0;
}

int mc_etcd_pause(mc_etcd* e) { return e->process.Pause() ? 0 : -1; }

int mc_etcd_resume(mc_etcd* e) {
  if (!e->process.running()) return -1;
  e->process.Resume();
  return 0;
}

int mc_etcd_restart(mc_etcd* e) { return e->process.Restart() ? 0 : -1; }

void mc_etcd_destroy(mc_etcd* e) { delete e; }

}  // extern "C"
