// Issue 32, attack 8 (the socket's name): a socket path in a directory others may write
// can be taken first by an impostor, which then receives the clients' pools and values.
// Real processes: a master and a daemon (tests/harness/cluster.h), daemons started with bad
// socket directories, and impostors forked from this test that drop to uid 65534.
//  - mooncaked refuses to start (exit status 2, a line naming --socket, the directory and
//    the fix) when its socket's directory may be written by others, sticky or not, or by
//    a group other than its own; a directory its own group may write is fine, and it
//    serves there.
//  - a client (libmc, under every binding) refuses, with -1401 and an errmsg naming the
//    path and why, a socket an impostor bound in a directory anyone may write; one whose
//    listener is not the socket file's owner; one owned by another user in a directory of
//    root's; and a symbolic link, in a directory anyone may write, to the real daemon's
//    socket. In each case the impostor accepts the connection and sees it end without a
//    byte or a descriptor: no HELLO, no pool. Through a link in a directory of ours the
//    same client reaches the daemon.
#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "include/mooncake_store.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/process_harness.h"
extern "C" {
#include "tests/harness/cluster.h"
}

namespace {

namespace harness = mooncake::testing;

constexpr uid_t kNobody = 65534;
constexpr uint64_t kMiB = 1 << 20;
constexpr int kExitWithinMs = 60000;  // a guard against a hang: a refused start is quick
constexpr int kDenied = -1401;

mc_cluster* g_c = nullptr;
std::string g_dir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string MakeDir(const std::string& name, mode_t mode, gid_t group = static_cast<gid_t>(-1)) {
  const std::string path = g_dir + "/" + name;
  assert_int_equal(mkdir(path.c_str(), 0700), 0);
  if (group != static_cast<gid_t>(-1)) assert_int_equal(chown(path.c_str(), 0, group), 0);
  assert_int_equal(chmod(path.c_str(), mode), 0);
  return path;
}

// ---------------------------------------------------------------------------------------
// The daemon's side.

void AssertDaemonRefuses(const std::string& dir, const char* needle) {
  const std::string socket = dir + "/mooncaked.sock";
  const std::string log = g_dir + "/refused-daemon.log";
  unlink(log.c_str());
  harness::ChildProcess daemon;
  assert_true(harness::SpawnDaemon(&daemon, mc_cluster_master_port(g_c), socket, log, {}));
  const int status = daemon.Wait(kExitWithinMs);
  const std::string text = ReadAll(log);
  std::printf("--socket %s: status %d: %s", socket.c_str(), status, text.c_str());
  assert_true(status != -1 && WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 2);
  assert_non_null(strstr(text.c_str(), ("--socket " + socket).c_str()));
  assert_non_null(strstr(text.c_str(), needle));
  struct stat st;
  assert_int_equal(lstat(socket.c_str(), &st), -1);  // nothing bound
}

void test_the_daemon_refuses_a_socket_directory_others_may_write(void**) {
  if (geteuid() != 0) {
    std::printf("skipped: a directory of another group needs root\n");
    skip();
  }
  AssertDaemonRefuses(MakeDir("open", 0777), "may be written by anyone (mode 0777)");
  AssertDaemonRefuses(MakeDir("sticky", 01777), "may be written by anyone (mode 1777, sticky)");
  AssertDaemonRefuses(MakeDir("nogroup", 0770, kNobody),
                      "may be written by the group gid 65534");
  // Its own group may write it (the daemon runs as root here, group 0): it serves.
  const std::string own = MakeDir("own-group", 0770, getegid());
  harness::ChildProcess daemon;
  const std::string socket = own + "/mooncaked.sock";
  assert_true(harness::StartDaemon(&daemon, mc_cluster_master_port(g_c), socket,
                                   g_dir + "/own-group-daemon.log", {}));
  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(s, socket.c_str(), 1 * kMiB), 0);
  mooncake_store_destroy(s);
  assert_int_equal(WEXITSTATUS(daemon.Stop(SIGTERM, kExitWithinMs)), 0);
}

// ---------------------------------------------------------------------------------------
// The client's side: impostors.

enum class Impostor {
  kNobodyInOpenDir,    // uid 65534 binds and listens in a directory anyone may write
  kListensAsNobody,    // root binds (the file is root's), uid 65534 listens
  kSocketOfNobody,     // root binds and gives the file to 65534, which listens
};

// What an impostor saw of the one connection it accepted.
struct Observed {
  int64_t accepted = 0;
  int64_t bytes = 0;
  int64_t descriptors = 0;
};

// Forks an impostor on path; it writes one byte to *report once it listens, then an
// Observed when the connection it accepted has ended.
pid_t StartImpostor(Impostor kind, const std::string& path, int* report) {
  int fds[2];
  assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
  const pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid > 0) {
    close(fds[1]);
    *report = fds[0];
    char ready = 0;
    assert_int_equal(read(fds[0], &ready, 1), 1);
    return pid;
  }
  close(fds[0]);
  auto drop = [] {
    if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(3);
  };
  if (kind == Impostor::kNobodyInOpenDir) drop();
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) _exit(4);
  chmod(path.c_str(), 0666);
  if (kind == Impostor::kSocketOfNobody && chown(path.c_str(), kNobody, kNobody) != 0) _exit(5);
  if (kind != Impostor::kNobodyInOpenDir) drop();
  if (listen(listener, 4) != 0) _exit(6);  // the kernel records the listener's uid now
  if (write(fds[1], "R", 1) != 1) _exit(7);
  Observed seen;
  const int conn = accept(listener, nullptr, nullptr);
  if (conn >= 0) {
    seen.accepted = 1;
    for (;;) {
      char data[4096];
      alignas(cmsghdr) char control[CMSG_SPACE(16 * sizeof(int))];
      iovec iov{data, sizeof(data)};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      const ssize_t n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
      if (n <= 0) break;  // the client closed: what it sent is all it will send
      seen.bytes += n;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
          seen.descriptors += (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        }
      }
    }
  }
  if (write(fds[1], &seen, sizeof(seen)) != sizeof(seen)) _exit(8);
  _exit(0);
}

// The client connects to path (an impostor's) and is refused with -1401 before sending
// anything; its errmsg names path and holds needle.
void AssertClientRefuses(Impostor kind, const std::string& socket_path,
                         const std::string& client_path, const char* needle) {
  int report = -1;
  const pid_t impostor = StartImpostor(kind, socket_path, &report);
  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(s, client_path.c_str(), 4 * kMiB), kDenied);
  const std::string why = mooncake_store_errmsg(s);
  std::printf("refused: %s\n", why.c_str());
  assert_non_null(strstr(why.c_str(), client_path.c_str()));
  assert_non_null(strstr(why.c_str(), needle));
  mooncake_store_destroy(s);
  Observed seen;
  assert_int_equal(read(report, &seen, sizeof(seen)), sizeof(seen));  // the connection ended
  close(report);
  int status = 0;
  assert_int_equal(waitpid(impostor, &status, 0), impostor);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(seen.accepted, 1);
  assert_int_equal(seen.bytes, 0);        // no HELLO
  assert_int_equal(seen.descriptors, 0);  // no pool
  unlink(socket_path.c_str());
}

void test_the_client_refuses_impostors(void**) {
  if (geteuid() != 0) {
    std::printf("skipped: the impostors setuid to 65534, which needs root\n");
    skip();
  }
  const std::string open = MakeDir("impostor-open", 0777);
  AssertClientRefuses(Impostor::kNobodyInOpenDir, open + "/mooncaked.sock",
                      open + "/mooncaked.sock", "may be written by anyone");
  const std::string roots = MakeDir("impostor-roots", 0755);
  AssertClientRefuses(Impostor::kListensAsNobody, roots + "/mooncaked.sock",
                      roots + "/mooncaked.sock", "is not the socket file's owner");
  AssertClientRefuses(Impostor::kSocketOfNobody, roots + "/mooncaked.sock",
                      roots + "/mooncaked.sock", "owned by uid 65534");
  // A symbolic link in a directory anyone may write, to a socket in a safe one.
  const std::string link = open + "/link.sock";
  assert_int_equal(symlink((roots + "/mooncaked.sock").c_str(), link.c_str()), 0);
  AssertClientRefuses(Impostor::kListensAsNobody, roots + "/mooncaked.sock", link,
                      "may be written by anyone");
}

// The real daemon through links: refused from a directory anyone may write, served from
// one of ours.
void test_the_client_follows_links_only_from_safe_directories(void**) {
  const std::string daemon_socket = mc_cluster_socket_at(g_c, 0);
  const std::string open = MakeDir("links-open", 0777);
  assert_int_equal(symlink(daemon_socket.c_str(), (open + "/d.sock").c_str()), 0);
  mooncake_store_t s = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(s, (open + "/d.sock").c_str(), 1 * kMiB), kDenied);
  assert_non_null(strstr(mooncake_store_errmsg(s), "may be written by anyone"));
  mooncake_store_destroy(s);
  const std::string safe = MakeDir("links-safe", 0755);
  assert_int_equal(symlink(daemon_socket.c_str(), (safe + "/d.sock").c_str()), 0);
  s = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(s, (safe + "/d.sock").c_str(), 1 * kMiB), 0);
  assert_int_equal(mooncake_store_put(s, "through-a-link", "v", 1, nullptr), 0);
  mooncake_store_destroy(s);
}

int Setup(void**) {
  setenv("MOONCAKE_STORE_TIMEOUT_MS", "10000", 1);  // a client that did wait would not hang
  g_c = mc_cluster_start(16 * kMiB);
  if (g_c == nullptr) return -1;
  g_dir = harness::MakeTempDir("mc-socket-path-");
  // Others must reach the impostors' directories (the cluster's own stays 0700).
  return g_dir.empty() || chmod(g_dir.c_str(), 0755) != 0 ? -1 : 0;
}

int Teardown(void**) {
  mc_cluster_stop(g_c);
  harness::RemoveTree(g_dir);
  return 0;
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_the_daemon_refuses_a_socket_directory_others_may_write),
      cmocka_unit_test(test_the_client_refuses_impostors),
      cmocka_unit_test(test_the_client_follows_links_only_from_safe_directories),
  };
  return cmocka_run_group_tests(tests, Setup, Teardown);
}
