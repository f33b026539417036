// The real binaries' command lines (common/base/flags.h) against processes on 127.0.0.1:
//  - mooncake-master starts and serves on gflags' spellings as Mooncake's docs write them
//    (-v=1, -name=value, --noname, a --flagfile), and -v=1 logs at debug;
//  - mooncaked likewise (-port=P, --noread_cache, -v 1): the port and the read cache are
//    the ones asked for;
//  - an unknown flag exits 2 naming it (and the flag meant), a fractional size without a
//    unit exits 2 naming the flag;
//  - --help prints a usage line and one block per flag with its real default; --version
//    prints "PROGRAM VERSION".
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/base/version.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

namespace {

namespace harness = mooncake::testing;

std::string g_dir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Polls the log until pattern matches in it (a process writes its log as it goes); the
// match, or an empty one when it never came.
std::smatch WaitForLine(const std::string& log_path, const std::regex& pattern, std::string* log) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::smatch match;
  while (std::chrono::steady_clock::now() < deadline) {
    *log = ReadFile(log_path);
    if (std::regex_search(*log, match, pattern)) return match;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::smatch();
}

// Runs a binary to its exit: the exit status (WEXITSTATUS, -1 when it did not exit) and
// what it printed.
int RunToExit(const std::vector<std::string>& argv, const std::string& name, std::string* out) {
  harness::ChildProcess child;
  const std::string path = g_dir + "/" + name + ".log";
  if (!child.Start(argv, path)) return -1;
  const int status = child.Wait(60000);
  *out = ReadFile(path);
  return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void TestMasterTakesGflagsSpellings(void**) {
  const std::string flagfile = g_dir + "/master.flags";
  std::ofstream(flagfile) << "# as Mooncake's docs write them\n\n-rpc_address=127.0.0.1\n"
                          << "--metrics_port=0\n-cluster_key_file=" << harness::ClusterKeyFile()
                          << "\n";
  harness::ChildProcess master;
  const std::string log_path = g_dir + "/master.log";
  assert_true(
      master.Start({harness::BuildPath("master/mooncake-master"), "-v=1", "--rpc_port=0",
                    "--flagfile=" + flagfile, "--noenable_metric_reporting", "-max_threads", "2"},
                   log_path));
  std::string log;
  std::smatch listening = WaitForLine(
      log_path, std::regex("mooncake-master listening on 127\\.0\\.0\\.1:(\\d+)"), &log);
  if (listening.empty()) fail_msg("the master did not start:\n%s", log.c_str());
  const int port = std::stoi(listening[1]);
  assert_true(harness::WithMasterClient(port, [](auto&) {}));
  // -v=1: the connection just made is logged at debug.
  if (WaitForLine(log_path, std::regex(" D master .*admitted"), &log).empty()) {
    fail_msg("no debug line:\n%s", log.c_str());
  }
  assert_non_null(strstr(log.c_str(), " rpc_thread_num=2 "));  // -max_threads, an alias
  assert_int_equal(WEXITSTATUS(master.Stop(SIGTERM, 30000)), 0);
}

void TestDaemonTakesGflagsSpellings(void**) {
  harness::ChildProcess master;
  int master_port = 0;
  assert_true(harness::StartMaster(&master, &master_port, g_dir + "/daemon_master.log", {}));
  // The transfer port was free a moment ago; another process may take it first.
  bool served = false;
  for (int attempt = 0; attempt < 3 && !served; ++attempt) {
    const int port = harness::FreeTcpPort();
    const std::string socket = g_dir + "/d" + std::to_string(attempt) + ".sock";
    const std::string log_path = g_dir + "/daemon" + std::to_string(attempt) + ".log";
    harness::ChildProcess daemon;
    assert_true(daemon.Start(
        {harness::BuildPath("daemon/mooncaked"), "-master=127.0.0.1:" + std::to_string(master_port),
         "-port=" + std::to_string(port), "--noread_cache", "-socket", socket,
         "-hostname=127.0.0.1", "--global_segment_size=16MB", "-cluster_key_file",
         harness::ClusterKeyFile(), "-metrics_port=0", "-v", "1"},
        log_path));
    // Serving, or exited (the port taken meanwhile: try another).
    bool up = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!up && daemon.running() && std::chrono::steady_clock::now() < deadline) {
      up = harness::WaitForUnixSocket(socket, 100);
      if (!up) daemon.Wait(0);
    }
    std::string log = ReadFile(log_path);
    if (!up && daemon.running()) fail_msg("the daemon did not serve:\n%s", log.c_str());
    if (!up) continue;
    WaitForLine(log_path, std::regex(" serving .*read cache o"), &log);
    if (strstr(log.c_str(), ("port " + std::to_string(port) + " ").c_str()) == nullptr) {
      fail_msg("not on port %d:\n%s", port, log.c_str());
    }
    assert_non_null(strstr(log.c_str(), "read cache off"));
    // -v 1: the connection WaitForUnixSocket made is logged at debug.
    if (WaitForLine(log_path, std::regex(" D daemon .*connection"), &log).empty()) {
      fail_msg("no debug line:\n%s", log.c_str());
    }
    assert_int_equal(WEXITSTATUS(daemon.Stop(SIGTERM, 90000)), 0);
    served = true;
  }
  assert_true(served);
  master.Stop(SIGTERM, 30000);
}

void TestRefusalsNameTheFlag(void**) {
  std::string out;
  const std::string master = harness::BuildPath("master/mooncake-master");
  assert_int_equal(RunToExit({master, "--bogus"}, "bogus", &out), 2);
  assert_non_null(strstr(out.c_str(), "unknown flag --bogus"));
  assert_int_equal(RunToExit({master, "-rpc_prot=1"}, "typo", &out), 2);
  assert_non_null(strstr(out.c_str(), "unknown flag -rpc_prot (did you mean --rpc_port?)"));
  assert_int_equal(RunToExit({master, "--norpc_port"}, "negated", &out), 2);
  assert_non_null(strstr(out.c_str(), "--rpc_port is not a boolean"));
  const std::string daemon = harness::BuildPath("daemon/mooncaked");
  assert_int_equal(RunToExit({daemon, "--global_segment_size", "1.5"}, "fraction", &out), 2);
  assert_non_null(strstr(out.c_str(), "'1.5' for --global_segment_size (expected whole bytes"));
  assert_int_equal(RunToExit({daemon, "--flagfile=" + g_dir + "/none"}, "flagfile", &out), 2);
  assert_true(out.find("--flagfile " + g_dir + "/none: cannot read it") != std::string::npos);
}

void TestHelpAndVersion(void**) {
  std::string out;
  const std::string master = harness::BuildPath("master/mooncake-master");
  assert_int_equal(RunToExit({master, "--help"}, "help", &out), 0);
  assert_int_equal(out.find("Usage: mooncake-master [FLAG]...\n"), 0);
  // GNU's layout: the help from column 30, on the flag's line or the next.
  for (const char* block :
       {"\n  --rpc_port=INT {14}Thrift port .*\n {30}--port\\) \\(default: 50051\\)\n",
        "\n  --spin_us=INT {15}how long", "\n  --\\[no\\]enable_ha {13}campaign",
        "\n  --metrics_report_interval=SECONDS\n {30}how often", "\n  -v=N, --v=N {17}glog's"}) {
    if (!std::regex_search(out, std::regex(block))) {
      fail_msg("no \"%s\" in:\n%s", block, out.c_str());
    }
  }
  assert_int_equal(RunToExit({harness::BuildPath("daemon/mooncaked"), "-version"}, "version", &out),
                   0);
  assert_string_equal(out.c_str(),
                      (std::string("mooncaked ") + mooncake::MooncakeVersion() + "\n").c_str());
}

int Setup(void**) {
  g_dir = harness::MakeTempDir("mc-flags-bin");
  return g_dir.empty() ? -1 : 0;
}

int Teardown(void**) {
  if (getenv("MC_KEEP_TEST_DIR") == nullptr) harness::RemoveTree(g_dir);
  return 0;
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(TestMasterTakesGflagsSpellings),
      cmocka_unit_test(TestDaemonTakesGflagsSpellings),
      cmocka_unit_test(TestRefusalsNameTheFlag),
      cmocka_unit_test(TestHelpAndVersion),
  };
  return cmocka_run_group_tests(tests, Setup, Teardown);
}
