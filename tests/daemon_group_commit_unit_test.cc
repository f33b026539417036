// The group commit queue (daemon/base/group_commit.h) and the daemon's master batcher
// (daemon/cluster/master_batcher.h) on their own: a lone call runs alone (and a second one too,
// with two leaders allowed); calls made while a run is in progress run together in the
// next one, oldest first, and the lead passes on after a few runs; a group never exceeds
// its cap nor holds a call that may not share it; every result reaches its caller and no
// caller is left waiting (many threads, many rounds, one or two leaders); a batcher whose
// master cannot be reached answers every concurrent caller RPC_FAIL.
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "daemon/base/group_commit.h"
#include "daemon/cluster/master_batcher.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

using namespace mooncake;

namespace {

struct Job {
  int value = 0;
  int kind = 0;    // only jobs of one kind share a run
  int result = -1;
  size_t ran_with = 0;  // the size of the group it ran in, as the runner saw it
};

// A runner that holds its first run until released, and records every group.
struct Recorder {
  std::mutex mu;
  std::vector<std::vector<int>> groups;  // the values of each run, in order
  std::atomic<bool> hold{false};
  std::atomic<bool> holding{false};

  void Run(const std::vector<Job*>& group) {
    if (hold.load()) {
      holding = true;
      while (hold.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::vector<int> values;
    for (Job* j : group) {
      j->result = j->value * 10;
      j->ran_with = group.size();
      values.push_back(j->value);
    }
    std::lock_guard<std::mutex> lock(mu);
    groups.push_back(values);
  }
};

GroupCommit<Job>::Compatible SameKind() {
  return [](const Job& a, const Job& b) { return a.kind == b.kind; };
}

// Polls cond for up to 20 s.
template <class Cond>
bool Eventually(Cond cond) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void test_a_lone_call_runs_alone(void**) {
  Recorder rec;
  GroupCommit<Job> gc(8, [&](const std::vector<Job*>& g) { rec.Run(g); }, SameKind());
  for (int i = 0; i < 3; ++i) {
    Job j;
    j.value = i;
    assert_int_equal(gc.Submit(&j), 1);
    assert_int_equal(j.result, i * 10);
  }
  assert_int_equal(rec.groups.size(), 3);
}

// The first call runs and is held; n others arrive meanwhile and wait (pending() says so);
// released, they run as groups of at most cap, oldest first, each with its own result.
void RunHeldThenQueued(size_t cap, int n, std::vector<size_t>* sizes) {
  Recorder rec;
  GroupCommit<Job> gc(cap, [&](const std::vector<Job*>& g) { rec.Run(g); }, SameKind());
  rec.hold = true;
  Job first;
  first.value = 100;
  std::thread leader([&] { gc.Submit(&first); });
  assert_true(Eventually([&] { return rec.holding.load(); }));
  std::vector<Job> jobs(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    jobs[i].value = i;
    // One at a time, so that the queue's order is known.
    threads.emplace_back([&gc, &jobs, i] { gc.Submit(&jobs[i]); });
    assert_true(Eventually([&] { return gc.pending() == static_cast<size_t>(i) + 1; }));
  }
  rec.hold = false;
  leader.join();
  for (std::thread& t : threads) t.join();
  assert_int_equal(first.result, 1000);
  for (int i = 0; i < n; ++i) assert_int_equal(jobs[i].result, i * 10);
  assert_int_equal(gc.pending(), 0);
  sizes->clear();
  int next = 0;
  for (size_t g = 1; g < rec.groups.size(); ++g) {
    sizes->push_back(rec.groups[g].size());
    for (int v : rec.groups[g]) assert_int_equal(v, next++);  // oldest first
  }
  assert_int_equal(rec.groups[0].size(), 1);
}

void test_calls_queued_behind_a_run_share_the_next(void**) {
  std::vector<size_t> sizes;
  RunHeldThenQueued(16, 6, &sizes);
  assert_int_equal(sizes.size(), 1);
  assert_int_equal(sizes[0], 6);
}

void test_a_group_never_exceeds_its_cap(void**) {
  std::vector<size_t> sizes;
  RunHeldThenQueued(4, 10, &sizes);
  assert_int_equal(sizes.size(), 3);
  assert_int_equal(sizes[0], 4);
  assert_int_equal(sizes[1], 4);
  assert_int_equal(sizes[2], 2);
}

// More queued groups than one leader runs (GroupCommit::kRunsPerLeader): the lead passes
// on to the oldest waiter, and every call still runs once, oldest first.
void test_the_lead_passes_on_after_a_few_runs(void**) {
  std::vector<size_t> sizes;
  RunHeldThenQueued(2, 20, &sizes);
  assert_int_equal(sizes.size(), 10);
  for (size_t size : sizes) assert_int_equal(size, 2);
}

// With two leaders allowed, a second call made during a run goes at once too; only a
// third waits, and then runs.
void test_a_second_leader_runs_at_once(void**) {
  Recorder rec;
  std::atomic<int> entered{0};
  GroupCommit<Job> gc(
      8,
      [&](const std::vector<Job*>& g) {
        entered++;
        rec.Run(g);
      },
      SameKind(), /*max_leaders=*/2);
  rec.hold = true;
  Job a, b, c;
  a.value = 1;
  b.value = 2;
  c.value = 3;
  std::thread ta([&] { gc.Submit(&a); });
  assert_true(Eventually([&] { return entered.load() == 1; }));
  std::thread tb([&] { gc.Submit(&b); });
  assert_true(Eventually([&] { return entered.load() == 2; }));
  assert_int_equal(gc.pending(), 0);
  std::thread tc([&] { gc.Submit(&c); });
  assert_true(Eventually([&] { return gc.pending() == 1; }));
  assert_int_equal(entered.load(), 2);
  rec.hold = false;
  ta.join();
  tb.join();
  tc.join();
  assert_int_equal(a.result + b.result + c.result, 60);
  assert_int_equal(rec.groups.size(), 3);
  assert_int_equal(gc.pending(), 0);
}

// Calls of two kinds queued alternately: each run holds one kind only, and both run.
void test_only_compatible_calls_share_a_run(void**) {
  Recorder rec;
  GroupCommit<Job> gc(16, [&](const std::vector<Job*>& g) { rec.Run(g); }, SameKind());
  rec.hold = true;
  Job first;
  std::thread leader([&] { gc.Submit(&first); });
  assert_true(Eventually([&] { return rec.holding.load(); }));
  std::vector<Job> jobs(6);
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    jobs[i].value = i;
    jobs[i].kind = i % 2;
    threads.emplace_back([&gc, &jobs, i] { gc.Submit(&jobs[i]); });
    assert_true(Eventually([&] { return gc.pending() == static_cast<size_t>(i) + 1; }));
  }
  rec.hold = false;
  leader.join();
  for (std::thread& t : threads) t.join();
  assert_int_equal(rec.groups.size(), 3);  // the first, then kind 0's three, then kind 1's
  assert_int_equal(rec.groups[1].size(), 3);
  assert_int_equal(rec.groups[2].size(), 3);
  for (size_t g = 1; g < 3; ++g) {
    for (int v : rec.groups[g]) assert_int_equal(v % 2, rec.groups[g][0] % 2);
  }
  for (int i = 0; i < 6; ++i) assert_int_equal(jobs[i].ran_with, 3);
}

// Many threads, many calls, a runner of varying length: every call gets its own result,
// the group size Submit returns is the one it ran in, nobody is left waiting.
void ManyThreads(size_t max_leaders) {
  std::atomic<uint64_t> runs{0}, calls{0};
  GroupCommit<Job> gc(
      5,
      [&](const std::vector<Job*>& g) {
        runs++;
        calls += g.size();
        if (runs % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
        for (Job* j : g) {
          j->result = j->value + 1;
          j->ran_with = g.size();
        }
      },
      SameKind(), max_leaders);
  constexpr int kThreads = 8, kCalls = 2000;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        Job j;
        j.value = t * kCalls + i;
        j.kind = i % 3 == 0 ? 1 : 0;
        size_t size = gc.Submit(&j);
        if (j.result != j.value + 1 || size != j.ran_with || size == 0 || size > 5) wrong++;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  assert_int_equal(wrong.load(), 0);
  assert_int_equal(calls.load(), kThreads * kCalls);
  assert_true(runs.load() <= calls.load());
  assert_int_equal(gc.pending(), 0);
}

void test_many_threads_every_call_answered(void**) {
  ManyThreads(1);
  ManyThreads(2);
}

// No master listens: each of the concurrent callers of each kind hears RPC_FAIL, soon.
void test_an_unreachable_master_fails_every_caller(void**) {
  MasterClientOptions mo;
  mo.port = testing::FreeTcpPort();
  mo.connect_timeout_ms = 200;
  MasterClient master(mo);
  MasterBatcher batcher(&master, 64, kDefaultSpinMicros * 1000);
  constexpr int kThreads = 8;
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::string key = "k" + std::to_string(t);
      for (int i = 0; i < 5; ++i) {
        rpc::PutStartResult started;
        rpc::ReplicaListResult list;
        failed += batcher.PutStart(1, key, 10, rpc::ReplicateConfig(), &started) ==
                  ErrorCode::RPC_FAIL;
        failed += batcher.PutEnd(1, key, -1) == ErrorCode::RPC_FAIL;
        failed += batcher.GetReplicaList(key, 0, &list) == ErrorCode::RPC_FAIL;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  assert_int_equal(failed.load(), kThreads * 5 * 3);
  assert_true(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_lone_call_runs_alone),
      cmocka_unit_test(test_calls_queued_behind_a_run_share_the_next),
      cmocka_unit_test(test_a_group_never_exceeds_its_cap),
      cmocka_unit_test(test_the_lead_passes_on_after_a_few_runs),
      cmocka_unit_test(test_a_second_leader_runs_at_once),
      cmocka_unit_test(test_only_compatible_calls_share_a_run),
      cmocka_unit_test(test_many_threads_every_call_answered),
      cmocka_unit_test(test_an_unreachable_master_fails_every_caller),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
