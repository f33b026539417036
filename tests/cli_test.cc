// mooncake-cli against a real master and two daemons (tests/cluster.h): the binary is run
// as a user runs it (fork + exec, stdin and stdout redirected to files), and what it
// prints and its exit code are checked. Data commands go through the daemon's socket, admin
// commands through the master's admin HTTP (its port read from the master's log) and, for
// snapshot, its Thrift port with the cluster key.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_args.h"
#include "mooncake_store.h"
#include "tests/cluster.h"
#include "tests/cmocka_cpp.h"
#include "tests/http_test_util.h"
#include "tests/process_harness.h"

using nlohmann::json;

namespace {

mc_cluster* g_cluster = nullptr;
std::string g_dir;
std::string g_admin_url;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(rng() & 0xff);
  return s;
}

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs mooncake-cli with args against the cluster (daemon 0's socket, the master's
// Thrift and admin ports), stdin from stdin_path ("" = /dev/null); waits for it to exit.
CliRun RunCli(const std::vector<std::string>& args, const std::string& stdin_path = "") {
  static int runs = 0;
  std::string out_path = g_dir + "/cli-" + std::to_string(runs) + ".out";
  std::string err_path = g_dir + "/cli-" + std::to_string(runs++) + ".err";
  std::string binary = mooncake::testing::BuildPath("cli/mooncake-cli");
  std::string master = "127.0.0.1:" + std::to_string(mc_cluster_master_port(g_cluster));
  std::vector<std::string> argv = {binary,     "--socket", mc_cluster_socket_at(g_cluster, 0),
                                   "--master", master,     "--admin_url",
                                   g_admin_url};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = fork();
  if (pid == 0) {
    int in = open(stdin_path.empty() ? "/dev/null" : stdin_path.c_str(), O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    unsetenv("MOONCAKE_CLUSTER_KEY_FILE");
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    execv(binary.c_str(), cargv.data());
    _exit(127);
  }
  CliRun run;
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
    run.exit_code = WEXITSTATUS(status);
  }
  run.out = ReadFile(out_path);
  run.err = ReadFile(err_path);
  if (run.exit_code != 0)
    std::fprintf(stderr, "  [cli exit %d] %s", run.exit_code, run.err.c_str());
  return run;
}

json ParseJson(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) std::fprintf(stderr, "not JSON: %s\n", text.c_str());
  assert_false(j.is_discarded());
  return j;
}

// The master logs "master: admin HTTP listening on 127.0.0.1:P" once it serves.
std::string AwaitAdminUrl(const std::string& log_path) {
  int port = mooncake::testing::AdminPortFromLog(log_path, "master", 30000);
  return port < 0 ? "" : "http://127.0.0.1:" + std::to_string(port);
}

int Setup(void** state) {
  (void)state;
  static const char* const master_flags[] = {"--enable_snapshot", "--snapshot_dir",
                                             "{dir}/snapshots", nullptr};
  mc_cluster_options o = {};
  o.daemons = 2;
  o.segment_size = 128ull << 20;
  o.master_flags = master_flags;
  g_cluster = mc_cluster_start_with(&o);
  if (g_cluster == nullptr) return -1;
  g_dir = mc_cluster_dir(g_cluster);
  g_admin_url = AwaitAdminUrl(mc_cluster_master_log(g_cluster));
  if (g_admin_url.empty()) {
    std::fprintf(stderr, "no admin HTTP line in %s\n", mc_cluster_master_log(g_cluster));
    return -1;
  }
  return 0;
}

int Teardown(void** state) {
  (void)state;
  mc_cluster_stop(g_cluster);
  return 0;
}

// A multi-MB random file through put and get, byte for byte: from a file to a file, and
// from stdin (a FIFO, whose size the CLI learns only by reading it) to stdout.
void test_put_get_round_trip(void** state) {
  (void)state;
  const std::string value = RandomBytes((6u << 20) + 12345, 1);
  const std::string in = g_dir + "/value.bin";
  WriteFile(in, value);
  // --progress: the line goes to stderr (a file here), ending with the total and the rate.
  CliRun put = RunCli({"--progress", "put", "rt/file", in});
  assert_int_equal(put.exit_code, 0);
  assert_true(std::regex_search(put.err, std::regex("put rt/file  6.0 MiB in [0-9.]+ m?s  ")));
  assert_true(put.out == "stored rt/file (6.0 MiB)\n");
  const std::string out = g_dir + "/value.out";
  assert_int_equal(RunCli({"get", "rt/file", out}).exit_code, 0);
  assert_true(ReadFile(out) == value);

  // stdin from a FIFO fed by a thread: the CLI cannot know the size before it has read it.
  const std::string fifo = g_dir + "/value.fifo";
  assert_int_equal(mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    int fd = open(fifo.c_str(), O_WRONLY);
    size_t done = 0;
    while (fd >= 0 && done < value.size()) {
      ssize_t n = write(fd, value.data() + done, value.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    if (fd >= 0) close(fd);
  });
  CliRun from_stdin = RunCli({"--json", "put", "rt/stdin", "-"}, fifo);
  writer.join();
  assert_int_equal(from_stdin.exit_code, 0);
  assert_int_equal(ParseJson(from_stdin.out)["size"].get<uint64_t>(), value.size());
  CliRun to_stdout = RunCli({"get", "rt/stdin"});
  assert_int_equal(to_stdout.exit_code, 0);
  assert_true(to_stdout.out == value);
  CliRun dash = RunCli({"get", "rt/file", "-"});
  assert_int_equal(dash.exit_code, 0);
  assert_true(dash.out == value);

  // A missing key: exit 1, and the output file is not created.
  const std::string never = g_dir + "/never.out";
  assert_int_equal(RunCli({"get", "rt/none", never}).exit_code, 1);
  assert_int_not_equal(access(never.c_str(), F_OK), 0);
}

void test_exists_exit_codes(void** state) {
  (void)state;
  const std::string in = g_dir + "/small.bin";
  WriteFile(in, "hello");
  assert_int_equal(RunCli({"put", "ex/a", in}).exit_code, 0);
  CliRun one = RunCli({"exists", "ex/a"});
  assert_int_equal(one.exit_code, 0);
  assert_true(one.out == "present ex/a\n");
  CliRun mixed = RunCli({"exists", "ex/a", "ex/none"});
  assert_int_equal(mixed.exit_code, 1);
  assert_true(mixed.out == "present ex/a\nmissing ex/none\n");
  CliRun j = RunCli({"--json", "exists", "ex/a", "ex/none"});
  assert_int_equal(j.exit_code, 1);
  json parsed = ParseJson(j.out);
  assert_true(parsed["ex/a"].get<bool>());
  assert_false(parsed["ex/none"].get<bool>());
}

// stat lists each replica with its tier and segment: two replicas on distinct daemons.
void test_stat_shows_replicas(void** state) {
  (void)state;
  const std::string value = RandomBytes(1u << 20, 2);
  const std::string in = g_dir + "/stat.bin";
  WriteFile(in, value);
  assert_int_equal(RunCli({"put", "--replicas", "2", "st/two", in}).exit_code, 0);
  CliRun j = RunCli({"stat", "--json", "st/two"});
  assert_int_equal(j.exit_code, 0);
  json parsed = ParseJson(j.out);
  assert_int_equal(parsed["size"].get<uint64_t>(), value.size());
  assert_true(parsed["replicas"].is_array());
  assert_int_equal(parsed["replicas"].size(), 2);
  std::set<std::string> segments;
  for (const auto& r : parsed["replicas"]) {
    assert_true(r["kind"].get<std::string>() == "memory");
    assert_int_equal(r["size"].get<uint64_t>(), value.size());
    segments.insert(r["segment_name"].get<std::string>());
  }
  assert_int_equal(segments.size(), 2);
  assert_true(segments.count(mc_cluster_name_at(g_cluster, 0)) == 1);
  assert_true(segments.count(mc_cluster_name_at(g_cluster, 1)) == 1);

  CliRun human = RunCli({"stat", "st/two"});
  assert_int_equal(human.exit_code, 0);
  assert_non_null(std::strstr(human.out.c_str(), "1.0 MiB (1048576 bytes)"));
  assert_non_null(std::strstr(human.out.c_str(), mc_cluster_name_at(g_cluster, 1)));
  assert_true(std::regex_search(human.out, std::regex("replicas: +2\n")));

  assert_int_equal(RunCli({"stat", "st/none"}).exit_code, 1);
}

// rm --regex removes exactly the keys the pattern matches and says how many.
void test_rm_regex(void** state) {
  (void)state;
  const std::string in = g_dir + "/rm.bin";
  WriteFile(in, "x");
  for (const char* k : {"rmx/tmp/1", "rmx/tmp/2", "rmx/tmp/3", "rmx/keep/tmp", "rmx/keep/1"}) {
    assert_int_equal(RunCli({"put", k, in}).exit_code, 0);
  }
  CliRun rm = RunCli({"rm", "--regex", "^rmx/tmp/"});
  assert_int_equal(rm.exit_code, 0);
  assert_true(rm.out == "removed 3 keys\n");
  CliRun left =
      RunCli({"exists", "rmx/tmp/1", "rmx/tmp/2", "rmx/tmp/3", "rmx/keep/tmp", "rmx/keep/1"});
  assert_true(left.out ==
              "missing rmx/tmp/1\nmissing rmx/tmp/2\nmissing rmx/tmp/3\n"
              "present rmx/keep/tmp\npresent rmx/keep/1\n");
  CliRun again = RunCli({"--json", "rm", "--regex", "^rmx/"});
  assert_int_equal(again.exit_code, 0);
  assert_int_equal(ParseJson(again.out)["removed"].get<int64_t>(), 2);
  assert_int_equal(RunCli({"rm", "--regex", "("}).exit_code, 3);  // a malformed pattern

  // rm KEY...: exit 1 when one did not exist, the others removed.
  assert_int_equal(RunCli({"put", "rmx/k", in}).exit_code, 0);
  CliRun keys = RunCli({"rm", "rmx/k", "rmx/none"});
  assert_int_equal(keys.exit_code, 1);
  assert_true(keys.out == "removed rmx/k\nmissing rmx/none\n");
}

// ls follows the master's pages (1000 keys each) up to --limit, and --regex filters.
void test_ls_limit_regex(void** state) {
  (void)state;
  mooncake_store_t store = mooncake_store_create();
  assert_int_equal(mooncake_store_connect(store, mc_cluster_socket_at(g_cluster, 0), 16 << 20), 0);
  std::set<std::string> expected;
  for (int i = 0; i < 1500; ++i) {
    std::string key = "lsk/" + std::to_string(i);
    assert_int_equal(mooncake_store_put(store, key.c_str(), "v", 1, nullptr), 0);
    expected.insert(key);
  }
  assert_int_equal(mooncake_store_put(store, "lsother", "v", 1, nullptr), 0);
  mooncake_store_destroy(store);

  CliRun all = RunCli({"ls", "--regex", "^lsk/", "--limit", "0"});
  assert_int_equal(all.exit_code, 0);
  std::set<std::string> listed;
  std::istringstream lines(all.out);
  for (std::string line; std::getline(lines, line);) listed.insert(line);
  assert_true(listed == expected);

  CliRun ten = RunCli({"--json", "ls", "--regex", "^lsk/", "--limit", "10"});
  assert_int_equal(ten.exit_code, 0);
  json parsed = ParseJson(ten.out);
  assert_int_equal(parsed["keys"].size(), 10);
  for (const auto& k : parsed["keys"]) assert_true(expected.count(k.get<std::string>()) == 1);
  assert_true(parsed["truncated"].get<bool>());

  // More than a page, but fewer than all: exactly the limit.
  CliRun some = RunCli({"--json", "ls", "--regex", "^lsk/", "--limit", "1200"});
  assert_int_equal(ParseJson(some.out)["keys"].size(), 1200);
  // A bad pattern is the master's -600.
  assert_int_equal(RunCli({"ls", "--regex", "("}).exit_code, 3);
}

void test_segments_stats_health(void** state) {
  (void)state;
  CliRun j = RunCli({"--json", "segments"});
  assert_int_equal(j.exit_code, 0);
  json parsed = ParseJson(j.out);
  std::set<std::string> names;
  for (const auto& s : parsed["segments"]) names.insert(s["segment_name"].get<std::string>());
  assert_true(names.count(mc_cluster_name_at(g_cluster, 0)) == 1);
  assert_true(names.count(mc_cluster_name_at(g_cluster, 1)) == 1);
  CliRun table = RunCli({"segments"});
  assert_int_equal(table.exit_code, 0);
  assert_int_equal(table.out.compare(0, 4, "NAME"), 0);
  assert_non_null(std::strstr(table.out.c_str(), "128.0 MiB"));

  CliRun stats = RunCli({"--json", "stats"});
  assert_int_equal(stats.exit_code, 0);
  assert_true(ParseJson(stats.out).is_object());
  assert_int_equal(RunCli({"stats"}).exit_code, 0);

  CliRun health = RunCli({"--json", "health"});
  assert_int_equal(health.exit_code, 0);
  assert_true(ParseJson(health.out)["master"]["status"].get<std::string>() == "ok");
}

void test_snapshot(void** state) {
  (void)state;
  // Without the cluster key the master refuses the call: an error answer, exit 3.
  assert_int_equal(RunCli({"snapshot"}).exit_code, 3);
  CliRun take =
      RunCli({"--json", "--cluster_key_file", mooncake::testing::ClusterKeyFile(), "snapshot"});
  assert_int_equal(take.exit_code, 0);
  json taken = ParseJson(take.out);
  assert_int_equal(taken["code"].get<int>(), 0);
  assert_false(taken["running"].get<bool>());
  CliRun status = RunCli({"--json", "snapshot", "status"});
  assert_int_equal(status.exit_code, 0);
  json last = ParseJson(status.out);
  assert_true(last["name"].get<std::string>() == taken["name"].get<std::string>());
}

// Unknown commands and bad options are usage errors (exit 2) that name the culprit.
void test_usage_errors(void** state) {
  (void)state;
  CliRun unknown = RunCli({"frobnicate"});
  assert_int_equal(unknown.exit_code, 2);
  assert_non_null(std::strstr(unknown.err.c_str(), "unknown command \"frobnicate\""));
  CliRun bad_flag = RunCli({"get", "--frob", "k"});
  assert_int_equal(bad_flag.exit_code, 2);
  assert_non_null(std::strstr(bad_flag.err.c_str(), "--frob"));
  assert_int_equal(RunCli({"put", "k"}).exit_code, 2);
  assert_int_equal(RunCli({"stat", "a", "b"}).exit_code, 2);
  assert_int_equal(RunCli({"ls", "--limit", "ten"}).exit_code, 2);
  assert_int_equal(RunCli({"rm"}).exit_code, 2);
  assert_int_equal(RunCli({"rm", "--regex", "x", "k"}).exit_code, 2);
  assert_int_equal(RunCli({"snapshot", "now"}).exit_code, 2);
  assert_int_equal(RunCli({"--json=yes", "stats"}).exit_code, 2);
  assert_int_equal(RunCli({}).exit_code, 2);
}

// Every command has help, by "CMD --help" and "help CMD", naming its arguments and options.
void test_help_for_every_command(void** state) {
  (void)state;
  for (const auto& command : mooncake::cli::Commands()) {
    for (const auto& args :
         std::vector<std::vector<std::string>>{{command.name, "--help"}, {"help", command.name}}) {
      CliRun help = RunCli(args);
      assert_int_equal(help.exit_code, 0);
      std::string usage = std::string("usage: mooncake-cli [global options] ") + command.name;
      assert_non_null(std::strstr(help.out.c_str(), usage.c_str()));
      std::istringstream words(command.arguments);
      for (std::string word; words >> word;) {
        assert_non_null(std::strstr(help.out.c_str(), word.c_str()));
      }
      for (const auto& option : command.options) {
        assert_non_null(std::strstr(help.out.c_str(), (std::string("--") + option.name).c_str()));
      }
    }
  }
  CliRun general = RunCli({"--help"});
  assert_int_equal(general.exit_code, 0);
  for (const auto& command : mooncake::cli::Commands()) {
    assert_non_null(std::strstr(general.out.c_str(), command.name));
  }
}

// A daemon (or master) that cannot be reached is exit 4, for every kind of command.
void test_unreachable(void** state) {
  (void)state;
  const std::string in = g_dir + "/down.bin";
  WriteFile(in, "x");
  std::string socket = mc_cluster_socket_at(g_cluster, 1);
  mc_cluster_kill_daemon_at(g_cluster, 1, SIGKILL);
  assert_int_equal(RunCli({"--socket", socket, "put", "down/a", in}).exit_code, 4);
  assert_int_equal(RunCli({"--socket", socket, "get", "rt/file"}).exit_code, 4);
  assert_int_equal(RunCli({"--socket", socket, "exists", "rt/file"}).exit_code, 4);
  assert_int_equal(RunCli({"--socket", socket, "rm", "rt/file"}).exit_code, 4);
  std::string nowhere = "http://127.0.0.1:" + std::to_string(mooncake::testing::FreeTcpPort());
  assert_int_equal(RunCli({"--admin_url", nowhere, "segments"}).exit_code, 4);
  assert_int_equal(RunCli({"--admin_url", nowhere, "health"}).exit_code, 4);
  std::string no_master = "127.0.0.1:" + std::to_string(mooncake::testing::FreeTcpPort());
  assert_int_equal(RunCli({"--master", no_master, "snapshot"}).exit_code, 4);
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_help_for_every_command),
      cmocka_unit_test(test_put_get_round_trip),
      cmocka_unit_test(test_exists_exit_codes),
      cmocka_unit_test(test_stat_shows_replicas),
      cmocka_unit_test(test_rm_regex),
      cmocka_unit_test(test_ls_limit_regex),
      cmocka_unit_test(test_segments_stats_health),
      cmocka_unit_test(test_snapshot),
      cmocka_unit_test(test_unreachable),  // last: it kills daemon 1
  };
  return cmocka_run_group_tests(tests, Setup, Teardown);
}
