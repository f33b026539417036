// mooncake-cli against a real master and two daemons (tests/cluster.h): the binary is run
// as a user runs it (fork + exec, stdin and stdout redirected to files), and what it
// prints and its exit code are checked. Data commands go through the daemon's socket, admin
// commands through the master's admin HTTP (its port read from the master's log) and, for
// snapshot, its Thrift port with the cluster key. The master's read lease is long (a
// minute), so that a key read by a get is certainly leased when rm follows.
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
#include "common/base/version.h"
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

// How RunCli starts the CLI: by default with --socket (daemon 0's), --master, --admin_url
// and --cluster_key_file (the cluster's key: the admin HTTP's token) flags; flags = false
// gives none, key = false all but the key, and env the variables it then finds (the CLI's
// variables of the test's own environment are never passed on).
struct CliEnv {
  bool flags = true;
  bool key = true;
  std::vector<std::pair<std::string, std::string>> env;
};

// Runs mooncake-cli with args against the cluster, stdin from stdin_path ("" = /dev/null);
// waits for it to exit.
CliRun RunCli(const std::vector<std::string>& args, const std::string& stdin_path = "",
              const CliEnv& how = CliEnv()) {
  static int runs = 0;
  std::string out_path = g_dir + "/cli-" + std::to_string(runs) + ".out";
  std::string err_path = g_dir + "/cli-" + std::to_string(runs++) + ".err";
  std::string binary = mooncake::testing::BuildPath("cli/mooncake-cli");
  std::string master = "127.0.0.1:" + std::to_string(mc_cluster_master_port(g_cluster));
  std::vector<std::string> argv = {binary};
  if (how.flags) {
    argv.insert(argv.end(), {"--socket", mc_cluster_socket_at(g_cluster, 0), "--master", master,
                             "--admin_url", g_admin_url});
    if (how.key) argv.insert(argv.end(), {"--cluster_key_file", mooncake::testing::ClusterKeyFile()});
  }
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = fork();
  if (pid == 0) {
    int in = open(stdin_path.empty() ? "/dev/null" : stdin_path.c_str(), O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    for (const char* name : {"MOONCAKE_SOCKET", "MOONCAKE_MASTER", "MOONCAKE_MASTER_ADMIN_URL",
                             "MOONCAKE_DAEMON_ADMIN_URL", "MOONCAKE_CLUSTER_KEY_FILE",
                             "MOONCAKE_ADMIN_TOKEN_FILE"}) {
      unsetenv(name);
    }
    for (const auto& e : how.env) setenv(e.first.c_str(), e.second.c_str(), 1);
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

bool Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return true;
  std::fprintf(stderr, "expected \"%s\" in: %s\n", part.c_str(), text.c_str());
  return false;
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
  static const char* const master_flags[] = {
      "--enable_snapshot",      "--snapshot_dir", "{dir}/snapshots",
      "--default_kv_lease_ttl", "60000",          nullptr};
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

// A multi-MB random file through put and get, byte for byte: from a file (-f FILE) to a
// file, and from stdin ("-", and "-f -": a FIFO, whose size the CLI learns only by reading
// it) to stdout.
void test_put_get_round_trip(void** state) {
  (void)state;
  const std::string value = RandomBytes((6u << 20) + 12345, 1);
  const std::string in = g_dir + "/value.bin";
  WriteFile(in, value);
  // --progress: the line goes to stderr (a file here), ending with the total and the rate.
  CliRun put = RunCli({"--progress", "put", "rt/file", "-f", in});
  assert_int_equal(put.exit_code, 0);
  assert_true(std::regex_search(put.err, std::regex("put rt/file  6.0 MiB in [0-9.]+ m?s  ")));
  assert_true(put.out == "stored rt/file (6.0 MiB)\n");
  const std::string out = g_dir + "/value.out";
  assert_int_equal(RunCli({"get", "rt/file", out}).exit_code, 0);
  assert_true(ReadFile(out) == value);

  // stdin from a FIFO fed by a thread: the CLI cannot know the size before it has read it.
  const std::string fifo = g_dir + "/value.fifo";
  assert_int_equal(mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& form : std::vector<std::vector<std::string>>{
           {"--json", "put", "rt/stdin", "-"}, {"--json", "put", "rt/stdin-f", "-f", "-"}}) {
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
    CliRun from_stdin = RunCli(form, fifo);
    writer.join();
    assert_int_equal(from_stdin.exit_code, 0);
    assert_int_equal(ParseJson(from_stdin.out)["size"].get<uint64_t>(), value.size());
    CliRun to_stdout = RunCli({"get", form[2]});
    assert_int_equal(to_stdout.exit_code, 0);
    assert_true(to_stdout.out == value);
  }
  CliRun dash = RunCli({"get", "rt/file", "-"});
  assert_int_equal(dash.exit_code, 0);
  assert_true(dash.out == value);

  // A file that cannot be read: exit 3, naming it.
  CliRun no_file = RunCli({"put", "rt/nofile", "-f", g_dir + "/no-such-file"});
  assert_int_equal(no_file.exit_code, 3);
  assert_true(Contains(no_file.err, "cannot open " + g_dir + "/no-such-file"));

  // A missing key: exit 1, and the output file is not created.
  const std::string never = g_dir + "/never.out";
  assert_int_equal(RunCli({"get", "rt/none", never}).exit_code, 1);
  assert_int_not_equal(access(never.c_str(), F_OK), 0);
}

void test_exists_exit_codes(void** state) {
  (void)state;
  assert_int_equal(RunCli({"put", "ex/a", "hello"}).exit_code, 0);
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
  CliRun put = RunCli({"--json", "put", "--replicas", "2", "st/two", "-f", in});
  assert_int_equal(put.exit_code, 0);
  assert_int_equal(ParseJson(put.out)["replicas"].get<int>(), 2);
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

  // More replicas than daemons: the master places one per daemon, and the CLI says so.
  CliRun three = RunCli({"--json", "put", "--replicas", "3", "st/three", "x"});
  assert_int_equal(three.exit_code, 0);
  json placed = ParseJson(three.out);
  assert_int_equal(placed["replicas"].get<int>(), 2);
  assert_int_equal(placed["replicas_asked"].get<int>(), 3);
  assert_true(Contains(three.err, "the master placed 2 of 3 replicas"));
  CliRun stat3 = RunCli({"stat", "--json", "st/three"});
  assert_int_equal(ParseJson(stat3.out)["replicas"].size(), 2);
}

// rm --regex removes exactly the keys the pattern matches and says how many.
void test_rm_regex(void** state) {
  (void)state;
  for (const char* k : {"rmx/tmp/1", "rmx/tmp/2", "rmx/tmp/3", "rmx/keep/tmp", "rmx/keep/1"}) {
    assert_int_equal(RunCli({"put", k, "x"}).exit_code, 0);
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
  assert_int_equal(RunCli({"put", "rmx/k", "x"}).exit_code, 0);
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
  CliEnv no_key;
  no_key.key = false;
  assert_int_equal(RunCli({"snapshot"}, "", no_key).exit_code, 3);
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

// put KEY VALUE stores the literal bytes of VALUE; after "--" a key and a value may start
// with '-'.
void test_put_literal_value(void** state) {
  (void)state;
  CliRun put = RunCli({"put", "lit/greeting", "hello world"});
  assert_int_equal(put.exit_code, 0);
  assert_true(put.out == "stored lit/greeting (11 B)\n");
  CliRun get = RunCli({"get", "lit/greeting"});
  assert_int_equal(get.exit_code, 0);
  assert_true(get.out == "hello world");
  // Not a file name: a VALUE that names an existing file is still stored as its text.
  const std::string file = g_dir + "/lit.txt";
  WriteFile(file, "file contents");
  assert_int_equal(RunCli({"put", "lit/path", file}).exit_code, 0);
  assert_true(RunCli({"get", "lit/path"}).out == file);

  assert_int_equal(RunCli({"put", "--", "-dash", "-v"}).exit_code, 0);
  CliRun dash = RunCli({"get", "--", "-dash"});
  assert_int_equal(dash.exit_code, 0);
  assert_true(dash.out == "-v");
  assert_int_equal(RunCli({"put", "lit/empty", ""}).exit_code, 2);
}

// A put never overwrites: a second put of a key says so and exits 5, the first value stays;
// --upsert replaces it.
void test_put_existing_key(void** state) {
  (void)state;
  assert_int_equal(RunCli({"put", "ow/k", "first"}).exit_code, 0);
  CliRun again = RunCli({"put", "ow/k", "second!"});
  assert_int_equal(again.exit_code, 5);
  assert_true(again.out.empty());
  assert_true(Contains(again.err,
                       "ow/k exists; not stored (Mooncake keeps the first value; "
                       "--upsert replaces it)"));
  assert_true(RunCli({"get", "ow/k"}).out == "first");
  CliRun j = RunCli({"--json", "put", "ow/k", "second!"});
  assert_int_equal(j.exit_code, 5);
  assert_false(ParseJson(j.out)["stored"].get<bool>());

  CliRun upsert = RunCli({"--json", "put", "--upsert", "ow/k", "second!"});
  assert_int_equal(upsert.exit_code, 0);
  assert_true(ParseJson(upsert.out)["stored"].get<bool>());
  assert_true(RunCli({"get", "ow/k"}).out == "second!");
  // --upsert of a key that does not exist is a put.
  assert_int_equal(RunCli({"put", "--upsert", "ow/new", "v"}).exit_code, 0);
  assert_true(RunCli({"get", "ow/new"}).out == "v");
}

// A get takes a read lease (a minute here); rm removes the key at once all the same. A
// hard-pinned key a read holds is kept without --force.
void test_rm_after_get(void** state) {
  (void)state;
  assert_int_equal(RunCli({"put", "lease/k", "v"}).exit_code, 0);
  assert_int_equal(RunCli({"get", "lease/k"}).exit_code, 0);
  CliRun rm = RunCli({"rm", "lease/k"});
  assert_int_equal(rm.exit_code, 0);
  assert_true(Contains(rm.out,
                       "removed lease/k (a read holds it: its space returns when the "
                       "lease ends)"));
  assert_true(RunCli({"exists", "lease/k"}).out == "missing lease/k\n");

  assert_int_equal(RunCli({"put", "--hard_pin", "lease/pinned", "v"}).exit_code, 0);
  assert_int_equal(RunCli({"get", "lease/pinned"}).exit_code, 0);
  CliRun kept = RunCli({"rm", "lease/pinned"});
  assert_int_equal(kept.exit_code, 3);
  assert_true(Contains(kept.err, "hard-pinned"));
  assert_true(Contains(kept.err, "rm --force"));
  assert_true(RunCli({"exists", "lease/pinned"}).out == "present lease/pinned\n");
  assert_int_equal(RunCli({"rm", "--force", "lease/pinned"}).exit_code, 0);
  assert_true(RunCli({"exists", "lease/pinned"}).out == "missing lease/pinned\n");
}

// With no flags, the CLI finds the cluster from the variables scripts/with-cluster.sh
// exports; a flag wins over its variable.
void test_environment(void** state) {
  (void)state;
  int daemon_port = mooncake::testing::AdminPortFromLog(mc_cluster_log_at(g_cluster, 0), "daemon");
  assert_true(daemon_port > 0);
  CliEnv cluster;
  cluster.flags = false;
  cluster.env = {
      {"MOONCAKE_SOCKET", mc_cluster_socket_at(g_cluster, 0)},
      {"MOONCAKE_MASTER", "127.0.0.1:" + std::to_string(mc_cluster_master_port(g_cluster))},
      {"MOONCAKE_MASTER_ADMIN_URL", g_admin_url},
      {"MOONCAKE_DAEMON_ADMIN_URL", "http://127.0.0.1:" + std::to_string(daemon_port)},
      {"MOONCAKE_CLUSTER_KEY_FILE", mooncake::testing::ClusterKeyFile()}};
  assert_int_equal(RunCli({"put", "env/k", "v"}, "", cluster).exit_code, 0);
  CliRun stat = RunCli({"stat", "--json", "env/k"}, "", cluster);
  assert_int_equal(stat.exit_code, 0);
  assert_int_equal(ParseJson(stat.out)["size"].get<int>(), 1);
  CliRun ls = RunCli({"ls", "--regex", "^env/"}, "", cluster);
  assert_int_equal(ls.exit_code, 0);
  assert_true(ls.out == "env/k\n");
  CliRun health = RunCli({"--json", "health"}, "", cluster);
  assert_int_equal(health.exit_code, 0);
  assert_true(ParseJson(health.out)["daemon"]["status"].get<std::string>() == "ok");

  // The flag wins: a dead URL in the variable does not matter when --admin_url is given.
  std::string nowhere = "http://127.0.0.1:" + std::to_string(mooncake::testing::FreeTcpPort());
  CliEnv dead = cluster;
  dead.env[2].second = nowhere;
  assert_int_equal(RunCli({"--admin_url", g_admin_url, "stat", "env/k"}, "", dead).exit_code, 0);
  CliRun from_env = RunCli({"stat", "env/k"}, "", dead);
  assert_int_equal(from_env.exit_code, 4);
  assert_true(Contains(from_env.err, nowhere));
}

// The admin HTTP answers the admin commands only with the cluster key's token (or that of
// a file the master was given as --admin_token_file): without a key file, or with another
// key, ls refuses (exit 3) and names the flags that give one; admin-token prints the token
// curl users send.
void test_admin_token(void** state) {
  (void)state;
  assert_int_equal(RunCli({"put", "--tenant", "alpha", "tok/secret-key", "v"}).exit_code, 0);
  CliRun ls = RunCli({"--tenant", "alpha", "ls"});
  assert_int_equal(ls.exit_code, 0);
  assert_true(ls.out == "tok/secret-key\n");

  CliEnv no_key;
  no_key.key = false;
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--tenant", "alpha", "ls"}, {"stat", "tok/k"},
                                             {"segments"}, {"stats"}, {"snapshot", "status"}}) {
    CliRun refused = RunCli(args, "", no_key);
    assert_int_equal(refused.exit_code, 3);
    assert_true(Contains(refused.err, "UNAUTHENTICATED"));
    assert_true(Contains(refused.err, "give --cluster_key_file or --admin_token_file"));
    assert_true(refused.out.find("secret") == std::string::npos);
  }
  // health reads open endpoints: no key needed.
  assert_int_equal(RunCli({"health"}, "", no_key).exit_code, 0);

  const std::string other = g_dir + "/other.key";
  assert_true(mooncake::testing::WriteClusterKeyFile(other, {mooncake::testing::RandomClusterKey()}));
  CliRun wrong = RunCli({"--admin_token_file", other, "ls"}, "", no_key);
  assert_int_equal(wrong.exit_code, 3);
  assert_true(Contains(wrong.err, "is not the master's"));
  CliRun unreadable = RunCli({"--admin_token_file", g_dir + "/no-such.key", "ls"}, "", no_key);
  assert_int_equal(unreadable.exit_code, 3);
  assert_true(Contains(unreadable.err, "--admin_token_file: "));
  assert_true(Contains(unreadable.err, "no-such.key"));

  // admin-token: the header value the master accepts, from either flag or variable.
  CliRun token = RunCli({"admin-token"});
  assert_int_equal(token.exit_code, 0);
  const std::string header = mooncake::testing::AdminAuthorization();
  assert_true(token.out == header.substr(header.rfind(' ') + 1) + "\n");
  int port = mooncake::testing::AdminPortFromLog(mc_cluster_master_log(g_cluster), "master");
  std::string bearer = "Authorization: Bearer " + token.out.substr(0, token.out.size() - 1);
  assert_int_equal(
      mooncake::testing::HttpRequestLoopback(port, "GET", "/get_all_keys", {bearer}).status, 200);
  CliEnv by_variable;
  by_variable.flags = false;
  by_variable.env = {{"MOONCAKE_ADMIN_TOKEN_FILE", other}};
  CliRun other_token = RunCli({"admin-token"}, "", by_variable);
  assert_int_equal(other_token.exit_code, 0);
  assert_true(other_token.out != token.out && other_token.out.size() == 65);
  CliRun none = RunCli({"admin-token"}, "", no_key);
  assert_int_equal(none.exit_code, 2);
  assert_true(Contains(none.err, "admin-token needs --cluster_key_file or --admin_token_file"));
}

void test_version(void** state) {
  (void)state;
  CliRun version = RunCli({"--version"});
  assert_int_equal(version.exit_code, 0);
  assert_true(version.out == std::string("mooncake-cli ") + mooncake::MooncakeVersion() + "\n");
}

// Unknown commands and bad options are usage errors (exit 2) that name the culprit.
void test_usage_errors(void** state) {
  (void)state;
  CliRun unknown = RunCli({"frobnicate"});
  assert_int_equal(unknown.exit_code, 2);
  assert_true(Contains(unknown.err, "unknown command \"frobnicate\""));
  CliRun bad_flag = RunCli({"get", "--frob", "k"});
  assert_int_equal(bad_flag.exit_code, 2);
  assert_true(Contains(bad_flag.err, "unknown option \"--frob\" for get"));
  CliRun bad_global = RunCli({"--frob=1", "stats"});
  assert_int_equal(bad_global.exit_code, 2);
  assert_true(Contains(bad_global.err, "unknown option \"--frob\""));
  CliRun no_value = RunCli({"put", "k"});
  assert_int_equal(no_value.exit_code, 2);
  assert_true(Contains(no_value.err, "-f FILE"));
  assert_int_equal(RunCli({"put", "k", "v", "-f", "file"}).exit_code, 2);
  assert_int_equal(RunCli({"put", "--replicas", "0", "k", "v"}).exit_code, 2);
  assert_int_equal(RunCli({"stat", "a", "b"}).exit_code, 2);
  CliRun count = RunCli({"ls", "--limit", "ten"});
  assert_int_equal(count.exit_code, 2);
  assert_true(Contains(count.err, "--limit takes a non-negative integer, not \"ten\""));
  assert_int_equal(RunCli({"rm"}).exit_code, 2);
  assert_int_equal(RunCli({"rm", "--regex", "x", "k"}).exit_code, 2);
  assert_int_equal(RunCli({"snapshot", "now"}).exit_code, 2);
  CliRun flag_value = RunCli({"--json=yes", "stats"});
  assert_int_equal(flag_value.exit_code, 2);
  assert_true(Contains(flag_value.err, "--json takes no value"));
  CliRun missing = RunCli({"stats", "--admin_url"});
  assert_int_equal(missing.exit_code, 2);
  assert_true(Contains(missing.err, "--admin_url needs a value"));
  assert_int_equal(RunCli({}).exit_code, 2);
}

// Every command has help, by "CMD --help", "CMD -h" and "help CMD", naming its arguments and
// options, in the shape help2man reads: a "Usage:" line, then one option per line.
void test_help_for_every_command(void** state) {
  (void)state;
  for (const auto& command : mooncake::cli::Commands()) {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {command.name, "--help"}, {command.name, "-h"}, {"help", command.name}}) {
      CliRun help = RunCli(args);
      assert_int_equal(help.exit_code, 0);
      std::string usage = std::string("Usage: mooncake-cli [OPTIONS] ") + command.name;
      assert_int_equal(help.out.compare(0, usage.size(), usage), 0);
      std::istringstream words(command.arguments);
      for (std::string word; words >> word;) assert_true(Contains(help.out, word));
      for (const auto& option : command.options) {
        std::string line = std::string("\n  ") +
                           (option.short_name != '\0' ? std::string("-") + option.short_name + ", "
                                                      : std::string()) +
                           "--" + option.name + (option.value_name != nullptr ? " " : "  ") +
                           (option.value_name != nullptr ? option.value_name : "");
        assert_true(Contains(help.out, line));
      }
      assert_true(Contains(help.out, "\n  -h, --help  "));
    }
  }
  CliRun general = RunCli({"--help"});
  assert_int_equal(general.exit_code, 0);
  assert_int_equal(general.out.compare(0, 19, "Usage: mooncake-cli"), 0);
  for (const auto& command : mooncake::cli::Commands()) {
    assert_true(Contains(general.out, std::string("\n  ") + command.name));
  }
  for (const char* line :
       {"\n  --socket PATH  ", "\n  --admin_url URL  ", "\n  --json  ", "\n  -v, --version  ",
        "\nExit codes:\n", "\n  5  put: the key exists"}) {
    assert_true(Contains(general.out, line));
  }
}

// A daemon (or master) that cannot be reached is exit 4, for every kind of command, with
// a line naming what was tried, why, and the fix.
void test_unreachable(void** state) {
  (void)state;
  const std::string none = g_dir + "/no-daemon.sock";
  CliRun no_socket = RunCli({"--socket", none, "get", "rt/file"});
  assert_int_equal(no_socket.exit_code, 4);
  assert_true(Contains(no_socket.err, "cannot reach mooncaked at " + none +
                                          ": No such file or directory (is it running? "
                                          "--socket or MOONCAKE_SOCKET name another)"));
  std::string socket = mc_cluster_socket_at(g_cluster, 1);
  mc_cluster_kill_daemon_at(g_cluster, 1, SIGKILL);
  assert_int_equal(RunCli({"--socket", socket, "put", "down/a", "x"}).exit_code, 4);
  assert_int_equal(RunCli({"--socket", socket, "get", "rt/file"}).exit_code, 4);
  assert_int_equal(RunCli({"--socket", socket, "exists", "rt/file"}).exit_code, 4);
  CliRun rm = RunCli({"--socket", socket, "rm", "rt/file"});
  assert_int_equal(rm.exit_code, 4);
  assert_true(Contains(rm.err, "cannot reach mooncaked at " + socket));
  std::string nowhere = "http://127.0.0.1:" + std::to_string(mooncake::testing::FreeTcpPort());
  CliRun segments = RunCli({"--admin_url", nowhere, "segments"});
  assert_int_equal(segments.exit_code, 4);
  assert_true(Contains(segments.err, "cannot reach the master's admin HTTP at " + nowhere));
  assert_true(Contains(segments.err, "--admin_url or MOONCAKE_MASTER_ADMIN_URL"));
  assert_int_equal(RunCli({"--admin_url", nowhere, "health"}).exit_code, 4);
  std::string no_master = "127.0.0.1:" + std::to_string(mooncake::testing::FreeTcpPort());
  CliRun snapshot = RunCli({"--master", no_master, "snapshot"});
  assert_int_equal(snapshot.exit_code, 4);
  assert_true(Contains(snapshot.err, "cannot reach the master at " + no_master));
  assert_true(Contains(snapshot.err, "--master or MOONCAKE_MASTER"));
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_help_for_every_command),
      cmocka_unit_test(test_version),
      cmocka_unit_test(test_put_get_round_trip),
      cmocka_unit_test(test_put_literal_value),
      cmocka_unit_test(test_put_existing_key),
      cmocka_unit_test(test_rm_after_get),
      cmocka_unit_test(test_environment),
      cmocka_unit_test(test_admin_token),
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
