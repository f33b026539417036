// The state behind tests/harness/cluster.h's mc_cluster, shared by its two halves: tests/harness/cluster.cc
// (one master, the daemons) and tests/harness/cluster_ha.cc (etcd and several HA masters). Private
// to the harness; tests see only the C interface.
//
// Threads: an mc_cluster is driven by the test's main thread (the processes it forks die
// with the thread that forked them); the query functions (roles, stats) may be called from
// any thread, they only read ports and flags fixed at start.
#ifndef MOONCAKE_TESTS_CLUSTER_INTERNAL_H_
#define MOONCAKE_TESTS_CLUSTER_INTERNAL_H_

#include <memory>
#include <string>
#include <vector>

#include "tests/harness/cluster.h"
#include "tests/harness/process_harness.h"

struct McDaemon {
  std::string socket_path;
  std::string ssd_dir;  // what "{ssd}" in its flags stands for
  std::string log_path;
  std::string name;  // "127.0.0.1:<port>"
  int port = 0;
  std::vector<std::string> flags;  // the cluster's daemon flags, then its own
  mooncake::testing::ChildProcess process;
};

struct McHaState;  // tests/harness/cluster_ha.cc

struct mc_cluster {
  std::string dir;
  uint64_t segment_size = 0;
  int lease_ms = 1000;
  int master_port = 0;  // without HA; with it, ask McHaLeaderPort
  std::vector<std::string> master_flags;
  std::vector<std::string> daemon_flags;
  mooncake::testing::ChildProcess master;  // without HA
  std::vector<std::unique_ptr<McDaemon>> daemons;
  std::vector<std::string> mounts;  // small filesystems, unmounted by mc_cluster_stop
  McHaState* ha = nullptr;          // mc_cluster_start_ha: etcd and the masters
};

// Starts etcd and ha->masters HA masters, waits for one of them to lead, and puts
// the flags that point daemons at etcd in front of c->daemon_flags. False (after printing
// why) when any of it fails; McHaStop still cleans up.
bool McHaStart(mc_cluster* c, const mc_cluster_ha_options* ha);
// The port of the master that leads now, or -1 when none does (within about a second).
int McHaLeaderPort(const mc_cluster* c);
// Stops the masters, then etcd, with sig, and frees c->ha.
void McHaStop(mc_cluster* c, int sig);

#endif  // MOONCAKE_TESTS_CLUSTER_INTERNAL_H_
