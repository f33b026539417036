// Spinning before blocking (common/base/spin_wait.h) and the worker pool that spins
// (daemon/base/worker_threads.h), in process:
//  - SpinUntil returns true when ready flips during the budget, false once the budget is
//    spent; a budget of 0 never spins; SpinUntilReadable sees a socket become readable;
//  - AdaptiveSpin halves its budget after each wait longer than kNearMissFactor full
//    budgets, down to 0, then spins only every kProbeEvery-th wait; a hit, or a blocked
//    wait that ended sooner (a near miss), restores the full budget;
//  - SpinnerLimit admits at most its limit;
//  - --spin_us parses and is range-checked; MOONCAKE_STORE_SPIN_US's parser too; the
//    master's --spin_us has the daemon's default;
//  - WorkerThreads loses no wake-up: rounds of concurrent submissions from several
//    threads, each round waited for with no later submission to rescue a stranded job,
//    with spinning off, short and long, on one worker and on four;
//  - an idle pool with spinning on burns ~no CPU.
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/base/flags.h"
#include "common/base/spin_wait.h"
#include "daemon/server/daemon_options.h"
#include "daemon/base/worker_threads.h"
#include "master/directory/master_options.h"
#include "tests/harness/cmocka_cpp.h"

namespace {

using mooncake::AdaptiveSpin;
using mooncake::MonotonicNanos;
using mooncake::SpinUntil;

constexpr int64_t kMs = 1000000;

void SleepNanos(int64_t ns) { std::this_thread::sleep_for(std::chrono::nanoseconds(ns)); }

void TestSpinUntilTrueWhenReadyFlips(void**) {
  std::atomic<bool> flag{false};
  std::thread setter([&] {
    SleepNanos(2 * kMs);
    flag.store(true);
  });
  const int64_t start = MonotonicNanos();
  // A generous budget (a loaded machine may delay the setter), and it ends early.
  assert_true(SpinUntil([&] { return flag.load(); }, 5000 * kMs));
  assert_true(MonotonicNanos() - start < 4000 * kMs);
  setter.join();
}

void TestSpinUntilFalseAfterBudget(void**) {
  int polls = 0;
  const int64_t start = MonotonicNanos();
  assert_false(SpinUntil([&] { return ++polls < 0; }, 5 * kMs));
  assert_true(MonotonicNanos() - start >= 5 * kMs);
  assert_true(polls > 1);  // it polled, repeatedly
}

void TestZeroBudgetNeverSpins(void**) {
  int polls = 0;
  assert_false(SpinUntil([&] { return ++polls > 0; }, 0));
  assert_false(SpinUntil([&] { return ++polls > 0; }, -5));
  assert_int_equal(polls, 0);
  AdaptiveSpin off(0);
  assert_false(off.Spin([&] { return ++polls > 0; }));
  off.Blocked();
  assert_int_equal(polls, 0);
  assert_int_equal(off.budget_ns(), 0);
}

void TestSpinUntilReadable(void**) {
  int fds[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  assert_false(mooncake::SpinUntilReadable(fds[0], 2 * kMs));
  std::thread writer([&] {
    SleepNanos(2 * kMs);
    assert_int_equal(write(fds[1], "x", 1), 1);
  });
  assert_true(mooncake::SpinUntilReadable(fds[0], 5000 * kMs));
  writer.join();
  close(fds[0]);
  close(fds[1]);
}

// Misses longer than kNearMissFactor full budgets halve it down to 0; then only every kProbeEvery-th
// wait spins (with the full budget), and the probe's hit restores it.
void TestAdaptiveBacksOffAndProbes(void**) {
  const int64_t max = 1 * kMs;
  AdaptiveSpin spin(max);
  assert_int_equal(spin.budget_ns(), max);
  int64_t expect = max;
  int misses = 0;
  while (spin.budget_ns() > 0) {
    assert_false(spin.Spin([] { return false; }));
    SleepNanos(10 * kMs);  // the blocking wait: a miss (over 8 full budgets)
    spin.Blocked();
    expect /= 2;
    if (expect < AdaptiveSpin::kMinBudgetNanos) expect = 0;
    assert_int_equal(spin.budget_ns(), expect);
    assert_true(++misses <= 11);
  }
  // Backed off: no polling but the one look whether the wait is needed at all, until
  // the probe, which spins and hits on its second poll.
  unsigned waits = 0;
  for (;;) {
    int polls = 0;
    ++waits;
    const int64_t start = MonotonicNanos();
    bool hit = spin.Spin([&] { return ++polls >= 2; });
    if (hit) break;
    assert_int_equal(polls, 1);
    assert_true(MonotonicNanos() - start < max);
    SleepNanos(10 * kMs);
    spin.Blocked();
    assert_int_equal(spin.budget_ns(), 0);
    assert_true(waits < AdaptiveSpin::kProbeEvery);
  }
  assert_int_equal(waits, AdaptiveSpin::kProbeEvery);
  assert_int_equal(spin.budget_ns(), max);
}

// A wait that had to block but ended within kNearMissFactor full budgets (a near miss)
// restores it, also from zero.
void TestAdaptiveNearMissRestores(void**) {
  const int64_t max = 20 * kMs;  // the near misses below leave margin for a loaded machine
  AdaptiveSpin spin(max);
  assert_false(spin.Spin([] { return false; }));
  SleepNanos(200 * kMs);  // a miss: over 8 x 20 ms
  spin.Blocked();
  assert_int_equal(spin.budget_ns(), max / 2);
  assert_false(spin.Spin([] { return false; }));  // spins max / 2
  SleepNanos(2 * max);                            // blocked twice the budget: near
  spin.Blocked();
  assert_int_equal(spin.budget_ns(), max);
  AdaptiveSpin quick(1 * kMs);
  while (quick.budget_ns() > 0) {
    assert_false(quick.Spin([] { return false; }));
    SleepNanos(10 * kMs);
    quick.Blocked();
  }
  assert_false(quick.Spin([] { return false; }));  // backed off: no spin
  quick.Blocked();                                 // but the wait was short
  assert_int_equal(quick.budget_ns(), 1 * kMs);
}

// Ready at the first look is no wait: it neither restores nor halves anything.
void TestAdaptiveImmediateReadyIsNoWait(void**) {
  AdaptiveSpin spin(1 * kMs);
  assert_false(spin.Spin([] { return false; }));
  SleepNanos(10 * kMs);
  spin.Blocked();
  assert_int_equal(spin.budget_ns(), kMs / 2);
  assert_true(spin.Spin([] { return true; }));
  assert_int_equal(spin.budget_ns(), kMs / 2);
}

void TestSpinnerLimit(void**) {
  mooncake::SpinnerLimit limit(1);
  assert_true(limit.TryEnter());
  assert_false(limit.TryEnter());
  assert_int_equal(limit.spinning(), 1);
  limit.Leave();
  assert_true(limit.TryEnter());
  limit.Leave();
  mooncake::SpinnerLimit none(0);
  assert_false(none.TryEnter());
}

void TestParseSpinMicros(void**) {
  int64_t us = -1;
  assert_true(mooncake::ParseSpinMicros("0", &us));
  assert_int_equal(us, 0);
  assert_true(mooncake::ParseSpinMicros("50", &us));
  assert_int_equal(us, 50);
  assert_true(mooncake::ParseSpinMicros("10000", &us));
  assert_int_equal(us, mooncake::kMaxSpinMicros);
  for (const char* bad : {"10001", "-1", "", "5x", "abc", " 5", "99999999999999999999"}) {
    us = 7;
    assert_false(mooncake::ParseSpinMicros(bad, &us));
    assert_int_equal(us, 7);
  }
  assert_false(mooncake::ParseSpinMicros(nullptr, &us));
}

// --spin_us: default, 0, the bounds, and out of range naming the flag.
bool ParseDaemon(std::vector<std::string> args, mooncake::DaemonOptions* options,
                 std::string* error) {
  mooncake::FlagSet flags("mooncaked", "");
  mooncake::RegisterDaemonFlags(&flags, options);
  std::vector<char*> argv = {const_cast<char*>("mooncaked")};
  for (auto& a : args) argv.push_back(a.data());
  if (!flags.Parse(static_cast<int>(argv.size()), argv.data(), error)) return false;
  options->master = "127.0.0.1:50051";
  return mooncake::ValidateDaemonOptions(options, error);
}

void TestDaemonSpinFlag(void**) {
  {
    mooncake::DaemonOptions o;
    std::string error;
    assert_true(ParseDaemon({}, &o, &error));
    assert_int_equal(o.spin_us, mooncake::kDefaultSpinMicros);
  }
  for (const char* ok : {"0", "1", "10000"}) {
    mooncake::DaemonOptions o;
    std::string error;
    assert_true(ParseDaemon({"--spin_us", ok}, &o, &error));
    assert_int_equal(o.spin_us, std::atoll(ok));
  }
  for (const char* bad : {"-1", "10001"}) {
    mooncake::DaemonOptions o;
    std::string error;
    assert_false(ParseDaemon({std::string("--spin_us=") + bad}, &o, &error));
    assert_non_null(std::strstr(error.c_str(), "--spin_us"));
  }
  mooncake::DaemonOptions o;
  std::string error;
  assert_false(ParseDaemon({"--spin_us", "fast"}, &o, &error));
}

void TestMasterSpinDefault(void**) {
  mooncake::MasterOptions o;
  mooncake::FlagSet flags("mooncake-master", "");
  mooncake::RegisterMasterFlags(&flags, &o);
  std::vector<char*> argv = {const_cast<char*>("mooncake-master")};
  std::string error;
  assert_true(flags.Parse(static_cast<int>(argv.size()), argv.data(), &error));
  assert_true(mooncake::ValidateMasterOptions(o, &error));
  assert_int_equal(o.spin_us, mooncake::kDefaultSpinMicros);
}

// Rounds of submissions from `producers` threads at once (each 1..4 jobs, some from inside
// a job), between which the pool is idle for a varying while (its workers spinning, about
// to sleep, or asleep). Each round is waited for with nothing submitted meanwhile, so a
// job stranded by a skipped notify would never run: the round's deadline catches it.
void StressWorkers(size_t workers, int64_t spin_ns, int producers, int rounds) {
  mooncake::WorkerThreads pool(workers, spin_ns);
  std::atomic<int64_t> done{0};
  std::atomic<int64_t> worst_wait_ns{0};
  int64_t submitted = 0;
  std::mt19937 rng(static_cast<unsigned>(workers * 1000 + spin_ns / 1000));
  auto job = [&](int64_t submitted_at, bool nested) {
    return [&, submitted_at, nested] {
      int64_t waited = MonotonicNanos() - submitted_at;
      int64_t worst = worst_wait_ns.load();
      while (waited > worst && !worst_wait_ns.compare_exchange_weak(worst, waited)) {
      }
      if (nested) {
        // A job that hands over more work (as a connection's teardown does).
        const int64_t now = MonotonicNanos();
        pool.Submit([&, now] {
          int64_t w = MonotonicNanos() - now;
          int64_t wst = worst_wait_ns.load();
          while (w > wst && !worst_wait_ns.compare_exchange_weak(wst, w)) {
          }
          done.fetch_add(1);
        });
      }
      done.fetch_add(1);
    };
  };
  for (int round = 0; round < rounds; ++round) {
    std::vector<int> counts(producers);
    std::vector<bool> nested(producers);
    for (int p = 0; p < producers; ++p) {
      counts[p] = 1 + static_cast<int>(rng() % 4);
      nested[p] = rng() % 5 == 0;
      submitted += counts[p] + (nested[p] ? 1 : 0);
    }
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        for (int i = 0; i < counts[p]; ++i) pool.Submit(job(MonotonicNanos(), nested[p] && i == 0));
      });
    }
    for (auto& t : threads) t.join();
    const int64_t deadline = MonotonicNanos() + 10000 * kMs;
    while (done.load() < submitted && MonotonicNanos() < deadline) SleepNanos(20000);
    if (done.load() != submitted) {
      fail_msg("workers %zu spin %lld ns: round %d stranded %lld of %lld jobs", workers,
               static_cast<long long>(spin_ns), round,
               static_cast<long long>(submitted - done.load()),
               static_cast<long long>(submitted));
    }
    // Idle for a while: none, a spin's worth, or long enough for every worker to sleep.
    switch (rng() % 4) {
      case 0: break;
      case 1: SleepNanos(20000); break;
      case 2: SleepNanos(100000); break;
      default: SleepNanos(2 * kMs); break;
    }
  }
  pool.Stop();
  assert_int_equal(done.load(), submitted);
  // Every job ran well within the round's deadline (this is what a lost wake-up breaks).
  assert_true(worst_wait_ns.load() < 5000 * kMs);
}

void TestWorkersNoLostWakeupSpinOff(void**) {
  StressWorkers(4, 0, 4, 300);
  StressWorkers(1, 0, 3, 150);
}
void TestWorkersNoLostWakeupShortSpin(void**) {
  StressWorkers(4, 50000, 4, 300);
  StressWorkers(1, 50000, 3, 150);
}
void TestWorkersNoLostWakeupLongSpin(void**) {
  // Spinners that are always spinning when a round starts: the notify is skipped the most.
  StressWorkers(4, 5 * kMs, 4, 200);
  StressWorkers(2, 5 * kMs, 4, 100);
}

int64_t ProcessCpuNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Idle workers with spinning on: one spins once for its budget, then all sleep.
void TestIdlePoolBurnsNothing(void**) {
  mooncake::WorkerThreads pool(8, 1 * kMs);
  std::atomic<int> ran{0};
  pool.Submit([&] { ran.fetch_add(1); });
  const int64_t deadline = MonotonicNanos() + 10000 * kMs;
  while (ran.load() == 0 && MonotonicNanos() < deadline) SleepNanos(100000);
  assert_int_equal(ran.load(), 1);
  SleepNanos(20 * kMs);
  const int64_t cpu = ProcessCpuNanos();
  SleepNanos(300 * kMs);
  // 8 workers spinning would burn ~600 ms of CPU on 2 vCPUs in 300 ms.
  assert_true(ProcessCpuNanos() - cpu < 30 * kMs);
  pool.Stop();
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(TestSpinUntilTrueWhenReadyFlips),
      cmocka_unit_test(TestSpinUntilFalseAfterBudget),
      cmocka_unit_test(TestZeroBudgetNeverSpins),
      cmocka_unit_test(TestSpinUntilReadable),
      cmocka_unit_test(TestAdaptiveBacksOffAndProbes),
      cmocka_unit_test(TestAdaptiveNearMissRestores),
      cmocka_unit_test(TestAdaptiveImmediateReadyIsNoWait),
      cmocka_unit_test(TestSpinnerLimit),
      cmocka_unit_test(TestParseSpinMicros),
      cmocka_unit_test(TestDaemonSpinFlag),
      cmocka_unit_test(TestMasterSpinDefault),
      cmocka_unit_test(TestWorkersNoLostWakeupSpinOff),
      cmocka_unit_test(TestWorkersNoLostWakeupShortSpin),
      cmocka_unit_test(TestWorkersNoLostWakeupLongSpin),
      cmocka_unit_test(TestIdlePoolBurnsNothing),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
