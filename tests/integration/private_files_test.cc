// Issue 32, attack 8 (files): real processes on 127.0.0.1.
//  - A key file the master or a daemon must not trust stops its start with exit status 2
//    and a line naming the file and the fix: a FIFO (which hung the master at start: the
//    test waits on the exit, and a hang would fail it), a file owned by another user, a
//    file in a directory anyone may write, a key of 32 "a". A generated key in a directory
//    of ours starts (every other suite does).
//  - What a master with snapshots and a strict operation log and a daemon with an SSD tier
//    create is theirs alone: every file 0600, every directory 0700, though the test runs
//    them with umask 0; the directories the harness made 0777 beforehand are tightened to
//    0700, and each process logs that it did.
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/process_harness.h"
extern "C" {
#include "tests/harness/cluster.h"
#include "tests/harness/cluster_ssd_util.h"
#include "tests/harness/cluster_test_util.h"
}

namespace {

namespace harness = mooncake::testing;

constexpr uid_t kNobody = 65534;
constexpr uint64_t kMiB = 1 << 20;
// A guard against a hang, not a measure: a refused start takes milliseconds.
constexpr int kExitWithinMs = 60000;

std::string g_dir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Starts binary (master/mooncake-master or daemon/mooncaked) with --cluster_key_file
// key_file and waits for it to exit: its status must be 2 and its log hold needle and the
// file's path.
void AssertStartRefused(const std::string& binary, const std::string& key_file,
                        const char* needle) {
  static int n = 0;
  const std::string log = g_dir + "/refused-" + std::to_string(++n) + ".log";
  std::vector<std::string> argv = {harness::BuildPath(binary), "--cluster_key_file", key_file,
                                   "--metrics_port", "0"};
  if (binary == "daemon/mooncaked") {
    argv.insert(argv.end(), {"--socket", g_dir + "/refused.sock", "--master", "127.0.0.1:1",
                             "--global_segment_size", "16MB"});
  } else {
    argv.insert(argv.end(), {"--rpc_port", std::to_string(harness::FreeTcpPort())});
  }
  harness::ChildProcess child;
  assert_true(child.Start(argv, log));
  const int status = child.Wait(kExitWithinMs);
  const std::string text = ReadAll(log);
  std::printf("%s, %s: status %d: %s", binary.c_str(), key_file.c_str(), status, text.c_str());
  assert_true(status != -1);  // it exited: it did not hang
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 2);
  assert_non_null(strstr(text.c_str(), needle));
  assert_non_null(strstr(text.c_str(), key_file.c_str()));
}

std::string WriteKey(const std::string& path, const std::string& key) {
  assert_true(harness::WriteClusterKeyFile(path, {key}));
  return path;
}

void test_a_fifo_key_file_stops_the_start(void**) {
  const std::string fifo = g_dir + "/keys/fifo.key";
  assert_int_equal(mkfifo(fifo.c_str(), 0600), 0);
  AssertStartRefused("master/mooncake-master", fifo, "not a regular file but a FIFO");
  AssertStartRefused("daemon/mooncaked", fifo, "not a regular file but a FIFO");
}

void test_a_key_file_of_another_user_stops_the_start(void**) {
  if (geteuid() != 0) {
    std::printf("skipped: chown to another user needs root\n");
    skip();
  }
  const std::string path = WriteKey(g_dir + "/keys/nobodys.key", harness::RandomClusterKey());
  assert_int_equal(chown(path.c_str(), kNobody, kNobody), 0);
  AssertStartRefused("master/mooncake-master", path, "owned by uid 65534");
  AssertStartRefused("daemon/mooncaked", path, "owned by uid 65534");
}

void test_a_key_in_a_directory_anyone_may_write_stops_the_start(void**) {
  const std::string open_dir = g_dir + "/open";
  assert_int_equal(mkdir(open_dir.c_str(), 0700), 0);
  const std::string path = WriteKey(open_dir + "/cluster.key", harness::RandomClusterKey());
  for (mode_t mode : {0777, 01777}) {
    assert_int_equal(chmod(open_dir.c_str(), mode), 0);
    AssertStartRefused("master/mooncake-master", path, "may be written by anyone");
  }
  AssertStartRefused("daemon/mooncaked", path, "may be written by anyone");
}

void test_a_guessable_key_stops_the_start(void**) {
  const std::string path = WriteKey(g_dir + "/keys/weak.key", std::string(32, 'a'));
  AssertStartRefused("master/mooncake-master", path, "openssl rand -hex 32");
  AssertStartRefused("daemon/mooncaked", path, "openssl rand -hex 32");
}

// Every file under root 0600 and every directory 0700; *files counts the files, and the
// names of those found go to *names.
void AssertPrivateTree(const std::string& root, int* files, std::string* names) {
  struct stat st;
  assert_int_equal(lstat(root.c_str(), &st), 0);
  if ((st.st_mode & 07777) != 0700) fail_msg("%s: mode %04o", root.c_str(), st.st_mode & 07777);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    const std::string path = entry.path().string();
    assert_int_equal(lstat(path.c_str(), &st), 0);
    const mode_t want = S_ISDIR(st.st_mode) ? 0700 : 0600;
    if ((st.st_mode & 07777) != want) {
      fail_msg("%s: mode %04o, not %04o", path.c_str(), st.st_mode & 07777, want);
    }
    if (S_ISREG(st.st_mode)) {
      ++*files;
      *names += path.substr(root.size()) + " ";
    }
  }
}

void test_snapshots_oplog_and_ssd_files_are_private(void**) {
  // The children inherit umask 0: only the modes the code names protect the files. The
  // harness makes --snapshot_dir and --ssd_path beforehand, 0777 under this umask.
  const mode_t old_umask = umask(0);
  static const char* const master[] = {"--enable_snapshot",          "--snapshot_dir",
                                       "{dir}/snap",                 "--oplog_mode",
                                       "strict",                     "--enable_offload",
                                       "--snapshot_interval_seconds", "3600",
                                       nullptr};
  static const char* const daemon[] = {"--ssd_path",        "{ssd}", "--ssd_capacity", "64m",
                                       "--ssd_bucket_size", "8m",    nullptr};
  mc_cluster_options options = {1, 16 * kMiB, 1000, master, daemon};
  mc_cluster* c = mc_cluster_start_with(&options);
  umask(old_umask);
  assert_non_null(c);
  mooncake_store_t s = connect_app(c, 0, 4 * kMiB);
  put_series(s, "private", 0, 8, 64 * 1024, nullptr);
  await_offloads_done(c, 8, 60);
  assert_int_equal(mc_cluster_master_snapshot(c, nullptr, nullptr), 0);
  put_series(s, "private", 8, 4, 64 * 1024, nullptr);  // records after the snapshot
  mooncake_store_destroy(s);

  const std::string snap = std::string(mc_cluster_dir(c)) + "/snap";
  const std::string ssd = mc_cluster_ssd_dir_at(c, 0);
  int files = 0;
  std::string names;
  AssertPrivateTree(snap, &files, &names);
  std::printf("%s: %d files: %s\n", snap.c_str(), files, names.c_str());
  // latest, a snapshot's payloads, manifest and descriptor, the log's files.
  assert_non_null(strstr(names.c_str(), "/latest "));
  assert_non_null(strstr(names.c_str(), "/snapshots/"));
  assert_non_null(strstr(names.c_str(), "/oplog/"));
  files = 0;
  names.clear();
  AssertPrivateTree(ssd, &files, &names);
  std::printf("%s: %d files: %s\n", ssd.c_str(), files, names.c_str());
  assert_true(files >= 3);  // LOCK, the identity, and a bucket's files at least

  // Each process said it tightened the directory it was given.
  assert_true(count_log_lines(mc_cluster_master_log(c), "--snapshot_dir", "0777 -> 0700") >= 1);
  assert_true(count_log_lines(mc_cluster_log_at(c, 0), "--ssd_path", "0777 -> 0700") >= 1);
  mc_cluster_stop(c);
}

int Setup(void**) {
  g_dir = harness::MakeTempDir("mc-private-files-");
  if (g_dir.empty() || mkdir((g_dir + "/keys").c_str(), 0700) != 0) return -1;
  return 0;
}

int Teardown(void**) {
  harness::RemoveTree(g_dir);
  return 0;
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_fifo_key_file_stops_the_start),
      cmocka_unit_test(test_a_key_file_of_another_user_stops_the_start),
      cmocka_unit_test(test_a_key_in_a_directory_anyone_may_write_stops_the_start),
      cmocka_unit_test(test_a_guessable_key_stops_the_start),
      cmocka_unit_test(test_snapshots_oplog_and_ssd_files_are_private),
  };
  return cmocka_run_group_tests(tests, Setup, Teardown);
}
