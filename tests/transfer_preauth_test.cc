// The daemon's transfer port before a connection is open (issue 32: attacks 4, 5, and the
// transfer side of 7), against a real master and real daemons.
//   - flood: a peer without the key keeps 1,520 connections going to B's port from five
//     source addresses (127.0.0.2-6): HELLOs whose payload stops half-way and AUTHs cut
//     short (256 from each address: more than the port's 1,024 slots), silent ones,
//     headers cut short, whole HELLOs never followed by AUTH; each one B closes is opened
//     again. While it lasts, puts from A onto B and gets on A of B's
//     objects all succeed, and B never holds more connections that are not open yet than
//     its cap (a quarter of the port);
//   - the log: 1,000 malformed openings (headers, HELLOs, AUTHs, wrong proofs, requests
//     before the handshake) write at most about one line a second, the last of which
//     counts them all;
//   - no key: a process of another user (uid 65534) that READs a segment's range through
//     the port of a daemon without a key gets not a byte, and the log says why; the
//     daemons' own traffic (one user) goes on.
// The same rules in process: tests/transfer_port_limits_test.cc (the connection table).
#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/auth/cluster_key.h"
#include "common/base/error_code.h"
#include "daemon/transfer/transfer_protocol.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"
#include "tests/transfer_test_util.h"

extern "C" {
#include "tests/cluster.h"
#include "tests/cluster_test_util.h"
}

using namespace mooncake;
using Clock = std::chrono::steady_clock;
using testing::AwaitLogLine;
using testing::BytesUntilClosed;
using testing::ConnectFrom;
using testing::SendRequest;

namespace {

constexpr int A = 0, B = 1;
constexpr size_t kPool = 64 << 20;
constexpr size_t kPortCap = 1024;      // mooncaked's default --transfer_max_connections
constexpr size_t kOpeningCap = 256;    // a quarter of it (TransferConnections::ForPort)
constexpr uid_t kNobody = 65534;

mc_cluster* g_keyed;    // master, A, B with the harness's key
mc_cluster* g_keyless;  // master, two daemons, no key

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Lines of path containing needle (not printed: a flood's log is long).
std::vector<std::string> LinesWith(const std::string& path, const char* needle) {
  std::vector<std::string> found;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) found.push_back(line);
  }
  return found;
}

// The number after the first occurrence of word in line, or -1.
long long NumberAfter(const std::string& line, const char* word) {
  size_t at = line.find(word);
  if (at == std::string::npos) return -1;
  return std::strtoll(line.c_str() + at + std::strlen(word), nullptr, 10);
}

// The request header of op with payload length, as bytes.
std::string Header(transfer::Op op, uint64_t length, int64_t segment = 0) {
  transfer::RequestHeader h;
  h.op = static_cast<uint16_t>(op);
  h.request_id = 7;
  h.segment_id = segment;
  h.length = length;
  char head[transfer::kRequestHeaderSize];
  transfer::EncodeRequest(h, head);
  return std::string(head, sizeof(head));
}

std::string KeyedHello(const std::string& name) {
  return transfer::EncodeHello(transfer::Hello{name, ClusterKey::NewNonce()});
}

// ---- the flood --------------------------------------------------------------------------

// One thread keeping per_source connections from each source address to port, each
// sending the opening of its kind and then nothing; one the owner closes is opened again
// (at most kReopensPerSecond in all, so that it stays a flood of slots, not of SYNs).
class Flood {
 public:
  enum Kind { kSilent, kHeaderCutShort, kHelloCutShort, kHelloNoAuth, kAuthCutShort };

  // From each source: busy openings (a HELLO or an AUTH half-sent, which used to count as
  // requests in progress, never to be taken), and a few of each other kind.
  Flood(int port, const std::vector<std::string>& sources, size_t busy, size_t others)
      : port_(port) {
    for (const std::string& source : sources) {
      for (size_t i = 0; i < busy; ++i) {
        slots_.push_back(Slot{-1, i % 2 == 0 ? kHelloCutShort : kAuthCutShort, source});
      }
      for (size_t i = 0; i < 3 * others; ++i) {
        static const Kind kOthers[] = {kSilent, kHeaderCutShort, kHelloNoAuth};
        slots_.push_back(Slot{-1, kOthers[i % 3], source});
      }
    }
  }
  size_t slots() const { return slots_.size(); }
  ~Flood() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (Slot& s : slots_) {
      if (s.fd >= 0) close(s.fd);
      s.fd = -1;
    }
  }
  // Connections made so far, and closed by the owner (not by us).
  uint64_t connects() const { return connects_.load(); }
  uint64_t closed_by_owner() const { return closed_by_owner_.load(); }
  size_t open_now() const { return open_now_.load(); }

 private:
  static constexpr int kReopensPerSecond = 2000;
  struct Slot {
    int fd;
    Kind kind;
    std::string source;
  };

  // Connects from s.source and sends its kind's opening; s.fd stays -1 when it cannot.
  void Open(Slot* s) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    int one = 1;
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
    timeval bound{0, 500 * 1000};  // a connect the owner's full backlog would hold
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof(bound));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, s->source.c_str(), &addr.sin_addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd);
      return;
    }
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd);
      return;
    }
    std::string bytes;
    const std::string hello = KeyedHello("flood:1");
    switch (s->kind) {
      case kSilent:
        break;
      case kHeaderCutShort:
        bytes = Header(transfer::Op::kHello, hello.size()).substr(0, 20);
        break;
      case kHelloCutShort:
        bytes = Header(transfer::Op::kHello, hello.size()) + hello.substr(0, 10);
        break;
      case kHelloNoAuth:
        bytes = Header(transfer::Op::kHello, hello.size()) + hello;
        break;
      case kAuthCutShort:
        bytes = Header(transfer::Op::kHello, hello.size()) + hello +
                Header(transfer::Op::kAuth, transfer::kProofBytes) + std::string(5, 'p');
        break;
    }
    if (!bytes.empty()) send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    s->fd = fd;
    connects_.fetch_add(1);
  }

  void Run() {
    double budget = 0;
    auto last = Clock::now();
    std::vector<pollfd> fds;
    std::vector<Slot*> polled;
    while (!stop_) {
      auto now = Clock::now();
      budget = std::min<double>(kReopensPerSecond,
                                budget + kReopensPerSecond *
                                             std::chrono::duration<double>(now - last).count());
      last = now;
      // Reopening from where the budget ran out last time, so that every slot gets its
      // turn (not the first source's, refused and reopened over and over).
      for (size_t n = 0; n < slots_.size() && budget >= 1; ++n) {
        Slot& s = slots_[next_];
        next_ = (next_ + 1) % slots_.size();
        if (s.fd < 0) {
          budget -= 1;
          Open(&s);
        }
      }
      fds.clear();
      polled.clear();
      for (Slot& s : slots_) {
        if (s.fd >= 0) {
          fds.push_back(pollfd{s.fd, POLLIN, 0});
          polled.push_back(&s);
        }
      }
      open_now_ = fds.size();
      if (poll(fds.data(), fds.size(), 20) <= 0) continue;
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        char buf[256];
        ssize_t r;
        while ((r = recv(fds[i].fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        }
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
          close(fds[i].fd);
          polled[i]->fd = -1;
          closed_by_owner_.fetch_add(1);
        }
      }
    }
  }

  const int port_;
  std::vector<Slot> slots_;
  size_t next_ = 0;  // the slot to reopen first (Run's thread)
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> connects_{0}, closed_by_owner_{0};
  std::atomic<size_t> open_now_{0};
};

// One app's share of the traffic through B's port: puts from A of 64 KiB values (and one
// of 4 MiB, striped over several connections) with their replica on B, each read back on
// A. Counts what failed instead of asserting (it runs on a thread of its own).
void Traffic(const char* phase, int worker, std::atomic<int>* done, std::atomic<int>* failed) {
  mooncake_store_t a = connect_app(g_keyed, A, kPool);
  placement p;
  const int target = B;
  steer(&p, g_keyed, &target, 1, 1);
  for (int k = 0; k < 16; ++k) {
    const size_t n = k == 0 ? 4 << 20 : 64 << 10;
    std::vector<char> value(n), out(n);
    const uint64_t seed = 1000 * worker + k;
    fill_pattern(value.data(), n, seed);
    char key[64];
    std::snprintf(key, sizeof(key), "%s-%d-%d", phase, worker, k);
    int rc = mooncake_store_put(a, key, value.data(), n, &p.config);
    int64_t got = rc == 0 ? mooncake_store_get_into(a, key, out.data(), n) : 0;
    if (rc != 0 || got != static_cast<int64_t>(n) || check_pattern(out.data(), n, seed) != -1) {
      std::fprintf(stderr, "%s: put %d, get %lld\n", key, rc, static_cast<long long>(got));
      failed->fetch_add(1);
    }
    done->fetch_add(1);
  }
  mooncake_store_destroy(a);
}

// Four apps on A at once, each with its own share.
void RunTraffic(const char* phase, std::atomic<int>* done, std::atomic<int>* failed) {
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) workers.emplace_back(Traffic, phase, w, done, failed);
  for (std::thread& t : workers) t.join();
}

// Attack 4. The flood holds while the traffic runs, and while A restarts (a new process:
// every connection to B opened under the flood): not one put or get fails.
void test_a_flood_of_openings_keeps_no_daemon_out(void**) {
  // The flood's 1,520 connections, and the rest.
  rlimit limit{};
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &limit), 0);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &limit), 0);
  assert_true(limit.rlim_cur >= 2048);
  const int port = mc_cluster_port_at(g_keyed, B);
  Flood flood(port, {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"}, 256, 16);
  flood.Start();
  // Held: every slot of the flood opened once (more than the port has), and then some.
  for (auto until = Clock::now() + std::chrono::seconds(60);
       flood.connects() < flood.slots() + kPortCap / 4;) {
    assert_true(Clock::now() < until);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto t0 = Clock::now();
  std::atomic<int> done{0}, failed{0};
  RunTraffic("flooded", &done, &failed);
  int status = mc_cluster_kill_daemon_at(g_keyed, A, SIGTERM);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_int_equal(mc_cluster_restart_daemon_at(g_keyed, A), 0);
  RunTraffic("flooded-after-restart", &done, &failed);
  double took = SecondsSince(t0);
  const uint64_t connects = flood.connects(), closed = flood.closed_by_owner();
  const size_t holding = flood.open_now();
  flood.Stop();
  print_message("during a flood of %llu connections to B (%llu closed by B, %zu held at the "
                "end): %d of %d puts and gets failed in %.2f s, A restarted half-way\n",
                static_cast<unsigned long long>(connects), static_cast<unsigned long long>(closed),
                holding, failed.load(), done.load(), took);
  assert_int_equal(done.load(), 128);
  assert_int_equal(failed.load(), 0);
  assert_true(closed > 0);  // B did close the flood's connections, it did not just go by
  // B's lines say how many connections it held and how many were not open yet: never more
  // than the cap on those, however many addresses they came from.
  std::vector<std::string> lines = LinesWith(mc_cluster_log_at(g_keyed, B), "of them opening");
  assert_true(!lines.empty());
  long long most_opening = 0, most_open = 0;
  for (const std::string& line : lines) {
    size_t open_at = line.rfind("; ");
    long long open = NumberAfter(line.substr(open_at), "; ");
    long long opening = NumberAfter(line.substr(open_at), "open, ");
    most_open = std::max(most_open, open);
    most_opening = std::max(most_opening, opening);
  }
  print_message("B's %zu lines about its port: at most %lld connections, %lld of them not "
                "open yet\n",
                lines.size(), most_open, most_opening);
  assert_true(most_opening >= 1 && most_opening <= static_cast<long long>(kOpeningCap));
  assert_true(most_open <= static_cast<long long>(kPortCap));
  assert_int_equal(mc_cluster_daemon_alive(g_keyed, B), 1);
}

// ---- the log ----------------------------------------------------------------------------

// One malformed opening of kind k (of 8) on a connection of its own, read until A closes
// it.
void MalformedOpening(int port, int k, const ClusterKey& other) {
  int fd = ConnectFrom("", "127.0.0.1", port);
  assert_true(fd >= 0);
  const std::string hello = KeyedHello("noise:1");
  std::string bytes;
  switch (k % 8) {
    case 0:  // not a header at all
      bytes = std::string(transfer::kRequestHeaderSize, 'x');
      break;
    case 1:  // a HELLO with a field it does not use set
      bytes = Header(transfer::Op::kHello, hello.size(), 5) + hello;
      break;
    case 2:  // a HELLO longer than any
      bytes = Header(transfer::Op::kHello, 1 << 20);
      break;
    case 3:  // a HELLO that does not decode
      bytes = Header(transfer::Op::kHello, 9) + std::string("\x07\x00\x09\x00zzzzz", 9);
      break;
    case 4: {  // a HELLO without a nonce, to a daemon with a key
      std::string payload = transfer::EncodeHello(transfer::Hello{"noise:1", ""});
      bytes = Header(transfer::Op::kHello, payload.size()) + payload;
      break;
    }
    case 5:  // AUTH with no HELLO before
      bytes = Header(transfer::Op::kAuth, transfer::kProofBytes) +
              std::string(transfer::kProofBytes, 'p');
      break;
    case 6: {  // a proof of another key
      std::string client_nonce = ClusterKey::NewNonce(), server_nonce;
      std::string payload = transfer::EncodeHello(transfer::Hello{"noise:1", client_nonce});
      assert_true(SendRequest(fd, transfer::Op::kHello, 0, 0, payload.size(), payload));
      assert_int_equal(testing::ReplyCode(fd, &server_nonce), 0);
      bytes = Header(transfer::Op::kAuth, transfer::kProofBytes) +
              other.Prove(ClusterKey::Role::kClient, transfer::kAuthContext, client_nonce,
                          server_nonce);
      break;
    }
    case 7:  // a READ before the handshake
      bytes = Header(transfer::Op::kRead, 64, 1);
      break;
  }
  send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  BytesUntilClosed(fd);
  close(fd);
}

// Attack 5. 1,000 malformed openings: a line a second at most, the last one counting.
void test_malformed_openings_are_logged_a_line_a_second(void**) {
  const std::string log = mc_cluster_log_at(g_keyed, A);
  const int port = mc_cluster_port_at(g_keyed, A);
  const ClusterKey other = ClusterKey::FromKeys({testing::RandomClusterKey()});
  const size_t before = LinesWith(log, "transfer_server.cc").size();
  auto t0 = Clock::now();
  for (int k = 0; k < 1000; ++k) MalformedOpening(port, k, other);
  double took = SecondsSince(t0);
  // A second later the next one is logged for sure, with the count of all before it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  MalformedOpening(port, 0, other);
  std::vector<std::string> lines;
  for (auto until = Clock::now() + std::chrono::seconds(10);;) {
    lines = LinesWith(log, "transfer_server.cc");
    if (lines.size() > before && NumberAfter(lines.back(), "so far ") >= 1001) break;
    assert_true(Clock::now() < until);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const size_t written = lines.size() - before;
  print_message("1,001 malformed openings in %.2f s wrote %zu lines; the last:\n%s\n", took + 1.1,
                written, lines.back().c_str());
  // One a second, and one at each end of the span.
  assert_true(written >= 2 && written <= static_cast<size_t>(took + 1.1) + 3);
  assert_non_null(std::strstr(lines.back().c_str(), "malformed header"));
  assert_true(NumberAfter(lines.back(), "so far ") >= 1001);
  // Those not logged since the line before, counted in it.
  assert_true(NumberAfter(lines.back().substr(lines.back().rfind(" -- ")), " -- ") >= 1);
  // And A still serves its peers.
  mooncake_store_t a = connect_app(g_keyed, A, kPool), b = connect_app(g_keyed, B, kPool);
  assert_round_trip(g_keyed, b, a, A, "after-the-noise", 256 << 10, 77, 0);
  mooncake_store_destroy(a);
  mooncake_store_destroy(b);
}

// ---- no key -----------------------------------------------------------------------------

// Attack 7, the transfer port: without a key, a process of another user on this host
// connects to daemon 1's port and READs the first 4 KiB of its segment. It is closed at
// accept and gets not a byte; the log names its uid. The daemons (one user) still talk.
void test_without_a_key_another_user_gets_nothing(void**) {
  if (geteuid() != 0) {
    print_message("skipped: not root, so no process of another user can be made here "
                  "(peer_owner_test covers the rule)\n");
    skip();
  }
  mc_cluster_segment seg;
  assert_int_equal(mc_cluster_segment_at(g_keyless, 1, &seg), 0);
  const int port = mc_cluster_port_at(g_keyless, 1);
  const std::string read = Header(transfer::Op::kRead, 4096, seg.id);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the next refusal is logged
  // The child makes system calls only (the parent has threads): its exit status says
  // what it saw. 0: closed without a byte; 1: bytes came; 2: it could not connect; 3: it
  // could not become uid 65534.
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(3);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) _exit(2);
    timeval bound{10, 0};  // a daemon that neither answers nor closes: counted as bytes
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
    send(fd, read.data(), read.size(), MSG_NOSIGNAL);
    char buf[4096];
    ssize_t r = recv(fd, buf, sizeof(buf), 0);
    _exit(r == 0 || (r < 0 && errno == ECONNRESET) ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_true(AwaitLogLine(mc_cluster_log_at(g_keyless, 1), "closed at accept",
                           "belongs to uid 65534"));
  // This process (root) is served, and so are the daemons, both ways.
  int fd = ConnectFrom("", "127.0.0.1", port);
  assert_true(fd >= 0);
  assert_true(SendRequest(fd, transfer::Op::kRead, seg.id, 0, 64));
  std::string bytes;
  assert_int_equal(testing::ReplyCode(fd, &bytes), 0);
  assert_int_equal(bytes.size(), 64);
  close(fd);
  mooncake_store_t s0 = connect_app(g_keyless, 0, kPool), s1 = connect_app(g_keyless, 1, kPool);
  assert_round_trip(g_keyless, s0, s1, 1, "keyless-0-to-1", 256 << 10, 71, 0);
  assert_round_trip(g_keyless, s1, s0, 0, "keyless-1-to-0", 256 << 10, 72, 0);
  mooncake_store_destroy(s0);
  mooncake_store_destroy(s1);
}

// ---- set-up -----------------------------------------------------------------------------

int StartKeyed(void**) {
  mc_cluster_options options = {2, 128 << 20, 20000, nullptr, nullptr};
  g_keyed = mc_cluster_start_with(&options);
  return g_keyed == nullptr ? -1 : 0;
}

int StartKeyless(void**) {
  static const char* const flags[] = {"--cluster_key_file", "", nullptr};
  mc_cluster_options options = {2, 16 << 20, 20000, flags, flags};
  g_keyless = mc_cluster_start_with(&options);
  return g_keyless == nullptr ? -1 : 0;
}

int StopKeyed(void**) {
  mc_cluster_stop(g_keyed);
  return 0;
}

int StopKeyless(void**) {
  mc_cluster_stop(g_keyless);
  return 0;
}

}  // namespace

int main() {
  // Line-buffered even into a pipe: a run that dies still leaves what it had printed.
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const struct CMUnitTest keyed[] = {
      cmocka_unit_test(test_a_flood_of_openings_keeps_no_daemon_out),
      cmocka_unit_test(test_malformed_openings_are_logged_a_line_a_second),
  };
  const struct CMUnitTest keyless[] = {
      cmocka_unit_test(test_without_a_key_another_user_gets_nothing),
  };
  int failed = cmocka_run_group_tests_name("keyed cluster", keyed, StartKeyed, StopKeyed);
  failed += cmocka_run_group_tests_name("keyless cluster", keyless, StartKeyless, StopKeyless);
  return failed;
}
