// common/path_trust (who besides us could put a file or socket at a path) and
// common/private_dir (directories only this user may enter), in process.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/base/path_trust.h"
#include "common/base/private_dir.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

using namespace mooncake;

namespace {

constexpr uid_t kNobody = 65534;

mode_t ModeOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

void test_split_real_directory(void**) {
  std::string dir = testing::MakeTempDir("mc-split");
  assert_int_equal(mkdir((dir + "/real").c_str(), 0700), 0);
  assert_int_equal(symlink((dir + "/real").c_str(), (dir + "/link").c_str()), 0);
  std::string real_dir, name, why;
  assert_true(SplitRealDirectory(dir + "/link/x.sock", &real_dir, &name, &why));
  char real[4096];
  assert_non_null(realpath((dir + "/real").c_str(), real));
  assert_string_equal(real_dir.c_str(), real);
  assert_string_equal(name.c_str(), "x.sock");
  assert_false(SplitRealDirectory(dir + "/none/x.sock", &real_dir, &name, &why));
  assert_int_equal(errno, ENOENT);
  assert_false(SplitRealDirectory(dir + "/", &real_dir, &name, &why));
  testing::RemoveTree(dir);
}

// The socket's directory: nobody but its owner (and the daemon's group) may write it;
// sticky does not help there; above it, sticky does.
void test_socket_directory(void**) {
  std::string dir = testing::MakeTempDir("mc-sockdir");
  const gid_t mine = getegid();
  assert_string_equal(SocketDirectoryProblem(dir, mine).c_str(), "");
  for (mode_t mode : {0777, 01777, 0703}) {
    assert_int_equal(chmod(dir.c_str(), mode), 0);
    std::string why = SocketDirectoryProblem(dir, mine);
    std::printf("%04o: %s\n", mode, why.c_str());
    assert_non_null(strstr(why.c_str(), "may be written by anyone"));
    assert_non_null(strstr(why.c_str(), dir.c_str()));
    // The client's check, which knows no daemon group, refuses the same.
    assert_string_not_equal(SocketDirectoryProblem(dir, static_cast<gid_t>(-1)).c_str(), "");
  }
  // Group-writable: fine for the daemon's own group, not another.
  assert_int_equal(chmod(dir.c_str(), 0770), 0);
  assert_string_equal(SocketDirectoryProblem(dir, mine).c_str(), "");
  assert_string_equal(SocketDirectoryProblem(dir, static_cast<gid_t>(-1)).c_str(), "");
  assert_non_null(
      strstr(SocketDirectoryProblem(dir, mine + 1).c_str(), "may be written by the group"));
  // Above the socket's directory: others may write it only when it is sticky.
  assert_int_equal(chmod(dir.c_str(), 0755), 0);
  assert_int_equal(mkdir((dir + "/run").c_str(), 0755), 0);
  assert_string_equal(SocketDirectoryProblem(dir + "/run", mine).c_str(), "");
  assert_int_equal(chmod(dir.c_str(), 0777), 0);
  assert_non_null(
      strstr(SocketDirectoryProblem(dir + "/run", mine).c_str(), "above it may be written"));
  assert_int_equal(chmod(dir.c_str(), 01777), 0);
  assert_string_equal(SocketDirectoryProblem(dir + "/run", mine).c_str(), "");
  testing::RemoveTree(dir);
}

// What the master and the daemon create is private whatever the umask; an existing
// directory of ours is tightened, one of another user left (and warned about).
void test_private_directories(void**) {
  const mode_t old_umask = umask(0);
  std::string dir = testing::MakeTempDir("mc-private");
  assert_true(MakePrivateDirectories(dir + "/a/b/c", "test"));
  for (const char* level : {"/a", "/a/b", "/a/b/c"}) {
    assert_int_equal(ModeOf(dir + level), 0700);
  }
  assert_int_equal(mkdir((dir + "/loose").c_str(), 0777), 0);
  assert_int_equal(ModeOf(dir + "/loose"), 0777);
  assert_true(MakePrivateDirectory(dir + "/loose", "test"));
  assert_int_equal(ModeOf(dir + "/loose"), 0700);
  assert_int_equal(mkdir((dir + "/setgid").c_str(), 0775), 0);
  assert_int_equal(chmod((dir + "/setgid").c_str(), 02775), 0);
  KeepPrivate(dir + "/setgid", "test");
  assert_int_equal(ModeOf(dir + "/setgid"), 02700);  // set-group-ID kept: it is not access
  // A file where a directory is wanted.
  assert_int_equal(close(creat((dir + "/file").c_str(), 0600)), 0);
  assert_false(MakePrivateDirectory(dir + "/file", "test"));
  assert_int_equal(errno, ENOTDIR);
  if (geteuid() == 0) {
    assert_int_equal(mkdir((dir + "/theirs").c_str(), 0755), 0);
    assert_int_equal(chown((dir + "/theirs").c_str(), kNobody, kNobody), 0);
    KeepPrivate(dir + "/theirs", "test");  // a warning, once
    KeepPrivate(dir + "/theirs", "test");
    assert_int_equal(ModeOf(dir + "/theirs"), 0755);
  }
  testing::RemoveTree(dir);
  umask(old_umask);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split_real_directory),
      cmocka_unit_test(test_socket_directory),
      cmocka_unit_test(test_private_directories),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
