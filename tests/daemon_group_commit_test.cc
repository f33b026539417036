// Group commit of single-key puts and gets (daemon/cluster/master_batcher.h, docs/daemon.md) against
// a real master and daemon: many threads putting distinct keys all succeed and read back
// byte for byte, in fewer PutStart / PutEnd / GetReplicaList RPCs than calls (the daemon's
// /metrics say so); concurrent puts of one key leave exactly one whole value; a put of a
// key that exists keeps the old value while the new keys put beside it are stored; a put
// the master has no space for fails alone (-200) while the puts beside it succeed; a
// master killed while groups wait leaves no caller hanging, each hears an error.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "include/mooncake_store.h"
#include "tests/cluster.h"
#include "tests/cmocka_cpp.h"
#include "tests/http_test_util.h"
extern "C" {
#include "tests/cluster_test_util.h"
}

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr int kThreads = 8;
// Eight workers, so that eight requests reach the master client at once.
const char* const kDaemonFlags[] = {"--worker_threads", "8", nullptr};

mc_cluster* StartCluster(uint64_t segment, const char* const* daemon_flags) {
  mc_cluster_options options = {1, segment, 30000, nullptr, daemon_flags};
  mc_cluster* c = mc_cluster_start_with(&options);
  assert_non_null(c);
  return c;
}

// /metrics of daemon 0 as "name{labels}" -> value.
std::map<std::string, double> Scrape(const mc_cluster* c) {
  int port = mooncake::testing::AdminPortFromLog(mc_cluster_log_at(c, 0), "daemon", 20000);
  assert_true(port > 0);
  mooncake::testing::HttpAnswer answer = mooncake::testing::HttpGetLoopback(port, "/metrics");
  assert_int_equal(answer.status, 200);
  std::map<std::string, double> samples;
  std::istringstream lines(answer.body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return samples;
}

// How the grouped call kind moved between two scrapes: calls, and the RPCs they took.
struct Moved {
  double calls, rpcs;
};
Moved Delta(const std::map<std::string, double>& before,
            const std::map<std::string, double>& after, const std::string& call) {
  std::string labels = "{call=\"" + call + "\"}";
  auto get = [](const std::map<std::string, double>& s, const std::string& name) {
    auto it = s.find(name);
    if (it == s.end()) fail_msg("no %s in /metrics", name.c_str());
    return it->second;
  };
  std::string calls = "mooncake_daemon_master_grouped_calls_total" + labels;
  std::string rpcs = "mooncake_daemon_master_grouped_rpcs_total" + labels;
  Moved m{get(after, calls) - get(before, calls), get(after, rpcs) - get(before, rpcs)};
  std::printf("%s: %.0f calls in %.0f RPCs\n", call.c_str(), m.calls, m.rpcs);
  return m;
}

// Runs body(t) on kThreads threads started together.
template <class Body>
void OnThreads(Body body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready++;
      while (ready.load() < kThreads) std::this_thread::yield();
      body(t);
    });
  }
  for (std::thread& th : threads) th.join();
}

std::string Key(const char* prefix, int t, int i) {
  return std::string(prefix) + "/" + std::to_string(t) + "/" + std::to_string(i);
}

size_t SizeOf(int t, int i) { return 1000 + static_cast<size_t>((t * 131 + i * 977) % 9000); }

void test_concurrent_puts_share_rpcs_and_read_back(void**) {
  mc_cluster* c = StartCluster(256 * kMiB, kDaemonFlags);
  mooncake_store_t writer = connect_app(c, 0, 64 * kMiB);
  mooncake_store_t reader = connect_app(c, 0, 64 * kMiB);
  constexpr int kPuts = 300;
  auto before = Scrape(c);
  std::atomic<int> failed{0};
  OnThreads([&](int t) {
    std::vector<char> value(10000);
    for (int i = 0; i < kPuts; ++i) {
      std::string key = Key("distinct", t, i);
      fill_pattern(value.data(), SizeOf(t, i), seed_of(key.c_str(), 0));
      int rc = mooncake_store_put(writer, key.c_str(), value.data(), SizeOf(t, i), nullptr);
      if (rc != 0) {
        std::printf("put %s: %d\n", key.c_str(), rc);
        failed++;
      }
    }
  });
  assert_int_equal(failed.load(), 0);
  auto put = Scrape(c);
  // Read back from another handle, as concurrently: the first read of each asks the master.
  OnThreads([&](int t) {
    std::vector<char> value(10000);
    for (int i = 0; i < kPuts; ++i) {
      std::string key = Key("distinct", t, i);
      int64_t n = mooncake_store_get_into(reader, key.c_str(), value.data(), value.size());
      if (n != static_cast<int64_t>(SizeOf(t, i)) ||
          check_pattern(value.data(), SizeOf(t, i), seed_of(key.c_str(), 0)) != -1) {
        std::printf("get %s: %lld\n", key.c_str(), static_cast<long long>(n));
        failed++;
      }
    }
  });
  assert_int_equal(failed.load(), 0);
  auto got = Scrape(c);
  // One call per put and per first read; fewer RPCs, as concurrent calls shared them.
  for (const char* call : {"put_start", "put_end"}) {
    Moved m = Delta(before, put, call);
    assert_int_equal(static_cast<int>(m.calls), kThreads * kPuts);
    assert_true(m.rpcs < m.calls);
    assert_true(m.rpcs > 0);
  }
  Moved lists = Delta(put, got, "get_replica_list");
  assert_int_equal(static_cast<int>(lists.calls), kThreads * kPuts);
  assert_true(lists.rpcs < lists.calls);
  mooncake_store_destroy(writer);
  mooncake_store_destroy(reader);
  mc_cluster_stop(c);
}

// Eight puts of one key at once, many times over: each answers 0 (a put never overwrites:
// the losers leave the winner's value), and the value is one writer's, whole.
void test_concurrent_puts_of_one_key_leave_one_whole_value(void**) {
  mc_cluster* c = StartCluster(256 * kMiB, kDaemonFlags);
  mooncake_store_t s = connect_app(c, 0, 64 * kMiB);
  constexpr int kRounds = 60;
  constexpr size_t kSize = 64 * 1024;
  std::atomic<int> failed{0};
  for (int r = 0; r < kRounds; ++r) {
    std::string key = "same/" + std::to_string(r);
    OnThreads([&](int t) {
      std::vector<char> value(kSize);
      fill_pattern(value.data(), kSize, seed_of(key.c_str(), t));
      int rc = mooncake_store_put(s, key.c_str(), value.data(), kSize, nullptr);
      if (rc != 0) {
        std::printf("put %s from %d: %d\n", key.c_str(), t, rc);
        failed++;
      }
    });
    std::vector<char> value(kSize);
    assert_int_equal(mooncake_store_get_into(s, key.c_str(), value.data(), kSize), kSize);
    int whole = 0;
    for (int t = 0; t < kThreads; ++t) {
      whole += check_pattern(value.data(), kSize, seed_of(key.c_str(), t)) == -1;
    }
    assert_int_equal(whole, 1);
  }
  assert_int_equal(failed.load(), 0);
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

// Thread 0 puts keys that exist while the others put new ones beside it: the old values
// stay (its puts answer 0, as a put of an existing key does), every new key is stored.
void test_a_group_mixing_existing_and_new_keys(void**) {
  mc_cluster* c = StartCluster(256 * kMiB, kDaemonFlags);
  mooncake_store_t s = connect_app(c, 0, 64 * kMiB);
  constexpr int kPuts = 200;
  std::vector<char> value(10000);
  for (int i = 0; i < kPuts; ++i) {
    std::string key = Key("old", 0, i);
    fill_pattern(value.data(), SizeOf(0, i), seed_of(key.c_str(), 0));
    assert_int_equal(mooncake_store_put(s, key.c_str(), value.data(), SizeOf(0, i), nullptr), 0);
  }
  auto before = Scrape(c);
  std::atomic<int> failed{0};
  OnThreads([&](int t) {
    std::vector<char> mine(10000);
    for (int i = 0; i < kPuts; ++i) {
      std::string key = t == 0 ? Key("old", 0, i) : Key("new", t, i);
      fill_pattern(mine.data(), SizeOf(t, i), seed_of(key.c_str(), 1));  // other bytes
      int rc = mooncake_store_put(s, key.c_str(), mine.data(), SizeOf(t, i), nullptr);
      if (rc != 0) {
        std::printf("put %s: %d\n", key.c_str(), rc);
        failed++;
      }
    }
  });
  assert_int_equal(failed.load(), 0);
  Moved starts = Delta(before, Scrape(c), "put_start");
  assert_true(starts.rpcs < starts.calls);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPuts; ++i) {
      std::string key = t == 0 ? Key("old", 0, i) : Key("new", t, i);
      int64_t n = mooncake_store_get_into(s, key.c_str(), value.data(), value.size());
      assert_int_equal(n, SizeOf(t, i));
      assert_int_equal(check_pattern(value.data(), SizeOf(t, i), seed_of(key.c_str(), t == 0 ? 0 : 1)),
                       -1);
    }
  }
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

// A value larger than the whole segment: the master answers -200 for as long as the put
// asks again (--put_no_space_wait), while the small puts of the other threads, sharing
// RPCs with those retries, all succeed.
void test_no_space_for_one_put_fails_it_alone(void**) {
  const char* const flags[] = {"--worker_threads", "8", "--put_no_space_wait", "500ms", nullptr};
  mc_cluster* c = StartCluster(16 * kMiB, flags);
  mooncake_store_t s = connect_app(c, 0, 64 * kMiB);
  std::atomic<int> failed{0};
  std::atomic<bool> big_done{false};
  int big_rc = 1;
  OnThreads([&](int t) {
    if (t == 0) {
      std::vector<char> big(24 * kMiB, 'x');
      big_rc = mooncake_store_put(s, "big", big.data(), big.size(), nullptr);
      big_done = true;
      return;
    }
    std::vector<char> value(4096);
    // Until the big put gave up, and at least a few rounds.
    for (int i = 0; i < 20 || !big_done.load(); ++i) {
      std::string key = Key("small", t, i);
      fill_pattern(value.data(), value.size(), seed_of(key.c_str(), 0));
      int rc = mooncake_store_put(s, key.c_str(), value.data(), value.size(), nullptr);
      if (rc != 0) {
        std::printf("put %s: %d\n", key.c_str(), rc);
        failed++;
      }
      // Each put's key is removed again: the segment stays roomy for the small ones.
      mooncake_store_remove(s, key.c_str(), 1);
    }
  });
  assert_int_equal(big_rc, MOONCAKE_STORE_NO_AVAILABLE_HANDLE);
  assert_int_equal(failed.load(), 0);
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

// Puts flow from eight threads; the master is stopped (the RPCs in flight hang, the calls
// behind them queue up), then killed: every thread's put returns an error soon, none hangs.
void test_a_master_killed_under_a_group_fails_every_waiter(void**) {
  mc_cluster* c = StartCluster(256 * kMiB, kDaemonFlags);
  mooncake_store_t s = connect_app(c, 0, 64 * kMiB);
  std::atomic<int> puts{0}, finished{0};
  std::vector<int> last(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<char> value(4096, static_cast<char>(t));
      for (int i = 0;; ++i) {
        std::string key = Key("doomed", t, i);
        int rc = mooncake_store_put(s, key.c_str(), value.data(), value.size(), nullptr);
        if (rc != 0) {
          last[t] = rc;
          break;
        }
        puts++;
      }
      finished++;
    });
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (puts.load() < 500 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  assert_true(puts.load() >= 500);
  assert_int_equal(mc_cluster_pause_master(c), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  mc_cluster_kill_master(c, SIGKILL);
  // Well inside --rpc_timeout (10 s): a broken connection fails the call at once.
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (finished.load() < kThreads && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (finished.load() < kThreads) fail_msg("%d puts still waiting", kThreads - finished.load());
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    std::printf("thread %d: %d (%s)\n", t, last[t], mooncake_store_strerror(last[t]));
    assert_true(last[t] < 0);
  }
  mooncake_store_destroy(s);
  mc_cluster_stop(c);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_puts_share_rpcs_and_read_back),
      cmocka_unit_test(test_concurrent_puts_of_one_key_leave_one_whole_value),
      cmocka_unit_test(test_a_group_mixing_existing_and_new_keys),
      cmocka_unit_test(test_no_space_for_one_put_fails_it_alone),
      cmocka_unit_test(test_a_master_killed_under_a_group_fails_every_waiter),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
