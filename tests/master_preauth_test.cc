// The master's Thrift port before and after admission (issue 32: attacks 2, 3 and the
// master's side of 7), against real mooncake-master processes on 127.0.0.1 (and a real
// cluster for the daemons' pools):
//  - a connection that has not proved the key and declares a 200 MB frame is closed at
//    once; ten of them, sending 20 MiB each, leave the master's RSS where it was;
//  - a connection that never completes the handshake (silent, half a handshake, or only
//    refused calls) is closed at the handshake deadline; an admitted one is not;
//  - a hundred idle connections from one address, and then more from nine others, keep
//    at most 32 per address and 256 in all (the oldest giving way), and a member's new
//    connection is served at once; a master with 256 descriptors and 300 idle
//    connections never runs out of them, and one whose limit was lowered under it closes
//    the oldest waiting connection to make room;
//  - admitted connections past --rpc_max_connections close the one idle the longest and a
//    member's new connection is served; an admitted connection silent for
//    --rpc_idle_timeout_sec is closed, and daemons whose pooled connections the master
//    closed keep serving puts and gets without a failure;
//  - without a key, another local user (uid 65534) gets -1400 for RemoveAll and removes
//    nothing, while the master's own user may;
//  - each closure is counted in /metrics by reason and logged at most once a second.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <thrift/TApplicationException.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>

#include "MasterService.h"
#include "common/auth/cluster_key.h"
#include "common/master_link/master_auth.h"
#include "tests/cmocka_cpp.h"
#include "tests/http_test_util.h"
#include "tests/process_harness.h"
extern "C" {
#include "tests/cluster_test_util.h"
}

namespace {

namespace harness = mooncake::testing;
namespace rpc = mooncake::rpc;
using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TFramedTransport;
using apache::thrift::transport::TSocket;

constexpr uint64_t kMiB = 1 << 20;

std::string g_dir;

// Until ms pass: true once done() is.
bool WaitFor(const std::function<bool()>& done, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// A master of this suite's own, with its log and admin port.
struct Master {
  harness::ChildProcess process;
  int port = 0;
  int admin_port = -1;
  std::string log;

  // descriptor_limit > 0: started by a shell that lowers RLIMIT_NOFILE (soft and hard) to
  // it first, as a unit's LimitNOFILE= would.
  Master(const std::string& name, const std::vector<std::string>& flags,
         int descriptor_limit = 0) {
    log = g_dir + "/" + name + ".log";
    if (descriptor_limit == 0) {
      assert_true(harness::StartMaster(&process, &port, log, flags));
    } else {
      port = harness::FreeTcpPort();
      const std::string shell =
          "ulimit -n " + std::to_string(descriptor_limit) + " && exec \"$0\" \"$@\"";
      std::vector<std::string> argv = {
          "/bin/sh", "-c", shell, harness::BuildPath("master/mooncake-master"),
          "--rpc_address", "127.0.0.1", "--rpc_port", std::to_string(port),
          "--cluster_key_file", harness::ClusterKeyFile(), "--metrics_port", "0"};
      argv.insert(argv.end(), flags.begin(), flags.end());
      assert_true(process.Start(argv, log));
      assert_true(harness::WaitForTcpPort(port, 30000));
    }
    admin_port = harness::AdminPortFromLog(log, "master");
    assert_true(admin_port > 0);
    // The harness's probe of the port is gone (the counts below start from nothing).
    assert_true(WaitFor([&] { return Open("handshake") == 0 && Open("admitted") == 0; },
                        30000));
  }
  ~Master() { process.Stop(SIGTERM, 10000); }

  // A sample of /metrics ("name{labels}" as rendered), or -1 when it is not there (or the
  // port does not answer).
  double Metric(const std::string& sample) const {
    harness::HttpAnswer answer = harness::HttpGetLoopback(admin_port, "/metrics");
    if (answer.status != 200) return -1;
    const std::string prefix = "\n" + sample + " ";
    const size_t at = ("\n" + answer.body).find(prefix);
    if (at == std::string::npos) return -1;
    return std::strtod(answer.body.c_str() + at + prefix.size() - 1, nullptr);
  }
  double Closed(const char* reason) const {
    return Metric(std::string("master_rpc_connections_closed_total{reason=\"") + reason + "\"}");
  }
  double Open(const char* state) const {
    return Metric(std::string("master_rpc_connections{state=\"") + state + "\"}");
  }
};

int CountLines(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

// A TCP connection to 127.0.0.1:port from source (another loopback address is another
// source to the master), sends giving up after 5 s.
int RawConnect(int port, const char* source = "127.0.0.1") {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  assert_int_equal(inet_pton(AF_INET, source, &from.sin_addr), 1);
  assert_int_equal(bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  return fd;
}

// True once the master closed fd's connection (end of stream or reset) within ms.
bool ClosedByServer(int fd, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t got = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

// Closed already (nothing to wait for): end of stream or reset, or readable bytes that
// are not ours to judge.
bool ClosedNow(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

std::string FrameHeader(uint32_t bytes) {
  return std::string{static_cast<char>(bytes >> 24), static_cast<char>(bytes >> 16),
                     static_cast<char>(bytes >> 8), static_cast<char>(bytes)};
}

// Sends up to total bytes of frame (its header first, then filler) until the peer stops
// taking them; returns how many went.
size_t SendFrame(int fd, uint32_t declared, size_t total) {
  const std::string header = FrameHeader(declared);
  size_t sent = 0;
  if (send(fd, header.data(), header.size(), MSG_NOSIGNAL) != 4) return 0;
  const std::string chunk(256 << 10, 'x');
  while (sent < total) {
    const ssize_t n = send(fd, chunk.data(), std::min(chunk.size(), total - sent), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  return sent;
}

// A Thrift client over fd (which it then owns), as daemons talk.
struct Client {
  std::shared_ptr<TSocket> socket;
  std::shared_ptr<TFramedTransport> transport;
  std::unique_ptr<rpc::MasterServiceClient> rpc;
  int fd = -1;

  explicit Client(int connected) : fd(connected) {
    socket = std::make_shared<TSocket>(connected);
    socket->setRecvTimeout(10000);
    transport = std::make_shared<TFramedTransport>(socket);
    rpc = std::make_unique<rpc::MasterServiceClient>(std::make_shared<TBinaryProtocol>(transport));
  }
  // Proves the harness's key.
  bool Authenticate() {
    std::string error;
    const bool ok = harness::AuthenticateMasterClient(rpc.get(), "", &error);
    if (!ok) std::printf("handshake failed: %s\n", error.c_str());
    return ok;
  }
  // True when GetStats is answered (not refused, not cut).
  bool Served() {
    try {
      rpc::MasterStats stats;
      rpc->GetStats(stats);
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }
};

long ResidentKiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

// ---- before admission --------------------------------------------------------------

// Attack 2: four connections declaring 200 MB frames took a master from 15.7 MiB to 931
// MiB. Before admission a frame may hold 4 KiB: each is closed once its header is read.
void test_a_huge_frame_before_admission_costs_the_master_nothing(void**) {
  Master m("huge-frame", {"--rpc_handshake_timeout_sec", "120"});
  // Warm: one admitted call, so that what the first call allocates is not counted below.
  Client warm(RawConnect(m.port));
  assert_true(warm.Authenticate() && warm.Served());
  const long before = ResidentKiB(m.process.pid());
  constexpr int kPeers = 10;
  size_t sent_total = 0;
  for (int i = 0; i < kPeers; ++i) {
    int fd = RawConnect(m.port);
    sent_total += SendFrame(fd, 200u << 20, 20 * kMiB);
    assert_true(ClosedByServer(fd, 30000));
    close(fd);
  }
  const long after = ResidentKiB(m.process.pid());
  std::printf("10 connections declaring 200 MB frames (%zu bytes sent before the master shut "
              "them): RSS %ld -> %ld KiB\n",
              sent_total, before, after);
  assert_true(before > 0 && after > 0);
  assert_true(after - before < 8 * 1024);  // 2 GB had the frames been taken
  assert_int_equal(m.Closed("frame_before_admission"), kPeers);
  assert_int_equal(m.Closed("handshake_timeout"), 0);
  // A frame just over the limit is refused as well; the handshake's own go through.
  int fd = RawConnect(m.port);
  SendFrame(fd, 4097, 4097);
  assert_true(ClosedByServer(fd, 30000));
  close(fd);
  assert_int_equal(m.Closed("frame_before_admission"), kPeers + 1);
  Client member(RawConnect(m.port));
  assert_true(member.Authenticate() && member.Served());
  assert_true(warm.Served());
}

// A connection not admitted within --rpc_handshake_timeout_sec is closed, whatever it did:
// nothing, half the handshake, or calls that were refused. An admitted one stays.
void test_the_handshake_has_a_deadline(void**) {
  Master m("deadline", {"--rpc_handshake_timeout_sec", "1"});
  Client admitted(RawConnect(m.port));  // the oldest of them all
  assert_true(admitted.Authenticate());
  int silent = RawConnect(m.port);
  Client half(RawConnect(m.port));
  rpc::AuthChallengeResult challenge;
  half.rpc->AuthChallenge(challenge, mooncake::ClusterKey::NewNonce());
  assert_int_equal(challenge.code, 0);
  Client refused(RawConnect(m.port));
  assert_false(refused.Served());  // -1400: the connection stays, until its deadline
  for (int fd : {silent, half.fd, refused.fd}) assert_true(ClosedByServer(fd, 30000));
  close(silent);
  assert_int_equal(m.Closed("handshake_timeout"), 3);
  // Older than all three, and still served: the deadline is the handshake's only.
  assert_true(admitted.Served());
  assert_true(CountLines(m.log, "not admitted within 1000 ms of its accept") >= 1);
}

// Attack 3 from one address and then from ten: the oldest connections not admitted give
// way (32 per address, 256 in all), and a member's new connection is served at once.
void test_a_flood_of_connections_cannot_crowd_out_a_member(void**) {
  Master m("flood", {"--rpc_handshake_timeout_sec", "120"});
  std::vector<int> ones;
  for (int i = 0; i < 100; ++i) ones.push_back(RawConnect(m.port, "127.0.0.1"));
  for (int i = 0; i < 68; ++i) assert_true(ClosedByServer(ones[i], 30000));
  assert_int_equal(m.Closed("source_cap"), 68);
  assert_int_equal(m.Open("handshake"), 32);
  // A member from the same address: its connection is the newest, and is served.
  Client member(RawConnect(m.port, "127.0.0.1"));
  assert_true(member.Authenticate() && member.Served());
  assert_true(ClosedByServer(ones[68], 30000));  // the oldest made room for it
  assert_int_equal(m.Closed("source_cap"), 69);
  for (int i = 69; i < 100; ++i) assert_false(ClosedNow(ones[i]));

  // Nine more addresses, 40 each, in turn: each keeps its newest 32 (8 give way), and
  // past 256 in all the oldest go, whoever's: 31 + 9 x 32 - 256 = 63 of them.
  std::vector<int> others;
  for (int a = 2; a <= 10; ++a) {
    const std::string source = "127.0.0." + std::to_string(a);
    for (int i = 0; i < 40; ++i) others.push_back(RawConnect(m.port, source.c_str()));
  }
  assert_true(WaitFor([&] { return m.Closed("unadmitted_cap") == 63; }, 30000));
  assert_int_equal(m.Closed("source_cap"), 69 + 9 * 8);
  assert_int_equal(m.Open("handshake"), 256);
  // A member from an address at its cap: the oldest of that address makes room.
  Client another(RawConnect(m.port, "127.0.0.5"));
  assert_true(another.Authenticate() && another.Served());
  assert_true(member.Served());
  assert_int_equal(m.Closed("source_cap"), 69 + 9 * 8 + 1);
  assert_int_equal(m.Open("handshake"), 255);
  assert_int_equal(m.Closed("connection_cap"), 0);  // nothing admitted was touched
  // One line a second at most for all these closures.
  const int lines = CountLines(m.log, "(not admitted)");
  std::printf("%.0f closures of connections not admitted, %d log lines\n",
              m.Closed("source_cap") + m.Closed("unadmitted_cap"), lines);
  assert_true(lines >= 1 && lines < 30);
  for (int fd : ones) close(fd);
  for (int fd : others) close(fd);
}

// Attack 3 as the tester ran it: a master with 256 descriptors and 300 idle connections
// (here from ten addresses). Its budgets fit its descriptors, so accept() never runs out
// and a member is served at once.
void test_idle_connections_cannot_exhaust_the_descriptors(void**) {
  Master m("descriptors", {"--rpc_handshake_timeout_sec", "120"}, 256);
  // 256 less a quarter (at least 64) for the rest of the master: 192, a quarter of them
  // for handshakes.
  assert_true(CountLines(m.log, "at most 144 connections admitted and 48 in their "
                                "handshake (6 per address") == 1);
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) {
    const std::string source = "127.0.0." + std::to_string(2 + i % 10);
    idle.push_back(RawConnect(m.port, source.c_str()));
  }
  assert_true(WaitFor(
      [&] { return m.Closed("source_cap") + m.Closed("unadmitted_cap") == 300 - 48; }, 30000));
  Client member(RawConnect(m.port));
  assert_true(member.Authenticate() && member.Served());
  assert_int_equal(m.Closed("descriptors"), 0);
  assert_int_equal(CountLines(m.log, "Too many open files"), 0);
  for (int fd : idle) close(fd);
}

// The limit lowered under a running master (its budgets made for more): accept() runs out,
// the oldest connection not admitted is closed to make a descriptor, and a member still
// gets in.
void test_out_of_descriptors_the_oldest_waiting_connection_goes(void**) {
  Master m("out-of-descriptors", {"--rpc_handshake_timeout_sec", "120"});
  rlimit low{128, 128};
  assert_int_equal(prlimit(m.process.pid(), RLIMIT_NOFILE, &low, nullptr), 0);
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) {
    const std::string source = "127.0.0." + std::to_string(2 + i % 10);
    idle.push_back(RawConnect(m.port, source.c_str()));
  }
  Client member(RawConnect(m.port));
  assert_true(member.Authenticate() && member.Served());
  assert_true(CountLines(m.log, "rpc server: accept: Too many open files") >= 1);
  for (int fd : idle) close(fd);  // the admin port, too, needs a descriptor to answer
  assert_true(WaitFor([&] { return m.Closed("descriptors") >= 1; }, 30000));
  assert_true(member.Served());
}

// ---- after admission ---------------------------------------------------------------

// --rpc_max_connections 64: 48 admitted (and 16 kept for handshakes). Sixty admitted,
// idle connections: the twelve idle the longest were closed, and a member still gets in.
void test_admitted_connections_past_the_cap_close_the_longest_idle(void**) {
  Master m("cap", {"--rpc_max_connections", "64"});
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 60; ++i) {
    clients.push_back(std::make_unique<Client>(RawConnect(m.port)));
    assert_true(clients.back()->Authenticate());
  }
  int closed = 0;
  assert_true(WaitFor(
      [&] {
        closed = 0;
        for (auto& c : clients) closed += ClosedNow(c->fd);
        return closed == 12;
      },
      30000));
  assert_int_equal(m.Closed("connection_cap"), 12);
  assert_int_equal(m.Open("admitted"), 48);
  assert_true(clients.back()->Served());
  Client member(RawConnect(m.port));
  assert_true(member.Authenticate() && member.Served());
  assert_int_equal(m.Closed("connection_cap"), 13);
  assert_int_equal(m.Open("admitted"), 48);
  assert_true(CountLines(m.log, "admitted connections (--rpc_max_connections)") >= 1);
}

void test_an_idle_admitted_connection_is_closed(void**) {
  Master m("idle", {"--rpc_idle_timeout_sec", "1"});
  Client idle(RawConnect(m.port));
  assert_true(idle.Authenticate() && idle.Served());
  assert_true(ClosedByServer(idle.fd, 30000));
  assert_true(m.Closed("idle") >= 1);
  assert_true(CountLines(m.log, "idle for 1 s (--rpc_idle_timeout_sec)") >= 1);
}

// Threads of puts and gets open several pooled connections per daemon; the master closes
// those left idle; the next round finds them closed and opens others: no request fails.
void test_daemons_reconnect_after_idle_closures(void**) {
  const char* master_flags[] = {"--rpc_idle_timeout_sec", "2", nullptr};
  mc_cluster_options o = {2, 64 * kMiB, 10000, master_flags, nullptr};
  mc_cluster* c = mc_cluster_start_with(&o);
  assert_non_null(c);
  const std::string log = mc_cluster_master_log(c);
  const int admin = harness::AdminPortFromLog(log, "master");
  auto idle_closures = [&] {
    harness::HttpAnswer a = harness::HttpGetLoopback(admin, "/metrics");
    const std::string sample = "master_rpc_connections_closed_total{reason=\"idle\"} ";
    const size_t at = a.body.find(sample);
    if (at == std::string::npos) return -1.0;
    return std::strtod(a.body.c_str() + at + sample.size(), nullptr);
  };
  std::atomic<int> failures{0};
  std::atomic<int> done{0};
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
      threads.emplace_back([&, t, round] {
        mooncake_store_t s = mooncake_store_create();
        if (mooncake_store_connect(s, mc_cluster_socket_at(c, t % 2), 4 * kMiB) != 0) {
          failures++;
          mooncake_store_destroy(s);
          return;
        }
        char key[64], value[1024], back[1024];
        for (int i = 0; i < 40; ++i) {
          std::snprintf(key, sizeof(key), "idle-%d-%d-%d", round, t, i);
          std::memset(value, 'a' + (i % 26), sizeof(value));
          if (mooncake_store_put(s, key, value, sizeof(value), nullptr) != 0) failures++;
          if (mooncake_store_get_into(s, key, back, sizeof(back)) != sizeof(back) ||
              std::memcmp(back, value, sizeof(value)) != 0) {
            failures++;
          }
          done++;
        }
        mooncake_store_destroy(s);
      });
    }
    for (auto& t : threads) t.join();
    // The pools' idle connections go before the next round.
    const double before = idle_closures();
    assert_true(WaitFor([&] { return idle_closures() > before; }, 30000));
  }
  std::printf("%d put+get pairs over 3 rounds, %.0f idle connections closed, %d failures\n",
              done.load(), idle_closures(), failures.load());
  assert_int_equal(failures.load(), 0);
  assert_int_equal(done.load(), 3 * 6 * 40);
  mc_cluster_stop(c);
}

// ---- no key: another user on this host (attack 7) ----------------------------------

// In a child that becomes uid 65534: RemoveAll and GetAllSegments must be refused -1400
// naming the uid. Exit status 0 when they were, 1 when anything else happened (no CMocka
// assertion here: a failed one would jump back into the test runner in the child).
int ChildTriesAsNobody(int port) {
  if (setgid(65534) != 0 || setuid(65534) != 0) return 2;
  try {
    auto socket = std::make_shared<TSocket>("127.0.0.1", port);
    socket->setRecvTimeout(10000);
    auto transport = std::make_shared<TFramedTransport>(socket);
    transport->open();
    rpc::MasterServiceClient client(std::make_shared<TBinaryProtocol>(transport));
    int refused = 0;
    rpc::ChangeResult change;
    std::vector<rpc::SegmentInfo> segments;
    for (const std::function<void()>& call :
         std::vector<std::function<void()>>{[&] { client.RemoveAll(change, true, 0, ""); },
                                            [&] { client.GetAllSegments(segments); }}) {
      try {
        call();
      } catch (const apache::thrift::TApplicationException& e) {
        refused += mooncake::IsUnauthenticatedMessage(e.what()) &&
                   std::strstr(e.what(), "uid 65534") != nullptr;
      }
    }
    return refused == 2 && segments.empty() ? 0 : 1;
  } catch (const std::exception&) {
    return 1;
  }
}

void test_without_a_key_another_user_is_refused(void**) {
  if (geteuid() != 0) {
    std::printf("skipped: needs root, to run a client as uid 65534\n");
    return;
  }
  Master m("keyless", {"--cluster_key_file", ""});
  harness::ChildProcess daemon;
  const std::string socket = g_dir + "/keyless.sock";
  assert_true(harness::StartDaemon(&daemon, m.port, socket, g_dir + "/keyless-daemon.log",
                                   {"--cluster_key_file", ""}));
  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(s, socket.c_str(), 4 * kMiB), 0);
  const char value[] = "kept";
  for (int i = 0; i < 10; ++i) {
    const std::string key = "keyless-" + std::to_string(i);
    assert_int_equal(mooncake_store_put(s, key.c_str(), value, sizeof(value), nullptr), 0);
  }
  mooncake_store_destroy(s);  // its threads gone: the child forks a process of one thread
  const pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) _exit(ChildTriesAsNobody(m.port));
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  // Nothing was removed; the master said whom it refused and why.
  rpc::MasterStats stats;
  assert_true(harness::WithMasterClientKey(m.port, "", [&](rpc::MasterServiceClient& c) {
    c.GetStats(stats);
  }));
  assert_int_equal(stats.objects, 10);
  assert_true(CountLines(m.log, "refused RemoveAll from 127.0.0.1:") == 1);
  assert_true(CountLines(m.log, "its socket belongs to uid 65534") >= 1);
  assert_true(m.Metric("master_rpc_unauthenticated_calls_total") >= 2);
  // The master's own user (root here) may.
  rpc::ChangeResult removed;
  assert_true(harness::WithMasterClientKey(m.port, "", [&](rpc::MasterServiceClient& c) {
    c.RemoveAll(removed, true, 0, "");
    c.GetStats(stats);
  }));
  assert_int_equal(removed.code, 10);
  assert_int_equal(stats.objects, 0);
  assert_int_equal(daemon.Stop(SIGTERM, 10000), 0);
}

int Setup(void**) {
  g_dir = harness::MakeTempDir("mc-master-preauth-");
  return g_dir.empty() ? -1 : 0;
}

int Teardown(void**) {
  if (getenv("MC_KEEP_TEST_DIR") == nullptr) harness::RemoveTree(g_dir);
  return 0;
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_huge_frame_before_admission_costs_the_master_nothing),
      cmocka_unit_test(test_the_handshake_has_a_deadline),
      cmocka_unit_test(test_a_flood_of_connections_cannot_crowd_out_a_member),
      cmocka_unit_test(test_idle_connections_cannot_exhaust_the_descriptors),
      cmocka_unit_test(test_out_of_descriptors_the_oldest_waiting_connection_goes),
      cmocka_unit_test(test_admitted_connections_past_the_cap_close_the_longest_idle),
      cmocka_unit_test(test_an_idle_admitted_connection_is_closed),
      cmocka_unit_test(test_daemons_reconnect_after_idle_closures),
      cmocka_unit_test(test_without_a_key_another_user_is_refused),
  };
  return cmocka_run_group_tests(tests, Setup, Teardown);
}
