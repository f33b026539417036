// store_bench: put_from / get_into through the public C ABI against a real daemon, for
// KV-cache-sized objects, with pool (zero-copy) and plain (staged) buffers, 1 and N threads,
// single and batch calls. Every figure is printed next to baselines measured in the same
// run: memcpy of the same size, one Unix-socket round trip, and a redis-server on
// 127.0.0.1 doing the same operations (SET/GET, MSET/MGET/EXISTS) with the same sizes,
// threads and batches (--redis off: without it); then a line per goal of issue 18, and
// with --csv and --png a plot of the table (store_bench_local.h).
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
//
// --checksum both: what the daemons' CRC32C (on by default) costs the local path. Rounds
// of two one-daemon clusters, --checksum=false and true, in alternating order: a put and a
// first get of each size in each; the medians side by side, with the ratio on/off.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/master_bench_util.h"
#include "bench/store_bench_local.h"
#include "bench/store_bench_util.h"
#include "common/auth/cluster_key.h"
#include "common/base/flags.h"
#include "common/base/units.h"
#include "daemon/memory/segment_memory.h"
#include "daemon/transfer/tcp_transport.h"
#include "daemon/transfer/transfer_server.h"
#include "include/mooncake_store.h"
#include "tests/cluster.h"
#include "tests/process_harness.h"

namespace {

using namespace mooncake::store_bench;  // NOLINT: this program's own helpers

// The two-daemon mode: a client on daemon 0 (A) puts pool buffers with the replica steered
// onto daemon 1 (B), then gets them back on A, so both directions cross the transfer port.
void RunTwoDaemons(const Options& o, mc_cluster* cluster, mooncake_store_t store, FILE* csv) {
  double tcp_gbps = LoopbackTcpGbps(2.0);
  std::printf("machine: %u cores; raw loopback TCP, one connection, 1 MiB writes (same run): "
              "%.2f GB/s\n", std::thread::hardware_concurrency(), tcp_gbps);
  if (!o.digest) PrintHeader("tcp", "vs_tcp", csv);
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
        std::vector<double> lat = RunPhase(p, is_put ? Op::kPut : Op::kGet, &r.seconds);
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
        if (!o.digest) Print(r, csv);
        rows.push_back(r);
      }
      mooncake_store_remove_all(store, 1);
      space.Removed(static_cast<uint64_t>(ops) * size);
    }
  }
  std::printf("\nacross daemons, as a share of raw loopback TCP in the same run (one "
              "connection, %.2f GB/s):\n", tcp_gbps);
  for (const Row& r : rows) {
    const char* what = r.op == "put" ? "put from A into B's memory"
                       : r.form == "B->A" ? "get on A of B's object"
                                          : "get again (A knows where it lies)";
    std::printf("  %-35s %s, %d thread%s: %5.2f GB/s = %3.0f%%\n", what,
                mooncake::FormatSize(r.size).c_str(), r.threads, r.threads == 1 ? " " : "s",
                r.gbps(), r.gbps() / tcp_gbps * 100);
  }
}

// The master and daemons of one run: with the harness's cluster key, or none at all; with
// the daemons' checksums as --checksum says (both: on when checksum, else off).
mc_cluster* SpawnCluster(const Options& o, bool keyed, bool checksum = true) {
  setenv("MC_BUILD_DIR", o.build_dir.c_str(), 1);
  std::fprintf(stderr, "spawning mooncake-master and %d mooncaked from %s (%s) ...\n",
               static_cast<int>(o.daemons), o.build_dir.c_str(),
               keyed ? "with a cluster key" : "without a cluster key");
  std::vector<std::string> args = SplitArgs(o.daemon_args);
  if (!keyed) args.insert(args.end(), {"--cluster_key_file", ""});
  const bool summed = o.checksum == "both" ? checksum : o.checksum == "on";
  args.push_back(summed ? "--checksum=true" : "--checksum=false");
  std::vector<const char*> daemon_flags;
  for (const auto& a : args) daemon_flags.push_back(a.c_str());
  daemon_flags.push_back(nullptr);
  std::vector<std::string> master_args = SplitArgs(o.master_args);
  if (!keyed) master_args.insert(master_args.end(), {"--cluster_key_file", ""});
  std::vector<const char*> master_flags;
  for (const auto& a : master_args) master_flags.push_back(a.c_str());
  master_flags.push_back(nullptr);
  // A 3 s lease: long enough that re-reads hit the read cache, short enough that space
  // of removed (leased) objects comes back before the next phases need it.
  mc_cluster_options options{static_cast<int>(o.daemons), o.segment_size,
                             static_cast<int>(o.lease_ms), master_flags.data(),
                             daemon_flags.data()};
  return mc_cluster_start_with(&options);
}

struct AuthFigures {
  double put4k_kops_per_s = 0, get4m_gbps = 0;
};

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
  RunPhase(warm, Op::kPut, &ignored);
  mooncake_store_remove_all(store, 1);
  AuthFigures f;
  for (uint64_t size : {uint64_t{4096}, uint64_t{4} << 20}) {
    int64_t ops = PhaseOps(o, size, threads);
    Phase p{store, size, threads, ops / threads, 1, true, run++, &to_b};
    for (int pass = 0; pass < (size == 4096 ? 1 : 2); ++pass) {
      Row r{pass == 0 ? "put" : "get", "pool", pass == 0 ? "A->B" : "B->A", size, threads,
            p.ops_per_thread * threads};
      std::vector<double> lat = RunPhase(p, pass == 0 ? Op::kPut : Op::kGet, &r.seconds);
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

// --checksum both: what CRC32C at put and its check at get cost the local path. Rounds of
// two one-daemon clusters, --checksum=false and the default (true), in alternating order;
// in each, one thread puts objects of each --sizes size from pool buffers and gets each
// once (a first read: the master lists it, the daemon copies and verifies). The medians of
// the rounds side by side, with the ratio on/off.
void RunChecksumComparison(const Options& o, FILE* csv) {
  const std::vector<uint64_t> sizes = ParseSizes(o.sizes);
  std::printf("machine: %u cores; one daemon, pool buffers, 1 thread, first gets; checksums "
              "off and on, %d rounds in alternating order\n",
              std::thread::hardware_concurrency(), static_cast<int>(o.checksum_rounds));
  PrintHeader("-", "-", csv);
  // [on][size index][0 put, 1 get]: each round's row.
  std::vector<Row> rows[2][8][2];
  if (sizes.size() > 8) Die("--checksum both takes at most 8 sizes", -1);
  int run = static_cast<int>(getpid());
  for (int round = 0; round < o.checksum_rounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      const bool on = (round % 2 == 0) == (k == 1);
      mc_cluster* cluster = SpawnCluster(o, o.auth == "on", on);
      if (cluster == nullptr) Die("starting the cluster", -1);
      mooncake_store_t store = mooncake_store_create();
      int rc = mooncake_store_connect(store, mc_cluster_socket(cluster), o.pool_size);
      if (rc != 0) Die("connect", rc);
      // Warm-up, not measured: the connections fill, the segment's pages are touched.
      Phase warm{store, 4096, 1, 256, 1, true, run++};
      double ignored = 0;
      RunPhase(warm, Op::kPut, &ignored);
      mooncake_store_remove_all(store, 1);
      for (size_t i = 0; i < sizes.size(); ++i) {
        Phase p{store, sizes[i], 1, PhaseOps(o, sizes[i], 1), 1, true, run++};
        for (int pass = 0; pass < 2; ++pass) {
          Row r{pass == 0 ? "put" : "get", "pool", on ? "crc on" : "crc off", sizes[i], 1,
                p.ops_per_thread};
          std::vector<double> lat = RunPhase(p, pass == 0 ? Op::kPut : Op::kGet, &r.seconds);
          r.p50_us = Percentile(lat, 0.5);
          r.p99_us = Percentile(lat, 0.99);
          Print(r, csv);
          rows[on][i][pass].push_back(r);
        }
        mooncake_store_remove_all(store, 1);
      }
      mooncake_store_destroy(store);
      mc_cluster_stop(cluster);
    }
  }
  auto median = [](const std::vector<Row>& v, double (*field)(const Row&)) {
    std::vector<double> x;
    for (const Row& r : v) x.push_back(field(r));
    return Median(x);
  };
  auto p50 = [](const Row& r) { return r.p50_us; };
  auto p99 = [](const Row& r) { return r.p99_us; };
  auto ops = [](const Row& r) { return r.ops_per_s(); };
  std::printf("\nmedians of %d rounds, checksums off / on (ratio on/off):\n"
              "| op | size | p50 us off / on | p99 us off / on | ops/s off / on | ratio "
              "(p50, ops/s) |\n|---|---|---|---|---|---|\n",
              static_cast<int>(o.checksum_rounds));
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (int pass = 0; pass < 2; ++pass) {
      const std::vector<Row>& off = rows[0][i][pass];
      const std::vector<Row>& on = rows[1][i][pass];
      if (off.empty() || on.empty()) continue;
      std::printf("| %s | %s | %.1f / %.1f | %.1f / %.1f | %.0f / %.0f | %.3f, %.3f |\n",
                  pass == 0 ? "put" : "get", mooncake::FormatSize(sizes[i]).c_str(),
                  median(off, p50), median(on, p50), median(off, p99), median(on, p99),
                  median(off, ops), median(on, ops), median(on, p50) / median(off, p50),
                  median(on, ops) / median(off, ops));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  mooncake::FlagSet flags("store_bench",
                          "put_from/get_into throughput and latency through the C ABI, with "
                          "same-run memcpy, Unix-socket and Redis baselines and issue 18's goals; "
                          "--daemons 2: across two daemons, against raw loopback TCP.");
  flags.AddString("socket", &o.socket, "daemon socket to use (empty: spawn a master and daemon)");
  flags.AddString("build_dir", &o.build_dir, "build tree holding the binaries to spawn");
  flags.AddInt("daemons", &o.daemons,
               "1: one daemon; 2: spawn two, put from A onto B and get B's objects on A");
  flags.AddString("daemon_args", &o.daemon_args,
                  "extra flags of the spawned daemons, separated by spaces");
  flags.AddString("master_args", &o.master_args,
                  "extra flags of the spawned master, separated by spaces (--master_args "
                  "\"--spin_us 200\")");
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
  flags.AddChoice("checksum", &o.checksum, {"on", "off", "both"},
                  "spawned daemons with --checksum (on, their default), without (off), or one "
                  "daemon both compared: put and first get of each --sizes size, rounds of "
                  "each");
  flags.AddInt("checksum_rounds", &o.checksum_rounds, "--checksum both: rounds of each");
  flags.AddChoice("redis", &o.redis, {"on", "off"},
                  "one daemon: also measure a redis-server on 127.0.0.1 (started for the run, "
                  "persistence off) with the same sizes, threads and batches");
  flags.AddString("redis_server", &o.redis_server,
                  "the redis-server binary (a path or a name on PATH)");
  flags.AddString("csv", &o.csv, "also write the rows to this CSV file");
  flags.AddString("png", &o.png,
                  "one daemon: plot the CSV (--csv) into this PNG, ours beside Redis (needs "
                  "gnuplot)");
  flags.AddString("plot_script", &o.plot_script,
                  "the gnuplot script that draws --png (empty: the source tree's "
                  "bench/plot_store_bench.gnuplot)");
  flags.AddBool("digest", &o.digest,
                "a few plain lines against the same run's baselines (memcpy, Redis, raw "
                "loopback TCP) instead of the table, without the goals: what make demo shows");
  mooncake::ParseFlagsOrExit(&flags, argc, argv);
  bool two = o.daemons == 2;
  if ((o.daemons != 1 && !two) || (two && !o.socket.empty())) {
    std::fprintf(stderr, "store_bench: --daemons is 1 or 2, and 2 spawns its own (no --socket)\n");
    return 2;
  }
  if (o.digest && !o.csv.empty()) {
    std::fprintf(stderr, "store_bench: --digest prints no table: it takes no --csv\n");
    return 2;
  }
  if (o.sizes.empty()) o.sizes = two ? "1MB,4MB" : "4KB,64KB,1MB,4MB,16MB";
  if (!o.png.empty() && (o.csv.empty() || two)) {
    std::fprintf(stderr,
                 "store_bench: --png plots the one-daemon CSV: it needs --csv and --daemons 1\n");
    return 2;
  }
  if (o.plot_script.empty()) o.plot_script = MC_BENCH_DIR "/plot_store_bench.gnuplot";
  // Started first, so that a missing or broken redis-server costs no cluster start-up; a
  // static, so that the exit of a fatal error stops it too (and the kernel, should this
  // process be killed: it dies with its parent).
  static RedisServer redis;
  const bool with_redis = !two && o.redis == "on";
  if (with_redis) {
    std::string binary = RedisServer::Find(o.redis_server);
    if (binary.empty()) {
      std::fprintf(stderr,
                   "store_bench: %s not found: install it (scripts/install-deps.sh, or apt-get "
                   "install redis-server), give its path with --redis_server, or run without the "
                   "comparison: --redis off\n", o.redis_server.c_str());
      return 2;
    }
    std::string error;
    if (!redis.Start(binary, &error)) {
      std::fprintf(stderr, "store_bench: %s\n", error.c_str());
      return 1;
    }
  }
  // Two daemons pre-fault a segment each; 1 GiB apiece is plenty for their 1-4 MiB phases.
  if (o.segment_size == 0) o.segment_size = two ? (1ull << 30) : (3ull << 30);
  if (o.checksum == "both") {
    if (two || !o.socket.empty() || o.checksum_rounds < 1) {
      std::fprintf(stderr, "store_bench: --checksum both spawns one daemon at a time (no "
                           "--socket, no --daemons 2) and needs --checksum_rounds >= 1\n");
      return 2;
    }
    FILE* csv = o.csv.empty() ? nullptr : std::fopen(o.csv.c_str(), "w");
    RunChecksumComparison(o, csv);
    if (csv) std::fclose(csv);
    return 0;
  }
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
    RunOneDaemon(o, store, with_redis ? &redis : nullptr, csv);
  }
  if (csv) std::fclose(csv);
  mooncake_store_destroy(store);
  mc_cluster_stop(cluster);
  redis.Stop();
  if (!o.png.empty()) mooncake::bench::PlotCsv(o.plot_script, o.csv, o.png);
  return 0;
}
