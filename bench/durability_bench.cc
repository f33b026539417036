// durability_bench: what durability costs a mooncake-master at scale, and what it buys.
//
// It spawns its own masters on 127.0.0.1, one at a time, each with its state and log file
// in a directory under one temporary directory (removed at the end, also when the run
// fails), and drives them over Thrift with a fake daemon that mounts one big segment (the
// master only does bookkeeping, so the segment needs no memory):
//
//   1. load      --objects single-replica objects with BatchPutStart + BatchPutEnd, into a
//                master with --enable_snapshot --enable_snapshot_restore --oplog_mode relaxed
//                (periodic snapshots pushed a day away, so only ours run).
//   2. snapshot  --snapshots snapshots, --snapshot_gap apart, while --readers threads
//                loop on ExistKey / GetReplicaList of loaded keys and time every call. For each
//                snapshot: the master's own pause_us (state gate + fork), the reads that
//                overlapped the snapshot (how many took over 20 ms, the longest), the
//                snapshot's size and write time; for the reads outside every call: p50, p99,
//                max.
//   3. restore   SIGKILL the master, start it again with the same flags on the same port:
//                wall time from spawn to accepting connections, GetStats().restore_ms and
//                restored_objects (must equal --objects, or the run fails). Then the fake
//                daemon re-attaches its segment and random keys are read back and checked.
//   4. puts      batch put throughput on fresh masters with durability off, and with
//                snapshots on and --oplog_mode disabled, relaxed, strict; the order alternates
//                (off, disabled, relaxed, strict, then backwards) so drift of a shared machine
//                hits every mode alike; the median per mode is reported. Then single
//                PutStart+PutEnd pairs, off vs strict, with 1 and --threads threads: one
//                latency per pair, which in strict mode includes waiting for the fdatasync
//                (group commit shows once many threads wait at once).
//
// Every result code is checked; the first unexpected one ends the run (exit 1) with a
// message naming the call, the key and the code, and the tail of the master's log.
// See bench/README.md for how to run it and what the figures mean.
#include <signal.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/master_bench_util.h"
#include "bench/spawned_master.h"
#include "common/base/error_code.h"
#include "common/base/flags.h"
#include "common/base/units.h"
#include "tests/process_harness.h"

#ifndef MC_BUILD_TYPE
#define MC_BUILD_TYPE "unknown"
#endif
#ifndef MC_BENCH_DIR
#define MC_BENCH_DIR "bench"
#endif

namespace {

namespace rpc = mooncake::rpc;
namespace testing = mooncake::testing;
using namespace mooncake::bench;  // what the master benchmarks share

struct Options {
  std::string spawn_master = "build/master/mooncake-master";
  std::string master_args;
  std::string dir;  // parent of the temporary directory; empty: $TMPDIR or /tmp
  int64_t objects = 1000000;
  uint64_t object_size = 4096;
  int64_t key_size = 64;
  int64_t batch = 128;
  int64_t threads = 4;
  int64_t readers = 2;
  int64_t snapshots = 3;
  int64_t snapshot_gap_ms = 1000;
  int64_t verify_keys = 10000;
  int64_t put_keys = 200000;
  int64_t single_keys = 5000;
  int64_t rounds = 1;
  uint64_t segment_size = 1ULL << 40;
  int64_t start_timeout_ms = 120000;
  std::string csv = "durability_bench.csv";
  std::string png = "durability_bench.png";
  std::string plot_script = MC_BENCH_DIR "/plot_durability_bench.gnuplot";
};

constexpr uint64_t kSetLoad = 1;
constexpr uint64_t kSetPut = 2;
constexpr uint64_t kSetSingleOne = 3;
constexpr uint64_t kSetSingleMany = 4;

// The temporary directory everything goes under; removed at the end, and by the Die hook.
std::string g_top_dir;

// The durability modes compared in part 4, and the flags each adds.
struct Mode {
  const char* name;
  const char* oplog_mode;  // nullptr: durability off (no --enable_snapshot)
};
const Mode kModes[] = {{"off", nullptr},
                       {"disabled", "disabled"},
                       {"relaxed", "relaxed"},
                       {"strict", "strict"}};

std::vector<std::string> DurableFlags(const std::string& state_dir, const char* oplog_mode) {
  return {"--enable_snapshot",     "--snapshot_dir",  state_dir,
          "--oplog_mode",          oplog_mode,        "--snapshot_interval_seconds",
          "86400"};
}

// ---- the report ------------------------------------------------------------------------

// One CSV for every part: a section and a mode column, then the columns each section fills
// (the others stay empty). The plot reads the throughput and median rows.
const std::vector<std::string> kCsvColumns = {
    "section",     "mode",     "run",         "form",   "threads",          "keys",
    "seconds",     "keys_per_s", "p50_us",    "p99_us", "max_us",           "master_cores",
    "bench_cores", "pause_us", "duration_ms", "bytes",  "bytes_per_object", "objects",
    "restore_ms", "slow_reads"};

// Cells by column name.
using Cells = std::vector<std::pair<std::string, std::string>>;

Cells PhaseCells(int run, const PhaseResult& r) {
  return {{"run", std::to_string(run)},
          {"form", r.form},
          {"threads", std::to_string(r.threads)},
          {"keys", std::to_string(r.keys)},
          {"seconds", Format("%.4f", r.seconds)},
          {"keys_per_s", Format("%.1f", r.keys_per_s)},
          {"p50_us", Format("%.2f", r.p50_us)},
          {"p99_us", Format("%.2f", r.p99_us)},
          {"master_cores", r.master_cores < 0 ? "" : Fixed(r.master_cores, 3)},
          {"bench_cores", Format("%.3f", r.bench_cores)}};
}

const Table kRunTable({{"mode", 8, true}, {"form", 6, true}, {"thr", 3}, {"keys", 8},
                       {"seconds", 7}, {"keys/s", 8}, {"p50_us", 8}, {"p99_us", 8},
                       {"mst_cpu", 7}, {"cli_cpu", 7}, {"mst_us", 6}});

void PrintRun(const std::string& mode, const PhaseResult& r) {
  kRunTable.PrintRow({mode, r.form, std::to_string(r.threads), std::to_string(r.keys),
                      Format("%.2f", r.seconds), Format("%.0f", r.keys_per_s),
                      Format("%.1f", r.p50_us), Format("%.1f", r.p99_us),
                      Fixed(r.master_cores, 2), Fixed(r.bench_cores, 2),
                      Fixed(r.master_us_per_key, 2)});
}

// ---- the benchmark ---------------------------------------------------------------------

// One read a reader made: when it started (ns after the readers' start) and how long it took.
struct Read {
  int64_t start_ns;
  int64_t latency_ns;
};

// One snapshot asked for: from just before Snapshot() was sent until LastSnapshot() said it
// was published, and that answer.
struct Window {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  rpc::SnapshotResult result;
};

// The aims.
constexpr int64_t kPauseAimUs = 20000;     // requests held by a snapshot, at 1M objects
constexpr double kRestoreAimSeconds = 3;   // restart to serving, at 1M objects
constexpr double kStrictAimRatio = 0.7;    // strict-mode batch puts vs oplog disabled

class Bench {
 public:
  Bench(const Options& o, uint64_t run_id, int64_t daemon_id, int64_t segment_id)
      : o_(o), keys_(run_id, static_cast<size_t>(o.key_size)), daemon_id_(daemon_id),
        segment_id_(segment_id), csv_(o.csv, kCsvColumns) {}

  void Run() {
    LoadSnapshotRestore();
    Throughput();
    csv_.Close();
    std::printf("\nCSV written to %s\n", o_.csv.c_str());
    PlotCsv(o_.plot_script, o_.csv, o_.png);
  }

 private:
  void CsvRow(const std::string& section, const std::string& mode, const Cells& cells) {
    std::vector<std::string> row(kCsvColumns.size());
    row[0] = section;
    row[1] = mode;
    for (const auto& [name, value] : cells) {
      auto it = std::find(kCsvColumns.begin(), kCsvColumns.end(), name);
      if (it == kCsvColumns.end()) Die("no CSV column named %s", name.c_str());
      row[static_cast<size_t>(it - kCsvColumns.begin())] = value;
    }
    csv_.Row(row);
  }

  // A master whose state and log go under dir, at --log_level info (the restore's lines are
  // part of the report), with --master_args last so that they win.
  SpawnedMaster Spawn(const std::string& dir, std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"--log_level", "info"});
    for (const std::string& w : SplitWords(o_.master_args)) flags.push_back(w);
    return SpawnedMaster(o_.spawn_master, std::move(flags), dir + "/master.log",
                         o_.start_timeout_ms);
  }

  std::unique_ptr<FakeDaemon> Daemon(const SpawnedMaster& m) {
    return std::make_unique<FakeDaemon>("127.0.0.1", m.port(), daemon_id_, segment_id_,
                                        o_.segment_size);
  }

  // Parts 1-3, on one master and its restarted self.
  void LoadSnapshotRestore() {
    std::string dir = g_top_dir + "/load";
    MakeDir(dir);
    std::vector<std::string> flags = DurableFlags(dir + "/state", "relaxed");
    flags.push_back("--enable_snapshot_restore");
    SpawnedMaster master = Spawn(dir, flags);
    std::fprintf(stderr, "[1/4] loading %" PRId64 " objects\n", o_.objects);
    master.Start();
    auto daemon = Daemon(master);
    auto conns = Connect("127.0.0.1", master.port(), o_.threads);
    size_t n = conns.size();
    PhaseResult load = RunPhase(
        "load", "batch", o_.objects, conns,
        [&](size_t t, Conn& c, Recorder& r) {
          auto [b, e] = Share(o_.objects, t, n);
          PutKeys(c, r, daemon_id_, static_cast<int64_t>(o_.object_size), o_.batch, true, b, e,
                  [this](int64_t i) { return keys_.Make(kSetLoad, static_cast<uint64_t>(i)); });
        },
        master.process());
    rpc::MasterStats stats = Stats(*conns[0]);
    if (stats.objects != o_.objects) {
      Die("the master holds %" PRId64 " objects after loading %" PRId64,
          static_cast<int64_t>(stats.objects), o_.objects);
    }
    std::printf("1. load: %" PRId64 " objects of %s into a master with --enable_snapshot "
                "--enable_snapshot_restore --oplog_mode relaxed\n",
                o_.objects, mooncake::FormatSize(o_.object_size).c_str());
    kRunTable.PrintHeader();
    PrintRun("relaxed", load);
    std::printf("  master resident %s; oplog: %" PRId64 " records appended, %" PRId64
                " synced\n",
                mooncake::FormatSize(static_cast<uint64_t>(stats.resident_bytes)).c_str(),
                static_cast<int64_t>(stats.oplog_sequence),
                static_cast<int64_t>(stats.oplog_synced));
    CsvRow("load", "relaxed", PhaseCells(1, load));
    conns.clear();

    Snapshots(master);

    std::fprintf(stderr, "[3/4] SIGKILL and restore\n");
    daemon.reset();  // its heartbeats would fail once the master is gone
    Restore(&master);
  }

  // Part 2: the readers run from before the first snapshot until after the last.
  void Snapshots(const SpawnedMaster& master) {
    std::fprintf(stderr, "[2/4] %" PRId64 " snapshots while %" PRId64 " readers read\n",
                 o_.snapshots, o_.readers);
    std::atomic<bool> stop{false};
    auto t0 = Clock::now();
    std::vector<std::vector<Read>> reads(static_cast<size_t>(o_.readers));
    std::vector<std::thread> readers;
    for (size_t t = 0; t < reads.size(); ++t) {
      readers.emplace_back([&, t] { ReadLoop(master.port(), t, t0, &stop, &reads[t]); });
    }
    Conn admin("127.0.0.1", master.port());
    std::vector<Window> windows;
    for (int64_t i = 0; i < o_.snapshots; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(o_.snapshot_gap_ms));
      Window w;
      w.begin_ns = NanosSince(t0);
      // Snapshot() answers once the child has forked; the window runs until LastSnapshot()
      // says that snapshot is published, so it covers the whole of its writing.
      try {
        rpc::SnapshotResult started;
        admin->Snapshot(started);
        w.result = started;
        while (w.result.code == 0 && (w.result.running || w.result.name != started.name)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          admin->LastSnapshot(w.result);
        }
      } catch (const std::exception& e) {
        Die("Snapshot() failed: %s", e.what());
      }
      w.end_ns = NanosSince(t0);
      if (w.result.code != 0) {
        Die("Snapshot() returned %s: %s", CodeText(w.result.code).c_str(),
            w.result.error.c_str());
      }
      if (w.result.objects != o_.objects) {
        Die("snapshot %s holds %" PRId64 " objects, %" PRId64 " were loaded",
            w.result.name.c_str(), static_cast<int64_t>(w.result.objects), o_.objects);
      }
      std::fprintf(stderr, "  snapshot %" PRId64 ": pause %" PRId64 " us, %" PRId64 " ms\n",
                   i + 1, static_cast<int64_t>(w.result.pause_us),
                   static_cast<int64_t>(w.result.duration_ms));
      windows.push_back(w);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o_.snapshot_gap_ms));
    stop = true;
    for (auto& r : readers) r.join();
    ReportSnapshots(windows, reads);
  }

  // A read belongs to every snapshot it overlapped; the others are the baseline.
  void ReportSnapshots(const std::vector<Window>& windows,
                       const std::vector<std::vector<Read>>& reads) {
    std::vector<int64_t> outside;
    std::vector<std::vector<int64_t>> inside(windows.size());
    for (const auto& list : reads) {
      for (const Read& r : list) {
        bool in_any = false;
        for (size_t w = 0; w < windows.size(); ++w) {
          if (r.start_ns < windows[w].end_ns && r.start_ns + r.latency_ns > windows[w].begin_ns) {
            inside[w].push_back(r.latency_ns);
            in_any = true;
          }
        }
        if (!in_any) outside.push_back(r.latency_ns);
      }
    }
    std::printf("\n2. snapshot pause: %" PRId64 " snapshots %.1f s apart while %" PRId64
                " readers loop on ExistKey / GetReplicaList\n",
                o_.snapshots, static_cast<double>(o_.snapshot_gap_ms) / 1000, o_.readers);
    Table table({{"snap", 4}, {"pause_us", 8}, {"call_ms", 7}, {"write_ms", 8},
                 {"reads_in", 8}, {">20ms", 5}, {"max_in_us", 9}, {"bytes", 10},
                 {"B/obj", 6}, {"objects", 8}, {"sequence", 8}});
    table.PrintHeader();
    int64_t worst_pause_us = 0;
    double worst_read_us = 0;
    for (size_t w = 0; w < windows.size(); ++w) {
      const rpc::SnapshotResult& s = windows[w].result;
      // The reads that waited longer than the aim for the pause.
      int64_t slow = std::count_if(inside[w].begin(), inside[w].end(),
                                   [](int64_t ns) { return ns > kPauseAimUs * 1000; });
      size_t reads_in = inside[w].size();
      double max_in_us = Percentile(&inside[w], 1.0);
      double per_object = static_cast<double>(s.bytes) / static_cast<double>(s.objects);
      double call_ms = static_cast<double>(windows[w].end_ns - windows[w].begin_ns) / 1e6;
      worst_pause_us = std::max<int64_t>(worst_pause_us, s.pause_us);
      worst_read_us = std::max(worst_read_us, max_in_us);
      table.PrintRow({std::to_string(w + 1), std::to_string(s.pause_us), Format("%.0f", call_ms),
                      std::to_string(s.duration_ms), std::to_string(reads_in),
                      std::to_string(slow), Format("%.0f", max_in_us), std::to_string(s.bytes),
                      Format("%.1f", per_object), std::to_string(s.objects),
                      std::to_string(s.sequence)});
      CsvRow("snapshot", "relaxed",
             {{"run", std::to_string(w + 1)},
              {"threads", std::to_string(o_.readers)},
              {"keys", std::to_string(reads_in)},
              {"seconds", Format("%.4f", call_ms / 1000)},
              {"max_us", Format("%.1f", max_in_us)},
              {"pause_us", std::to_string(s.pause_us)},
              {"duration_ms", std::to_string(s.duration_ms)},
              {"bytes", std::to_string(s.bytes)},
              {"bytes_per_object", Format("%.1f", per_object)},
              {"objects", std::to_string(s.objects)},
              {"slow_reads", std::to_string(slow)}});
    }
    size_t outside_n = outside.size();
    double p50 = Percentile(&outside, 0.5), p99 = Percentile(&outside, 0.99);
    double max = Percentile(&outside, 1.0);
    std::printf("  reads outside every snapshot: %zu, p50 %.1f us, p99 %.1f us, "
                "max %.0f us\n",
                outside_n, p50, p99, max);
    CsvRow("reads_outside", "relaxed",
           {{"threads", std::to_string(o_.readers)},
            {"keys", std::to_string(outside_n)},
            {"p50_us", Format("%.2f", p50)},
            {"p99_us", Format("%.2f", p99)},
            {"max_us", Format("%.1f", max)}});
    std::printf("  => pause (the master's pause_us, gate + fork): worst %.1f ms, aim <= %.0f ms "
                "at 1M objects: %s; the longest read during a snapshot took %.1f ms\n",
                static_cast<double>(worst_pause_us) / 1000,
                static_cast<double>(kPauseAimUs) / 1000,
                worst_pause_us <= kPauseAimUs ? "met" : "NOT met", worst_read_us / 1000);
  }

  // A reader of part 2: random loaded keys, ExistKey and GetReplicaList in turn, each timed.
  void ReadLoop(int port, size_t t, Clock::time_point t0, const std::atomic<bool>* stop,
                std::vector<Read>* out) {
    Conn conn("127.0.0.1", port);
    std::mt19937_64 rng(t + 1);
    std::uniform_int_distribution<int64_t> pick(0, o_.objects - 1);
    rpc::ReplicaListResult replicas;
    for (uint64_t i = 0; !stop->load(std::memory_order_relaxed); ++i) {
      std::string key = keys_.Make(kSetLoad, static_cast<uint64_t>(pick(rng)));
      int64_t start_ns = NanosSince(t0);
      int32_t exists = 1;
      try {
        if (i % 2 == 0) {
          exists = conn->ExistKey(key);
        } else {
          conn->GetReplicaList(replicas, key, 0);
        }
      } catch (const std::exception& e) {
        Die("reader: %s failed: %s", i % 2 == 0 ? "ExistKey" : "GetReplicaList", e.what());
      }
      int64_t end_ns = NanosSince(t0);
      if (i % 2 == 0) {
        CheckCode(exists, 1, key, "ExistKey");
      } else {
        CheckReplicaList(replicas, key, static_cast<int64_t>(o_.object_size), "GetReplicaList");
      }
      out->push_back({start_ns, end_ns - start_ns});
    }
  }

  // Part 3: SIGKILL, restart with the same flags on the same port, check what came back.
  void Restore(SpawnedMaster* master) {
    master->Kill();
    double seconds = master->Start(master->port());
    Conn conn("127.0.0.1", master->port());
    rpc::MasterStats stats = Stats(conn);
    if (stats.restored_objects != o_.objects || stats.objects != o_.objects) {
      Die("after the restart the master restored %" PRId64 " objects and holds %" PRId64
          "; %" PRId64 " were loaded",
          static_cast<int64_t>(stats.restored_objects), static_cast<int64_t>(stats.objects),
          o_.objects);
    }
    std::printf("\n3. restore: SIGKILL, then the same master started again with the same "
                "flags\n");
    std::printf("  spawn to accepting connections %.2f s; GetStats: restore_ms %" PRId64
                ", restored_objects %" PRId64 " (= loaded), pending_segments %" PRId64 "\n",
                seconds, static_cast<int64_t>(stats.restore_ms),
                static_cast<int64_t>(stats.restored_objects),
                static_cast<int64_t>(stats.pending_segments));
    for (const std::string& line : master->LogLines("restore:")) {
      std::printf("  | %s\n", line.c_str());
    }
    // A daemon that comes back re-attaches its segment; then the objects must read as put.
    auto daemon = Daemon(*master);
    int64_t pending = Stats(conn).pending_segments;
    if (pending != 0) Die("%" PRId64 " segments still pending after the re-attach", pending);
    VerifyKeys(conn);
    std::printf("  fake daemon re-attached (pending_segments 0); %" PRId64
                " random keys read back with their size and checksum\n",
                std::min(o_.verify_keys, o_.objects));
    std::printf("  => restore %.2f s from spawn (%" PRId64 " ms in the master) for %" PRId64
                " objects, aim <= %.0f s for 1M: %s\n",
                seconds, static_cast<int64_t>(stats.restore_ms), o_.objects, kRestoreAimSeconds,
                seconds <= kRestoreAimSeconds ? "met" : "NOT met");
    CsvRow("restore", "relaxed",
           {{"seconds", Format("%.4f", seconds)},
            {"objects", std::to_string(stats.restored_objects)},
            {"restore_ms", std::to_string(stats.restore_ms)}});
    daemon.reset();
    master->Stop();
  }

  void VerifyKeys(Conn& conn) {
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int64_t> pick(0, o_.objects - 1);
    int64_t left = std::min(o_.verify_keys, o_.objects);
    std::vector<std::string> chunk;
    std::vector<rpc::ReplicaListResult> out;
    while (left > 0) {
      chunk.clear();
      for (; left > 0 && static_cast<int64_t>(chunk.size()) < o_.batch; --left) {
        chunk.push_back(keys_.Make(kSetLoad, static_cast<uint64_t>(pick(rng))));
      }
      try {
        conn->BatchGetReplicaList(out, chunk, 0);
      } catch (const std::exception& e) {
        Die("BatchGetReplicaList after the restore failed: %s", e.what());
      }
      CheckBatchSize(out, chunk.size(), "BatchGetReplicaList");
      for (size_t k = 0; k < chunk.size(); ++k) {
        CheckReplicaList(out[k], chunk[k], static_cast<int64_t>(o_.object_size),
                         "BatchGetReplicaList after the restore");
      }
    }
  }

  // Part 4: one fresh master per run, modes alternating, batch and then single puts.
  void Throughput() {
    std::vector<const Mode*> order;
    for (int64_t r = 0; r < o_.rounds; ++r) {
      for (const Mode& m : kModes) order.push_back(&m);
      for (auto it = std::rbegin(kModes); it != std::rend(kModes); ++it) order.push_back(&*it);
    }
    std::printf("\n4. puts on a fresh master per run, in this order: ");
    for (size_t i = 0; i < order.size(); ++i) std::printf("%s%s", i ? " " : "", order[i]->name);
    std::printf("\n");

    // Every run puts the same keys (on a fresh master), made before any clock starts.
    auto lists = [&](uint64_t set, int64_t count, size_t n) {
      std::vector<std::vector<std::string>> out(n);
      for (size_t t = 0; t < n; ++t) {
        auto [b, e] = Share(count, t, n);
        for (int64_t i = b; i < e; ++i) out[t].push_back(keys_.Make(set, static_cast<uint64_t>(i)));
      }
      return out;
    };
    size_t threads = static_cast<size_t>(o_.threads);
    auto batch_keys = lists(kSetPut, o_.put_keys, threads);
    auto single_keys_1 = lists(kSetSingleOne, o_.single_keys, 1);
    auto single_keys_n = lists(kSetSingleMany, o_.single_keys, threads);

    // Results per mode name: batch keys/s, and for single: keys/s, p50, p99 (1 and N threads).
    struct Figures {
      std::vector<double> batch, single1_p50, single1_p99, singlen_rate, singlen_p50,
          singlen_p99;
    };
    std::map<std::string, Figures> figures;
    kRunTable.PrintHeader();
    int run = 0;
    for (const Mode* m : order) {
      ++run;
      std::fprintf(stderr, "[4/4] run %d/%zu: batch puts, %s\n", run, order.size(), m->name);
      PhaseResult r;
      PutRun(*m, run, [&](const SpawnedMaster& master) {
        auto conns = Connect("127.0.0.1", master.port(), o_.threads);
        r = RunPhase(m->name, "batch", o_.put_keys, conns,
                     [&](size_t t, Conn& conn, Recorder& rec) {
                       const auto& list = batch_keys[t];
                       PutKeys(conn, rec, daemon_id_, static_cast<int64_t>(o_.object_size),
                               o_.batch, true, 0, static_cast<int64_t>(list.size()),
                               [&list](int64_t i) { return list[static_cast<size_t>(i)]; });
                     },
                     master.process());
      });
      PrintRun(m->name, r);
      CsvRow("throughput", m->name, PhaseCells(run, r));
      figures[m->name].batch.push_back(r.keys_per_s);
    }

    // Single puts: off and strict only, each pair of runs 1 thread then --threads.
    std::vector<const Mode*> single_order;
    for (const Mode* m : order) {
      if (m->oplog_mode == nullptr || std::string(m->oplog_mode) == "strict") {
        single_order.push_back(m);
      }
    }
    for (const Mode* m : single_order) {
      ++run;
      std::fprintf(stderr, "[4/4] run %d: single puts, %s\n", run, m->name);
      PhaseResult one, many;
      PutRun(*m, run, [&](const SpawnedMaster& master) {
        auto conn = Connect("127.0.0.1", master.port(), 1);
        one = RunPhase(
            m->name, "single", o_.single_keys, conn,
            [&](size_t, Conn& c, Recorder& rec) { PutPairs(c, rec, single_keys_1[0]); },
            master.process());
        auto conns = Connect("127.0.0.1", master.port(), o_.threads);
        many = RunPhase(
            m->name, "single", o_.single_keys, conns,
            [&](size_t t, Conn& c, Recorder& rec) { PutPairs(c, rec, single_keys_n[t]); },
            master.process());
      });
      PrintRun(m->name, one);
      PrintRun(m->name, many);
      CsvRow("throughput", m->name, PhaseCells(run, one));
      CsvRow("throughput", m->name, PhaseCells(run, many));
      Figures& f = figures[m->name];
      f.single1_p50.push_back(one.p50_us);
      f.single1_p99.push_back(one.p99_us);
      f.singlen_rate.push_back(many.keys_per_s);
      f.singlen_p50.push_back(many.p50_us);
      f.singlen_p99.push_back(many.p99_us);
    }

    std::printf("\n  medians over the runs of each mode (single: one latency per "
                "PutStart+PutEnd pair)\n");
    Table summary({{"mode", 8, true}, {"batch keys/s", 12}, {"1-thr p50_us", 12},
                   {"1-thr p99_us", 12}, {"N-thr keys/s", 12}, {"N-thr p50_us", 12},
                   {"N-thr p99_us", 12}});
    summary.PrintHeader();
    for (const Mode& m : kModes) {
      const Figures& f = figures[m.name];
      double batch = Median(f.batch);
      summary.PrintRow({m.name, Format("%.0f", batch), Fixed(Median(f.single1_p50), 1),
                        Fixed(Median(f.single1_p99), 1), Fixed(Median(f.singlen_rate), 0),
                        Fixed(Median(f.singlen_p50), 1), Fixed(Median(f.singlen_p99), 1)});
      std::string threads = std::to_string(o_.threads);
      CsvRow("median", m.name,
             {{"form", "batch"}, {"threads", threads}, {"keys_per_s", Format("%.1f", batch)}});
      if (!f.singlen_rate.empty()) {
        CsvRow("median", m.name,
               {{"form", "single"},
                {"threads", threads},
                {"keys_per_s", Format("%.1f", Median(f.singlen_rate))},
                {"p50_us", Format("%.2f", Median(f.singlen_p50))},
                {"p99_us", Format("%.2f", Median(f.singlen_p99))}});
      }
    }
    double strict = Median(figures["strict"].batch);
    double strict_vs_disabled = strict / Median(figures["disabled"].batch);
    std::printf("  => batch puts: strict/disabled %.2f (aim >= %.1f: %s); strict/off %.2f; "
                "single puts with %" PRId64 " threads: strict/off %.2f\n",
                strict_vs_disabled, kStrictAimRatio,
                strict_vs_disabled >= kStrictAimRatio ? "met" : "NOT met",
                strict / Median(figures["off"].batch), o_.threads,
                Median(figures["strict"].singlen_rate) / Median(figures["off"].singlen_rate));
  }

  // Starts a fresh master in mode m with the fake daemon's segment mounted, runs
  // body(master), stops the master and removes its directory.
  template <typename F>
  void PutRun(const Mode& m, int run, F&& body) {
    std::string dir = g_top_dir + Format("/run%02d-%s", run, m.name);
    MakeDir(dir);
    std::vector<std::string> flags;
    if (m.oplog_mode != nullptr) flags = DurableFlags(dir + "/state", m.oplog_mode);
    SpawnedMaster master = Spawn(dir, flags);
    master.Start();
    auto daemon = Daemon(master);
    body(master);
    daemon.reset();
    master.Stop();
    testing::RemoveTree(dir);  // its log and snapshots are of no further use
  }

  // Single puts timed as pairs: one latency per key from PutStart to PutEnd's answer, what a
  // writer waits for (in strict mode PutEnd answers once its record is fdatasync'ed).
  void PutPairs(Conn& conn, Recorder& rec, const std::vector<std::string>& keys) {
    rpc::ReplicateConfig config;
    config.replica_num = 1;
    int64_t size = static_cast<int64_t>(o_.object_size);
    for (const std::string& key : keys) {
      rpc::PutStartResult started;
      int32_t rc = 0;
      rec.Rpc([&] {
        conn->PutStart(started, daemon_id_, key, size, config);
        CheckPutStart(started, key, "PutStart");
        rc = conn->PutEnd(daemon_id_, key, ChecksumOf(key));
      });
      CheckCode(rc, 0, key, "PutEnd");
      rec.KeysDone(1);
    }
  }

  static void MakeDir(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::create_directories(path, ec) && ec) {
      Die("cannot create %s: %s", path.c_str(), ec.message().c_str());
    }
  }

  const Options& o_;
  KeyMaker keys_;
  int64_t daemon_id_;
  int64_t segment_id_;
  CsvFile csv_;
};

// The file system the state lives on, for the header: fdatasync costs differ by orders of
// magnitude between tmpfs, a local SSD and a network disk.
std::string FileSystemOf(const std::string& path) {
  struct statfs fs {};
  if (statfs(path.c_str(), &fs) != 0) return "unknown";
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x794C7630: return "overlayfs";
    default: return Format("f_type 0x%lx", static_cast<unsigned long>(fs.f_type));
  }
}

}  // namespace

int main(int argc, char** argv) {
  mooncake::bench::SetProgramName("durability_bench");
  Options o;
  mooncake::FlagSet flags("durability_bench",
                          "Snapshot pause, restore time and put throughput per durability mode "
                          "of mooncake-master processes it spawns.");
  flags.AddString("spawn_master", &o.spawn_master, "path of the mooncake-master binary to run");
  flags.AddString("master_args", &o.master_args,
                  "extra flags for every spawned master, space-separated");
  flags.AddString("dir", &o.dir,
                  "where the temporary directory goes (default $TMPDIR or /tmp): its disk is "
                  "the one the snapshots and the log are written to");
  flags.AddInt("objects", &o.objects, "objects loaded for the snapshot and restore parts");
  flags.AddSize("object_size", &o.object_size, "size of every object, as told to PutStart");
  flags.AddInt("key_size", &o.key_size, "key length in bytes (hex digits, >= 16)");
  flags.AddInt("batch", &o.batch, "keys per batch call");
  flags.AddInt("threads", &o.threads, "client threads for the load and the puts");
  flags.AddInt("readers", &o.readers, "reader threads during the snapshots");
  flags.AddInt("snapshots", &o.snapshots, "snapshots to take while the readers read");
  flags.AddDuration("snapshot_gap", &o.snapshot_gap_ms, 1,
                    "pause before each snapshot and after the last, ms");
  flags.AddInt("verify_keys", &o.verify_keys, "random keys read back after the restore");
  flags.AddInt("put_keys", &o.put_keys, "keys per batch-put run");
  flags.AddInt("single_keys", &o.single_keys, "keys per single-put run");
  flags.AddInt("rounds", &o.rounds,
               "rounds of put runs; each runs every mode forwards, then backwards");
  flags.AddSize("segment_size", &o.segment_size, "size of the one segment mounted (virtual)");
  flags.AddDuration("start_timeout", &o.start_timeout_ms, 1,
                    "longest a master may take to accept connections (a restore included), ms");
  flags.AddString("csv", &o.csv, "CSV of every figure");
  flags.AddString("png", &o.png, "plot of the put throughput per mode (needs gnuplot; empty: none)");
  flags.AddString("plot_script", &o.plot_script, "the gnuplot script that draws it");
  mooncake::ParseFlagsOrExit(&flags, argc, argv);
  SetClusterKeyFile(testing::ClusterKeyFile());  // the key every SpawnedMaster runs with
  if (o.objects < 1 || o.put_keys < 1 || o.single_keys < 1) {
    Die("--objects, --put_keys and --single_keys must be >= 1");
  }
  if (o.threads < 1 || o.threads > 1024 || o.readers < 1 || o.readers > 1024) {
    Die("--threads and --readers must be in 1..1024");
  }
  if (o.batch < 1 || o.snapshots < 1 || o.rounds < 1 || o.verify_keys < 0) {
    Die("--batch, --snapshots and --rounds must be >= 1, --verify_keys >= 0");
  }
  if (o.key_size < 16 || o.key_size > MOONCAKE_STORE_MAX_KEY_LEN) {
    Die("--key_size must be in 16..%d", MOONCAKE_STORE_MAX_KEY_LEN);
  }
  if (o.object_size == 0 || o.object_size > MOONCAKE_STORE_MAX_VALUE_SIZE) {
    Die("--object_size must be in 1..%llu",
        static_cast<unsigned long long>(MOONCAKE_STORE_MAX_VALUE_SIZE));
  }
  uint64_t needed = o.object_size * static_cast<uint64_t>(std::max(o.objects, o.put_keys));
  if (needed > o.segment_size / 10 * 8) {
    Die("--segment_size %s is too small for %s of objects (keep usage under the master's "
        "eviction watermark)",
        mooncake::FormatSize(o.segment_size).c_str(), mooncake::FormatSize(needed).c_str());
  }
  if (access(o.spawn_master.c_str(), X_OK) != 0) {
    Die("--spawn_master %s: not an executable file", o.spawn_master.c_str());
  }
  signal(SIGPIPE, SIG_IGN);

  if (!o.dir.empty()) setenv("TMPDIR", o.dir.c_str(), 1);  // where MakeTempDir creates it
  g_top_dir = testing::MakeTempDir("durability_bench.");
  if (g_top_dir.empty()) Die("cannot create a temporary directory: %s", std::strerror(errno));
  mooncake::bench::AtDie([] {
    SpawnedMaster::KillRunning();  // before its files go
    testing::RemoveTree(g_top_dir);
  });

  std::mt19937_64 rng{std::random_device{}() ^
                      static_cast<uint64_t>(Clock::now().time_since_epoch().count())};
  uint64_t run_id = rng();
  int64_t daemon_id = static_cast<int64_t>(rng() >> 2) + 1;
  int64_t segment_id = static_cast<int64_t>(rng() >> 2) + 1;

  std::printf("durability_bench: %" PRId64 " objects of %s, key %" PRId64 " B, batch %" PRId64
              ", %" PRId64 " client threads, %" PRId64 " readers; %" PRId64
              " keys per batch-put run, %" PRId64 " per single-put run\n",
              o.objects, mooncake::FormatSize(o.object_size).c_str(), o.key_size, o.batch,
              o.threads, o.readers, o.put_keys, o.single_keys);
  std::printf("machine: %u cores (shared by the client and the master); state in %s (%s); "
              "bench built %s; master %s %s\n\n",
              std::thread::hardware_concurrency(), g_top_dir.c_str(),
              FileSystemOf(g_top_dir).c_str(), MC_BUILD_TYPE, o.spawn_master.c_str(),
              o.master_args.c_str());
  std::fflush(stdout);

  Bench(o, run_id, daemon_id, segment_id).Run();
  testing::RemoveTree(g_top_dir);
  return 0;
}
