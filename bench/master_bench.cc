// master_bench: how many keys per second a mooncake-master takes through its Thrift
// interface, and how much memory it spends per object.
//
// A fake daemon registers and mounts one big segment (the master only does bookkeeping, so
// the segment needs no memory), then --threads client threads, each on its own connection,
// run these phases one after another, each in a single-key and a batch form:
//   PutStart+PutEnd   new keys; a key counts once both calls succeeded
//   GetReplicaList    existing keys
//   ExistKey          existing keys
// Every result code is checked; the first unexpected one aborts the run with its code.
// Then the memory phase: RemoveAll(true), read GetStats().resident_bytes, bulk-load
// --rss_objects single-replica objects with batch puts, read it again; the difference per
// object is the master's memory cost of one object.
//
// See bench/README.md for how to run it and what the columns mean.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/master_bench_util.h"
#include "common/base/error_code.h"
#include "common/base/flags.h"
#include "common/base/tenant_key.h"
#include "common/base/units.h"
#include "tests/process_harness.h"

#ifndef MC_BUILD_TYPE
#define MC_BUILD_TYPE "unknown"
#endif

namespace {

namespace rpc = mooncake::rpc;
using namespace mooncake::bench;  // what the master benchmarks share

// The master we spawned, if any. Started with PR_SET_PDEATHSIG, so it never outlives us,
// even when Die() ends the run from another thread.
mooncake::testing::ChildProcess* g_master = nullptr;

// ---- flags -----------------------------------------------------------------------------

struct Options {
  std::string master = "127.0.0.1:50051";
  int64_t threads = 2;
  int64_t keys = 200000;
  int64_t batch = 128;
  int64_t key_size = 64;
  uint64_t object_size = 4096;
  uint64_t segment_size = 1ULL << 40;
  int64_t rss_objects = 1000000;
  bool rss_fresh_master = true;
  bool cleanup = true;
  bool targets = true;
  int64_t lent_segments = 0;
  std::string csv;
  std::string spawn_master;
  std::string master_args;
  std::string cluster_key_file;
  std::string forms = "both";
  std::string tenant;
};

constexpr uint64_t kSetPutSingle = 1;
constexpr uint64_t kSetPutBatch = 2;
constexpr uint64_t kSetMemory = 3;

// ---- the spawned master ----------------------------------------------------------------

// Starts the master on a free port of 127.0.0.1 and waits until it accepts.
void SpawnMaster(const Options& o, int* port) {
  if (access(o.spawn_master.c_str(), X_OK) != 0) {
    Die("--spawn_master %s: not an executable file", o.spawn_master.c_str());
  }
  std::vector<std::string> flags = {"--log_level", "warning"};
  if (!o.cluster_key_file.empty()) {
    flags.insert(flags.end(), {"--cluster_key_file", o.cluster_key_file});
  }
  for (const std::string& w : SplitWords(o.master_args)) flags.push_back(w);
  std::fprintf(stderr, "spawning %s on 127.0.0.1 with --log_level warning %s\n",
               o.spawn_master.c_str(), o.master_args.c_str());
  if (!mooncake::testing::StartMaster(g_master, port, "/dev/stderr", flags, o.spawn_master)) {
    Die("the spawned master did not start serving");
  }
}

void StopSpawnedMaster() {
  if (!g_master->running()) return;
  int status = g_master->Stop(SIGTERM, 10000);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "warning: the spawned master did not exit cleanly (status 0x%x)\n",
                 status);
  }
}

// ---- report ----------------------------------------------------------------------------

const Table& PhaseTable() {
  static const Table table({{"operation", 16, true},
                            {"form", 6, true},
                            {"thr", 3},
                            {"keys", 9},
                            {"rpcs", 9},
                            {"seconds", 8},
                            {"keys/s", 10},
                            {"p50_us", 9},
                            {"p99_us", 9},
                            {"mst_cpu", 7},
                            {"cli_cpu", 7},
                            {"mst_us", 7}});
  return table;
}

void PrintTableHeader() { PhaseTable().PrintHeader(); }

void PrintRow(const PhaseResult& r) {
  PhaseTable().PrintRow({r.operation, r.form, Format("%" PRId64, r.threads),
                         Format("%" PRId64, r.keys), Format("%" PRId64, r.rpcs),
                         Format("%.2f", r.seconds), Format("%.0f", r.keys_per_s),
                         Format("%.1f", r.p50_us), Format("%.1f", r.p99_us),
                         Fixed(r.master_cores, 2), Fixed(r.bench_cores, 2),
                         Fixed(r.master_us_per_key, 2)});
}

// One row per phase; bytes_per_object goes on the load row (the only one that has it).
void WriteCsv(const std::string& path, const std::vector<PhaseResult>& rows, int64_t key_size,
              double bytes_per_object) {
  CsvFile csv(path, {"operation", "form", "threads", "keys", "rpcs", "seconds", "keys_per_s",
                     "p50_us", "p99_us", "master_cores", "bench_cores", "master_us_per_key",
                     "key_size", "bytes_per_object"});
  for (const PhaseResult& r : rows) {
    bool load = r.form == "load" && bytes_per_object >= 0;
    csv.Row({r.operation, r.form, Format("%" PRId64, r.threads), Format("%" PRId64, r.keys),
             Format("%" PRId64, r.rpcs), Format("%.4f", r.seconds), Format("%.1f", r.keys_per_s),
             Format("%.2f", r.p50_us), Format("%.2f", r.p99_us),
             r.master_cores < 0 ? "" : Fixed(r.master_cores, 3), Format("%.3f", r.bench_cores),
             r.master_us_per_key < 0 ? "" : Fixed(r.master_us_per_key, 3),
             Format("%" PRId64, key_size), load ? Fixed(bytes_per_object, 1) : ""});
  }
  csv.Close();
}

}  // namespace

int main(int argc, char** argv) {
  mooncake::bench::SetProgramName("master_bench");
  Options o;
  mooncake::FlagSet flags("master_bench",
                          "Throughput, latency and memory per object of a mooncake-master.");
  flags.AddString("master", &o.master, "host:port of the master (ignored with --spawn_master)");
  flags.AddInt("threads", &o.threads, "client threads, each with its own connection");
  flags.AddInt("keys", &o.keys, "keys per phase (0: skip the throughput phases)");
  flags.AddInt("batch", &o.batch, "keys per batch call");
  flags.AddInt("key_size", &o.key_size, "key length in bytes (hex digits, >= 16)");
  flags.AddSize("object_size", &o.object_size, "size of every object, as told to PutStart");
  flags.AddSize("segment_size", &o.segment_size, "size of the one segment mounted (virtual)");
  flags.AddInt("rss_objects", &o.rss_objects,
               "objects inserted for the memory-per-object figure (0: skip)");
  flags.AddBool("rss_fresh_master", &o.rss_fresh_master,
                "with --spawn_master: measure memory on a newly started master, so memory "
                "freed by the earlier phases (kept and reused by malloc) does not hide cost");
  flags.AddBool("cleanup", &o.cleanup, "RemoveAll(true) and unmount the segment at the end");
  flags.AddBool("targets", &o.targets,
                "end with the batch calls against the 300k keys/s target (make bench; make "
                "demo turns it off)");
  flags.AddInt("lent_segments", &o.lent_segments,
               "also mount this many segments marked lent by a client (placement passes them "
               "over while the main one has room: what the policy costs a put)");
  flags.AddChoice("forms", &o.forms, {"both", "single", "batch"},
                  "which forms of the throughput phases to run");
  flags.AddString("tenant", &o.tenant,
                  "put every key in this tenant (its figures, and its --tenant_quota if the "
                  "master has one, on the put path); default: the default tenant");
  flags.AddString("csv", &o.csv, "also write one CSV row per phase to this file");
  flags.AddString("spawn_master", &o.spawn_master,
                  "path of a mooncake-master binary to start on a free port and stop at the end");
  flags.AddString("master_args", &o.master_args,
                  "extra flags for the spawned master, space-separated");
  flags.AddString("cluster_key_file", &o.cluster_key_file,
                  "the cluster key file to prove to the master (default: with --spawn_master, "
                  "a fresh key it gives the master too; otherwise none)");
  mooncake::ParseFlagsOrExit(&flags, argc, argv);
  if (!o.spawn_master.empty() && o.cluster_key_file.empty()) {
    o.cluster_key_file = mooncake::testing::ClusterKeyFile();
  }
  SetClusterKeyFile(o.cluster_key_file);
  if (o.threads < 1 || o.threads > 1024) Die("--threads must be in 1..1024");
  if (o.keys < 0 || o.rss_objects < 0) Die("--keys and --rss_objects must be >= 0");
  if (o.batch < 1) Die("--batch must be >= 1");
  if (o.lent_segments < 0 || o.lent_segments > 1000) Die("--lent_segments must be in 0..1000");
  if (!mooncake::tenant_key::ValidTenantOrDefault(o.tenant)) {
    Die("--tenant must be 1..64 characters of [A-Za-z0-9_.-]");
  }
  if (o.key_size < 16 || o.key_size > MOONCAKE_STORE_MAX_KEY_LEN) {
    Die("--key_size must be in 16..%d", MOONCAKE_STORE_MAX_KEY_LEN);
  }
  if (o.object_size == 0 || o.object_size > MOONCAKE_STORE_MAX_VALUE_SIZE) {
    Die("--object_size must be in 1..%llu",
        static_cast<unsigned long long>(MOONCAKE_STORE_MAX_VALUE_SIZE));
  }
  uint64_t needed = o.object_size * static_cast<uint64_t>(2 * o.keys + o.rss_objects);
  if (needed > o.segment_size / 10 * 8) {
    Die("--segment_size %s is too small for %s of objects (keep usage under the master's "
        "eviction watermark)",
        mooncake::FormatSize(o.segment_size).c_str(), mooncake::FormatSize(needed).c_str());
  }
  signal(SIGPIPE, SIG_IGN);

  mooncake::testing::ChildProcess master;
  g_master = &master;
  std::string host;
  int port = 0;
  if (!o.spawn_master.empty()) {
    host = "127.0.0.1";
    SpawnMaster(o, &port);
  } else if (!ParseHostPort(o.master, &host, &port)) {
    Die("--master must be host:port, not '%s'", o.master.c_str());
  }

  // A random run id keeps keys, the daemon and the segment apart from earlier runs against
  // the same master.
  std::mt19937_64 rng{std::random_device{}() ^
                      static_cast<uint64_t>(Clock::now().time_since_epoch().count())};
  uint64_t run_id = rng();
  int64_t daemon_id = static_cast<int64_t>(rng() >> 2) + 1;
  int64_t segment_id = static_cast<int64_t>(rng() >> 2) + 1;
  KeyMaker keys(run_id, static_cast<size_t>(o.key_size), o.tenant);
  int64_t object_size = static_cast<int64_t>(o.object_size);

  std::printf("master_bench: master %s:%d%s, %" PRId64 " threads, %" PRId64
              " keys/phase, batch %" PRId64 ", key %" PRId64 " B, object %s, segment %s\n",
              host.c_str(), port, o.spawn_master.empty() ? "" : " (spawned)", o.threads, o.keys,
              o.batch, o.key_size, mooncake::FormatSize(o.object_size).c_str(),
              mooncake::FormatSize(o.segment_size).c_str());
  std::printf(
      "machine: %u cores (shared by client and master when both run here); "
      "bench built %s; sample key %s%s%s\n\n",
      std::thread::hardware_concurrency(), MC_BUILD_TYPE,
      std::string(mooncake::tenant_key::UserKeyOf(keys.Make(0, 0))).c_str(),
      o.tenant.empty() ? "" : " of tenant ", o.tenant.c_str());
  std::fflush(stdout);

  auto daemon = std::make_unique<FakeDaemon>(host, port, daemon_id, segment_id, o.segment_size,
                                        o.lent_segments);
  auto conns = Connect(host, port, o.threads);
  std::vector<PhaseResult> results;
  double bytes_per_object = -1;  // the memory phase's figure, when it ran
  size_t n = conns.size();
  int64_t batch = o.batch;

  if (o.keys > 0) {
    bool single = o.forms != "batch";
    bool batched = o.forms != "single";
    // Every thread's keys are made before the clock starts.
    std::vector<std::vector<std::string>> put_single(n), put_batch(n), read(n);
    for (size_t t = 0; t < n; ++t) {
      auto [b, e] = Share(o.keys, t, n);
      for (int64_t i = b; i < e; ++i) {
        if (single) put_single[t].push_back(keys.Make(kSetPutSingle, static_cast<uint64_t>(i)));
        if (batched) put_batch[t].push_back(keys.Make(kSetPutBatch, static_cast<uint64_t>(i)));
      }
    }
    // Reads pick --keys of the stored keys, in an order unrelated to the puts.
    {
      std::vector<std::string> all;
      for (size_t t = 0; t < n; ++t) {
        all.insert(all.end(), put_single[t].begin(), put_single[t].end());
        all.insert(all.end(), put_batch[t].begin(), put_batch[t].end());
      }
      std::shuffle(all.begin(), all.end(), rng);
      all.resize(static_cast<size_t>(o.keys));
      for (size_t t = 0; t < n; ++t) {
        auto [b, e] = Share(o.keys, t, n);
        read[t].assign(all.begin() + b, all.begin() + e);
      }
    }
    // Thread t's read keys in chunks of --batch.
    auto for_each_chunk = [&](size_t t, const std::function<void(std::vector<std::string>&)>& f) {
      const std::vector<std::string>& list = read[t];
      std::vector<std::string> chunk;
      for (size_t i = 0; i < list.size(); i += static_cast<size_t>(batch)) {
        size_t stop = std::min(list.size(), i + static_cast<size_t>(batch));
        chunk.assign(list.begin() + static_cast<ptrdiff_t>(i),
                     list.begin() + static_cast<ptrdiff_t>(stop));
        f(chunk);
      }
    };

    auto put = [&](bool batch_form) {
      auto& lists = batch_form ? put_batch : put_single;
      return [&, batch_form](size_t t, Conn& c, Recorder& r) {
        const std::vector<std::string>& list = lists[t];
        PutKeys(c, r, daemon_id, object_size, batch, batch_form, 0,
                static_cast<int64_t>(list.size()),
                [&list](int64_t i) { return list[static_cast<size_t>(i)]; });
      };
    };
    Body get_single = [&](size_t t, Conn& c, Recorder& r) {
      rpc::ReplicaListResult result;
      for (const std::string& key : read[t]) {
        r.Rpc([&] { c->GetReplicaList(result, key, 0); });
        CheckReplicaList(result, key, object_size, "GetReplicaList");
        r.KeysDone(1);
      }
    };
    Body get_batch = [&](size_t t, Conn& c, Recorder& r) {
      std::vector<rpc::ReplicaListResult> out;
      for_each_chunk(t, [&](std::vector<std::string>& chunk) {
        r.Rpc([&] { c->BatchGetReplicaList(out, chunk, 0); });
        CheckBatchSize(out, chunk.size(), "BatchGetReplicaList");
        for (size_t k = 0; k < chunk.size(); ++k) {
          CheckReplicaList(out[k], chunk[k], object_size, "BatchGetReplicaList");
        }
        r.KeysDone(static_cast<int64_t>(chunk.size()));
      });
    };
    Body exist_single = [&](size_t t, Conn& c, Recorder& r) {
      for (const std::string& key : read[t]) {
        int32_t rc = 0;
        r.Rpc([&] { rc = c->ExistKey(key); });
        CheckCode(rc, 1, key, "ExistKey");
        r.KeysDone(1);
      }
    };
    Body exist_batch = [&](size_t t, Conn& c, Recorder& r) {
      std::vector<int32_t> out;
      for_each_chunk(t, [&](std::vector<std::string>& chunk) {
        r.Rpc([&] { c->BatchExistKey(out, chunk); });
        CheckBatchSize(out, chunk.size(), "BatchExistKey");
        for (size_t k = 0; k < chunk.size(); ++k) CheckCode(out[k], 1, chunk[k], "BatchExistKey");
        r.KeysDone(static_cast<int64_t>(chunk.size()));
      });
    };

    struct Phase {
      const char* operation;
      const char* form;
      Body body;
    };
    std::vector<Phase> phases;
    if (single) phases.push_back({"PutStart+PutEnd", "single", put(false)});
    if (batched) phases.push_back({"PutStart+PutEnd", "batch", put(true)});
    if (single) phases.push_back({"GetReplicaList", "single", get_single});
    if (batched) phases.push_back({"GetReplicaList", "batch", get_batch});
    if (single) phases.push_back({"ExistKey", "single", exist_single});
    if (batched) phases.push_back({"ExistKey", "batch", exist_batch});
    PrintTableHeader();
    for (const Phase& phase : phases) {
      results.push_back(RunPhase(phase.operation, phase.form, o.keys, conns, phase.body, master));
      PrintRow(results.back());
    }
  }

  if (o.rss_objects > 0) {
    std::printf("\nmemory per object (%" PRId64 " single-replica objects, %" PRId64 "-byte keys)\n",
                o.rss_objects, o.key_size);
    if (g_master->running() && o.rss_fresh_master && o.keys > 0) {
      // Objects freed by RemoveAll stay in malloc's free lists and would be reused by the
      // load below, so a delta on the same process would come out too small.
      std::printf("  restarting the spawned master so the measurement starts from a clean heap\n");
      conns.clear();
      daemon.reset();
      StopSpawnedMaster();
      SpawnMaster(o, &port);
      daemon = std::make_unique<FakeDaemon>(host, port, daemon_id, segment_id, o.segment_size,
                                        o.lent_segments);
      conns = Connect(host, port, o.threads);
    }
    rpc::MasterStats before, after;
    rpc::ChangeResult all;
    (*conns[0])->RemoveAll(all, true, 0, o.tenant);
    int64_t removed = all.code;
    if (removed < 0) Die("RemoveAll(true) returned %s", CodeText(removed).c_str());
    (*conns[0])->GetStats(before);
    std::printf("  RemoveAll(true) removed %" PRId64 " objects; master now holds %" PRId64
                " objects, resident %s\n",
                removed, static_cast<int64_t>(before.objects),
                mooncake::FormatSize(static_cast<uint64_t>(before.resident_bytes)).c_str());
    std::fflush(stdout);
    PrintTableHeader();
    PhaseResult load = RunPhase(
        "PutStart+PutEnd", "load", o.rss_objects, conns,
        [&](size_t t, Conn& c, Recorder& r) {
          auto [b, e] = Share(o.rss_objects, t, n);
          PutKeys(c, r, daemon_id, object_size, batch, /*batched=*/true, b, e,
                  [&keys](int64_t i) { return keys.Make(kSetMemory, static_cast<uint64_t>(i)); });
        },
        master);
    (*conns[0])->GetStats(after);
    int64_t added = after.objects - before.objects;
    if (added != o.rss_objects) {
      Die("the master counts %" PRId64 " more objects after loading %" PRId64, added,
          o.rss_objects);
    }
    int64_t delta = after.resident_bytes - before.resident_bytes;
    bytes_per_object = static_cast<double>(delta) / static_cast<double>(o.rss_objects);
    PrintRow(load);
    results.push_back(load);
    std::printf("  resident before %s, after %s: +%s for %" PRId64 " objects\n",
                mooncake::FormatSize(static_cast<uint64_t>(before.resident_bytes)).c_str(),
                mooncake::FormatSize(static_cast<uint64_t>(after.resident_bytes)).c_str(),
                mooncake::FormatSize(static_cast<uint64_t>(std::max<int64_t>(0, delta))).c_str(),
                added);
    std::printf("  GetStats().objects = %" PRId64 "  (used %s of %s)\n",
                static_cast<int64_t>(after.objects),
                mooncake::FormatSize(static_cast<uint64_t>(after.used_bytes)).c_str(),
                mooncake::FormatSize(static_cast<uint64_t>(after.capacity_bytes)).c_str());
    std::printf("  => %.1f bytes of master memory per single-replica object (key %" PRId64
                " bytes%s)%s\n",
                bytes_per_object, o.key_size, o.targets ? "; target <= 250 with 64-byte keys" : "",
                g_master->running() && o.rss_fresh_master
                    ? ""
                    : (o.keys > 0 ? "\n     (same master process as the throughput phases: memory "
                                    "they freed is reused, so this is a lower bound)"
                                  : ""));
  }

  bool printed_targets = false;
  for (const PhaseResult& r : results) {
    if (!o.targets || r.form == "single") continue;
    if (!printed_targets) std::printf("\nbatch calls vs the 300k keys/s target:\n");
    printed_targets = true;
    std::printf("  %-16s %-6s %10.0f keys/s  %s\n", r.operation.c_str(), r.form.c_str(),
                r.keys_per_s, r.keys_per_s >= 300000 ? "met" : "NOT met");
  }
  if (!o.csv.empty()) {
    WriteCsv(o.csv, results, o.key_size, bytes_per_object);
    std::printf("CSV written to %s\n", o.csv.c_str());
  }
  if (o.cleanup) {
    rpc::ChangeResult all;
    (*conns[0])->RemoveAll(all, true, 0, o.tenant);
    int64_t removed = all.code;
    if (removed < 0) Die("final RemoveAll(true) returned %s", CodeText(removed).c_str());
    // Leaves no segment behind on a master that keeps running (it would otherwise stay
    // until the master notices the missing heartbeats).
    for (int64_t i = 0; i <= o.lent_segments; ++i) {
      int32_t rc = (*conns[0])->UnmountSegment(daemon_id, segment_id + i);
      if (rc != 0) Die("UnmountSegment returned %s", CodeText(rc).c_str());
    }
  }
  conns.clear();
  daemon.reset();
  StopSpawnedMaster();
  return 0;
}
