// What store_bench's modes share: the options, timed phases of put/get/exist through the
// C ABI, the value stamps that check what a get returned, the same-run baselines (memcpy,
// a Unix-socket round trip, loopback TCP), the leased-space pacing, and the table printer
// of the two-daemon modes. Every function is called from the main thread only, except what
// RunThreads runs on its workers.
#ifndef MOONCAKE_BENCH_STORE_BENCH_UTIL_H_
#define MOONCAKE_BENCH_STORE_BENCH_UTIL_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "include/mooncake_store.h"

namespace mooncake {
namespace store_bench {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string socket;               // an existing daemon; empty: spawn master + daemon
  std::string build_dir = "build";  // where the spawned binaries are
  int64_t daemons = 1;              // 2: the two-daemon (transfer engine) mode
  std::string daemon_args;          // extra flags of spawned daemons, separated by spaces
  std::string master_args;          // extra flags of the spawned master, likewise
  std::string sizes;                // empty: the mode's default
  int64_t threads = 4;
  uint64_t bytes_per_phase = 256ull << 20;
  int64_t max_ops = 20000;
  uint64_t pool_size = 1ull << 30;
  uint64_t segment_size = 0;  // 0: the mode's default
  int64_t lease_ms = 3000;    // the master's read lease (spawned: set to this)
  std::string auth = "on";    // --daemons 2: with the cluster key, without, or both compared
  int64_t auth_rounds = 3;
  std::string checksum = "on";  // spawned daemons' --checksum, or both compared
  int64_t checksum_rounds = 3;
  std::string redis = "on";                   // one daemon: Redis measured alongside
  std::string redis_server = "redis-server";  // its binary (a path, or a name on PATH)
  std::string csv;
  std::string png;  // one daemon: the side-by-side plot of the CSV (needs --csv, gnuplot)
  std::string plot_script;
  // A few plain lines against the same run's baselines instead of the table, and no goals
  // (what make demo shows).
  bool digest = false;
};

// Prints what returned code (with the ABI's message) and exits 1; spawned processes are
// stopped by their destructors at exit, or by the kernel (they die with their parent).
[[noreturn]] void Die(const char* what, int64_t code);

double Seconds(Clock::time_point a, Clock::time_point b);
double Percentile(std::vector<double> v, double q);
double Median(std::vector<double> v);

struct Row {
  std::string op, buffer, form;
  uint64_t size = 0;
  int threads = 0;
  int64_t ops = 0;  // keys, for batch calls
  // baseline_gbps: raw loopback TCP (two daemons; the one-daemon rows keep theirs beside).
  double seconds = 0, p50_us = 0, p99_us = 0, baseline_gbps = 0;
  double ops_per_s() const { return static_cast<double>(ops) / seconds; }
  double gbps() const {
    return static_cast<double>(ops) * static_cast<double>(size) / seconds / 1e9;
  }
};

enum class Op { kPut, kGet, kExist };

// One benchmark configuration: `threads` threads each doing `ops_per_thread` operations in
// groups of `batch` keys (1 = the single-key call), on pool or plain buffers.
struct Phase {
  mooncake_store_t store;
  uint64_t size;
  int threads;
  int64_t ops_per_thread;
  int batch;
  bool pool;
  int run;                                              // keeps keys of different phases apart
  const mooncake_replicate_config_t* config = nullptr;  // of the puts
};

// Key i of thread `thread` in run `run` for objects of `size` bytes.
std::string Key(int run, uint64_t size, int thread, int64_t i);
inline std::string Key(const Phase& p, int thread, int64_t i) {
  return Key(p.run, p.size, thread, i);
}

// Fills a value whose bytes depend on its index, so a get can be checked cheaply (head
// and tail), and checks one.
void Stamp(char* buf, uint64_t size, int64_t i);
bool StampMatches(const char* buf, uint64_t size, int64_t i);

// Runs body(t, ready) on `threads` threads: each does its untimed set-up, calls ready()
// (which waits until every thread is set up) and then its timed work, appending per-call
// latencies in microseconds to its vector. Returns all of them; *seconds the wall time
// from the moment every thread was ready until the last one finished.
using ThreadBody =
    std::function<void(int t, const std::function<void()>& ready, std::vector<double>* latencies)>;
std::vector<double> RunThreads(int threads, const ThreadBody& body, double* seconds);

// Runs the op over the phase (single calls for batch 1, the batch calls otherwise; exist
// only batched), checking every result and, for gets, every value's stamp; returns
// per-call latencies of all threads.
std::vector<double> RunPhase(const Phase& p, Op op, double* seconds);

// Same-run baselines of memcpy, GB/s of one thread copying objects of this size. Cold to
// cold: source and destination both cycle through a span bigger than the caches (each op
// touches fresh memory on both sides). Cold to warm: the source cycles through such a span
// into one destination buffer used again and again (what get_into into a reused pool
// buffer does, and what the 1 MiB goal compares with). Each the median of 5
// passes, timed in the thread's CPU time: what the copy costs, not how long the scheduler
// kept it off a CPU on a shared machine.
double MemcpyColdToColdGbps(uint64_t size, uint64_t total_bytes);
double MemcpyColdToWarmGbps(uint64_t size, uint64_t total_bytes);

// What backs the segments and pools on this host (common/base/shared_memory.h), for the run's
// header: hugetlbfs pages reserved and in use (by anyone: run it after the cluster and the
// pool exist), and the shmem THP policy. The memcpy baselines use malloc'd memory, which
// the host's anonymous THP policy (usually "always") puts on huge pages.
std::string SharedPagesSummary();
// Reserved huge pages in use on this host now (by anyone), 0 when none are.
uint64_t HugePagesInUse();

// Same-run baseline: median round trip of a small message over a Unix socket between two
// threads, both blocking in read() (what one control request costs at minimum when both
// sides sleep: two wake-ups).
double UnixRoundTripUs();

// Same-run floor of the design's hops: three processes, as an application, its mooncaked
// and the master are. The client writes 48 bytes to a relay over a Unix socket; the relay
// makes h round trips of 48 bytes over loopback TCP to an echo process, then answers.
// No work is done anywhere, and every waiting side polls its socket up to
// kDefaultSpinMicros (sched_yield between polls) before it blocks, as libmc, mooncaked
// and the master do by default (common/base/spin_wait.h). A first get makes one master hop, a
// put two (PutStart, PutEnd): the medians of 1 and 2 hops are what each would cost if
// every process did nothing but pass the message on. us[h] is the median of h hops
// (h = 0, 1, 2). False when the processes could not be set up or a message was lost.
struct HopFloor {
  double us[3] = {0, 0, 0};
};
bool MeasureHopFloor(HopFloor* floor);

// Same-run baseline of the two-daemon mode: one TCP connection over 127.0.0.1, a sender
// thread write()ing 1 MiB buffers and a receiver thread read()ing them, for `seconds`.
double LoopbackTcpGbps(double seconds);

// Objects removed while leased keep their space until the lease ends (the master frees it
// then), and a cache evicts what it must: a phase that finds the segment full of such space
// would see its own fresh objects evicted. So phases wait until enough space is back.
class LeasedSpace {
 public:
  LeasedSpace(uint64_t segment_size, int64_t lease_ms)
      : budget_(segment_size / 10 * 7), lease_(std::chrono::milliseconds(lease_ms)) {}

  void WaitForRoom(uint64_t bytes);
  // Call after removing objects that were read (leased) just now.
  void Removed(uint64_t bytes);

 private:
  const uint64_t budget_;
  const std::chrono::milliseconds lease_;
  std::deque<std::pair<Clock::time_point, uint64_t>> held_;
  uint64_t total_ = 0;
};

std::vector<uint64_t> ParseSizes(const std::string& text);  // exits 2 on a bad one
std::vector<std::string> SplitArgs(const std::string& text);

// Enough operations to move about bytes_per_phase, but at least 32 so that percentiles
// mean something, as a multiple of unit.
int64_t PhaseOps(const Options& o, uint64_t size, int64_t unit);

// The table of the two-daemon modes and its CSV; baseline names the same-run figure
// ("tcp"), ratio the column of the share of it.
void PrintHeader(const char* baseline, const char* ratio, FILE* csv);
void Print(const Row& r, FILE* csv);

}  // namespace store_bench
}  // namespace mooncake

#endif  // MOONCAKE_BENCH_STORE_BENCH_UTIL_H_
