// tests/cluster.h's high-availability half: an etcd and several HA masters (docs/ha.md).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>

#include "MasterService.h"
#include "common/etcd/etcd_client.h"
#include "common/etcd/leader_watch.h"
#include "tests/cluster.h"
#include "tests/cluster_internal.h"
#include "tests/etcd_process.h"
#include "tests/process_harness.h"

namespace harness = mooncake::testing;

struct McHaMaster {
  int port = 0;
  std::string log_path;
  std::vector<std::string> flags;  // after --rpc_address/--rpc_port/--cluster_key_file
  harness::ChildProcess process;
  std::atomic<bool> paused{false};  // by the harness: not asked for its role
};

struct McHaState {
  std::string cluster_id;
  harness::EtcdProcess etcd;  // its data in <dir>/etcd-data, its log <dir>/etcd.log
  std::vector<std::unique_ptr<McHaMaster>> masters;
};

namespace {

using Clock = std::chrono::steady_clock;

McHaMaster* MasterAt(const mc_cluster* c, int i) {
  if (c->ha == nullptr || i < 0 || static_cast<size_t>(i) >= c->ha->masters.size()) {
    std::fprintf(stderr, "mc_cluster: no HA master %d\n", i);
    std::abort();
  }
  return c->ha->masters[static_cast<size_t>(i)].get();
}

bool StartHaMaster(McHaMaster* m) {
  return harness::StartMasterOnPort(&m->process, m->port, m->log_path, m->flags);
}

// GetRole on a fresh connection that gives up after timeout_ms (connect, send, receive).
bool AskRole(int port, int timeout_ms, mooncake::rpc::RoleResult* out) {
  using apache::thrift::protocol::TBinaryProtocol;
  using apache::thrift::transport::TFramedTransport;
  using apache::thrift::transport::TSocket;
  try {
    auto socket = std::make_shared<TSocket>("127.0.0.1", port);
    socket->setConnTimeout(timeout_ms);
    socket->setRecvTimeout(timeout_ms);
    socket->setSendTimeout(timeout_ms);
    auto transport = std::make_shared<TFramedTransport>(socket);
    transport->open();
    mooncake::rpc::MasterServiceClient client(std::make_shared<TBinaryProtocol>(transport));
    bool ok = harness::AuthenticateMasterClient(&client, "");
    if (ok) client.GetRole(*out);
    transport->close();
    return ok && out->code == 0;
  } catch (const std::exception&) {
    return false;
  }
}

// Waits until the sync set in etcd names `members` standbys.
bool AwaitSyncSet(const McHaState* ha, size_t members, int timeout_ms) {
  std::unique_ptr<mooncake::EtcdClient> etcd;
  if (mooncake::EtcdClient::Create(ha->etcd.endpoint(), 1000, &etcd) != mooncake::ErrorCode::OK) {
    return false;
  }
  const auto until = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < until) {
    mooncake::EtcdClient::KeyValue kv;
    bool found = false;
    if (etcd->Get(mooncake::SyncSetKey(ha->cluster_id), &kv, &found) == mooncake::ErrorCode::OK &&
        found && !kv.value.empty() &&
        static_cast<size_t>(std::count(kv.value.begin(), kv.value.end(), ',')) + 1 >= members) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace

bool McHaStart(mc_cluster* c, const mc_cluster_ha_options* options) {
  static std::atomic<int> clusters{0};
  auto* ha = new McHaState;
  c->ha = ha;
  ha->cluster_id = "t" + std::to_string(getpid()) + "-" + std::to_string(clusters++);
  if (!ha->etcd.Start(c->dir)) {
    std::fprintf(stderr, "etcd did not start; see %s\n", ha->etcd.log_path().c_str());
    return false;
  }
  const std::string ttl =
      std::to_string(options->lease_ttl_ms > 0 ? options->lease_ttl_ms : 2000);
  const std::string mode = options->oplog_mode != nullptr ? options->oplog_mode : "strict";
  for (int i = 0; i < options->masters; ++i) {
    auto m = std::make_unique<McHaMaster>();
    std::string dir = c->dir + "/master-" + std::to_string(i);
    mkdir(dir.c_str(), 0700);
    m->log_path = c->dir + "/master-" + std::to_string(i) + ".log";
    m->flags = {"--default_kv_lease_ttl", std::to_string(c->lease_ms),
                "--enable_ha", "--etcd_endpoints", ha->etcd.endpoint(),
                "--cluster_id", ha->cluster_id, "--ha_lease_ttl", ttl,
                "--enable_snapshot", "--snapshot_dir", dir, "--enable_snapshot_restore",
                "--oplog_mode", mode};
    m->flags.insert(m->flags.end(), c->master_flags.begin(), c->master_flags.end());
    bool started = false;
    for (int attempt = 0; !started && attempt < 3; ++attempt) {
      m->port = harness::FreeTcpPort();
      started = StartHaMaster(m.get());
    }
    ha->masters.push_back(std::move(m));
    if (!started) {
      std::fprintf(stderr, "HA master %d did not start\n", i);
      return false;
    }
  }
  if (mc_cluster_ha_await_leader(c, -1, 20000) < 0) {
    std::fprintf(stderr, "no HA master leads after 20 s\n");
    return false;
  }
  // In strict mode an acknowledgement waits for every standby of the sync set; but until
  // the standbys have caught up and joined it, the set is empty and an acknowledgement
  // waits for the leader's disk alone, so a failover may lose it (docs/ha.md, "Who may take
  // over"). The cluster is handed over once every standby is in the set: tests of
  // failovers must not race that window (they lost an early put about once in five runs).
  if (mode == "strict" && !AwaitSyncSet(ha, ha->masters.size() - 1, 20000)) {
    std::fprintf(stderr, "the sync set did not name every standby after 20 s\n");
    return false;
  }
  std::vector<std::string> flags = {"--master", "etcd://" + ha->etcd.endpoint(), "--cluster_id",
                                    ha->cluster_id};
  flags.insert(flags.end(), c->daemon_flags.begin(), c->daemon_flags.end());
  c->daemon_flags = flags;
  return true;
}

int McHaLeaderPort(const mc_cluster* c) {
  int i = mc_cluster_ha_leader(c);
  return i < 0 ? -1 : MasterAt(c, i)->port;
}

void McHaStop(mc_cluster* c, int sig) {
  McHaState* ha = c->ha;
  for (auto& m : ha->masters) {
    m->process.Resume();
    m->process.Stop(sig, 10000);
  }
  ha->etcd.Resume();
  ha->etcd.Stop(sig);
  c->ha = nullptr;
  delete ha;
}

extern "C" {

int mc_cluster_ha_master_count(const mc_cluster* c) {
  return c->ha == nullptr ? 0 : static_cast<int>(c->ha->masters.size());
}
int mc_cluster_ha_master_port_at(const mc_cluster* c, int i) { return MasterAt(c, i)->port; }
const char* mc_cluster_ha_master_log_at(const mc_cluster* c, int i) {
  return MasterAt(c, i)->log_path.c_str();
}
const char* mc_cluster_ha_cluster_id(const mc_cluster* c) {
  return c->ha == nullptr ? "" : c->ha->cluster_id.c_str();
}

int mc_cluster_ha_role_at(const mc_cluster* c, int i, int64_t* term) {
  McHaMaster* m = MasterAt(c, i);
  if (!m->process.running() || m->paused.load()) return -1;
  mooncake::rpc::RoleResult role;
  if (!AskRole(m->port, 1000, &role)) return -1;
  if (term != nullptr) *term = role.term;
  return static_cast<int>(role.role);
}

int64_t mc_cluster_ha_applied_seq_at(const mc_cluster* c, int i) {
  McHaMaster* m = MasterAt(c, i);
  mooncake::rpc::RoleResult role;
  if (!m->process.running() || m->paused.load() || !AskRole(m->port, 1000, &role)) return -1;
  return role.applied_seq;
}

int mc_cluster_ha_leader(const mc_cluster* c) {
  int leader = -1;
  int64_t best = -1;
  for (int i = 0; i < mc_cluster_ha_master_count(c); ++i) {
    int64_t term = 0;
    if (mc_cluster_ha_role_at(c, i, &term) == 0 && term > best) {
      best = term;
      leader = i;
    }
  }
  return leader;
}

int mc_cluster_ha_await_leader(const mc_cluster* c, int except, int timeout_ms) {
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int i = mc_cluster_ha_leader(c);
    if (i >= 0 && i != except) return i;
    if (Clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int mc_cluster_ha_kill_master_at(mc_cluster* c, int i, int sig) {
  McHaMaster* m = MasterAt(c, i);
  if (sig != SIGKILL) m->process.Resume();
  int status = m->process.Stop(sig, 10000);
  m->paused = false;
  return status;
}

int mc_cluster_ha_pause_master_at(mc_cluster* c, int i) {
  McHaMaster* m = MasterAt(c, i);
  m->paused = true;
  return m->process.Pause() ? 0 : -1;
}

int mc_cluster_ha_resume_master_at(mc_cluster* c, int i) {
  McHaMaster* m = MasterAt(c, i);
  if (!m->process.running()) return -1;
  m->process.Resume();
  m->paused = false;
  return 0;
}

int mc_cluster_ha_restart_master_at(mc_cluster* c, int i) {
  McHaMaster* m = MasterAt(c, i);
  m->paused = false;
  return StartHaMaster(m) ? 0 : -1;
}

int mc_cluster_ha_master_alive(mc_cluster* c, int i) {
  McHaMaster* m = MasterAt(c, i);
  m->process.Wait(0);  // reaps it if it has exited
  return m->process.running() ? 1 : 0;
}

int mc_cluster_ha_wait_master_at(mc_cluster* c, int i, int timeout_ms) {
  McHaMaster* m = MasterAt(c, i);
  if (!m->process.running()) return m->process.exit_status();
  return m->process.Wait(timeout_ms);
}

int mc_cluster_etcd_port(const mc_cluster* c) {
  return c->ha == nullptr ? -1 : c->ha->etcd.client_port();
}
const char* mc_cluster_etcd_endpoint(const mc_cluster* c) {
  return c->ha == nullptr ? "" : c->ha->etcd.endpoint().c_str();
}

int mc_cluster_etcd_stop(mc_cluster* c, int sig) {
  c->ha->etcd.Resume();
  return c->ha->etcd.Stop(sig);
}

int mc_cluster_etcd_start(mc_cluster* c) { return c->ha->etcd.Restart() ? 0 : -1; }

}  // extern "C"
