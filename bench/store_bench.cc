// store_bench: put_from / get_into through the public C ABI against a real daemon, for
// KV-cache-sized objects, with pool (zero-copy) and plain (staged) buffers, 1 and N threads,
// single and batch calls. Every figure is printed next to a baseline measured in the same
// run: a plain memcpy of the same size, and one Unix-socket round trip.
//
// --daemons 2: the transfer engine instead. A client on daemon A puts with the replica
// steered onto daemon B and gets those objects back on A, so every byte crosses the
// transfer port; the baseline is raw loopback TCP measured in the same run.
//
// --daemons 2 --auth both: what the cluster key costs the transfer engine. Rounds of two
// clusters, one without a key (master and daemons: --cluster_key_file "") and one with the
// harness's key, in alternating order: remote 4 KiB puts and 4 MiB gets in each; the
// medians of the rounds side by side, with the ratio on/off; then what the handshake adds
// to a new transfer connection, measured in process.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "common/cluster_key.h"
#include "common/flags.h"
#include "common/units.h"
#include "daemon/segment_memory.h"
#include "daemon/tcp_transport.h"
#include "daemon/transfer_server.h"
#include "include/mooncake_store.h"
#include "tests/cluster.h"
#include "tests/process_harness.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string socket;               // an existing daemon; empty: spawn master + daemon
  std::string build_dir = "build";  // where the spawned binaries are
  int64_t daemons = 1;              // 2: the two-daemon (transfer engine) mode
  std::string daemon_args;          // extra flags of spawned daemons, separated by spaces
  std::string sizes;                // empty: the mode's default
  int64_t threads = 4;
  uint64_t bytes_per_phase = 256ull << 20;
  int64_t max_ops = 20000;
  uint64_t pool_size = 1ull << 30;
  uint64_t segment_size = 0;  // 0: the mode's default
  int64_t lease_ms = 3000;  // the master's read lease (spawned: set to this)
  std::string auth = "on";  // --daemons 2: with the cluster key, without, or both compared
  int64_t auth_rounds = 3;
  std::string csv;
};

[[noreturn]] void Die(const char* what, int64_t code) {
  std::fprintf(stderr, "store_bench: FATAL: %s returned %" PRId64 " (%s)\n", what, code,
               mooncake_store_strerror(static_cast<int>(code)));
  if (code == MOONCAKE_STORE_OBJECT_NOT_FOUND || code == MOONCAKE_STORE_NO_AVAILABLE_HANDLE) {
    std::fprintf(stderr,
                 "  the segment is too small: removed objects keep their space until their read "
                 "leases end,\n  so the master evicted this phase's objects. Use a bigger "
                 "segment, a shorter lease or --bytes_per_phase.\n");
  }
  std::exit(1);
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

struct Row {
  std::string op, buffer, form;
  uint64_t size = 0;
  int threads = 0;
  int64_t ops = 0;
  // baseline_gbps: memcpy of the same size (one daemon), raw loopback TCP (two daemons).
  double seconds = 0, p50_us = 0, p99_us = 0, baseline_gbps = 0;
  double ops_per_s() const { return static_cast<double>(ops) / seconds; }
  double gbps() const { return static_cast<double>(ops) * static_cast<double>(size) / seconds / 1e9; }
};

// One benchmark configuration: `threads` threads each doing `ops_per_thread` operations in
// groups of `batch` keys (1 = the single-key call), on pool or plain buffers.
struct Phase {
  mooncake_store_t store;
  uint64_t size;
  int threads;
  int64_t ops_per_thread;
  int batch;
  bool pool;
  int run;  // keeps keys of different phases apart
  const mooncake_replicate_config_t* config = nullptr;  // of the puts
};

std::string Key(const Phase& p, int thread, int64_t i) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "bench-r%d-s%" PRIu64 "-t%d-%" PRId64, p.run, p.size, thread, i);
  return buf;
}

// Fills a value whose bytes depend on its index, so a get can be checked cheaply.
void Stamp(char* buf, uint64_t size, int64_t i) {
  std::memcpy(buf, &i, std::min<uint64_t>(sizeof(i), size));
  if (size > 16) std::memcpy(buf + size - sizeof(i), &i, sizeof(i));
}

bool StampMatches(const char* buf, uint64_t size, int64_t i) {
  int64_t head = 0, tail = 0;
  std::memcpy(&head, buf, std::min<uint64_t>(sizeof(head), size));
  if (size > 16) std::memcpy(&tail, buf + size - sizeof(tail), sizeof(tail));
  int64_t want_head = 0;
  std::memcpy(&want_head, &i, std::min<uint64_t>(sizeof(i), size));
  return head == want_head && (size <= 16 || tail == i);
}

// Runs put (is_put) or get over the phase; returns per-call latencies of all threads.
std::vector<double> RunPhase(const Phase& p, bool is_put, double* seconds) {
  std::vector<std::vector<double>> latencies(p.threads);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < p.threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<char*> bufs(p.batch);
      for (auto& b : bufs) {
        b = p.pool ? static_cast<char*>(mooncake_store_alloc(p.store, p.size))
                   : static_cast<char*>(std::aligned_alloc(64, (p.size + 63) / 64 * 64));
        if (b == nullptr) Die("alloc (pool too small for this phase)", -1);
        std::memset(b, 0x5a, p.size);
      }
      std::vector<std::string> keys(p.batch);
      std::vector<const char*> key_ptrs(p.batch);
      std::vector<void*> buf_ptrs(bufs.begin(), bufs.end());
      std::vector<size_t> sizes(p.batch, p.size);
      std::vector<int> put_results(p.batch);
      std::vector<int64_t> get_results(p.batch);
      latencies[t].reserve(p.ops_per_thread / p.batch + 1);
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      for (int64_t i = 0; i < p.ops_per_thread; i += p.batch) {
        for (int j = 0; j < p.batch; ++j) {
          keys[j] = Key(p, t, i + j);
          key_ptrs[j] = keys[j].c_str();
          if (is_put) Stamp(bufs[j], p.size, i + j);
        }
        auto start = Clock::now();
        if (p.batch == 1 && is_put) {
          int rc = mooncake_store_put_from(p.store, key_ptrs[0], bufs[0], p.size, p.config);
          if (rc != 0) Die("put_from", rc);
        } else if (p.batch == 1) {
          int64_t rc = mooncake_store_get_into(p.store, key_ptrs[0], bufs[0], p.size);
          if (rc != static_cast<int64_t>(p.size)) Die("get_into", rc);
        } else if (is_put) {
          int rc = mooncake_store_batch_put_from(p.store, key_ptrs.data(), buf_ptrs.data(),
                                                 sizes.data(), p.batch, p.config,
                                                 put_results.data());
          if (rc != 0) Die("batch_put_from", rc);
          for (int r : put_results) {
            if (r != 0) Die("batch_put_from entry", r);
          }
        } else {
          int rc = mooncake_store_batch_get_into(p.store, key_ptrs.data(), buf_ptrs.data(),
                                                 sizes.data(), p.batch, get_results.data());
          if (rc != 0) Die("batch_get_into", rc);
          for (int64_t r : get_results) {
            if (r != static_cast<int64_t>(p.size)) Die("batch_get_into entry", r);
          }
        }
        latencies[t].push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
        if (!is_put) {
          for (int j = 0; j < p.batch; ++j) {
            if (!StampMatches(bufs[j], p.size, i + j)) Die("get_into returned wrong bytes", -1);
          }
        }
      }
      for (char* b : bufs) {
        if (p.pool) {
          mooncake_store_free(p.store, b);
        } else {
          std::free(b);
        }
      }
    });
  }
  while (ready.load() < p.threads) std::this_thread::yield();
  auto start = Clock::now();
  go.store(true);
  for (auto& w : workers) w.join();
  *seconds = Seconds(start, Clock::now());
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  return all;
}

// Same-run baseline: GB/s of one thread memcpy-ing objects of this size between two
// buffers of the kind the store copies between (each op touches fresh source memory).
double MemcpyGbps(uint64_t size, uint64_t total_bytes) {
  uint64_t span = std::max<uint64_t>(size, std::min<uint64_t>(total_bytes, 256ull << 20));
  char* src = static_cast<char*>(std::aligned_alloc(64, (span + 63) / 64 * 64));
  char* dst = static_cast<char*>(std::aligned_alloc(64, (span + 63) / 64 * 64));
  std::memset(src, 1, span);
  std::memset(dst, 2, span);
  uint64_t ops = std::max<uint64_t>(1, total_bytes / size), slots = span / size;
  auto start = Clock::now();
  for (uint64_t i = 0; i < ops; ++i) {
    uint64_t off = (i % slots) * size;
    std::memcpy(dst + off, src + off, size);
    asm volatile("" : : "r"(dst) : "memory");  // keep the copy
  }
  double s = Seconds(start, Clock::now());
  std::free(src);
  std::free(dst);
  return static_cast<double>(ops) * static_cast<double>(size) / s / 1e9;
}

// Same-run baseline: median round trip of a small message over a Unix socket between two
// threads (what one control request costs at minimum).
double UnixRoundTripUs() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  std::thread echo([fd = sv[1]] {
    char msg[64];
    for (;;) {
      ssize_t n = read(fd, msg, sizeof(msg));
      if (n <= 0 || write(fd, msg, n) != n) break;
    }
  });
  std::vector<double> rtts;
  char msg[48] = {0}, back[48];
  for (int i = 0; i < 20000; ++i) {
    auto start = Clock::now();
    if (write(sv[0], msg, sizeof(msg)) != sizeof(msg)) break;
    size_t got = 0;
    while (got < sizeof(back)) {
      ssize_t n = read(sv[0], back + got, sizeof(back) - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  close(sv[0]);
  echo.join();
  close(sv[1]);
  return Percentile(rtts, 0.5);
}

// Objects removed while leased keep their space until the lease ends (the master frees it
// then), and a cache evicts what it must: a phase that finds the segment full of such space
// would see its own fresh objects evicted. So phases wait until enough space is back.
class LeasedSpace {
 public:
  LeasedSpace(uint64_t segment_size, int64_t lease_ms)
      : budget_(segment_size / 10 * 7), lease_(std::chrono::milliseconds(lease_ms)) {}

  void WaitForRoom(uint64_t bytes) {
    for (;;) {
      auto now = Clock::now();
      while (!held_.empty() && held_.front().first <= now) {
        total_ -= held_.front().second;
        held_.pop_front();
      }
      if (held_.empty() || total_ + bytes <= budget_) return;
      std::this_thread::sleep_until(held_.front().first);
    }
  }
  // Call after removing objects that were read (leased) just now.
  void Removed(uint64_t bytes) {
    held_.emplace_back(Clock::now() + lease_ + std::chrono::milliseconds(200), bytes);
    total_ += bytes;
  }

 private:
  const uint64_t budget_;
  const std::chrono::milliseconds lease_;
  std::deque<std::pair<Clock::time_point, uint64_t>> held_;
  uint64_t total_ = 0;
};

std::vector<uint64_t> ParseSizes(const std::string& text) {
  std::vector<uint64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    uint64_t v = 0;
    if (!mooncake::ParseSize(item, &v) || v == 0) {
      std::fprintf(stderr, "store_bench: bad size '%s' in --sizes\n", item.c_str());
      std::exit(2);
    }
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// The table's header and the CSV's; baseline names the same-run figure ("memcpy", "tcp"),
// ratio the column of the share of it.
void PrintHeader(const char* baseline, const char* ratio, FILE* csv) {
  std::printf("%-4s %-6s %-9s %9s %3s %7s %10s %8s %9s %9s %8s %7s\n", "op", "buffer", "form",
              "size", "thr", "ops", "ops/s", "GB/s", "p50_us", "p99_us", baseline, ratio);
  if (csv) {
    std::fprintf(csv, "op,buffer,form,size,threads,ops,seconds,ops_per_s,gb_per_s,p50_us,p99_us,"
                      "%s_gb_per_s,ratio_to_%s\n", baseline, baseline);
  }
}

void Print(const Row& r, FILE* csv) {
  double ratio = r.baseline_gbps > 0 ? r.gbps() / r.baseline_gbps : 0;
  std::printf("%-4s %-6s %-9s %9s %3d %7" PRId64 " %10.0f %8.2f %9.1f %9.1f %8.2f %6.0f%%\n",
              r.op.c_str(), r.buffer.c_str(), r.form.c_str(), mooncake::FormatSize(r.size).c_str(),
              r.threads, r.ops, r.ops_per_s(), r.gbps(), r.p50_us, r.p99_us, r.baseline_gbps,
              ratio * 100);
  std::fflush(stdout);
  if (csv) {
    std::fprintf(csv, "%s,%s,%s,%" PRIu64 ",%d,%" PRId64 ",%.3f,%.0f,%.4f,%.2f,%.2f,%.4f,%.4f\n",
                 r.op.c_str(), r.buffer.c_str(), r.form.c_str(), r.size, r.threads, r.ops,
                 r.seconds, r.ops_per_s(), r.gbps(), r.p50_us, r.p99_us, r.baseline_gbps, ratio);
  }
}

// Same-run baseline of the two-daemon mode: one TCP connection over 127.0.0.1, a sender
// thread write()ing 1 MiB buffers and a receiver thread read()ing them, for `seconds`.
double LoopbackTcpGbps(double seconds) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  int tx = socket(AF_INET, SOCK_STREAM, 0);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      connect(tx, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Die("loopback TCP set-up", -1);
  }
  int rx = accept(listener, nullptr, nullptr);
  uint64_t received = 0;
  std::thread receiver([&] {
    std::vector<char> buf(1 << 20);
    for (;;) {
      ssize_t n = read(rx, buf.data(), buf.size());
      if (n <= 0) break;
      received += static_cast<uint64_t>(n);
    }
  });
  std::vector<char> buf(1 << 20, 1);
  auto start = Clock::now();
  while (Seconds(start, Clock::now()) < seconds) {
    for (size_t off = 0; off < buf.size();) {
      ssize_t n = write(tx, buf.data() + off, buf.size() - off);
      if (n <= 0) Die("loopback TCP write", -1);
      off += static_cast<size_t>(n);
    }
  }
  shutdown(tx, SHUT_WR);
  receiver.join();
  double s = Seconds(start, Clock::now());
  close(tx);
  close(rx);
  close(listener);
  return static_cast<double>(received) / s / 1e9;
}

std::vector<std::string> SplitArgs(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while ((start = text.find_first_not_of(' ', start)) != std::string::npos) {
    size_t end = text.find(' ', start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    start = end;
  }
  return out;
}

// Enough operations to move about bytes_per_phase, but at least 32 so that percentiles
// mean something, as a multiple of unit.
int64_t PhaseOps(const Options& o, uint64_t size, int64_t unit) {
  int64_t base = std::max<int64_t>(
      32, std::min<int64_t>(o.max_ops, static_cast<int64_t>(o.bytes_per_phase / size)));
  return (base + unit - 1) / unit * unit;
}

// The one-daemon matrix: pool and plain buffers, 1 and N threads, single and batch calls.
void RunOneDaemon(const Options& o, mooncake_store_t store, FILE* csv) {
  double uds_rtt = UnixRoundTripUs();
  std::printf("machine: %u cores; Unix-socket round trip (p50, same run): %.1f us\n",
              std::thread::hardware_concurrency(), uds_rtt);
  PrintHeader("memcpy", "vs_cpy", csv);

  int run = static_cast<int>(getpid());
  LeasedSpace space(o.segment_size, o.lease_ms);
  double get4k_p50 = 0, reread4k_p50 = 0, get1m_pool_ratio = 0;
  for (uint64_t size : ParseSizes(o.sizes)) {
    double memcpy_gbps = MemcpyGbps(size, o.bytes_per_phase);
    for (bool pool : {true, false}) {
      for (int threads : {1, static_cast<int>(o.threads)}) {
        for (int batch : {1, 32, 128}) {
          // A batch is one call; batches bigger than a phase's data are not a use case.
          // Phases must not fill the segment: a cache evicts.
          if (batch > 1 && (threads > 1 || size * batch > o.bytes_per_phase)) continue;
          int64_t ops = PhaseOps(o, size, static_cast<int64_t>(threads) * batch);
          Phase p{store, size, threads, ops / threads, batch, pool, ++run};
          space.WaitForRoom(static_cast<uint64_t>(ops) * size);
          std::string form = batch == 1 ? "single" : "batch" + std::to_string(batch);
          // The second get of a single-key, one-thread run reads the same keys again: the
          // first read is a miss in the daemon's read cache, a re-read within the lease is
          // a hit and skips the master.
          int passes = (batch == 1 && threads == 1) ? 3 : 2;
          for (int pass = 0; pass < passes; ++pass) {
            bool is_put = pass == 0;
            Row r{is_put ? "put" : "get", pool ? "pool" : "plain",
                  pass == 2 ? "reread" : form, size, threads, p.ops_per_thread * threads};
            std::vector<double> lat = RunPhase(p, is_put, &r.seconds);
            r.p50_us = Percentile(lat, 0.5);
            r.p99_us = Percentile(lat, 0.99);
            r.baseline_gbps = memcpy_gbps;
            Print(r, csv);
            if (pass == 1 && batch == 1 && threads == 1 && pool && size == 4096) get4k_p50 = r.p50_us;
            if (pass == 2 && pool && size == 4096) reread4k_p50 = r.p50_us;
            if (pass == 1 && batch == 1 && threads == 1 && pool && size == (1u << 20)) {
              get1m_pool_ratio = r.gbps() / memcpy_gbps;
            }
          }
          mooncake_store_remove_all(store, 1);
          space.Removed(static_cast<uint64_t>(ops) * size);
        }
      }
    }
  }
  if (get1m_pool_ratio > 0) {
    std::printf("\n1 MiB get_into (pool, 1 thread): %.0f%% of same-run memcpy (aim >= 50%%)\n",
                get1m_pool_ratio * 100);
  }
  if (get4k_p50 > 0) {
    std::printf("4 KiB get p50, first read (asks the master): %.1f us = %.1fx one Unix-socket "
                "round trip\n", get4k_p50, get4k_p50 / uds_rtt);
  }
  if (reread4k_p50 > 0) {
    std::printf("4 KiB get p50, re-read (daemon read cache): %.1f us = %.1fx one Unix-socket "
                "round trip (aim <= 3x)\n", reread4k_p50, reread4k_p50 / uds_rtt);
  }
}

// The two-daemon mode: a client on daemon 0 (A) puts pool buffers with the replica steered
// onto daemon 1 (B), then gets them back on A, so both directions cross the transfer port.
void RunTwoDaemons(const Options& o, mc_cluster* cluster, mooncake_store_t store, FILE* csv) {
  double tcp_gbps = LoopbackTcpGbps(2.0);
  std::printf("machine: %u cores; raw loopback TCP, one connection, 1 MiB writes (same run): "
              "%.2f GB/s\n", std::thread::hardware_concurrency(), tcp_gbps);
  PrintHeader("tcp", "vs_tcp", csv);
  const char* target[] = {mc_cluster_name_at(cluster, 1)};
  mooncake_replicate_config_t to_b{1, 0, 0, target, 1};
  mc_cluster_segment b_segment{};
  if (mc_cluster_segment_at(cluster, 1, &b_segment) != 0) Die("finding B's segment", -1);

  int run = static_cast<int>(getpid());
  LeasedSpace space(o.segment_size, o.lease_ms);
  std::vector<Row> rows;
  for (uint64_t size : ParseSizes(o.sizes)) {
    for (int threads : {1, static_cast<int>(o.threads)}) {
      int64_t ops = PhaseOps(o, size, threads);
      Phase p{store, size, threads, ops / threads, 1, true, ++run, &to_b};
      space.WaitForRoom(static_cast<uint64_t>(ops) * size);
      // Put, get, and get again within the read lease: A's daemon then remembers where on B
      // each object lies and skips the master ("B->A re").
      for (int pass = 0; pass < 3; ++pass) {
        bool is_put = pass == 0;
        Row r{is_put ? "put" : "get", "pool", pass == 0 ? "A->B" : pass == 1 ? "B->A" : "B->A re",
              size, threads, p.ops_per_thread * threads};
        std::vector<double> lat = RunPhase(p, is_put, &r.seconds);
        r.p50_us = Percentile(lat, 0.5);
        r.p99_us = Percentile(lat, 0.99);
        r.baseline_gbps = tcp_gbps;
        // A figure of the local path would be meaningless here: check where it went.
        int64_t segment = 0;
        uint64_t offset = 0;
        if (is_put && (mc_cluster_replica_at(cluster, Key(p, 0, 0).c_str(), 0, &segment,
                                             &offset) != 0 ||
                       segment != b_segment.id)) {
          Die("a put steered onto B landed elsewhere", -1);
        }
        Print(r, csv);
        rows.push_back(r);
      }
      mooncake_store_remove_all(store, 1);
      space.Removed(static_cast<uint64_t>(ops) * size);
    }
  }
  std::printf("\nacross daemons, as a share of raw loopback TCP (%.2f GB/s):\n", tcp_gbps);
  for (const Row& r : rows) {
    std::printf("  %s %-5s %s, %d thread%s: %.2f GB/s = %.0f%%\n", r.op.c_str(), r.form.c_str(),
                mooncake::FormatSize(r.size).c_str(), r.threads, r.threads == 1 ? "" : "s",
                r.gbps(), r.gbps() / tcp_gbps * 100);
  }
}

// The master and daemons of one run: with the harness's cluster key, or none at all.
mc_cluster* SpawnCluster(const Options& o, bool keyed) {
  setenv("MC_BUILD_DIR", o.build_dir.c_str(), 1);
  std::fprintf(stderr, "spawning mooncake-master and %d mooncaked from %s (%s) ...\n",
               static_cast<int>(o.daemons), o.build_dir.c_str(),
               keyed ? "with a cluster key" : "without a cluster key");
  std::vector<std::string> args = SplitArgs(o.daemon_args);
  if (!keyed) args.insert(args.end(), {"--cluster_key_file", ""});
  std::vector<const char*> daemon_flags;
  for (const auto& a : args) daemon_flags.push_back(a.c_str());
  daemon_flags.push_back(nullptr);
  static const char* const keyless_master[] = {"--cluster_key_file", "", nullptr};
  // A 3 s lease: long enough that re-reads hit the read cache, short enough that space
  // of removed (leased) objects comes back before the next phases need it.
  mc_cluster_options options{static_cast<int>(o.daemons), o.segment_size,
                             static_cast<int>(o.lease_ms), keyed ? nullptr : keyless_master,
                             daemon_flags.data()};
  return mc_cluster_start_with(&options);
}

struct AuthFigures {
  double put4k_kops_per_s = 0, get4m_gbps = 0;
};

double Median(std::vector<double> v) { return Percentile(std::move(v), 0.5); }

// What the key costs a transfer, measured in process where the cases can alternate sample
// by sample (a shared machine's noise hits them alike), against transfer servers on
// loopback with and without it: a 4 KiB READ on a new connection (a fresh TcpTransport
// connects, opens -- HELLO, with the key AUTH too -- and reads), and one on a pooled
// connection. p50 in microseconds, [0] without the key, [1] with it.
void TransferCostUs(double fresh[2], double reused[2]) {
  std::string error;
  std::shared_ptr<mooncake::SegmentMemory> segment =
      mooncake::SegmentMemory::Create(1 << 20, &error);
  if (segment == nullptr) Die(error.c_str(), -1);
  auto key = std::make_shared<const mooncake::ClusterKey>(
      mooncake::ClusterKey::FromKeys({mooncake::testing::RandomClusterKey()}));
  std::unique_ptr<mooncake::TransferServer> servers[2];
  std::shared_ptr<mooncake::RemoteSegment> remotes[2];
  for (int keyed = 0; keyed < 2; ++keyed) {
    int port = 0;
    int fd = mooncake::testing::ListenOnLoopback(&port);
    if (fd < 0) Die("a loopback port for the transfer server", -1);
    mooncake::TransferServer::Options options;
    if (keyed) options.cluster_key = key;
    servers[keyed].reset(new mooncake::TransferServer(
        fd, [segment](int64_t id) { return id == 1 ? segment : nullptr; }, options));
    servers[keyed]->Start();
    remotes[keyed] = std::make_shared<mooncake::RemoteSegment>();
    remotes[keyed]->segment_id = 1;
    remotes[keyed]->name = "127.0.0.1:" + std::to_string(port);
    remotes[keyed]->endpoints.push_back(mooncake::rpc::TransportEndpoint());
    remotes[keyed]->endpoints[0].protocol = "tcp";
    remotes[keyed]->endpoints[0].address = remotes[keyed]->name;
  }
  std::vector<char> buf(4096);
  std::vector<double> fresh_us[2], pooled_us[2];
  auto options_for = [&](int keyed) {
    mooncake::TcpTransport::Options options;
    options.address = "127.0.0.1:1";
    options.streams = 1;
    options.threads = 1;
    if (keyed) options.cluster_key = key;
    return options;
  };
  auto read = [&](mooncake::TcpTransport* transport, int keyed) {
    mooncake::TransferOp op{mooncake::TransferKind::kRead, remotes[keyed], 0, buf.data(),
                            buf.size()};
    std::vector<mooncake::TransferOp*> ops{&op};
    transport->Execute(&ops, Clock::now() + std::chrono::seconds(5));
    if (op.result != mooncake::ErrorCode::OK) Die("a 4 KiB READ", ToInt(op.result));
  };
  std::unique_ptr<mooncake::TcpTransport> pooled[2];
  for (int keyed = 0; keyed < 2; ++keyed) {
    pooled[keyed].reset(new mooncake::TcpTransport(options_for(keyed)));
    read(pooled[keyed].get(), keyed);  // its connection made, and kept
  }
  for (int i = 0; i < 4000; ++i) {
    const int keyed = i % 2;
    auto start = Clock::now();
    {
      mooncake::TcpTransport transport(options_for(keyed));
      read(&transport, keyed);
    }
    fresh_us[keyed].push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  for (int i = 0; i < 20000; ++i) {
    const int keyed = i % 2;
    auto start = Clock::now();
    read(pooled[keyed].get(), keyed);
    pooled_us[keyed].push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  for (int keyed = 0; keyed < 2; ++keyed) {
    servers[keyed]->Stop();
    fresh[keyed] = Median(fresh_us[keyed]);
    reused[keyed] = Median(pooled_us[keyed]);
  }
}

// One round on a fresh cluster: 4 KiB puts A->B, 4 MiB puts A->B then gets B->A (the
// first read of each: a master round trip and a transfer), --threads threads each.
AuthFigures MeasureAuthRound(const Options& o, mc_cluster* cluster, bool keyed, int run,
                             FILE* csv) {
  mooncake_store_t store = mooncake_store_create();
  int rc = mooncake_store_connect(store, mc_cluster_socket(cluster), o.pool_size);
  if (rc != 0) Die("connect", rc);
  const char* target[] = {mc_cluster_name_at(cluster, 1)};
  mooncake_replicate_config_t to_b{1, 0, 0, target, 1};
  const int threads = static_cast<int>(o.threads);
  const char* mode = keyed ? "key" : "no key";
  // Warm-up, not measured: the pools of connections (client to daemon, daemon to daemon,
  // daemon to master) fill, each paying its handshake once, as in any long-lived cluster.
  Phase warm{store, 4096, threads, 256, 1, true, run++, &to_b};
  double ignored = 0;
  RunPhase(warm, true, &ignored);
  mooncake_store_remove_all(store, 1);
  AuthFigures f;
  for (uint64_t size : {uint64_t{4096}, uint64_t{4} << 20}) {
    int64_t ops = PhaseOps(o, size, threads);
    Phase p{store, size, threads, ops / threads, 1, true, run++, &to_b};
    for (int pass = 0; pass < (size == 4096 ? 1 : 2); ++pass) {
      Row r{pass == 0 ? "put" : "get", "pool", pass == 0 ? "A->B" : "B->A", size, threads,
            p.ops_per_thread * threads};
      std::vector<double> lat = RunPhase(p, pass == 0, &r.seconds);
      r.p50_us = Percentile(lat, 0.5);
      r.p99_us = Percentile(lat, 0.99);
      r.form += keyed ? " key" : " nokey";
      Print(r, csv);
      if (size == 4096) f.put4k_kops_per_s = r.ops_per_s() / 1000;
      if (pass == 1) f.get4m_gbps = r.gbps();
    }
    mooncake_store_remove_all(store, 1);
  }
  mooncake_store_destroy(store);
  std::printf("  %s: 4 KiB put %.2f kops/s, 4 MiB get %.2f GB/s\n", mode, f.put4k_kops_per_s,
              f.get4m_gbps);
  std::fflush(stdout);
  return f;
}

// --auth both: rounds of a keyless and a keyed cluster, in alternating order, so that a
// machine growing faster or slower during the run favours neither.
void RunAuthComparison(const Options& o, FILE* csv) {
  std::printf("machine: %u cores; remote 4 KiB puts and 4 MiB gets (A's client, B's segment), "
              "%d threads, with and without the cluster key, %d rounds\n",
              std::thread::hardware_concurrency(), static_cast<int>(o.threads),
              static_cast<int>(o.auth_rounds));
  PrintHeader("-", "-", csv);
  std::vector<AuthFigures> with[2];  // [0] without a key, [1] with
  int run = static_cast<int>(getpid());
  for (int round = 0; round < o.auth_rounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      bool keyed = (round % 2 == 0) == (k == 1);
      mc_cluster* cluster = SpawnCluster(o, keyed);
      if (cluster == nullptr) Die("starting the cluster", -1);
      with[keyed].push_back(MeasureAuthRound(o, cluster, keyed, run, csv));
      run += 8;
      mc_cluster_stop(cluster);
    }
  }
  // Three views of the same rounds: the medians, the best (what the machine gives when the
  // other work on it leaves it alone), and the median of each round's own ratio (its two
  // clusters ran back to back).
  auto figures = [&](int keyed, double AuthFigures::*field) {
    std::vector<double> v;
    for (const AuthFigures& f : with[keyed]) v.push_back(f.*field);
    return v;
  };
  auto report = [&](const char* what, const char* unit, double AuthFigures::*field) {
    std::vector<double> off = figures(0, field), on = figures(1, field), ratios;
    for (size_t i = 0; i < off.size(); ++i) ratios.push_back(on[i] / off[i]);
    double best_off = *std::max_element(off.begin(), off.end());
    double best_on = *std::max_element(on.begin(), on.end());
    std::printf("  %s: median %.2f / %.2f %s (%.3f), best %.2f / %.2f (%.3f), median of the "
                "rounds' ratios %.3f\n",
                what, Median(off), Median(on), unit, Median(on) / Median(off), best_off, best_on,
                best_on / best_off, Median(ratios));
  };
  std::printf("\n%d rounds, without the key / with it (ratio with/without; aim >= 0.95):\n",
              static_cast<int>(o.auth_rounds));
  if (o.auth_rounds > 0) {
    report("4 KiB put A->B", "kops/s", &AuthFigures::put4k_kops_per_s);
    report("4 MiB get B->A", "GB/s", &AuthFigures::get4m_gbps);
  }
  double fresh[2], reused[2];
  TransferCostUs(fresh, reused);
  std::printf("  in process, alternating: a 4 KiB READ on a new connection (connect, opening, "
              "READ; 2000 of each) p50 %.1f / %.1f us: the handshake adds %.1f us, once per "
              "pooled connection; on a pooled one (10000 of each) p50 %.1f / %.1f us\n",
              fresh[0], fresh[1], fresh[1] - fresh[0], reused[0], reused[1]);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  mooncake::FlagSet flags("store_bench",
                          "put_from/get_into throughput and latency through the C ABI, with "
                          "same-run memcpy and Unix-socket baselines; --daemons 2: across two "
                          "daemons, against raw loopback TCP.");
  flags.AddString("socket", &o.socket, "daemon socket to use (empty: spawn a master and daemon)");
  flags.AddString("build_dir", &o.build_dir, "build tree holding the binaries to spawn");
  flags.AddInt("daemons", &o.daemons,
               "1: one daemon; 2: spawn two, put from A onto B and get B's objects on A");
  flags.AddString("daemon_args", &o.daemon_args,
                  "extra flags of the spawned daemons, separated by spaces");
  flags.AddString("sizes", &o.sizes,
                  "comma-separated object sizes (default 4KB,64KB,1MB,4MB,16MB; with "
                  "--daemons 2: 1MB,4MB)");
  flags.AddInt("threads", &o.threads, "N for the multi-thread runs");
  flags.AddSize("bytes_per_phase", &o.bytes_per_phase, "data moved per phase (bounds the op count)");
  flags.AddInt("max_ops", &o.max_ops, "upper bound on operations per phase");
  flags.AddSize("pool_size", &o.pool_size, "the client pool (local_buffer_size)");
  flags.AddSize("segment_size", &o.segment_size,
                "each daemon's segment (spawned: created this big; --socket: say how big it is); "
                "default 3GB, with --daemons 2 1GB each");
  flags.AddDuration("lease_ms", &o.lease_ms, 1,
                    "the master's read lease (spawned: set to this; --socket: say what it is)");
  flags.AddChoice("auth", &o.auth, {"on", "off", "both"},
                  "spawned clusters with the cluster key (on), without (off), or with --daemons "
                  "2 both compared: remote 4 KiB puts and 4 MiB gets, rounds of each");
  flags.AddInt("auth_rounds", &o.auth_rounds,
               "--auth both: rounds of each (0: only the in-process figures of the handshake)");
  flags.AddString("csv", &o.csv, "also write the rows to this CSV file");
  mooncake::ParseFlagsOrExit(&flags, argc, argv);
  bool two = o.daemons == 2;
  if ((o.daemons != 1 && !two) || (two && !o.socket.empty())) {
    std::fprintf(stderr, "store_bench: --daemons is 1 or 2, and 2 spawns its own (no --socket)\n");
    return 2;
  }
  if (o.sizes.empty()) o.sizes = two ? "1MB,4MB" : "4KB,64KB,1MB,4MB,16MB";
  // Two daemons pre-fault a segment each; 1 GiB apiece is plenty for their 1-4 MiB phases.
  if (o.segment_size == 0) o.segment_size = two ? (1ull << 30) : (3ull << 30);
  if (o.auth == "both") {
    if (!two || o.auth_rounds < 0) {
      std::fprintf(stderr, "store_bench: --auth both needs --daemons 2 and --auth_rounds >= 0\n");
      return 2;
    }
    FILE* csv = o.csv.empty() ? nullptr : std::fopen(o.csv.c_str(), "w");
    RunAuthComparison(o, csv);
    if (csv) std::fclose(csv);
    return 0;
  }

  mc_cluster* cluster = nullptr;
  std::string socket = o.socket;
  if (socket.empty()) {
    cluster = SpawnCluster(o, o.auth == "on");
    if (cluster == nullptr) return 1;
    socket = mc_cluster_socket(cluster);
  }
  mooncake_store_t store = mooncake_store_create();
  int rc = mooncake_store_connect(store, socket.c_str(), o.pool_size);
  if (rc != 0) Die("connect", rc);

  FILE* csv = o.csv.empty() ? nullptr : std::fopen(o.csv.c_str(), "w");
  if (two) {
    RunTwoDaemons(o, cluster, store, csv);
  } else {
    RunOneDaemon(o, store, csv);
  }
  if (csv) std::fclose(csv);
  mooncake_store_destroy(store);
  mc_cluster_stop(cluster);
  return 0;
}
