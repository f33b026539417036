#include "tests/cluster.h"

#include <signal.h>

#include <cstdio>
#include <string>

#include "tests/process_harness.h"

namespace harness = mooncake::testing;

struct mc_cluster {
  std::string dir;
  std::string socket_path;
  uint64_t segment_size = 0;
  int lease_ms = 1000;
  int master_port = 0;
  int daemon_port = 0;
  harness::ChildProcess master;
  harness::ChildProcess daemon;
};

namespace {

// Tests use a 1 s read lease so lease tests stay short. The daemon TTL stays at the
// master's default: a short one declared daemons dead whenever a loaded machine delayed a
// heartbeat, and the death tests do not wait for it (a restarted daemon replaces its
// predecessor when it registers).
bool StartMasterOn(mc_cluster* c) {
  return harness::StartMasterOnPort(&c->master, c->master_port, c->dir + "/master.log",
                                    {"--default_kv_lease_ttl", std::to_string(c->lease_ms)});
}

bool StartDaemonOn(mc_cluster* c) {
  return harness::StartDaemon(&c->daemon, c->master_port, c->socket_path, c->dir + "/daemon.log",
                              {"--port", std::to_string(c->daemon_port), "--global_segment_size",
                               std::to_string(c->segment_size)});
}

}  // namespace

extern "C" {

mc_cluster* mc_cluster_start(uint64_t segment_size) {
  return mc_cluster_start_with_lease(segment_size, 1000);
}

mc_cluster* mc_cluster_start_with_lease(uint64_t segment_size, int lease_ms) {
  auto* c = new mc_cluster;
  c->lease_ms = lease_ms;
  c->dir = harness::MakeTempDir("mc-cluster-");
  c->socket_path = c->dir + "/mooncaked.sock";
  c->segment_size = segment_size;
  c->master_port = harness::FreeTcpPort();
  c->daemon_port = harness::FreeTcpPort();
  if (!StartMasterOn(c) || !StartDaemonOn(c)) {
    std::fprintf(stderr, "cluster did not start; logs in %s\n", c->dir.c_str());
    c->daemon.Stop(SIGKILL, 1000);
    c->master.Stop(SIGKILL, 1000);
    delete c;
    return nullptr;
  }
  return c;
}

const char* mc_cluster_socket(const mc_cluster* c) { return c->socket_path.c_str(); }
int mc_cluster_daemon_port(const mc_cluster* c) { return c->daemon_port; }

void mc_cluster_kill_daemon(mc_cluster* c, int sig) { c->daemon.Stop(sig, 10000); }
void mc_cluster_kill_master(mc_cluster* c, int sig) { c->master.Stop(sig, 10000); }
int mc_cluster_restart_daemon(mc_cluster* c) { return StartDaemonOn(c) ? 0 : -1; }
int mc_cluster_restart_master(mc_cluster* c) { return StartMasterOn(c) ? 0 : -1; }

void mc_cluster_stop(mc_cluster* c) {
  if (c == nullptr) return;
  c->daemon.Stop(SIGTERM, 10000);
  c->master.Stop(SIGTERM, 10000);
  harness::RemoveTree(c->dir);
  delete c;
}

}  // extern "C"
