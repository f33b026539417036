// Issue 30 against the real binaries: what a fresh host's first start meets, beside a
// master and a daemon of the test's own:
//  - --socket in a missing directory, a missing --ssd_path (or a file there) and a missing
//    --snapshot_dir stop the start (exit 2) with a line naming the flag, the directory and
//    the fix, and nothing creates the directory.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cmocka_cpp.h"
#include "tests/daemon_test_client.h"
#include "tests/process_harness.h"

namespace harness = mooncake::testing;
using namespace mooncake::testing;

namespace {

int GroupSetup(void** state) {
  auto* f = new Fixture;
  g_fixture = f;
  f->dir = harness::MakeTempDir("mc-host-limits-");
  f->socket_path = f->dir + "/d.sock";
  if (!harness::StartMaster(&f->master, &f->master_port, f->dir + "/master.log", {}) ||
      !harness::StartDaemon(&f->daemon, f->master_port, f->socket_path, f->dir + "/d.log", {})) {
    return -1;
  }
  *state = f;
  return 0;
}

int GroupTeardown(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  StopFixture(f);
  delete f;
  return 0;
}

// How many lines of the file at path contain needle.
int LogLines(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.find(needle) != std::string::npos;
  return n;
}

// The exit code of a child that exits on its own (within 60 s), failing the test when it is
// killed by a signal (the OOM killer's SIGKILL) or does not exit.
int ExitCode(ChildProcess* p) {
  int status = p->Wait(60000);
  assert_true(status != -1);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// mooncaked's argv as harness::SpawnDaemon makes it, without its making of directories.
std::vector<std::string> DaemonArgv(const std::string& socket,
                                    const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {
      harness::BuildPath("daemon/mooncaked"), "--metrics_port", "0", "--master",
      "127.0.0.1:" + std::to_string(g_fixture->master_port), "--socket", socket, "--hostname",
      "127.0.0.1", "--global_segment_size", "64MB", "--cluster_key_file",
      harness::ClusterKeyFile()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

void test_socket_in_a_missing_directory_stops_the_start(void**) {
  const std::string missing = g_fixture->dir + "/nonexistent-dir";
  ChildProcess d;
  const std::string log = g_fixture->dir + "/no-socket-dir.log";
  assert_true(d.Start(DaemonArgv(missing + "/d.sock", {}), log));
  assert_int_equal(ExitCode(&d), 2);
  assert_int_equal(LogLines(log, "--socket " + missing + "/d.sock: the directory " + missing +
                                     " does not exist: create it (mkdir -p " + missing +
                                     "), or point --socket elsewhere"),
                   1);
  assert_false(Exists(missing));
}

void test_missing_ssd_path_stops_the_start(void**) {
  const std::string missing = g_fixture->dir + "/no-ssd";
  ChildProcess d;
  const std::string log = g_fixture->dir + "/no-ssd.log";
  assert_true(d.Start(DaemonArgv(g_fixture->dir + "/ssd.sock",
                                 {"--ssd_path", missing, "--ssd_capacity", "256MB"}),
                      log));
  assert_int_equal(ExitCode(&d), 2);
  assert_int_equal(
      LogLines(log, "--ssd_path " + missing + ": the directory " + missing + " does not exist"), 1);
  assert_false(Exists(missing));
  // A file where the directory should be, or under the path: refused the same way.
  const std::string file = g_fixture->dir + "/a-file";
  std::ofstream(file) << "not a directory";
  for (const std::string& path : {file, file + "/ssd"}) {
    ChildProcess e;
    const std::string elog = g_fixture->dir + "/ssd-file.log";
    std::remove(elog.c_str());
    assert_true(e.Start(DaemonArgv(g_fixture->dir + "/ssd.sock",
                                   {"--ssd_path", path, "--ssd_capacity", "256MB"}),
                        elog));
    assert_int_equal(ExitCode(&e), 2);
    assert_int_equal(LogLines(elog, "--ssd_path " + path + ": "), 1);
    assert_int_equal(LogLines(elog, path == file ? " is not a directory" : "Not a directory"), 1);
  }
}

void test_missing_snapshot_dir_stops_the_master(void**) {
  const std::string missing = g_fixture->dir + "/no-snapshots";
  ChildProcess m;
  const std::string log = g_fixture->dir + "/no-snapshots.log";
  assert_true(m.Start({harness::BuildPath("master/mooncake-master"), "--rpc_address", "127.0.0.1",
                       "--rpc_port", std::to_string(harness::FreeTcpPort()), "--metrics_port",
                       "0", "--cluster_key_file", harness::ClusterKeyFile(), "--enable_snapshot",
                       "--snapshot_dir", missing},
                      log));
  assert_int_equal(ExitCode(&m), 2);
  assert_int_equal(LogLines(log, "--snapshot_dir " + missing + ": the directory " + missing +
                                     " does not exist"),
                   1);
  assert_false(Exists(missing));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_socket_in_a_missing_directory_stops_the_start),
      cmocka_unit_test(test_missing_ssd_path_stops_the_start),
      cmocka_unit_test(test_missing_snapshot_dir_stops_the_master),
  };
  return cmocka_run_group_tests(tests, GroupSetup, GroupTeardown);
}
