// A daemon that finds its master through etcd (--master etcd://..., docs/ha.md "Daemons"),
// on real processes: a real etcd, two mooncake-master processes WITHOUT HA (the test
// writes the leader key itself, as an election would: the old key deleted, a new one
// created, so the term grows), one mooncaked and an application on the C ABI.
//  - puts and gets work through master A, which the key names;
//  - the key switched to B and A stopped: the daemon logs the change once, registers and
//    mounts its segment at B within a bound (measured), forgets what its read cache knew
//    from A (the old object is not served from it), and puts and gets work again;
//  - a new leader that already knows the daemon (as a standby that replayed its
//    registration does) answers its heartbeat under another master epoch: the daemon
//    mounts its segment there all the same, promptly;
//  - with real HA masters (--enable_ha, strict): the leader killed with SIGKILL, the daemon
//    follows the one elected next, re-mounts there (measured from the kill), and every
//    object put before reads back with its bytes; new puts work;
//  - a daemon whose key names nobody yet waits, and registers as soon as a leader is named;
//  - --master and --cluster_id are validated at start.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "MasterService.h"
#include "common/etcd/etcd_client.h"
#include "common/etcd/leader_watch.h"
#include "include/mooncake_store.h"
#include "tests/etcd_test_util.h"
#include "tests/process_harness.h"

namespace {

namespace harness = mooncake::testing;
namespace rpc = mooncake::rpc;
using mooncake::EtcdClient;
using mooncake::ErrorCode;
using harness::SuiteEtcd;
using harness::WaitFor;

constexpr uint64_t kMiB = 1 << 20;
constexpr size_t kValue = 64 * 1024;
// From the key's change to the daemon's segment mounted at the new master: the poll
// (500 ms), one heartbeat round trip and a registration, with ample room for a loaded
// machine; below the heartbeat interval the daemons run with here, so that a daemon that
// waited for its next heartbeat instead of following at once would miss it. The masters
// keep a silent daemon for longer than that interval (kMasterFlags).
constexpr int64_t kFollowBoundMs = 10000;
constexpr char kHeartbeatInterval[] = "20000";
const std::vector<std::string> kMasterFlags = {"--client_live_ttl_sec", "60"};

std::string g_dir;

int CountLines(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

// A failure's evidence: the file on stdout, as CTest keeps it.
void PrintFile(const std::string& path) {
  std::ifstream in(path);
  std::printf("---- %s\n", path.c_str());
  for (std::string line; std::getline(in, line);) std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// The leader key of cluster names value, as after an election: returns the term.
int64_t Elect(const std::string& cluster, const std::string& value) {
  std::unique_ptr<EtcdClient> etcd = harness::SuiteClient();
  const std::string key = mooncake::LeaderKey(cluster);
  EtcdClient::KeyValue kv;
  bool found = false;
  assert_int_equal(ToInt(etcd->Get(key, &kv, &found)), 0);
  if (found) {
    bool done = false;
    assert_int_equal(ToInt(etcd->DeleteIfHeld(key, kv.create_revision, &done)), 0);
  }
  assert_int_equal(ToInt(etcd->Put(key, value)), 0);
  assert_int_equal(ToInt(etcd->Get(key, &kv, &found)), 0);
  return kv.create_revision;
}

// How many segments of the daemon named name the master on port lists (-1: unreachable).
int SegmentsOf(int port, const std::string& name) {
  std::vector<rpc::SegmentInfo> all;
  if (!harness::WithMasterClient(port, [&](rpc::MasterServiceClient& m) { m.GetAllSegments(all); })) {
    return -1;
  }
  int n = 0;
  for (const rpc::SegmentInfo& s : all) n += s.name == name;
  return n;
}

// The daemon's "host:port" as it registered (its log says so, just after its socket
// starts accepting: polled).
std::string DaemonName(const std::string& log) {
  std::string name;
  WaitFor([&] {
    std::ifstream in(log);
    const std::string marker = "mooncaked ";
    for (std::string line; std::getline(in, line);) {
      size_t at = line.find(marker);
      size_t serving = line.find(" serving ");
      if (at != std::string::npos && serving != std::string::npos && serving > at) {
        name = line.substr(at + marker.size(), serving - at - marker.size());
        return true;
      }
    }
    return false;
  }, 30000);
  return name;
}

// The daemon's id as it registered (its log says so); 0 when not found.
int64_t DaemonId(const std::string& log) {
  int64_t id = 0;
  WaitFor([&] {
    std::ifstream in(log);
    const std::string marker = "registered with the master as daemon ";
    for (std::string line; std::getline(in, line);) {
      size_t at = line.find(marker);
      if (at != std::string::npos) {
        id = std::stoll(line.substr(at + marker.size()));
        return true;
      }
    }
    return false;
  }, 30000);
  return id;
}

std::vector<char> Pattern(uint64_t seed) {
  std::vector<char> v(kValue);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<char>((seed * 131 + i * 7) & 0xff);
  return v;
}

void PutAndGet(mooncake_store_t s, const std::string& key, uint64_t seed) {
  std::vector<char> value = Pattern(seed);
  assert_int_equal(mooncake_store_put(s, key.c_str(), value.data(), value.size(), nullptr), 0);
  std::vector<char> back(kValue);
  assert_int_equal(mooncake_store_get_into(s, key.c_str(), back.data(), back.size()),
                   static_cast<int64_t>(kValue));
  assert_memory_equal(back.data(), value.data(), kValue);
}

std::vector<std::string> DaemonFlags(const std::string& cluster) {
  return {"--master", "etcd://" + SuiteEtcd()->endpoint(), "--cluster_id", cluster,
          "--global_segment_size", "64MiB", "--heartbeat_interval", kHeartbeatInterval};
}

void test_the_daemon_follows_the_leader_key(void**) {
  const std::string cluster = "follow";
  harness::ChildProcess a, b, daemon;
  int port_a = 0, port_b = 0;
  assert_true(harness::StartMaster(&a, &port_a, g_dir + "/master-a.log", kMasterFlags));
  assert_true(harness::StartMaster(&b, &port_b, g_dir + "/master-b.log", kMasterFlags));
  Elect(cluster, "127.0.0.1:" + std::to_string(port_a));
  const std::string socket = g_dir + "/follow.sock", log = g_dir + "/follow-daemon.log";
  assert_true(harness::StartDaemon(&daemon, 0, socket, log, DaemonFlags(cluster)));
  const std::string name = DaemonName(log);
  assert_false(name.empty());
  assert_int_equal(SegmentsOf(port_a, name), 1);

  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(s, socket.c_str(), 16 * kMiB), 0);
  PutAndGet(s, "through-a", 1);
  PutAndGet(s, "through-a", 1);  // read again: from the read cache now

  // An election: B leads now, A is gone.
  int64_t term = Elect(cluster, "127.0.0.1:" + std::to_string(port_b));
  auto switched = std::chrono::steady_clock::now();
  assert_int_equal(a.Stop(SIGTERM, 5000) != -1, 1);
  assert_true(WaitFor([&] { return SegmentsOf(port_b, name) == 1; }, 3 * kFollowBoundMs));
  int64_t followed_ms = harness::MsSince(switched);
  std::printf("the daemon mounted at the new leader %lld ms after the key changed\n",
              static_cast<long long>(followed_ms));
  assert_true(followed_ms < kFollowBoundMs);
  const std::string change = "master leader is now 127.0.0.1:" + std::to_string(port_b) +
                             " (term " + std::to_string(term) + ")";
  assert_true(WaitFor([&] { return CountLines(log, change) == 1; }, 30000));

  // B never had the old object: the daemon must not serve it from what A told it.
  std::vector<char> back(kValue);
  assert_int_equal(mooncake_store_get_into(s, "through-a", back.data(), back.size()),
                   static_cast<int64_t>(ErrorCode::OBJECT_NOT_FOUND));
  // The same connection puts and gets through B.
  PutAndGet(s, "through-b", 2);
  assert_true(harness::WithMasterClient(port_b, [&](rpc::MasterServiceClient& m) {
    assert_int_equal(m.ExistKey("through-b"), 1);
  }));
  mooncake_store_destroy(s);
  assert_int_equal(daemon.Stop(SIGTERM, 10000), 0);
  b.Stop(SIGTERM, 5000);
  // One line per change seen: A at start, B after.
  assert_int_equal(CountLines(log, "master leader is now"), 2);
}

void test_a_new_leader_that_knows_the_daemon_gets_its_segment(void**) {
  const std::string cluster = "known";
  harness::ChildProcess a, b, daemon;
  int port_a = 0, port_b = 0;
  assert_true(harness::StartMaster(&a, &port_a, g_dir + "/master-known-a.log", kMasterFlags));
  assert_true(harness::StartMaster(&b, &port_b, g_dir + "/master-known-b.log", kMasterFlags));
  Elect(cluster, "127.0.0.1:" + std::to_string(port_a));
  const std::string socket = g_dir + "/known.sock", log = g_dir + "/known-daemon.log";
  assert_true(harness::StartDaemon(&daemon, 0, socket, log, DaemonFlags(cluster)));
  const std::string name = DaemonName(log);
  const int64_t id = DaemonId(log);
  assert_true(id != 0);
  // B learns of the daemon as a standby would from the log: registered, no segment.
  assert_true(harness::WithMasterClient(port_b, [&](rpc::MasterServiceClient& m) {
    assert_int_equal(m.RegisterDaemon(id, name), 0);
  }));
  assert_int_equal(SegmentsOf(port_b, name), 0);
  Elect(cluster, "127.0.0.1:" + std::to_string(port_b));
  auto switched = std::chrono::steady_clock::now();
  // Its heartbeat is answered (B knows it), under B's epoch: that alone must bring the
  // segment there.
  const bool mounted =
      WaitFor([&] { return SegmentsOf(port_b, name) == 1; }, 3 * kFollowBoundMs);
  const int64_t took_ms = harness::MsSince(switched);
  if (!mounted || took_ms >= kFollowBoundMs) PrintFile(log);  // what the daemon did instead
  assert_true(mounted);
  assert_true(took_ms < kFollowBoundMs);
  assert_true(CountLines(log, "registering and mounting again") == 1);
  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(s, socket.c_str(), 16 * kMiB), 0);
  PutAndGet(s, "known-b", 4);
  mooncake_store_destroy(s);
  assert_int_equal(daemon.Stop(SIGTERM, 10000), 0);
  a.Stop(SIGTERM, 5000);
  b.Stop(SIGTERM, 5000);
}

// The index of the master of ports that says LEADER, polled until timeout_ms; -1: none.
int WaitLeader(const std::vector<int>& ports, const std::vector<harness::ChildProcess*>& procs,
               int timeout_ms) {
  int leader = -1;
  WaitFor(
      [&] {
        for (size_t i = 0; i < ports.size(); ++i) {
          rpc::RoleResult role;
          if (procs[i]->running() &&
              harness::WithMasterClient(ports[i], [&](rpc::MasterServiceClient& m) { m.GetRole(role); }) &&
              role.role == rpc::MasterRole::LEADER) {
            leader = static_cast<int>(i);
            return true;
          }
        }
        return false;
      },
      timeout_ms);
  return leader;
}

void test_the_daemon_follows_a_real_failover(void**) {
  const std::string cluster = "ha";
  harness::ChildProcess m0, m1, daemon;
  std::vector<harness::ChildProcess*> procs = {&m0, &m1};
  std::vector<int> ports = {harness::FreeTcpPort(), harness::FreeTcpPort()};
  for (int i = 0; i < 2; ++i) {
    const std::string own = g_dir + "/ha-m" + std::to_string(i);
    assert_true(harness::StartMasterOnPort(
        procs[i], ports[i], own + ".log",
        {"--enable_ha", "--etcd_endpoints", SuiteEtcd()->endpoint(), "--cluster_id", cluster,
         "--ha_lease_ttl", "2000", "--enable_snapshot", "--snapshot_dir", own,
         "--enable_snapshot_restore", "--oplog_mode", "strict", kMasterFlags[0],
         kMasterFlags[1]}));
  }
  int leader = WaitLeader(ports, procs, 60000);
  assert_true(leader >= 0);
  const std::string socket = g_dir + "/ha.sock", log = g_dir + "/ha-daemon.log";
  assert_true(harness::StartDaemon(&daemon, 0, socket, log, DaemonFlags(cluster)));
  const std::string name = DaemonName(log);
  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(s, socket.c_str(), 16 * kMiB), 0);
  constexpr int kObjects = 20;
  for (int i = 0; i < kObjects; ++i) PutAndGet(s, "ha-" + std::to_string(i), 100 + i);

  // The standby must be in the sync set (caught up) before the leader goes, or it may not
  // take over (docs/ha.md, the campaign rule): strict puts waited for it, so it is.
  assert_int_equal(procs[leader]->Stop(SIGKILL, 5000) != -1, 1);
  auto killed = std::chrono::steady_clock::now();
  const int next = 1 - leader;
  assert_int_equal(WaitLeader({ports[next]}, {procs[next]}, 60000), 0);
  const bool mounted = WaitFor([&] { return SegmentsOf(ports[next], name) == 1; }, 60000);
  if (!mounted) PrintFile(log);
  assert_true(mounted);
  std::printf("kill -9 of the leader -> the daemon mounted at the next one: %lld ms\n",
              static_cast<long long>(harness::MsSince(killed)));
  // Nothing acknowledged is lost, and every byte is right.
  std::vector<char> back(kValue);
  for (int i = 0; i < kObjects; ++i) {
    const std::string key = "ha-" + std::to_string(i);
    int64_t got = -1;
    assert_true(WaitFor(
        [&] {
          got = mooncake_store_get_into(s, key.c_str(), back.data(), back.size());
          return got == static_cast<int64_t>(kValue);
        },
        5000));
    std::vector<char> want = Pattern(100 + i);
    assert_memory_equal(back.data(), want.data(), kValue);
  }
  PutAndGet(s, "ha-after", 200);
  assert_int_equal(CountLines(log, "master leader is now"), 2);
  mooncake_store_destroy(s);
  assert_int_equal(daemon.Stop(SIGTERM, 10000), 0);
  procs[next]->Stop(SIGTERM, 5000);
}

void test_a_daemon_waits_for_a_leader_to_be_named(void**) {
  const std::string cluster = "late";
  harness::ChildProcess master, daemon;
  int port = 0;
  assert_true(harness::StartMaster(&master, &port, g_dir + "/master-late.log", kMasterFlags));
  const std::string socket = g_dir + "/late.sock", log = g_dir + "/late-daemon.log";
  assert_true(harness::SpawnDaemon(&daemon, 0, socket, log, DaemonFlags(cluster)));
  assert_true(WaitFor([&] { return CountLines(log, "cannot register with the master") > 0; },
                      60000));
  assert_true(CountLines(log, "no master leader known") > 0);
  Elect(cluster, "127.0.0.1:" + std::to_string(port));
  assert_true(harness::WaitForUnixSocket(socket, 60000));
  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(s, socket.c_str(), 16 * kMiB), 0);
  PutAndGet(s, "late", 3);
  mooncake_store_destroy(s);
  assert_int_equal(daemon.Stop(SIGTERM, 10000), 0);
  master.Stop(SIGTERM, 5000);
}

void test_master_and_cluster_id_are_validated(void**) {
  struct Case {
    std::vector<std::string> flags;
    const char* says;
  } cases[] = {
      {{"--master", "etcd://"}, "--master etcd://"},
      {{"--master", "etcd://127.0.0.1:2379,nohost"}, "is not host:port"},
      {{"--master", "127.0.0.1"}, "--master must be host:port or etcd://"},
      {{"--master", "etcd://127.0.0.1:2379", "--cluster_id", "a/b"}, "--cluster_id must be"},
  };
  int i = 0;
  for (const Case& c : cases) {
    harness::ChildProcess daemon;
    const std::string log = g_dir + "/invalid-" + std::to_string(i++) + ".log";
    assert_false(harness::StartDaemon(&daemon, 1, g_dir + "/invalid.sock", log, c.flags));
    assert_true(WIFEXITED(daemon.exit_status()));
    assert_int_equal(WEXITSTATUS(daemon.exit_status()), 2);
    assert_true(CountLines(log, c.says) == 1);
  }
}

int Setup(void** state) {
  g_dir = harness::MakeTempDir("mc-discovery");
  return harness::StartSuiteEtcd(state);
}

int Teardown(void** state) {
  harness::StopSuiteEtcd(state);
  if (std::getenv("MC_KEEP_TEST_DIR") == nullptr) harness::RemoveTree(g_dir);
  return 0;
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_the_daemon_follows_the_leader_key),
      cmocka_unit_test(test_a_new_leader_that_knows_the_daemon_gets_its_segment),
      cmocka_unit_test(test_the_daemon_follows_a_real_failover),
      cmocka_unit_test(test_a_daemon_waits_for_a_leader_to_be_named),
      cmocka_unit_test(test_master_and_cluster_id_are_validated),
  };
  return cmocka_run_group_tests(tests, Setup, Teardown);
}
