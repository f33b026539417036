// The master's Thrift service admits only who holds the cluster key; real processes on
// 127.0.0.1 (a master and two daemons with the harness's key):
//  - attack 2 of issue 12: a Thrift client without the key, or with another one, gets a
//    refusal for every call: RemoveAll, removals, segment and replica lists, registering
//    and mounting a fake daemon, unmounting, draining, snapshots, stats. Afterwards every
//    object still reads back, the segment list is the two real daemons', and new puts
//    land on them only. Refusals are logged with the peer, at most once a second;
//  - a daemon with another key never joins, and says why;
//  - daemons refuse a master with another key, and one that cannot prove the key at all
//    (an impostor that admits anyone): they never register there;
//  - a master without a key serves this host only and says it cannot prove one;
//  - by default the master listens on this host's own address, where a daemon without
//    --master finds it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <thrift/TApplicationException.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/server/TThreadedServer.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TServerSocket.h>

#include "MasterService.h"
#include "common/auth/cluster_key.h"
#include "common/auth/host_address.h"
#include "common/master_link/master_auth.h"
#include "master/server/rpc_handler.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/process_harness.h"
extern "C" {
#include "tests/harness/cluster_test_util.h"
}

namespace {

namespace harness = mooncake::testing;
namespace rpc = mooncake::rpc;
using mooncake::ClusterKey;
using mooncake::ErrorCode;

constexpr uint64_t kMiB = 1 << 20;
constexpr int kObjects = 200;
const char kBefore[] = "auth-before";

mc_cluster* g_c = nullptr;
std::string g_dir;         // this suite's own files (other keys, extra logs)
std::string g_wrong_key;   // a key file holding another key

// Until timeout_ms: true once a line of path contains needle.
bool WaitForLogLine(const std::string& path, const std::string& needle, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  do {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      if (line.find(needle) != std::string::npos) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

int CountLines(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

// True when call was answered with the master's refusal, and only that.
bool Refused(const std::function<void()>& call) {
  try {
    call();
  } catch (const apache::thrift::TApplicationException& e) {
    return mooncake::IsUnauthenticatedMessage(e.what());
  }
  return false;
}

std::vector<rpc::SegmentInfo> Segments(int port) {
  std::vector<rpc::SegmentInfo> segments;
  assert_true(harness::WithMasterClient(port, [&](rpc::MasterServiceClient& m) {
    m.GetAllSegments(segments);
  }));
  return segments;
}

rpc::SegmentInfo FakeSegment() {
  rpc::SegmentInfo fake;
  fake.segment_id = 666;
  fake.name = "10.6.6.6:12300";
  fake.base = 1 << 20;
  fake.size = 1LL << 40;  // big enough to take most placements
  fake.daemon_id = 666;
  rpc::TransportEndpoint tcp;
  tcp.protocol = "tcp";
  tcp.address = fake.name;
  fake.endpoints.push_back(tcp);
  return fake;
}

// Every call a peer could use to learn where objects are, or to change anything, on a
// connection the master has not admitted: each must be refused.
void AssertEverythingRefused(rpc::MasterServiceClient& m, const rpc::SegmentInfo& real) {
  const std::string key = std::string(kBefore) + "/0";
  rpc::ChangeResult change;
  rpc::BatchChangeResult batch_change;
  rpc::ReplicaListResult list;
  std::vector<rpc::ReplicaListResult> lists;
  std::vector<rpc::SegmentInfo> segments;
  std::vector<int32_t> codes;
  rpc::PutStartResult started;
  rpc::HeartbeatResult beat;
  rpc::DrainBatchResult drain;
  rpc::MasterStats stats;
  rpc::SnapshotResult snapshot;
  assert_true(Refused([&] { m.RemoveAll(change, true, 0, ""); }));
  assert_true(Refused([&] { m.RemoveByRegex(change, ".*", true, 0, ""); }));
  assert_true(Refused([&] { m.Remove(change, key, true, 0); }));
  assert_true(Refused([&] { m.BatchRemove(batch_change, {key}, true, 0); }));
  assert_true(Refused([&] { m.GetAllSegments(segments); }));
  assert_true(Refused([&] { m.GetReplicaList(list, key, 0); }));
  assert_true(Refused([&] { m.BatchGetReplicaList(lists, {key}, 0); }));
  assert_true(Refused([&] { m.ExistKey(key); }));
  assert_true(Refused([&] { m.RegisterDaemon(666, "10.6.6.6:12300"); }));
  assert_true(Refused([&] { m.MountSegment(FakeSegment()); }));
  assert_true(Refused([&] { m.UnmountSegment(real.daemon_id, real.segment_id); }));
  assert_true(Refused([&] { m.Heartbeat(beat, real.daemon_id); }));
  assert_true(Refused([&] {
    m.DrainSegment(drain, real.daemon_id, real.segment_id, 0, 256, {});
  }));
  assert_true(Refused([&] { m.PutStart(started, 666, "attacker", 4096, rpc::ReplicateConfig()); }));
  assert_true(Refused([&] { m.GetStats(stats); }));
  assert_true(Refused([&] { m.Snapshot(snapshot); }));
  assert_true(Refused([&] { m.LastSnapshot(snapshot); }));
  // Nothing came back but the refusals.
  assert_true(segments.empty() && list.replicas.empty() && lists.empty());
}

int Setup(void**) {
  g_dir = harness::MakeTempDir("mc-master-auth-");
  g_wrong_key = g_dir + "/wrong.key";
  if (!harness::WriteClusterKeyFile(g_wrong_key, {harness::RandomClusterKey()})) return -1;
  mc_cluster_options o = {2, 64 * kMiB, 10000, nullptr, nullptr};
  g_c = mc_cluster_start_with(&o);
  if (g_c == nullptr) return -1;
  mooncake_store_t s = connect_app(g_c, 0, 4 * kMiB);
  put_many(s, kBefore, kObjects, nullptr);
  mooncake_store_destroy(s);
  return 0;
}

int Teardown(void**) {
  mc_cluster_stop(g_c);
  harness::RemoveTree(g_dir);
  return 0;
}

// The real daemons' segments, and that new puts land only there: the fake daemon an
// attacker tried to register took nothing.
void AssertOnlyTheRealDaemons(const char* prefix) {
  std::vector<rpc::SegmentInfo> segments = Segments(mc_cluster_master_port(g_c));
  assert_int_equal(segments.size(), 2);
  for (const rpc::SegmentInfo& s : segments) {
    assert_true(s.name == mc_cluster_name_at(g_c, 0) || s.name == mc_cluster_name_at(g_c, 1));
  }
  mooncake_store_t s = connect_app(g_c, 1, 4 * kMiB);
  put_many(s, prefix, 64, nullptr);
  char key[64];
  for (int i = 0; i < 64; ++i) {
    key_of(key, sizeof(key), prefix, i);
    int owner = replica_daemon(g_c, key, 0);
    assert_true(owner == 0 || owner == 1);
  }
  assert_all_read(s, prefix, 64);
  mooncake_store_destroy(s);
}

void test_client_without_the_key_gets_refusals_only(void**) {
  const int port = mc_cluster_master_port(g_c);
  const rpc::SegmentInfo real = Segments(port)[0];
  std::string error;
  // No handshake at all.
  assert_true(harness::WithMasterClientKey(
      port, "", [&](rpc::MasterServiceClient& m) { AssertEverythingRefused(m, real); }, &error));
  // Another key: the handshake fails, and so does everything after it.
  assert_false(harness::WithMasterClientKey(port, g_wrong_key, [](rpc::MasterServiceClient&) {},
                                            &error));
  assert_non_null(std::strstr(error.c_str(), "the master refused this process's cluster key"));
  assert_true(harness::WithMasterClientKey(port, "", [&](rpc::MasterServiceClient& m) {
    std::string why;
    ClusterKey wrong = ClusterKey::FromKeys({harness::RandomClusterKey()});
    assert_int_equal(static_cast<int>(mooncake::AuthenticateToMaster(&m, &wrong, &why)),
                     static_cast<int>(ErrorCode::UNAUTHENTICATED));
    AssertEverythingRefused(m, real);
  }));

  // Nothing happened: every object reads back, from the other daemon too.
  mooncake_store_t s = connect_app(g_c, 1, 4 * kMiB);
  assert_all_read(s, kBefore, kObjects);
  mooncake_store_destroy(s);
  mc_cluster_master_stats stats = master_stats(g_c);
  assert_int_equal(stats.objects, kObjects);
  assert_int_equal(stats.daemons, 2);
  AssertOnlyTheRealDaemons("auth-after-attack");
  // The master said whom it refused (the first refusal of its life: logged).
  assert_int_equal(CountLines(mc_cluster_master_log(g_c), "refused RemoveAll from 127.0.0.1:"), 1);
}

void test_refusals_are_logged_at_most_once_a_second(void**) {
  const int port = mc_cluster_master_port(g_c);
  const std::string log = mc_cluster_master_log(g_c);
  // Past the lines of the test before, whose second may not be over.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const int before = CountLines(log, "refused ");
  auto t0 = std::chrono::steady_clock::now();
  assert_true(harness::WithMasterClientKey(port, "", [](rpc::MasterServiceClient& m) {
    rpc::MasterStats stats;
    for (int i = 0; i < 2000; ++i) assert_true(Refused([&] { m.GetStats(stats); }));
  }));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int flood = CountLines(log, "refused ") - before;
  std::printf("2000 refused calls in %.2f s: %d log lines\n", seconds, flood);
  assert_true(flood >= 1 && flood <= static_cast<int>(seconds) + 2);
  // The next line a second later counts the ones not logged.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  assert_true(harness::WithMasterClientKey(port, "", [](rpc::MasterServiceClient& m) {
    rpc::MasterStats stats;
    assert_true(Refused([&] { m.GetStats(stats); }));
  }));
  assert_true(WaitForLogLine(log, "refusals not logged", 5000));
}

void test_client_with_the_key_is_served(void**) {
  rpc::MasterStats stats;
  std::string error;
  assert_true(harness::WithMasterClientKey(
      mc_cluster_master_port(g_c), harness::ClusterKeyFile(),
      [&](rpc::MasterServiceClient& m) { m.GetStats(stats); }, &error));
  assert_true(stats.objects >= kObjects);
  assert_int_equal(stats.daemons, 2);
}

void test_daemon_with_another_key_cannot_join(void**) {
  harness::ChildProcess daemon;
  const std::string log = g_dir + "/wrong-key-daemon.log";
  const std::string socket = g_dir + "/wrong-key.sock";
  assert_true(harness::SpawnDaemon(&daemon, mc_cluster_master_port(g_c), socket, log,
                                   {"--cluster_key_file", g_wrong_key}));
  // It says why, and keeps trying (a master may get its key later).
  assert_true(WaitForLogLine(log, "the master refused this process's cluster key", 10000));
  assert_true(WaitForLogLine(log, "cannot register with the master", 1000));
  // It never registered, so it never mounted or served anything.
  assert_false(harness::WaitForUnixSocket(socket, 500));
  assert_int_equal(master_stats(g_c).daemons, 2);
  AssertOnlyTheRealDaemons("auth-beside-wrong-daemon");
  assert_int_equal(CountLines(log, "registered with the master"), 0);
  int status = daemon.Stop(SIGTERM, 10000);
  assert_true(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// A master that admits anyone and "proves" with random bytes: it holds no key.
class Impostor : public mooncake::RpcHandler {
 public:
  explicit Impostor(mooncake::MasterService* service) : RpcHandler(service) {}
  void AuthChallenge(rpc::AuthChallengeResult& out, const std::string&) override {
    out.code = 0;
    out.server_nonce = ClusterKey::NewNonce();
  }
  void Authenticate(rpc::AuthenticateResult& out, const std::string&) override {
    out.code = 0;
    out.server_proof = ClusterKey::NewNonce();
  }
  int32_t RegisterDaemon(int64_t daemon_id, const std::string& name) override {
    ++calls;
    return RpcHandler::RegisterDaemon(daemon_id, name);
  }
  int32_t MountSegment(const rpc::SegmentInfo& segment) override {
    ++calls;
    return RpcHandler::MountSegment(segment);
  }
  std::atomic<int> calls{0};
};

void test_daemons_refuse_a_master_that_cannot_prove_the_key(void**) {
  mooncake::MasterService service{mooncake::MasterOptions()};
  auto impostor = std::make_shared<Impostor>(&service);
  int port = harness::FreeTcpPort();
  auto server = std::make_shared<apache::thrift::server::TThreadedServer>(
      std::make_shared<rpc::MasterServiceProcessor>(impostor),
      std::make_shared<apache::thrift::transport::TServerSocket>("127.0.0.1", port),
      std::make_shared<apache::thrift::transport::TFramedTransportFactory>(),
      std::make_shared<apache::thrift::protocol::TBinaryProtocolFactory>());
  std::thread serving([&] { server->serve(); });
  assert_true(harness::WaitForTcpPort(port, 5000));

  harness::ChildProcess daemon;
  const std::string log = g_dir + "/impostor-daemon.log";
  assert_true(harness::SpawnDaemon(&daemon, port, g_dir + "/impostor.sock", log, {}));
  assert_true(WaitForLogLine(log, "the master's proof does not check against", 10000));
  assert_true(WaitForLogLine(log, "an impostor", 1000));
  assert_false(harness::WaitForUnixSocket(g_dir + "/impostor.sock", 500));
  assert_int_equal(impostor->calls.load(), 0);  // told nothing, registered nowhere
  assert_int_equal(daemon.Stop(SIGTERM, 10000), 0);
  server->stop();
  serving.join();
}

void test_daemons_refuse_a_master_with_another_key(void**) {
  harness::ChildProcess master;
  int port = 0;
  assert_true(harness::StartMaster(&master, &port, g_dir + "/other-master.log",
                                   {"--cluster_key_file", g_wrong_key}));
  harness::ChildProcess daemon;
  const std::string log = g_dir + "/other-master-daemon.log";
  assert_true(harness::SpawnDaemon(&daemon, port, g_dir + "/other.sock", log, {}));
  assert_true(WaitForLogLine(log, "the master refused this process's cluster key", 10000));
  assert_true(WaitForLogLine(g_dir + "/other-master.log", "refused Authenticate from 127.0.0.1:",
                             5000));
  rpc::MasterStats stats;
  assert_true(harness::WithMasterClientKey(
      port, g_wrong_key, [&](rpc::MasterServiceClient& m) { m.GetStats(stats); }));
  assert_int_equal(stats.daemons, 0);
  assert_int_equal(stats.segments, 0);
  assert_int_equal(daemon.Stop(SIGTERM, 10000), 0);
  assert_int_equal(master.Stop(SIGTERM, 10000), 0);
}

void test_master_without_a_key_serves_this_host_only(void**) {
  harness::ChildProcess master;
  int port = 0;
  const std::string master_log = g_dir + "/keyless-master.log";
  assert_true(harness::StartMaster(&master, &port, master_log, {"--cluster_key_file", ""}));
  assert_true(WaitForLogLine(master_log, "only peers on this host (loopback, or this host's own", 1000));
  // A loopback client without a key is served as it is.
  rpc::MasterStats stats;
  assert_true(harness::WithMasterClientKey(port, "", [&](rpc::MasterServiceClient& m) {
    m.GetStats(stats);
  }));
  // A client with a key will not trust a master that cannot prove one.
  std::string error;
  assert_false(harness::WithMasterClientKey(port, harness::ClusterKeyFile(),
                                            [](rpc::MasterServiceClient&) {}, &error));
  assert_non_null(std::strstr(error.c_str(), "cannot prove the cluster key"));
  // A daemon without a key joins (one host, no configuration); one with a key does not.
  harness::ChildProcess keyless, keyed;
  assert_true(harness::StartDaemon(&keyless, port, g_dir + "/keyless.sock",
                                   g_dir + "/keyless-daemon.log", {"--cluster_key_file", ""}));
  const std::string keyed_log = g_dir + "/keyed-daemon.log";
  assert_true(harness::SpawnDaemon(&keyed, port, g_dir + "/keyed.sock", keyed_log, {}));
  assert_true(WaitForLogLine(keyed_log, "cannot prove the cluster key", 10000));
  assert_true(harness::WithMasterClientKey(port, "", [&](rpc::MasterServiceClient& m) {
    m.GetStats(stats);
  }));
  assert_int_equal(stats.daemons, 1);
  assert_int_equal(keyed.Stop(SIGTERM, 10000), 0);
  assert_int_equal(keyless.Stop(SIGTERM, 10000), 0);
  assert_int_equal(master.Stop(SIGTERM, 10000), 0);
}

// True when nothing listens on address:port and it can be bound (another test may take
// it between this check and the master's bind: then the master exits 1 and we skip).
bool CanBind(const std::string& address, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = inet_pton(AF_INET, address.c_str(), &addr.sin_addr) == 1 &&
            bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

void test_defaults_meet_at_this_hosts_address(void**) {
  const std::string self = mooncake::ThisHostAddress();
  if (!CanBind(self, 50051)) {
    std::printf("skipped: %s:50051 is taken\n", self.c_str());
    return;
  }
  harness::ChildProcess master;
  const std::string master_log = g_dir + "/default-master.log";
  assert_true(master.Start({harness::BuildPath("master/mooncake-master"), "--cluster_key_file",
                            harness::ClusterKeyFile(), "--metrics_port", "0"},
                           master_log));
  if (!WaitForLogLine(master_log, "mooncake-master listening on " + self + ":50051", 5000)) {
    assert_true(master.Wait(0) != -1);  // it lost the port to someone else: not our failure
    std::printf("skipped: the master could not bind %s:50051\n", self.c_str());
    return;
  }
  // A daemon without --master finds it there.
  harness::ChildProcess daemon;
  const std::string socket = g_dir + "/default.sock";
  const std::string log = g_dir + "/default-daemon.log";
  assert_true(daemon.Start({harness::BuildPath("daemon/mooncaked"), "--metrics_port", "0",
                            "--socket", socket,
                            "--hostname", "127.0.0.1", "--global_segment_size", "16MB",
                            "--cluster_key_file", harness::ClusterKeyFile()},
                           log));
  assert_true(harness::WaitForUnixSocket(socket, 10000));
  assert_true(WaitForLogLine(log, ", master " + self + ":50051,", 1000));
  assert_int_equal(daemon.Stop(SIGTERM, 10000), 0);
  assert_int_equal(master.Stop(SIGTERM, 10000), 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_client_without_the_key_gets_refusals_only),
      cmocka_unit_test(test_refusals_are_logged_at_most_once_a_second),
      cmocka_unit_test(test_client_with_the_key_is_served),
      cmocka_unit_test(test_daemon_with_another_key_cannot_join),
      cmocka_unit_test(test_daemons_refuse_a_master_that_cannot_prove_the_key),
      cmocka_unit_test(test_daemons_refuse_a_master_with_another_key),
      cmocka_unit_test(test_master_without_a_key_serves_this_host_only),
      cmocka_unit_test(test_defaults_meet_at_this_hosts_address),
  };
  return cmocka_run_group_tests(tests, Setup, Teardown);
}
