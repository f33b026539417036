// Issue 30 against the real binaries: what a fresh host's first start meets. A master and
// a daemon started with no budget flag (the defaults: no cap, whatever the host can back):
//  - a mount far over this host's memory is refused with -1300 before a byte is mapped
//    (no new segment memfd in the daemon, none at the master), the reason in the log
//    names the numbers, and the daemon goes on serving: an object stays readable, and the
//    same connection then mounts a segment the host can back;
//  - a daemon whose --global_segment_size is over what the host can back exits 1 at once
//    with the reason, instead of being killed by the OOM killer while populating it;
//  - --socket in a missing directory, a missing --ssd_path (or a file there) and a missing
//    --snapshot_dir stop the start (exit 2) with a line naming the flag, the directory and
//    the fix, and nothing creates the directory.
#include <dirent.h>
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

#include "common/base/error_code.h"
#include "common/uds/uds_ops.h"
#include "tests/cmocka_cpp.h"
#include "tests/daemon_test_client.h"
#include "tests/process_harness.h"

namespace uds = mooncake::uds;
namespace harness = mooncake::testing;
using mooncake::ErrorCode;
using mooncake::ToInt;
using namespace mooncake::testing;

namespace {

constexpr uint64_t kMiB = 1ull << 20;
const int64_t kLimit = ToInt(ErrorCode::RESOURCE_LIMIT_EXCEEDED);

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

// MemTotal of /proc/meminfo, in bytes.
uint64_t MemTotal() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemTotal:", 0) == 0) return std::stoull(line.substr(9)) * 1024;
  }
  fail_msg("no MemTotal in /proc/meminfo");
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

// The segment memfds process pid holds (SegmentMemory names them "mooncake-segment").
int SegmentMemfds(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  assert_non_null(d);
  int n = 0;
  while (dirent* e = readdir(d)) {
    char target[256] = {0};
    ssize_t len = readlink((dir + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
    n += len > 0 && std::string(target, len).find("memfd:mooncake-segment") != std::string::npos;
  }
  closedir(d);
  return n;
}

int64_t Mount(Conn* c, uint64_t size) {
  return c->Ints(uds::Op::kMountSegment, [&](uds::FrameBuilder* f) { f->args().pack(size); }, 1);
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

void test_mount_the_host_cannot_back_is_refused_before_mapping(void**) {
  Pool pool(kPoolSize);
  Conn owner;
  assert_int_equal(owner.Hello(&pool), 0);
  const uint64_t n = 300000;
  Fill(pool.base, n, 7);
  assert_int_equal(owner.Put("host-limits-kept", 0, n), 0);
  const pid_t pid = g_fixture->daemon.pid();
  const size_t segments = MasterSegmentCount(g_fixture->master_port);
  const int memfds = SegmentMemfds(pid);

  Conn b;
  assert_int_equal(b.Hello(nullptr), 0);
  const uint64_t huge = 2 * MemTotal();  // no host backs twice its memory
  assert_int_equal(Mount(&b, huge), kLimit);
  const std::string log = g_fixture->daemon.log_path();
  assert_int_equal(LogLines(log, "MOUNT_SEGMENT of "), 1);
  assert_int_equal(LogLines(log, "refused (RESOURCE_LIMIT_EXCEEDED): segment "), 1);
  assert_int_equal(LogLines(log, "this host can back now (MemAvailable "), 1);
  assert_int_equal(LogLines(log, "lend a smaller segment, or free memory on this host"), 1);
  // Nothing of it was mapped, nor mounted at the master.
  assert_int_equal(SegmentMemfds(pid), memfds);
  assert_int_equal(MasterSegmentCount(g_fixture->master_port), segments);

  // Still serving: the object reads back, and the same connection mounts what the host
  // can back (nothing of the refusal is left promised).
  assert_true(g_fixture->daemon.running());
  assert_int_equal(b.Health(), 1);
  assert_int_equal(owner.Get("host-limits-kept", 1 << 20, n), static_cast<int64_t>(n));
  assert_memory_equal(pool.base + (1 << 20), pool.base, n);
  assert_int_equal(Mount(&b, 64 * kMiB), 0);
  assert_int_equal(SegmentMemfds(pid), memfds + 1);
  assert_int_equal(MasterSegmentCount(g_fixture->master_port), segments + 1);
}

void test_global_segment_over_the_host_stops_the_start(void**) {
  const std::string dir = g_fixture->dir;
  ChildProcess d;
  const std::string log = dir + "/too-big.log";
  const std::string size = std::to_string(2 * MemTotal());
  assert_true(d.Start(DaemonArgv(dir + "/too-big.sock", {"--global_segment_size", size}), log));
  assert_int_equal(ExitCode(&d), 1);
  assert_int_equal(LogLines(log, "--global_segment_size: segment "), 1);
  assert_int_equal(LogLines(log, "this host can back now (MemAvailable "), 1);
  assert_int_equal(LogLines(log, "lower --global_segment_size, or free memory on this host"), 1);
  assert_false(Exists(dir + "/too-big.sock"));
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
      cmocka_unit_test(test_mount_the_host_cannot_back_is_refused_before_mapping),
      cmocka_unit_test(test_global_segment_over_the_host_stops_the_start),
      cmocka_unit_test(test_socket_in_a_missing_directory_stops_the_start),
      cmocka_unit_test(test_missing_ssd_path_stops_the_start),
      cmocka_unit_test(test_missing_snapshot_dir_stops_the_master),
  };
  return cmocka_run_group_tests(tests, GroupSetup, GroupTeardown);
}
