// eviction_bench: puts under memory pressure with existence checks alongside (issue 13).
//
// Spawns a master and two daemons A and B (--segment_size each). An application on A
// writes --memory_multiple times the cluster's memory in batches (--batch entries of
// --object_size) while --checkers applications on B poll batch_is_exist over every key
// written so far, as an engine's prefix lookups do. Two phases, each on a cluster of its
// own: without the checkers (the baseline, same run) and with them. Per phase: put
// throughput, batch entries that failed (the aim: none), eviction rounds (how many, run by
// puts or the upkeep, short of candidates, how long), peak memory use and how many samples
// found it above the high watermark, and how many of the newest keys -- half the memory's
// worth -- read back intact at the end. Memory use over time goes to a CSV, one row per
// --sample_ms, and from there to a PNG (bench/plot_eviction_bench.gnuplot, when gnuplot is
// installed).
//
// --build_dir picks the binaries, so the same program measures another build (e.g. one from
// before exist leases) against this one. The master runs with its own defaults (the
// watermark is taken to be its default, 0.9): extra flags go in --master_flags.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/master_bench_util.h"
#include "common/base/flags.h"
#include "include/mooncake_store.h"
#include "tests/cluster.h"
#include "tests/process_harness.h"

#ifndef MC_BENCH_DIR
#define MC_BENCH_DIR "bench"
#endif

namespace {

using Clock = std::chrono::steady_clock;
using mooncake::bench::Die;

// The cluster of the running phase, stopped by Die (its processes would outlive us).
std::atomic<mc_cluster*> g_running{nullptr};

struct Options {
  std::string build_dir = "build";
  uint64_t segment_size = 256ull << 20;  // per daemon (the 256 MB)
  uint64_t object_size = 64 << 10;
  int64_t batch = 128;
  double memory_multiple = 4;
  int64_t checkers = 1;
  int64_t lease_ms = 10000;  // the master's read lease: its production default
  int64_t sample_ms = 20;
  double watermark = 0.9;  // the master's default; only for the report
  std::string master_flags;
  std::string csv = "eviction_bench.csv";
  std::string png = "eviction_bench.png";
  std::string plot_script = MC_BENCH_DIR "/plot_eviction_bench.gnuplot";
};

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

struct Sample {
  double t_s;
  mc_cluster_eviction_stats stats;
  int64_t written_bytes;
};

struct PhaseResult {
  std::string name;
  double seconds = 0;
  int64_t keys = 0;
  int64_t failed_entries = 0;
  int64_t checked_keys = 0;
  int64_t check_calls = 0;
  int64_t newest = 0, newest_readable = 0;
  int64_t samples_above = 0;
  int64_t peak_used = 0;
  mc_cluster_eviction_stats end{};
  std::vector<Sample> samples;
};

class Phase {
 public:
  Phase(const Options& o, std::string name, int64_t checkers)
      : o_(o), checkers_(checkers) {
    result_.name = std::move(name);
    per_batch_ = static_cast<size_t>(o.batch);
    uint64_t memory = 2 * o.segment_size;
    total_keys_ = static_cast<int64_t>(o.memory_multiple * static_cast<double>(memory) /
                                       static_cast<double>(o.object_size));
    total_keys_ -= total_keys_ % o.batch;
    keys_.reserve(static_cast<size_t>(total_keys_));
    for (int64_t i = 0; i < total_keys_; ++i) {
      keys_.push_back("evict-" + std::to_string(getpid()) + "-" + result_.name + "-" +
                      std::to_string(i));
    }
    key_ptrs_.reserve(keys_.size());
    for (const std::string& k : keys_) key_ptrs_.push_back(k.c_str());
  }

  PhaseResult Run() {
    std::vector<std::string> flags = Split(o_.master_flags);
    std::vector<const char*> master_flags;
    for (const std::string& f : flags) master_flags.push_back(f.c_str());
    master_flags.push_back(nullptr);
    mc_cluster_options options{2, o_.segment_size, static_cast<int>(o_.lease_ms),
                               master_flags.data(), nullptr};
    cluster_ = mc_cluster_start_with(&options);
    if (cluster_ == nullptr) Die("cannot start the cluster from %s", o_.build_dir.c_str());
    g_running = cluster_;
    mooncake_store_t writer = Connect(0, 2 * per_batch_ * o_.object_size);
    std::vector<mooncake_store_t> checkers;
    for (int64_t i = 0; i < checkers_; ++i) checkers.push_back(Connect(1, 16 << 20));

    std::vector<std::thread> threads;
    start_ = Clock::now();
    threads.emplace_back([this] { SampleLoop(); });
    for (mooncake_store_t c : checkers) threads.emplace_back([this, c] { CheckLoop(c); });
    Write(writer);
    result_.seconds = Seconds(start_, Clock::now());
    stop_ = true;
    for (std::thread& t : threads) t.join();
    TakeSample();  // the state at the end
    ReadNewest(checkers_ > 0 ? checkers[0] : writer);

    result_.keys = total_keys_;
    result_.end = result_.samples.back().stats;
    for (const Sample& s : result_.samples) {
      result_.peak_used = std::max(result_.peak_used, s.stats.used_bytes);
      if (static_cast<double>(s.stats.used_bytes) >
          o_.watermark * static_cast<double>(s.stats.capacity_bytes)) {
        ++result_.samples_above;
      }
    }
    for (mooncake_store_t c : checkers) mooncake_store_destroy(c);
    mooncake_store_destroy(writer);
    g_running = nullptr;
    mc_cluster_stop(cluster_);
    return result_;
  }

 private:
  mooncake_store_t Connect(int daemon, uint64_t pool) {
    mooncake_store_t s = mooncake_store_create();
    int rc = s == nullptr ? -1 : mooncake_store_connect(s, mc_cluster_socket_at(cluster_, daemon), pool);
    if (rc != 0) Die("connect to daemon %d: %d (%s)", daemon, rc, mooncake_store_strerror(rc));
    return s;
  }

  // The batches, one after another; each entry's first 8 bytes are its key's index.
  void Write(mooncake_store_t s) {
    const uint64_t size = o_.object_size;
    char* area = static_cast<char*>(mooncake_store_alloc(s, per_batch_ * size));
    if (area == nullptr) Die("alloc of %zu bytes in the writer's pool", per_batch_ * size);
    std::memset(area, 0x5a, per_batch_ * size);
    std::vector<void*> bufs(per_batch_);
    std::vector<size_t> sizes(per_batch_, size);
    std::vector<int> results(per_batch_);
    for (size_t j = 0; j < per_batch_; ++j) bufs[j] = area + j * size;
    for (int64_t first = 0; first < total_keys_; first += o_.batch) {
      for (size_t j = 0; j < per_batch_; ++j) {
        int64_t index = first + static_cast<int64_t>(j);
        std::memcpy(bufs[j], &index, sizeof(index));
      }
      int rc = mooncake_store_batch_put_from(s, key_ptrs_.data() + first, bufs.data(),
                                             sizes.data(), per_batch_, nullptr, results.data());
      if (rc != 0) Die("batch_put_from: %d (%s)", rc, mooncake_store_strerror(rc));
      for (int r : results) result_.failed_entries += r != 0;
      written_.store(first + o_.batch);
    }
    mooncake_store_free(s, area);
  }

  // batch_is_exist over every key written so far, again and again, 8192 keys a call.
  void CheckLoop(mooncake_store_t s) {
    constexpr size_t kChunk = 8192;
    std::vector<int> present(kChunk);
    int64_t checked = 0, calls = 0;
    while (!stop_.load()) {
      int64_t n = written_.load();
      if (n == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      for (int64_t first = 0; first < n && !stop_.load(); first += kChunk) {
        size_t count = static_cast<size_t>(std::min<int64_t>(kChunk, n - first));
        int rc = mooncake_store_batch_is_exist(s, key_ptrs_.data() + first, count, present.data());
        if (rc != 0) Die("batch_is_exist: %d (%s)", rc, mooncake_store_strerror(rc));
        checked += static_cast<int64_t>(count);
        ++calls;
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    result_.checked_keys += checked;
    result_.check_calls += calls;
  }

  void SampleLoop() {
    while (!stop_.load()) {
      TakeSample();
      std::this_thread::sleep_for(std::chrono::milliseconds(o_.sample_ms));
    }
  }

  void TakeSample() {
    Sample s{Seconds(start_, Clock::now()), {}, 0};
    if (mc_cluster_eviction_stats_get(cluster_, &s.stats) != 0) Die("GetStats failed");
    s.written_bytes = written_.load() * static_cast<int64_t>(o_.object_size);
    std::lock_guard<std::mutex> lock(mu_);
    result_.samples.push_back(s);
  }

  // The newest keys, half the memory's worth, read back (on B when checkers ran there).
  void ReadNewest(mooncake_store_t s) {
    const uint64_t size = o_.object_size;
    int64_t newest = static_cast<int64_t>(o_.segment_size / size);  // half of 2 segments
    newest -= newest % o_.batch;
    char* area = static_cast<char*>(mooncake_store_alloc(s, per_batch_ * size));
    if (area == nullptr) Die("alloc of %zu bytes for the reads", per_batch_ * size);
    std::vector<void*> bufs(per_batch_);
    std::vector<size_t> sizes(per_batch_, size);
    std::vector<int64_t> got(per_batch_);
    for (size_t j = 0; j < per_batch_; ++j) bufs[j] = area + j * size;
    for (int64_t first = total_keys_ - newest; first < total_keys_; first += o_.batch) {
      int rc = mooncake_store_batch_get_into(s, key_ptrs_.data() + first, bufs.data(),
                                             sizes.data(), per_batch_, got.data());
      if (rc != 0) Die("batch_get_into: %d (%s)", rc, mooncake_store_strerror(rc));
      for (size_t j = 0; j < per_batch_; ++j) {
        int64_t index = -1;
        std::memcpy(&index, bufs[j], sizeof(index));
        result_.newest_readable +=
            got[j] == static_cast<int64_t>(size) && index == first + static_cast<int64_t>(j);
      }
    }
    result_.newest = newest;
    mooncake_store_free(s, area);
  }

  const Options& o_;
  const int64_t checkers_;
  size_t per_batch_ = 0;
  int64_t total_keys_ = 0;
  std::vector<std::string> keys_;
  std::vector<const char*> key_ptrs_;
  mc_cluster* cluster_ = nullptr;
  Clock::time_point start_;
  std::atomic<int64_t> written_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // result_.samples and the checkers' sums
  PhaseResult result_;
};

void WriteCsv(const Options& o, const std::vector<PhaseResult>& phases) {
  mooncake::bench::CsvFile csv(o.csv, {"phase", "t_s", "used_bytes", "capacity_bytes",
                                       "used_pct", "watermark_pct", "written_bytes",
                                       "written_x_memory", "rounds", "evicted_objects",
                                       "round_us_total", "no_space_puts"});
  for (const PhaseResult& p : phases) {
    for (const Sample& s : p.samples) {
      double capacity = static_cast<double>(std::max<int64_t>(1, s.stats.capacity_bytes));
      char cells[12][32];
      std::snprintf(cells[0], 32, "%.3f", s.t_s);
      std::snprintf(cells[1], 32, "%" PRId64, s.stats.used_bytes);
      std::snprintf(cells[2], 32, "%" PRId64, s.stats.capacity_bytes);
      std::snprintf(cells[3], 32, "%.2f", 100.0 * static_cast<double>(s.stats.used_bytes) / capacity);
      std::snprintf(cells[4], 32, "%.1f", 100.0 * o.watermark);
      std::snprintf(cells[5], 32, "%" PRId64, s.written_bytes);
      std::snprintf(cells[6], 32, "%.3f", static_cast<double>(s.written_bytes) / capacity);
      std::snprintf(cells[7], 32, "%" PRId64, s.stats.rounds);
      std::snprintf(cells[8], 32, "%" PRId64, s.stats.evicted_objects);
      std::snprintf(cells[9], 32, "%" PRId64, s.stats.total_us);
      std::snprintf(cells[10], 32, "%" PRId64, s.stats.no_space_puts);
      csv.Row({p.name, cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6],
               cells[7], cells[8], cells[9], cells[10]});
    }
  }
  csv.Close();
  std::printf("\nCSV written to %s\n", o.csv.c_str());
}

void Report(const Options& o, const std::vector<PhaseResult>& phases) {
  std::printf("%-12s %9s %9s %8s %13s %16s %10s %9s %9s %12s %10s\n", "phase", "MiB/s",
              "keys/s", "failed", "checks/s", "rounds put/upk", "short", "mean us",
              "max us", "peak used", "newest ok");
  for (const PhaseResult& p : phases) {
    const mc_cluster_eviction_stats& e = p.end;
    double mib = static_cast<double>(p.keys) * static_cast<double>(o.object_size) / (1 << 20);
    char rounds[32];
    std::snprintf(rounds, sizeof(rounds), "%" PRId64 "/%" PRId64, e.put_rounds,
                  e.rounds - e.put_rounds);
    char newest[32];
    std::snprintf(newest, sizeof(newest), "%" PRId64 "/%" PRId64, p.newest_readable, p.newest);
    std::printf("%-12s %9.0f %9.0f %8" PRId64 " %13.0f %16s %10" PRId64 " %9.0f %9" PRId64
                " %11.1f%% %10s\n",
                p.name.c_str(), mib / p.seconds, static_cast<double>(p.keys) / p.seconds,
                p.failed_entries, static_cast<double>(p.checked_keys) / p.seconds, rounds,
                e.short_rounds,
                e.rounds > 0 ? static_cast<double>(e.total_us) / static_cast<double>(e.rounds) : 0.0,
                e.max_us,
                100.0 * static_cast<double>(p.peak_used) /
                    static_cast<double>(std::max<int64_t>(1, e.capacity_bytes)),
                newest);
  }
  std::printf("\n(failed: batch entries not stored, the aim is 0; checks/s: keys asked by "
              "batch_is_exist; rounds: eviction rounds run by puts / by the upkeep, short: "
              "fewer bytes freed than asked; peak used: highest of the %" PRId64
              "-ms samples, the high watermark being %.0f%%; newest ok: of the newest keys "
              "worth half the memory, read back intact)\n",
              o.sample_ms, 100.0 * o.watermark);
  for (const PhaseResult& p : phases) {
    std::printf("%s: %" PRId64 " of %zu samples above the watermark; %" PRId64
                " objects evicted; %" PRId64 " -200 answers to PutStart (each retry "
                "counted); %" PRId64 " existence hits counted as uses, %" PRId64
                " exist leases\n",
                p.name.c_str(), p.samples_above, p.samples.size(), p.end.evicted_objects,
                p.end.no_space_puts, p.end.exist_uses, p.end.exist_leases);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  mooncake::FlagSet flags("eviction_bench",
                          "puts of several times the cluster's memory in batches, with and "
                          "without batch_is_exist polling alongside; spawns a master and two "
                          "daemons per phase");
  flags.AddString("build_dir", &o.build_dir, "build tree holding the binaries to spawn");
  flags.AddSize("segment_size", &o.segment_size, "each daemon's memory");
  flags.AddSize("object_size", &o.object_size, "value size");
  flags.AddInt("batch", &o.batch, "entries per batch_put_from");
  flags.AddDouble("memory_multiple", &o.memory_multiple, "bytes written, times the memory");
  flags.AddInt("checkers", &o.checkers, "applications on B polling batch_is_exist (phase 2)");
  flags.AddDuration("lease_ms", &o.lease_ms, 1, "the master's read lease");
  flags.AddDuration("sample_ms", &o.sample_ms, 1, "time between GetStats samples");
  flags.AddDouble("watermark", &o.watermark, "the master's high watermark, for the report");
  flags.AddString("master_flags", &o.master_flags, "extra master flags, space-separated");
  flags.AddString("csv", &o.csv, "CSV of memory use over time, both phases");
  flags.AddString("png", &o.png, "plot of it (needs gnuplot; empty: none)");
  flags.AddString("plot_script", &o.plot_script, "the gnuplot script that draws it");
  mooncake::ParseFlagsOrExit(&flags, argc, argv);
  mooncake::bench::SetProgramName("eviction_bench");
  mooncake::bench::AtDie([] {
    if (mc_cluster* c = g_running.exchange(nullptr)) mc_cluster_stop(c);
  });
  if (o.batch <= 0 || o.object_size == 0 || o.memory_multiple <= 0 || o.sample_ms <= 0) {
    Die("--batch, --object_size, --memory_multiple and --sample_ms must be positive");
  }

  setenv("MC_BUILD_DIR", o.build_dir.c_str(), 1);
  std::printf("machine: %ld cores; 2 daemons x %" PRIu64 " MiB; %" PRId64 " x %" PRIu64
              " KiB batches; %.1f x the memory written per phase; read lease %" PRId64
              " ms; master flags: %s\n",
              sysconf(_SC_NPROCESSORS_ONLN), o.segment_size >> 20, o.batch,
              o.object_size >> 10, o.memory_multiple, o.lease_ms,
              o.master_flags.empty() ? "(defaults)" : o.master_flags.c_str());
  std::vector<PhaseResult> phases;
  phases.push_back(Phase(o, "no-checks", 0).Run());
  phases.push_back(Phase(o, "with-checks", o.checkers).Run());
  std::printf("\n");
  Report(o, phases);
  WriteCsv(o, phases);
  mooncake::bench::PlotCsv(o.plot_script, o.csv, o.png);
  return 0;
}
