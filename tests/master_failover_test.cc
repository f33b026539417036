// Failover of real mooncake-master processes over a real etcd (tests/etcd_process.h):
// three masters with --enable_ha, one leads and the others answer -1600; SIGTERM of the
// leader hands over within a second (it resigns); kill -9 within the lease; a leader
// SIGSTOPped past its lease answers nothing but -1600 or a closed connection once resumed,
// and exits with status 3. (The cluster tests with daemons and load are tests/cluster.*.)
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <thrift/TApplicationException.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>

#include "MasterService.h"
#include "common/master_link/master_auth.h"
#include "tests/cmocka_cpp.h"
#include "tests/etcd_process.h"
#include "tests/process_harness.h"

namespace {

using mooncake::ErrorCode;
using mooncake::testing::ChildProcess;
using mooncake::testing::EtcdProcess;
using Clock = std::chrono::steady_clock;
namespace rpc = mooncake::rpc;

constexpr int kMasters = 3;
constexpr int kLeaseMs = 2000;
constexpr int kMarginMs = 2500;  // a loaded machine: polling, process start, etcd's expiry

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

struct Masters {
  EtcdProcess etcd;
  std::string dir = mooncake::testing::MakeTempDir("mc-failover-");
  int ports[kMasters];
  ChildProcess procs[kMasters];

  Masters() {
    assert_int_equal(mkdir((dir + "/etcd").c_str(), 0700), 0);  // where etcd.log goes
    assert_true(etcd.Start(dir + "/etcd"));
    for (int i = 0; i < kMasters; ++i) {
      ports[i] = mooncake::testing::FreeTcpPort();
      assert_true(Start(i));
    }
  }
  ~Masters() {
    for (ChildProcess& p : procs) {
      if (p.running()) p.Stop(SIGKILL, 2000);
    }
    if (getenv("MC_KEEP_TEST_DIR") == nullptr) mooncake::testing::RemoveTree(dir);
  }

  bool Start(int i) {
    std::string own = dir + "/m" + std::to_string(i);
    return mooncake::testing::StartMasterOnPort(
        &procs[i], ports[i], own + ".log",
        {"--enable_ha", "--etcd_endpoints", etcd.endpoint(), "--cluster_id", "failover",
         "--ha_lease_ttl", std::to_string(kLeaseMs), "--enable_snapshot", "--snapshot_dir",
         own, "--enable_snapshot_restore", "--oplog_mode", "strict"});
  }

  // GetRole of master i; false when it does not answer.
  bool Role(int i, rpc::RoleResult* out) {
    return mooncake::testing::WithMasterClient(
        ports[i], [&](rpc::MasterServiceClient& c) { c.GetRole(*out); });
  }

  // The one master that says LEADER (and whose term is the highest), polled until
  // timeout_ms; -1 when none. except: a master not to count (the old leader).
  int WaitLeader(int timeout_ms, int except = -1) {
    Clock::time_point until = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (Clock::now() < until) {
      for (int i = 0; i < kMasters; ++i) {
        rpc::RoleResult r;
        if (i != except && procs[i].running() && Role(i, &r) &&
            r.role == rpc::MasterRole::LEADER) {
          return i;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

  // A client call of master i: its code, -1600 when refused whole as not the leader, or
  // RPC_FAIL when the connection failed or closed.
  int Register(int i, int64_t daemon) {
    int code = static_cast<int>(ErrorCode::RPC_FAIL);
    std::string error;
    bool ok = mooncake::testing::WithMasterClientKey(
        ports[i], mooncake::testing::ClusterKeyFile(),
        [&](rpc::MasterServiceClient& c) {
          try {
            code = c.RegisterDaemon(daemon, "127.0.0.1:" + std::to_string(9000 + daemon));
          } catch (const apache::thrift::TApplicationException& e) {
            if (mooncake::RefusalCode(e.what()) != ErrorCode::OK) {
              code = static_cast<int>(mooncake::RefusalCode(e.what()));
              return;
            }
            throw;
          }
        },
        &error);
    return ok ? code : static_cast<int>(ErrorCode::RPC_FAIL);
  }
};

constexpr int kNotLeader = static_cast<int>(ErrorCode::NOT_LEADER);

void test_one_leads_and_the_others_refuse(void**) {
  Masters m;
  int leader = m.WaitLeader(10000);
  assert_true(leader >= 0);
  rpc::RoleResult lead;
  assert_true(m.Role(leader, &lead));
  assert_true(lead.term > 0);
  assert_int_equal(m.Register(leader, 1), 0);
  for (int i = 0; i < kMasters; ++i) {
    if (i == leader) continue;
    // Standbys know the leader once their watch read it.
    rpc::RoleResult r;
    Clock::time_point until = Clock::now() + std::chrono::seconds(5);
    while (Clock::now() < until && (!m.Role(i, &r) || r.leader != lead.leader)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    assert_int_equal(r.role, rpc::MasterRole::STANDBY);
    assert_string_equal(r.leader.c_str(), lead.leader.c_str());
    assert_int_equal(r.term, lead.term);
    assert_int_equal(m.Register(i, 2), kNotLeader);
  }
}

void test_sigterm_of_the_leader_hands_over_at_once(void**) {
  Masters m;
  int leader = m.WaitLeader(10000);
  assert_true(leader >= 0);
  rpc::RoleResult before;
  assert_true(m.Role(leader, &before));
  Clock::time_point t0 = Clock::now();
  assert_int_equal(WEXITSTATUS(m.procs[leader].Stop(SIGTERM, 10000)), 0);
  int next = m.WaitLeader(1000 + kMarginMs, leader);
  int64_t took = MsSince(t0);
  assert_true(next >= 0);
  rpc::RoleResult after;
  assert_true(m.Role(next, &after));
  assert_true(after.term > before.term);
  assert_int_equal(m.Register(next, 1), 0);
  fprintf(stderr, "# SIGTERM of the leader: a new leader after %lld ms\n",
          static_cast<long long>(took));
}

void test_kill_9_of_the_leader_hands_over_within_the_lease(void**) {
  Masters m;
  int leader = m.WaitLeader(10000);
  assert_true(leader >= 0);
  Clock::time_point t0 = Clock::now();
  m.procs[leader].Stop(SIGKILL, 5000);
  int next = m.WaitLeader(kLeaseMs + kMarginMs, leader);
  int64_t took = MsSince(t0);
  assert_true(next >= 0);
  assert_int_equal(m.Register(next, 1), 0);
  fprintf(stderr, "# kill -9 of the leader: a new leader after %lld ms\n",
          static_cast<long long>(took));
  // The killed master comes back as a standby of the new leader.
  assert_true(m.Start(leader));
  rpc::RoleResult r;
  Clock::time_point until = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < until && (!m.Role(leader, &r) || r.role != rpc::MasterRole::STANDBY)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  assert_int_equal(r.role, rpc::MasterRole::STANDBY);
  assert_int_equal(m.Register(leader, 2), kNotLeader);
}

void test_a_leader_paused_past_its_lease_acknowledges_nothing_and_exits_3(void**) {
  Masters m;
  int leader = m.WaitLeader(10000);
  assert_true(leader >= 0);
  // A connection opened while it led, kept across the pause: the call sent on it after the
  // lease ran out must not be answered OK.
  auto socket = std::make_shared<apache::thrift::transport::TSocket>("127.0.0.1", m.ports[leader]);
  socket->setRecvTimeout(10000);
  auto transport = std::make_shared<apache::thrift::transport::TFramedTransport>(socket);
  transport->open();
  rpc::MasterServiceClient held(
      std::make_shared<apache::thrift::protocol::TBinaryProtocol>(transport));
  assert_true(mooncake::testing::AuthenticateMasterClient(&held, ""));
  assert_int_equal(held.RegisterDaemon(1, "127.0.0.1:9001"), 0);

  assert_true(m.procs[leader].Pause());
  // The call is sent while it is stopped: the paused master reads it when it resumes.
  held.send_RegisterDaemon(2, "127.0.0.1:9002");
  int next = m.WaitLeader(kLeaseMs + kMarginMs + 2000, leader);
  assert_true(next >= 0);
  m.procs[leader].Resume();
  bool acknowledged = false;
  try {
    acknowledged = held.recv_RegisterDaemon() == 0;
  } catch (const std::exception&) {
    // -1600 or a closed connection: either way nothing was acknowledged.
  }
  assert_false(acknowledged);
  // New connections hear -1600 or nothing, until it exits with status 3.
  int code = m.Register(leader, 3);
  assert_true(code == kNotLeader || code == static_cast<int>(ErrorCode::RPC_FAIL));
  int status = m.procs[leader].Wait(10000);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 3);
  // The one that took over serves.
  assert_int_equal(m.Register(next, 1), 0);
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_leads_and_the_others_refuse),
      cmocka_unit_test(test_sigterm_of_the_leader_hands_over_at_once),
      cmocka_unit_test(test_kill_9_of_the_leader_hands_over_within_the_lease),
      cmocka_unit_test(test_a_leader_paused_past_its_lease_acknowledges_nothing_and_exits_3),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
