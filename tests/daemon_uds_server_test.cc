// UdsServer::Listen and Shutdown, without a store behind them (no connection is ever
// served, so the StoreService is never called): the socket file's mode from the moment it
// appears, whatever the umask; a missing directory refused, not made; a stale socket
// replaced, a live one or another file refused; Shutdown removing its own file only; and
// every failure of a descriptor Listen needs reported, with nothing left behind
// (RLIMIT_NOFILE lowered in a forked child).
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "daemon/server/uds_server.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

using mooncake::UdsServer;
namespace harness = mooncake::testing;

namespace {

// A fresh directory, removed with its contents at the end of the test.
struct TempDir {
  TempDir() : path(harness::MakeTempDir("uds-server-")) { assert_false(path.empty()); }
  ~TempDir() { harness::RemoveTree(path); }
  std::string path;
};

sockaddr_un Address(const std::string& path) {
  sockaddr_un addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  return addr;
}

// A socket bound at path: listening (a live daemon) or not (the file of one that died).
int BindSocket(const std::string& path, bool listening) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  sockaddr_un addr = Address(path);
  assert_int_equal(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  if (listening) assert_int_equal(listen(fd, 4), 0);
  return fd;
}

bool Connects(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr = Address(path);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

struct stat Lstat(const std::string& path) {
  struct stat st;
  assert_int_equal(lstat(path.c_str(), &st), 0);
  return st;
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  return names;
}

// Listens on path with mode under umask mask; the mode the file has right after.
unsigned ModeAfterListen(const std::string& path, unsigned mode, mode_t mask) {
  mode_t old = umask(mask);
  UdsServer server(nullptr, 1);
  std::string error;
  bool ok = server.Listen(path, mode, &error);
  umask(old);
  if (!ok) std::fprintf(stderr, "Listen: %s\n", error.c_str());
  assert_true(ok);
  struct stat st = Lstat(path);
  assert_true(S_ISSOCK(st.st_mode));
  assert_true(Connects(path));
  return st.st_mode & 07777;
}

void test_socket_has_requested_mode_whatever_the_umask(void**) {
  TempDir dir;
  // Narrower than the umask allows, wider than it allows, and in a subdirectory.
  std::string a = dir.path + "/a.sock";
  std::string b = dir.path + "/b.sock";
  std::string c = dir.path + "/run/mooncake/c.sock";
  assert_int_equal(ModeAfterListen(a, 0600, 0), 0600);
  assert_int_equal(ModeAfterListen(b, 0666, 077), 0666);
  // A missing directory is an error (issue 30), and nothing makes it.
  {
    UdsServer server(nullptr, 1);
    std::string error;
    assert_false(server.Listen(c, 0660, &error));
    assert_true(error.find("No such file or directory") != std::string::npos);
    assert_int_equal(Entries(dir.path).size(), 2);
  }
  std::filesystem::create_directories(dir.path + "/run/mooncake");
  assert_int_equal(ModeAfterListen(c, 0660, 022), 0660);
  // Nothing else is left next to them (the private directory is gone).
  std::vector<std::string> names = Entries(dir.path);
  assert_int_equal(names.size(), 3);  // a.sock, b.sock, run
  assert_int_equal(Entries(dir.path + "/run/mooncake").size(), 1);
}

// The file appears under its name already complete: no chmod (or anything else) reaches
// it there afterwards. Binding in place and chmod-ing after, as an earlier version did,
// shows up as IN_ATTRIB on the name.
void test_socket_appears_with_its_mode(void**) {
  TempDir dir;
  std::string path = dir.path + "/d.sock";
  int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  assert_true(in >= 0);
  assert_true(inotify_add_watch(in, dir.path.c_str(), IN_ALL_EVENTS) >= 0);
  assert_int_equal(ModeAfterListen(path, 0600, 0), 0600);

  alignas(struct inotify_event) char buf[16384];
  ssize_t n = read(in, buf, sizeof(buf));
  assert_true(n > 0);
  int appeared = 0;
  for (char* p = buf; p < buf + n;) {
    auto* e = reinterpret_cast<struct inotify_event*>(p);
    p += sizeof(*e) + e->len;
    if (e->len == 0 || std::strcmp(e->name, "d.sock") != 0) continue;
    if (e->mask & (IN_CREATE | IN_MOVED_TO)) ++appeared;
    if (e->mask & (IN_ATTRIB | IN_MODIFY | IN_CLOSE_WRITE)) {
      fail_msg("d.sock changed after it appeared (inotify mask %#x)", e->mask);
    }
  }
  assert_int_equal(appeared, 1);
  close(in);
}

void test_stale_socket_is_replaced(void**) {
  TempDir dir;
  std::string path = dir.path + "/d.sock";
  close(BindSocket(path, false));  // its daemon died
  ino_t stale = Lstat(path).st_ino;
  assert_false(Connects(path));
  assert_int_equal(ModeAfterListen(path, 0660, 022), 0660);
  assert_true(Lstat(path).st_ino != stale);
}

void test_live_socket_is_refused(void**) {
  TempDir dir;
  std::string path = dir.path + "/d.sock";
  int live = BindSocket(path, true);
  ino_t inode = Lstat(path).st_ino;
  UdsServer server(nullptr, 1);
  std::string error;
  assert_false(server.Listen(path, 0600, &error));
  assert_non_null(std::strstr(error.c_str(), "in use"));
  assert_int_equal(Lstat(path).st_ino, inode);  // untouched, and still answering
  assert_true(Connects(path));
  assert_int_equal(Entries(dir.path).size(), 1);
  close(live);
}

void test_other_file_is_refused(void**) {
  TempDir dir;
  std::string path = dir.path + "/d.sock";
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  assert_true(fd >= 0);
  close(fd);
  UdsServer server(nullptr, 1);
  std::string error;
  assert_false(server.Listen(path, 0600, &error));
  assert_non_null(std::strstr(error.c_str(), "not a socket"));
  assert_true(S_ISREG(Lstat(path).st_mode));
  assert_int_equal(Entries(dir.path).size(), 1);
}

void test_shutdown_removes_only_its_own_socket(void**) {
  TempDir dir;
  std::string path = dir.path + "/d.sock";
  std::string error;
  {
    UdsServer server(nullptr, 1);
    assert_true(server.Listen(path, 0600, &error));
    server.Start();
    server.Shutdown(0);
    assert_false(std::filesystem::exists(path));
    assert_int_equal(Entries(dir.path).size(), 0);
  }
  // A successor took the name over while this server was still running: its file stays.
  UdsServer server(nullptr, 1);
  assert_true(server.Listen(path, 0600, &error));
  server.Start();
  assert_int_equal(unlink(path.c_str()), 0);
  int successor = BindSocket(path, true);
  ino_t inode = Lstat(path).st_ino;
  server.Shutdown(0);
  assert_int_equal(Lstat(path).st_ino, inode);
  close(successor);
}

// In a child (the limit is process-wide): lets Listen open only `allowed` more
// descriptors, and checks it fails naming `call`, leaves no file and no descriptor
// behind. The exit status says which check failed.
int ListenOutOfDescriptors(const std::string& dir, int allowed, const char* call) {
  UdsServer server(nullptr, 1);
  int lowest = open("/dev/null", O_RDONLY | O_CLOEXEC);  // the next descriptor's number
  if (lowest < 0) return 10;
  close(lowest);
  struct rlimit saved;
  getrlimit(RLIMIT_NOFILE, &saved);
  struct rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(lowest + allowed);
  if (setrlimit(RLIMIT_NOFILE, &low) != 0) return 11;
  std::string error;
  bool ok = server.Listen(dir + "/d.sock", 0600, &error);
  setrlimit(RLIMIT_NOFILE, &saved);
  std::fprintf(stderr, "with %d descriptors: %s\n", allowed, ok ? "listening" : error.c_str());
  if (ok) return 12;
  if (error.find(std::string(call) + ": ") == std::string::npos) return 13;
  if (!Entries(dir).empty()) return 14;
  int next = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (next != lowest) return 15;  // a descriptor leaked
  close(next);
  return 0;
}

void test_listen_reports_descriptor_failures(void**) {
  const char* calls[] = {"epoll_create1", "eventfd", "socket"};  // in the order opened
  for (int allowed = 0; allowed < 3; ++allowed) {
    TempDir dir;
    std::fflush(nullptr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(ListenOutOfDescriptors(dir.path, allowed, calls[allowed]));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) != 0) {
      fail_msg("%s: child check %d failed", calls[allowed], WEXITSTATUS(status));
    }
  }
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_socket_has_requested_mode_whatever_the_umask),
      cmocka_unit_test(test_socket_appears_with_its_mode),
      cmocka_unit_test(test_stale_socket_is_replaced),
      cmocka_unit_test(test_live_socket_is_refused),
      cmocka_unit_test(test_other_file_is_refused),
      cmocka_unit_test(test_shutdown_removes_only_its_own_socket),
      cmocka_unit_test(test_listen_reports_descriptor_failures),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
