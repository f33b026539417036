// Mooncake's command lines and config files start our binaries (common/base/mooncake_compat.h),
// against real processes on 127.0.0.1:
//  - Mooncake's own conf/master.yaml and conf/master.json (tests/data/mooncake_master.*,
//    copied verbatim from kvcache-ai/Mooncake mooncake-store/conf/) start the master, by
//    --config_path, with one warning per key we do not implement and no error; the keys we
//    implement take effect (the start line reports them) and the command line wins over
//    the file (ports, --client_ttl);
//  - the aliases --port, --max_threads, --client_ttl, --config_path[=] work, the
//    mooncake_master name too, and mooncaked takes Mooncake's client spellings;
//  - an ignored flag on the command line is skipped with one warning, its value consumed;
//  - an unknown flag or config key exits 2 naming it; values outside ours (a cachelib
//    allocator, https etcd) are refused naming the flag.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/base/mooncake_compat.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

namespace {

namespace harness = mooncake::testing;

std::string g_dir;

std::string DataFile(const std::string& name) {
  return std::string(MC_SOURCE_DIR) + "/tests/data/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

int CountLines(const std::string& log, const std::vector<std::string>& needles) {
  int n = 0;
  for (const std::string& line : Lines(log)) {
    bool all = true;
    for (const std::string& needle : needles) all = all && line.find(needle) != std::string::npos;
    n += all;
  }
  return n;
}

// The log of a running master once its start line is there.
std::string WaitForStartLine(const std::string& log_path) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string log;
  while (std::chrono::steady_clock::now() < deadline) {
    log = ReadFile(log_path);
    if (log.find(" starting: ") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return log;
}

// Runs a binary expected to refuse its flags: its exit status (as WEXITSTATUS) and log.
int RunToExit(const std::vector<std::string>& argv, const std::string& name, std::string* log) {
  harness::ChildProcess child;
  std::string path = g_dir + "/" + name + ".log";
  if (!child.Start(argv, path)) return -1;
  int status = child.Wait(10000);
  *log = ReadFile(path);
  return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::string> MasterArgv(std::vector<std::string> flags) {
  std::vector<std::string> argv = {harness::BuildPath("master/mooncake-master"),
                                   "--rpc_address", "127.0.0.1", "--metrics_port", "0",
                                   "--cluster_key_file", harness::ClusterKeyFile()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

// The keys of conf/master.yaml we do not implement; master.json has these and kv_events_*.
const std::vector<std::string> kYamlIgnored = {
    "rpc_interface",        "rpc_conn_timeout_seconds",
    "rpc_enable_tcp_no_delay", "dynamic_replication_mode",
    "dynamic_replication_heat_window_seconds", "dynamic_replication_admission_qps_threshold",
    "dynamic_replication_max_memory_replicas", "enable_multi_tenants",
    "tenant_quota_connector_type", "tenant_quota_connector_uri",
    "root_fs_dir",          "oplog_poll_interval_ms",
    "batch_oplog_retry_timeout_sec", "enable_http_metadata_server",
    "http_metadata_server_host", "http_metadata_server_port"};

// Starts the master on Mooncake's file; checks one warning per ignored key, no error, and
// that the file's implemented values took effect where the command line did not override.
void StartsOnMooncakeFile(const std::string& file, const std::vector<std::string>& ignored) {
  harness::ChildProcess master;
  int port = 0;
  std::string log_path = g_dir + "/" + file + ".log";
  assert_true(harness::StartMaster(&master, &port, log_path,
                                   {"--config_path", DataFile(file)}));
  std::string log = WaitForStartLine(log_path);
  for (const std::string& key : ignored) {
    if (CountLines(log, {" W master ", "--" + key + " (in ", "is ignored: "}) != 1) {
      fail_msg("%s: not exactly one warning for %s:\n%s", file.c_str(), key.c_str(),
               log.c_str());
    }
  }
  // Those warnings are all: nothing else is wrong with Mooncake's own file.
  assert_int_equal(CountLines(log, {" W master "}), static_cast<int>(ignored.size()));
  assert_int_equal(CountLines(log, {" E master "}), 0);
  // Taken from the file (Mooncake's values, not our defaults).
  for (const char* setting :
       {"cluster_id=mooncake_cluster ", "client_live_ttl_sec=60 ", "rpc_thread_num=16 ",
        "eviction_high_watermark_ratio=1 ", "eviction_ratio=0.1 ",
        "default_kv_lease_ttl=10000ms ", "default_kv_soft_pin_ttl=1800000ms "}) {
    if (CountLines(log, {" starting: ", setting}) != 1) {
      fail_msg("%s: the start line does not say %s:\n%s", file.c_str(), setting, log.c_str());
    }
  }
  // The command line won: our port (the file says 50051) and no admin port 9003.
  assert_int_equal(CountLines(log, {" starting: ", "rpc_port=" + std::to_string(port) + " "}),
                   1);
  assert_int_equal(CountLines(log, {" starting: ", "metrics_port=0 "}), 1);
  assert_true(harness::WithMasterClient(port, [](auto&) {}));
  assert_int_equal(WEXITSTATUS(master.Stop(SIGTERM, 10000)), 0);
}

void TestMooncakeYaml(void**) { StartsOnMooncakeFile("mooncake_master.yaml", kYamlIgnored); }

void TestMooncakeJson(void**) {
  std::vector<std::string> ignored = kYamlIgnored;
  for (const char* key : {"enable_kv_events", "kv_events_bind_endpoint", "kv_events_model_name",
                          "kv_events_backend_id", "kv_events_tenant_id", "kv_events_block_size",
                          "kv_events_dp_rank", "kv_events_emit_object_key"}) {
    ignored.push_back(key);
  }
  // The JSON file has no tenant keys.
  for (const char* key : {"enable_multi_tenants", "tenant_quota_connector_type",
                          "tenant_quota_connector_uri", "oplog_poll_interval_ms",
                          "batch_oplog_retry_timeout_sec"}) {
    ignored.erase(std::find(ignored.begin(), ignored.end(), key));
  }
  StartsOnMooncakeFile("mooncake_master.json", ignored);
}

// --port, --max_threads, --client_ttl and --config_path=, under Mooncake's binary name.
void TestAliases(void**) {
  int port = harness::FreeTcpPort();
  std::vector<std::string> argv =
      MasterArgv({"--config_path=" + DataFile("mooncake_master.yaml"), "--port",
                  std::to_string(port), "--max_threads", "3", "--client_ttl", "7"});
  argv[0] = harness::BuildPath("master/mooncake_master");
  harness::ChildProcess master;
  std::string log_path = g_dir + "/aliases.log";
  assert_true(master.Start(argv, log_path));
  assert_true(harness::WaitForTcpPort(port, 10000));
  std::string log = WaitForStartLine(log_path);
  // The aliases set their flags, over the file's rpc_port, rpc_thread_num and
  // client_live_ttl_sec; the file itself was read (its cluster_id).
  assert_int_equal(CountLines(log, {" starting: ", "rpc_port=" + std::to_string(port) + " ",
                                    "rpc_thread_num=3 ", "client_live_ttl_sec=7 ",
                                    "cluster_id=mooncake_cluster "}),
                   1);
  assert_true(harness::WithMasterClient(port, [](auto&) {}));
  assert_int_equal(WEXITSTATUS(master.Stop(SIGTERM, 10000)), 0);
}

// Ignored flags on the command line: one warning each, their values consumed (a bare
// boolean too), and a key given on both the command line and in the file warned once.
void TestIgnoredOnCommandLine(void**) {
  harness::ChildProcess master;
  int port = 0;
  std::string log_path = g_dir + "/ignored.log";
  assert_true(harness::StartMaster(
      &master, &port, log_path,
      {"--rpc_interface", "eth0", "--enable_cxl", "--log_dir=/var/log/mooncake", "--root_fs_dir",
       "/mnt/3fs", "--config", DataFile("mooncake_master.yaml")}));
  std::string log = WaitForStartLine(log_path);
  for (const char* key : {"rpc_interface", "enable_cxl", "log_dir", "root_fs_dir"}) {
    assert_int_equal(CountLines(log, {" W master ", std::string("--") + key + " is ignored: "}),
                     1);
    assert_int_equal(CountLines(log, {std::string("--") + key + " "}), 1);
  }
  assert_int_equal(CountLines(log, {" W master ", "is ignored: "}),
                   static_cast<int>(kYamlIgnored.size()) + 2);  // + enable_cxl, log_dir
  assert_true(harness::WithMasterClient(port, [](auto&) {}));
  assert_int_equal(WEXITSTATUS(master.Stop(SIGTERM, 10000)), 0);
}

// What neither we nor Mooncake know exits 2 naming it; values we cannot honour are refused.
void TestRefusals(void**) {
  std::string log;
  assert_int_equal(RunToExit(MasterArgv({"--no_such_flag", "1"}), "unknown", &log), 2);
  assert_non_null(strstr(log.c_str(), "unknown flag --no_such_flag"));

  std::string config = g_dir + "/unknown_key.yaml";
  std::ofstream(config) << "rpc_port: 0\nmetrics_port: 0\nno_such_key: 3\n";
  assert_int_equal(RunToExit(MasterArgv({"--config_path", config}), "unknown_key", &log), 2);
  assert_non_null(strstr(log.c_str(), ("unknown flag --no_such_key (in " + config).c_str()));

  assert_int_equal(RunToExit(MasterArgv({"--rpc_port", "0", "--memory_allocator", "cachelib"}),
                             "cachelib", &log),
                   2);
  assert_non_null(strstr(log.c_str(), "'cachelib' for --memory_allocator (expected offset)"));

  assert_int_equal(
      RunToExit(MasterArgv({"--rpc_port", "0", "--etcd_endpoints", "https://127.0.0.1:2379"}),
                "https", &log),
      2);
  assert_non_null(strstr(log.c_str(), "--etcd_endpoints: https:// is not supported"));

  assert_int_equal(RunToExit(MasterArgv({"--rpc_port", "0", "--enable_oplog"}), "oplog", &log), 2);
  assert_non_null(strstr(log.c_str(), "--enable_oplog needs --enable_ha"));

  std::string daemon_log;
  assert_int_equal(RunToExit({harness::BuildPath("daemon/mooncaked"), "--no_such_flag"},
                             "daemon_unknown", &daemon_log),
                   2);
  assert_non_null(strstr(daemon_log.c_str(), "unknown flag --no_such_flag"));
}

// mooncaked with Mooncake's client spellings: --master_server_address and --host name the
// master and the advertised name; --metadata_server and --local_buffer_size are ignored.
void TestDaemonClientSpellings(void**) {
  harness::ChildProcess master;
  int port = 0;
  assert_true(harness::StartMaster(&master, &port, g_dir + "/daemon_master.log", {}));
  std::string socket = g_dir + "/d.sock";
  std::string log_path = g_dir + "/daemon.log";
  harness::ChildProcess daemon;
  assert_true(daemon.Start(
      {harness::BuildPath("daemon/mooncaked"), "--master_server_address",
       "127.0.0.1:" + std::to_string(port), "--host", "127.0.0.1", "--socket", socket,
       "--global_segment_size", "16MB", "--http_port", "0", "--cluster_key_file",
       harness::ClusterKeyFile(), "--metadata_server", "http://127.0.0.1:8080/metadata",
       "--local_buffer_size", "16MB"},
      log_path));
  assert_true(harness::WaitForUnixSocket(socket, 10000));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string log;
  while (std::chrono::steady_clock::now() < deadline) {
    log = ReadFile(log_path);
    if (log.find("registered with the master") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  assert_int_equal(CountLines(log, {" I daemon ", "registered with the master"}), 1);
  for (const char* key : {"metadata_server", "local_buffer_size"}) {
    assert_int_equal(
        CountLines(log, {" W daemon ", std::string("--") + key + " is ignored: "}), 1);
  }
  assert_int_equal(WEXITSTATUS(daemon.Stop(SIGTERM, 90000)), 0);
  master.Stop(SIGTERM, 10000);
}

// Every name the tables list is documented in docs/operations.md's mapping table.
void TestTablesDocumented(void**) {
  std::string doc = ReadFile(std::string(MC_SOURCE_DIR) + "/docs/operations.md");
  for (const auto* table :
       {&mooncake::MooncakeMasterSettings(), &mooncake::MooncakeClientSettings()}) {
    for (const mooncake::MooncakeSetting& s : *table) {
      if (doc.find("`" + std::string(s.name) + "`") == std::string::npos) {
        fail_msg("docs/operations.md does not list `%s`", s.name);
      }
    }
  }
}

int Setup(void**) {
  g_dir = harness::MakeTempDir("mc-compat");
  return g_dir.empty() ? -1 : 0;
}

int Teardown(void**) {
  if (getenv("MC_KEEP_TEST_DIR") == nullptr) harness::RemoveTree(g_dir);
  return 0;
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(TestMooncakeYaml),
      cmocka_unit_test(TestMooncakeJson),
      cmocka_unit_test(TestAliases),
      cmocka_unit_test(TestIgnoredOnCommandLine),
      cmocka_unit_test(TestRefusals),
      cmocka_unit_test(TestDaemonClientSpellings),
      cmocka_unit_test(TestTablesDocumented),
  };
  return cmocka_run_group_tests(tests, Setup, Teardown);
}
