// Issue 12, attack 3 (any local user who can open a daemon's socket reads, removes or
// REMOVE_ALLs everyone's keys), against a real master and three real daemons whose sockets
// have mode 0666, so that the filesystem lets everyone through and only the daemon's uid
// check (daemon/base/local_access.h) stands in the way:
//   0: the default rule (root, the daemon's uid, members of the socket's group: root's);
//   1: --allowed_uids nobody;
//   2: --allowed_gids 65534 (nogroup).
// The tests run as root; each other identity is this binary run again ("--peer") in a child
// that dropped to it (setgroups, setgid, setuid) before exec, so that it is a fresh process
// of that uid, talking through the C ABI and, for what the C ABI would never send, raw
// protocol frames. What each test asserts:
//  - uid 65534 on daemon 0: connect and setup get -1401; HELLO with a pool, pipelined with
//    REMOVE_ALL, REMOVE and REMOVE_BY_REGEX in one write, gets one answer, -1401 to HELLO,
//    then the end of the connection; so does a first frame that is REMOVE_ALL itself. The
//    400 objects root put beforehand are all there afterwards, byte for byte, and the
//    master counts as many objects as before. The log names the refused pid, uid and gid.
//  - daemon 1 admits uid 65534 and serves it (put, get, its bytes seen by root too), logging
//    the admission with its pid, uid and gid; daemon 0 still refuses it.
//  - daemon 2 admits gid 65534 as primary and as a supplementary group, refuses uid 65534
//    whose groups lack it, and still admits root, which is not in the group.
//  - daemon 0 admits uid 65534 when root's group is its primary or a supplementary group.
//  - a flood of refused connections writes a bounded number of log lines, the next line
//    counts the ones left out, and daemon 0 still serves root.
//  - a daemon given a group name that does not resolve exits at start (status 2), naming
//    the flag.
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/base/error_code.h"
#include "common/uds/uds_ops.h"
#include "common/uds/uds_protocol.h"
#include "include/mooncake_store.h"
#include "tests/cluster.h"
#include "tests/cmocka_cpp.h"

namespace uds = mooncake::uds;
using mooncake::ErrorCode;
using mooncake::ToInt;

namespace {

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;
constexpr uint64_t kPoolBytes = 4ull << 20;
constexpr int kVictimObjects = 400;
constexpr size_t kValueBytes = 2048;
const int kDenied = ToInt(ErrorCode::PERMISSION_DENIED);

mc_cluster* g_cluster = nullptr;
std::string* g_self = nullptr;  // this binary, for the children to exec

// ---------------------------------------------------------------------------------------
// The peer: this binary run again as another identity. It prints "name value" lines.

void Print(const char* name, long long value) { std::printf("%s %lld\n", name, value); }

int UnixConnect(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Reads every frame until the daemon closes (or 5 s pass): their [id, code] pairs, and in
// *closed whether the end came from the daemon.
std::vector<std::pair<uint64_t, int64_t>> ReadUntilClosed(int fd, bool* closed) {
  std::vector<std::pair<uint64_t, int64_t>> replies;
  uds::FrameReader reader;
  *closed = false;
  for (;;) {
    const char* payload = nullptr;
    size_t length = 0;
    bool oversized = false;
    while (reader.Next(&payload, &length, &oversized)) {
      uds::Message m;
      if (uds::ParseMessage(payload, length, &m)) replies.emplace_back(m.id, m.head);
    }
    uds::FrameReader::Status status = reader.ReadFrom(fd);
    if (status == uds::FrameReader::Status::kClosed) {
      *closed = true;
      return replies;
    }
    if (status != uds::FrameReader::Status::kOk) return replies;
  }
}

std::string HelloFrame(uint64_t id, uint64_t pool_size) {
  uds::HelloArgs hello;
  hello.abi_version = MOONCAKE_STORE_ABI_VERSION;
  hello.pool_size = pool_size;
  hello.pid = static_cast<uint64_t>(getpid());
  uds::RequestFrame frame(id, uds::Op::kHello, hello);
  return std::string(frame.data(), frame.size());
}

std::string RemoveAllFrame(uint64_t id) {
  uds::RemoveAllArgs args;
  args.force = uds::Flag{true};
  uds::RequestFrame frame(id, uds::Op::kRemoveAll, args);
  return std::string(frame.data(), frame.size());
}

// What a refused uid tries on socket: the C ABI, then frames no library would send.
int PeerRefused(const std::string& socket) {
  mooncake_store_t store = mooncake_store_create();
  Print("connect", mooncake_store_connect(store, socket.c_str(), kPoolBytes));
  std::vector<char> value(kValueBytes, 'x');
  Print("put", mooncake_store_put(store, "victim-000", value.data(), value.size(), nullptr));
  Print("get", mooncake_store_get_into(store, "victim-000", value.data(), value.size()));
  Print("remove_all", mooncake_store_remove_all(store, 1));
  mooncake_store_destroy(store);
  setenv("MOONCAKE_SOCKET", socket.c_str(), 1);
  store = mooncake_store_create();
  Print("setup", mooncake_store_setup(store, "localhost", "", 0, kPoolBytes, "tcp", "", ""));
  mooncake_store_destroy(store);

  // HELLO with a pool, and what would wipe the store right behind it, in one write.
  int pool = memfd_create("peer-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (pool < 0 || ftruncate(pool, static_cast<off_t>(kPoolBytes)) != 0 ||
      fcntl(pool, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    return 3;
  }
  uds::RemoveArgs remove;
  remove.key = "victim-001";
  remove.force = uds::Flag{true};
  uds::RemoveByRegexArgs regex;
  regex.pattern = ".*";
  regex.force = uds::Flag{true};
  uds::RequestFrame remove_frame(3, uds::Op::kRemove, remove);
  uds::RequestFrame regex_frame(4, uds::Op::kRemoveByRegex, regex);
  std::string burst = HelloFrame(1, kPoolBytes) + RemoveAllFrame(2) +
                      std::string(remove_frame.data(), remove_frame.size()) +
                      std::string(regex_frame.data(), regex_frame.size());
  int fd = UnixConnect(socket);
  if (fd < 0 || !uds::SendFrame(fd, burst.data(), burst.size(), pool)) return 4;
  bool closed = false;
  auto replies = ReadUntilClosed(fd, &closed);
  close(fd);
  close(pool);
  Print("burst_replies", static_cast<long long>(replies.size()));
  Print("burst_first_id", replies.empty() ? -1 : static_cast<long long>(replies[0].first));
  Print("burst_first_code", replies.empty() ? 0 : replies[0].second);
  Print("burst_closed", closed);

  // No HELLO at all: REMOVE_ALL as the first frame.
  fd = UnixConnect(socket);
  std::string first = RemoveAllFrame(7);
  if (fd < 0 || !uds::SendFrame(fd, first.data(), first.size())) return 5;
  replies = ReadUntilClosed(fd, &closed);
  close(fd);
  Print("bare_replies", static_cast<long long>(replies.size()));
  Print("bare_first_code", replies.empty() ? 0 : replies[0].second);
  Print("bare_closed", closed);
  return 0;
}

// An admitted uid: connect, put key, read it back.
int PeerServed(const std::string& socket, const std::string& key) {
  mooncake_store_t store = mooncake_store_create();
  int rc = mooncake_store_connect(store, socket.c_str(), kPoolBytes);
  Print("connect", rc);
  if (rc == 0) {
    std::vector<char> value(kValueBytes), back(kValueBytes);
    for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 13 + key.size());
    Print("put", mooncake_store_put(store, key.c_str(), value.data(), value.size(), nullptr));
    Print("get", mooncake_store_get_into(store, key.c_str(), back.data(), back.size()));
    Print("same", value == back);
  }
  mooncake_store_destroy(store);
  return 0;
}

// count raw HELLOs, one connection each: how many were answered -1401.
int PeerFlood(const std::string& socket, int count) {
  int denied = 0;
  for (int i = 0; i < count; ++i) {
    int fd = UnixConnect(socket);
    std::string hello = HelloFrame(1, 0);
    if (fd >= 0 && uds::SendFrame(fd, hello.data(), hello.size())) {
      bool closed = false;
      auto replies = ReadUntilClosed(fd, &closed);
      if (replies.size() == 1 && replies[0].second == kDenied && closed) ++denied;
    }
    if (fd >= 0) close(fd);
  }
  Print("denied", denied);
  return 0;
}

int PeerMain(int argc, char** argv) {
  std::string mode = argc > 2 ? argv[2] : "";
  std::string socket = argc > 3 ? argv[3] : "";
  Print("uid", geteuid());
  int rc = 2;
  if (mode == "refused") rc = PeerRefused(socket);
  if (mode == "served" && argc > 4) rc = PeerServed(socket, argv[4]);
  if (mode == "flood" && argc > 4) rc = PeerFlood(socket, std::atoi(argv[4]));
  std::fflush(stdout);
  return rc;
}

// ---------------------------------------------------------------------------------------
// The parent's side.

struct Identity {
  uid_t uid;
  gid_t gid;
  std::vector<gid_t> groups;  // supplementary
};

struct PeerRun {
  pid_t pid = -1;
  std::map<std::string, long long> out;
};

// Runs this binary as who with "--peer" args; asserts it ran to the end.
PeerRun RunPeer(const Identity& who, const std::vector<std::string>& args) {
  int pipe_fds[2];
  assert_int_equal(pipe2(pipe_fds, O_CLOEXEC), 0);
  std::vector<std::string> argv_text = {*g_self, "--peer"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_text) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    // Groups first, while still root; the uid last (it gives up the right to the rest).
    if (setgroups(who.groups.size(), who.groups.data()) != 0 || setgid(who.gid) != 0 ||
        setuid(who.uid) != 0) {
      _exit(120);
    }
    execv(argv[0], argv.data());
    _exit(121);
  }
  close(pipe_fds[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail_msg("peer %s exited with status %d; its output:\n%s", args[0].c_str(), status,
             text.c_str());
  }
  PeerRun run;
  run.pid = pid;
  std::istringstream lines(text);
  std::string name;
  long long value;
  while (lines >> name >> value) run.out[name] = value;
  assert_int_equal(run.out["uid"], who.uid);
  return run;
}

// Waits (10 s at most) for a line of daemon i's log holding every one of needles.
bool LogHasLine(int i, const std::vector<std::string>& needles) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    std::ifstream log(mc_cluster_log_at(g_cluster, i));
    std::string line;
    while (std::getline(log, line)) {
      bool all = true;
      for (const std::string& n : needles) all = all && line.find(n) != std::string::npos;
      if (all) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

size_t CountLogLines(int i, const std::string& needle) {
  std::ifstream log(mc_cluster_log_at(g_cluster, i));
  std::string line;
  size_t count = 0;
  while (std::getline(log, line)) count += line.find(needle) != std::string::npos;
  return count;
}

std::string PeerText(pid_t pid, uid_t uid, gid_t gid) {
  return "pid " + std::to_string(pid) + " uid " + std::to_string(uid) + " gid " +
         std::to_string(gid);
}

mooncake_store_t RootClient(int i) {
  mooncake_store_t store = mooncake_store_create();
  assert_non_null(store);
  assert_int_equal(
      mooncake_store_connect(store, mc_cluster_socket_at(g_cluster, i), kPoolBytes), 0);
  return store;
}

std::string VictimKey(int i) {
  char key[32];
  std::snprintf(key, sizeof(key), "victim-%03d", i);
  return key;
}

void VictimValue(int i, char* out) {
  for (size_t b = 0; b < kValueBytes; ++b) out[b] = static_cast<char>(i * 7 + b * 31 + (b >> 5));
}

// Every victim object is there with its own bytes.
void AssertVictimsIntact(mooncake_store_t store) {
  std::vector<char> want(kValueBytes), got(kValueBytes);
  for (int i = 0; i < kVictimObjects; ++i) {
    VictimValue(i, want.data());
    int64_t n = mooncake_store_get_into(store, VictimKey(i).c_str(), got.data(), got.size());
    if (n != static_cast<int64_t>(kValueBytes) || want != got) {
      fail_msg("%s: get returned %lld%s", VictimKey(i).c_str(), static_cast<long long>(n),
               n > 0 ? " with other bytes" : "");
    }
  }
}

int64_t MasterObjects() {
  mc_cluster_master_stats stats;
  assert_int_equal(mc_cluster_master_stats_get(g_cluster, &stats), 0);
  return stats.objects;
}

// ---------------------------------------------------------------------------------------

void test_refused_uid_cannot_touch_others_objects(void**) {
  mooncake_store_t root = RootClient(0);
  std::vector<char> value(kValueBytes);
  for (int i = 0; i < kVictimObjects; ++i) {
    VictimValue(i, value.data());
    assert_int_equal(
        mooncake_store_put(root, VictimKey(i).c_str(), value.data(), value.size(), nullptr), 0);
  }
  int64_t objects = MasterObjects();
  assert_true(objects >= kVictimObjects);

  PeerRun peer = RunPeer({kNobody, kNogroup, {}},
                         {"refused", mc_cluster_socket_at(g_cluster, 0)});
  assert_int_equal(peer.out["connect"], kDenied);
  assert_int_equal(peer.out["setup"], kDenied);
  assert_true(peer.out["put"] < 0);
  assert_true(peer.out["get"] < 0);
  assert_true(peer.out["remove_all"] < 0);
  // One answer, to HELLO, then the end: nothing behind it was served.
  assert_int_equal(peer.out["burst_replies"], 1);
  assert_int_equal(peer.out["burst_first_id"], 1);
  assert_int_equal(peer.out["burst_first_code"], kDenied);
  assert_int_equal(peer.out["burst_closed"], 1);
  assert_int_equal(peer.out["bare_replies"], 1);
  assert_int_equal(peer.out["bare_first_code"], kDenied);
  assert_int_equal(peer.out["bare_closed"], 1);

  assert_int_equal(MasterObjects(), objects);
  AssertVictimsIntact(root);
  assert_true(LogHasLine(0, {"refused", PeerText(peer.pid, kNobody, kNogroup)}));
  std::string message = mooncake_store_strerror(kDenied);
  assert_true(message.find("uid") != std::string::npos);
  mooncake_store_destroy(root);
}

void test_allowed_uid_is_served(void**) {
  PeerRun peer = RunPeer({kNobody, kNogroup, {}},
                         {"served", mc_cluster_socket_at(g_cluster, 1), "nobody-own"});
  assert_int_equal(peer.out["connect"], 0);
  assert_int_equal(peer.out["put"], 0);
  assert_int_equal(peer.out["get"], static_cast<long long>(kValueBytes));
  assert_int_equal(peer.out["same"], 1);
  assert_true(LogHasLine(1, {"admitted (--allowed_uids)", PeerText(peer.pid, kNobody, kNogroup)}));

  mooncake_store_t root = RootClient(1);
  assert_int_equal(mooncake_store_get_size(root, "nobody-own"), static_cast<int64_t>(kValueBytes));
  assert_int_equal(mooncake_store_remove(root, "nobody-own", 1), 0);
  mooncake_store_destroy(root);
  assert_true(LogHasLine(1, {"admitted (root)", " uid 0 gid 0"}));

  // The rule is the daemon's: daemon 0 still refuses this uid.
  peer = RunPeer({kNobody, kNogroup, {}}, {"served", mc_cluster_socket_at(g_cluster, 0), "x"});
  assert_int_equal(peer.out["connect"], kDenied);
}

void test_allowed_group_is_served(void**) {
  const char* socket = mc_cluster_socket_at(g_cluster, 2);
  // Primary group.
  PeerRun peer = RunPeer({kNobody, kNogroup, {}}, {"served", socket, "by-primary-group"});
  assert_int_equal(peer.out["connect"], 0);
  assert_int_equal(peer.out["same"], 1);
  assert_true(LogHasLine(2, {"admitted (a member of an allowed group)",
                             PeerText(peer.pid, kNobody, kNogroup)}));
  // Supplementary group: gid 1 (daemon), in group 65534 through setgroups.
  peer = RunPeer({kNobody, 1, {kNogroup}}, {"served", socket, "by-supplementary-group"});
  assert_int_equal(peer.out["connect"], 0);
  assert_int_equal(peer.out["same"], 1);
  // Neither: refused.
  peer = RunPeer({kNobody, 1, {}}, {"served", socket, "no-group"});
  assert_int_equal(peer.out["connect"], kDenied);
  assert_true(LogHasLine(2, {"refused", PeerText(peer.pid, kNobody, 1)}));
  // Root is not in group 65534, and is admitted all the same.
  mooncake_store_t root = RootClient(2);
  assert_int_equal(mooncake_store_is_exist(root, "by-supplementary-group"), 1);
  assert_int_equal(mooncake_store_is_exist(root, "no-group"), 0);
  mooncake_store_remove(root, "by-primary-group", 1);
  mooncake_store_remove(root, "by-supplementary-group", 1);
  mooncake_store_destroy(root);
}

void test_socket_group_members_admitted_by_default(void**) {
  const char* socket = mc_cluster_socket_at(g_cluster, 0);
  struct stat st;
  assert_int_equal(stat(socket, &st), 0);
  gid_t group = st.st_gid;  // the daemon's: root's
  PeerRun peer = RunPeer({kNobody, group, {}}, {"served", socket, "socket-group-primary"});
  assert_int_equal(peer.out["connect"], 0);
  assert_int_equal(peer.out["same"], 1);
  peer = RunPeer({kNobody, kNogroup, {group}}, {"served", socket, "socket-group-supplementary"});
  assert_int_equal(peer.out["connect"], 0);
  assert_int_equal(peer.out["same"], 1);
  mooncake_store_t root = RootClient(0);
  mooncake_store_remove(root, "socket-group-primary", 1);
  mooncake_store_remove(root, "socket-group-supplementary", 1);
  mooncake_store_destroy(root);
}

void test_refusal_flood_is_logged_at_a_bounded_rate(void**) {
  const std::string line = "is not admitted";
  size_t before = CountLogLines(0, line);
  size_t all_before = CountLogLines(0, "");
  auto start = std::chrono::steady_clock::now();
  constexpr int kFlood = 300;
  PeerRun peer = RunPeer({kNobody, kNogroup, {}},
                         {"flood", mc_cluster_socket_at(g_cluster, 0), std::to_string(kFlood)});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  assert_int_equal(peer.out["denied"], kFlood);
  // At most a burst of 5 lines (fewer when earlier tests' refusals spent them), then one a
  // second (daemon/base/local_access.h); and no other line per
  // connection (a close, a HELLO deadline) slips past the throttle.
  size_t logged = CountLogLines(0, line) - before;
  size_t bound = 5 + static_cast<size_t>(seconds) + 2;
  if (logged > bound) fail_msg("%zu refusal lines in %.1f s", logged, seconds);
  size_t all_logged = CountLogLines(0, "") - all_before;
  if (all_logged > bound + 20) fail_msg("%zu log lines for %d refusals", all_logged, kFlood);

  // The next refusal's line, once the throttle has refilled, counts those left out.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  peer = RunPeer({kNobody, kNogroup, {}}, {"flood", mc_cluster_socket_at(g_cluster, 0), "1"});
  assert_int_equal(peer.out["denied"], 1);
  assert_true(LogHasLine(0, {PeerText(peer.pid, kNobody, kNogroup), "more refused since"}));

  mooncake_store_t root = RootClient(0);
  AssertVictimsIntact(root);
  mooncake_store_destroy(root);
}

void test_unknown_name_stops_the_daemon_at_start(void**) {
  const char* bad[] = {"--allowed_gids", "nogroup,no-such-group-mc12", nullptr};
  int i = mc_cluster_add_daemon(g_cluster, bad);
  assert_true(i >= 0);
  int status = mc_cluster_wait_daemon_at(g_cluster, i, 10000);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 2);
  assert_true(LogHasLine(i, {"--allowed_gids: group no-such-group-mc12 is unknown"}));
}

int GroupSetup(void**) {
  const char* flags[] = {"--socket_mode", "0666", nullptr};
  mc_cluster_options options{};
  options.daemons = 1;
  options.segment_size = 64ull << 20;
  options.daemon_flags = flags;
  g_cluster = mc_cluster_start_with(&options);
  if (g_cluster == nullptr) return -1;
  // Other uids must be able to reach the sockets: the directory is mkdtemp's 0700.
  if (chmod(mc_cluster_dir(g_cluster), 0755) != 0) return -1;
  const char* by_uid[] = {"--allowed_uids", "nobody", nullptr};
  const char* by_gid[] = {"--allowed_gids", "65534", nullptr};
  if (mc_cluster_add_daemon(g_cluster, by_uid) != 1 ||
      mc_cluster_await_daemon_at(g_cluster, 1, 20000) != 0 ||
      mc_cluster_add_daemon(g_cluster, by_gid) != 2 ||
      mc_cluster_await_daemon_at(g_cluster, 2, 20000) != 0) {
    return -1;
  }
  return 0;
}

int GroupTeardown(void**) {
  mc_cluster_stop(g_cluster);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--peer") == 0) return PeerMain(argc, argv);
  if (geteuid() != 0) {
    std::printf("local_access_test needs root (it runs clients as other uids); skipped\n");
    return 77;  // CTest's SKIP_RETURN_CODE
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return 1;
  g_self = new std::string(self, static_cast<size_t>(n));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refused_uid_cannot_touch_others_objects),
      cmocka_unit_test(test_allowed_uid_is_served),
      cmocka_unit_test(test_allowed_group_is_served),
      cmocka_unit_test(test_socket_group_members_admitted_by_default),
      cmocka_unit_test(test_refusal_flood_is_logged_at_a_bounded_rate),
      cmocka_unit_test(test_unknown_name_stops_the_daemon_at_start),
  };
  return cmocka_run_group_tests(tests, GroupSetup, GroupTeardown);
}
