// Rotating the cluster key by a rolling restart loses nothing (docs/security.md, "Rotating
// the key"). Real processes on 127.0.0.1: a master that keeps its metadata across
// restarts (snapshots, a strict log, restore at start) and two daemons that drain their
// global segment when stopped (--drain_on_shutdown: a daemon's objects live in its own
// memory, and without the drain a restart would take them with it).
//
// The key file every process reads goes through [A] (the start), [A, B], [B, A], [B]. At
// each step the file is rewritten, then the master is restarted, then each daemon in turn;
// after each restart every object written so far still reads back with its bytes and new
// puts work. At the end a process holding only A is refused.
//
// The file rewritten is the harness's own (ClusterKeyFile()), which this test's Thrift
// helpers (mc_cluster_*) read at every call: they rotate with the processes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "MasterService.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/process_harness.h"
extern "C" {
#include "tests/harness/cluster_test_util.h"
}

namespace {

namespace harness = mooncake::testing;

constexpr uint64_t kMiB = 1 << 20;
constexpr int kObjects = 300;  // before the rotation; each restart adds kLater more
constexpr int kLater = 32;

std::string ReadKey(const std::string& path) {
  std::ifstream in(path);
  std::string key;
  std::getline(in, key);
  return key;
}

int CountLines(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

// Waits until the master knows both daemons again and none of its segments waits for
// its daemon (after a restart of the master: they register and mount again).
void AwaitRejoined(mc_cluster* c) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  mc_cluster_master_stats stats = {};
  for (;;) {
    if (mc_cluster_master_stats_get(c, &stats) == 0 && stats.daemons == 2 &&
        stats.pending_segments == 0) {
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      fail_msg("the daemons did not rejoin: %lld daemons, %lld pending segments",
               static_cast<long long>(stats.daemons),
               static_cast<long long>(stats.pending_segments));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

struct Written {
  std::string prefix;
  int count;
};

// Every object written so far reads back with its bytes, through daemon `via`.
void AssertAllRead(mc_cluster* c, int via, const std::vector<Written>& written) {
  mooncake_store_t s = connect_app(c, via, 4 * kMiB);
  for (const Written& w : written) assert_all_read(s, w.prefix.c_str(), w.count);
  mooncake_store_destroy(s);
}

// New puts work through daemon `via`: kLater objects, read back.
void PutMore(mc_cluster* c, int via, const std::string& prefix, std::vector<Written>* written) {
  mooncake_store_t s = connect_app(c, via, 4 * kMiB);
  put_many(s, prefix.c_str(), kLater, nullptr);
  assert_all_read(s, prefix.c_str(), kLater);
  mooncake_store_destroy(s);
  written->push_back({prefix, kLater});
}

// How many of prefix/0..count-1 live on daemon i.
int OnDaemon(mc_cluster* c, int i, const Written& w) {
  char key[64];
  int n = 0;
  for (int k = 0; k < w.count; ++k) {
    key_of(key, sizeof(key), w.prefix.c_str(), k);
    n += replica_daemon(c, key, 0) == i;
  }
  return n;
}

void test_rolling_restart_through_two_keys_loses_nothing(void**) {
  const std::string key_file = harness::ClusterKeyFile();
  const std::string a = ReadKey(key_file);
  const std::string b = harness::RandomClusterKey();
  const std::string dir = harness::MakeTempDir("mc-key-rotation-");
  const std::string only_a = dir + "/only-a.key";
  assert_true(harness::WriteClusterKeyFile(only_a, {a}));

  const char* master_flags[] = {"--enable_snapshot", "--snapshot_dir", "{dir}/snap",
                                "--enable_snapshot_restore", "--oplog_mode", "strict",
                                nullptr};
  const char* daemon_flags[] = {"--drain_on_shutdown", "true", nullptr};
  mc_cluster_options o = {2, 64 * kMiB, 10000, master_flags, daemon_flags};
  mc_cluster* c = mc_cluster_start_with(&o);
  assert_non_null(c);

  std::vector<Written> written = {{"rotation-before", kObjects}};
  {
    mooncake_store_t s = connect_app(c, 0, 4 * kMiB);
    put_many(s, "rotation-before", kObjects, nullptr);
    mooncake_store_destroy(s);
  }
  // Both daemons hold some: each restart below has objects to move.
  assert_true(OnDaemon(c, 0, written[0]) > 0);
  assert_true(OnDaemon(c, 1, written[0]) > 0);

  const std::vector<std::vector<std::string>> steps = {{a, b}, {b, a}, {b}};
  for (size_t step = 0; step < steps.size(); ++step) {
    assert_true(harness::WriteClusterKeyFile(key_file, steps[step]));
    std::printf("step %zu: %zu key(s) in the file; restarting the master\n", step + 1,
                steps[step].size());
    mc_cluster_kill_master(c, SIGTERM);
    assert_int_equal(mc_cluster_restart_master(c), 0);
    AwaitRejoined(c);
    AssertAllRead(c, 0, written);
    PutMore(c, 1, "rotation-" + std::to_string(step) + "-master", &written);

    for (int i = 0; i < 2; ++i) {
      const int other = 1 - i;
      const std::string log = mc_cluster_log_at(c, i);
      const int drained = CountLines(log, " 0 dropped with it");
      std::printf("step %zu: restarting daemon %d\n", step + 1, i);
      int status = mc_cluster_kill_daemon_at(c, i, SIGTERM);
      assert_true(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
      // It moved its objects out before it left, and dropped none.
      assert_int_equal(CountLines(log, " 0 dropped with it"), drained + 1);
      AssertAllRead(c, other, written);
      assert_int_equal(mc_cluster_restart_daemon_at(c, i), 0);
      AwaitRejoined(c);
      AssertAllRead(c, i, written);
      PutMore(c, i, "rotation-" + std::to_string(step) + "-daemon-" + std::to_string(i),
              &written);
    }
  }

  int64_t total = 0;
  for (const Written& w : written) total += w.count;
  mc_cluster_master_stats stats = master_stats(c);
  assert_int_equal(stats.objects, total);
  AssertAllRead(c, 0, written);
  AssertAllRead(c, 1, written);
  // The old key is out: a client holding only A is refused.
  std::string error;
  assert_false(harness::WithMasterClientKey(mc_cluster_master_port(c), only_a,
                                            [](mooncake::rpc::MasterServiceClient&) {}, &error));
  assert_non_null(std::strstr(error.c_str(), "the master refused"));
  mc_cluster_stop(c);
  harness::RemoveTree(dir);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rolling_restart_through_two_keys_loses_nothing),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
