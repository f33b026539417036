// fresh_bench: what keeping every host's reads fresh costs a write. Spawns a master and two
// daemons A and B; an application on each. A writes keys whose replica lies on A; in the
// "1 holder" phases an application on B reads each key just before A changes it, so B's
// read cache holds it and A's change must reach B (daemon/cluster/cache_invalidator.h) before it
// returns; in the "0 holders" phases nobody but A ever read the key. Per phase: p50 and p99
// of A's call, and after each change a read on B that must not see the old value (counted:
// a daemon build without invalidation shows them as stale). Baseline in the same run: one
// Unix-socket round trip to A, and A's get of a key it has cached.
//
// --build_dir picks the binaries, so the same program measures another build's daemons
// (e.g. one from before the change) against this one's.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/base/flags.h"
#include "include/mooncake_store.h"
#include "tests/cluster.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string build_dir = "build";
  int64_t ops = 2000;
  uint64_t size = 4096;
  int64_t lease_ms = 10000;
};

[[noreturn]] void Die(const char* what, int64_t code) {
  std::fprintf(stderr, "fresh_bench: FATAL: %s returned %" PRId64 " (%s)\n", what, code,
               mooncake_store_strerror(static_cast<int>(code)));
  std::exit(1);
}

double Us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

struct Bench {
  mooncake_store_t a, b;
  mooncake_replicate_config_t on_a;
  char* value;    // in A's pool
  char* scratch;  // in B's pool
  uint64_t size;
  int run = 0;

  std::string Key(const char* phase, int64_t i) const {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "fresh-%d-%s-%" PRId64, run, phase, i);
    return buf;
  }
  void Stamp(int64_t generation) { std::memcpy(value, &generation, sizeof(generation)); }
  // B reads key; the generation its bytes carry, or -1 when it is missing.
  int64_t ReadOnB(const std::string& key) {
    int64_t got = mooncake_store_get_into(b, key.c_str(), scratch, size);
    if (got == MOONCAKE_STORE_OBJECT_NOT_FOUND) return -1;
    if (got != static_cast<int64_t>(size)) Die("get_into on B", got);
    int64_t generation = 0;
    std::memcpy(&generation, scratch, sizeof(generation));
    return generation;
  }
};

struct Row {
  const char* what;
  double p50 = 0, p99 = 0;
  int64_t stale = 0;  // reads on B right after the change that saw the old value
};

// A changes ops keys (upsert to generation 2, or a forced remove), each put at generation 1
// beforehand; with_holder: B reads each one first. Times A's change only.
Row RunPhase(Bench& bench, const char* what, bool upsert, bool with_holder, int64_t ops) {
  Row row{what};
  std::vector<double> lat;
  lat.reserve(static_cast<size_t>(ops));
  for (int64_t i = 0; i < ops; ++i) {
    std::string key = bench.Key(what, i);
    bench.Stamp(1);
    int rc = mooncake_store_put_from(bench.a, key.c_str(), bench.value, bench.size, &bench.on_a);
    if (rc != 0) Die("put_from on A", rc);
    if (with_holder && bench.ReadOnB(key) != 1) Die("the first read on B", -1);
    bench.Stamp(2);
    Clock::time_point t0 = Clock::now();
    rc = upsert ? mooncake_store_upsert_from(bench.a, key.c_str(), bench.value, bench.size,
                                             &bench.on_a)
                : mooncake_store_remove(bench.a, key.c_str(), 1);
    Clock::time_point t1 = Clock::now();
    if (rc != 0) Die(upsert ? "upsert_from on A" : "remove on A", rc);
    lat.push_back(Us(t0, t1));
    int64_t seen = bench.ReadOnB(key);
    if (seen != (upsert ? 2 : -1)) ++row.stale;
    if (upsert && mooncake_store_remove(bench.a, key.c_str(), 1) != 0) Die("cleanup remove", -1);
  }
  row.p50 = Percentile(lat, 0.5);
  row.p99 = Percentile(lat, 0.99);
  return row;
}

// One Unix-socket round trip to A (HEALTH) and A's get of a key it has cached, p50.
void Baselines(Bench& bench, double* rtt_us, double* hit_us) {
  std::vector<double> rtt, hit;
  std::string key = bench.Key("hit", 0);
  bench.Stamp(1);
  int rc = mooncake_store_put_from(bench.a, key.c_str(), bench.value, bench.size, &bench.on_a);
  if (rc != 0) Die("put_from on A", rc);
  for (int i = 0; i < 2000; ++i) {
    Clock::time_point t0 = Clock::now();
    mooncake_store_health_check(bench.a);
    Clock::time_point t1 = Clock::now();
    int64_t got = mooncake_store_get_into(bench.a, key.c_str(), bench.scratch, bench.size);
    Clock::time_point t2 = Clock::now();
    if (got != static_cast<int64_t>(bench.size)) Die("get_into on A", got);
    rtt.push_back(Us(t0, t1));
    if (i > 0) hit.push_back(Us(t1, t2));  // the first one asks the master
  }
  *rtt_us = Percentile(rtt, 0.5);
  *hit_us = Percentile(hit, 0.5);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  mooncake::FlagSet flags("fresh_bench",
                          "the cost an upsert or forced remove pays to keep other hosts' read "
                          "caches fresh, with 0 and 1 remote holders; spawns a master and two "
                          "daemons");
  flags.AddString("build_dir", &o.build_dir, "build tree holding the binaries to spawn");
  flags.AddInt("ops", &o.ops, "changes per phase");
  flags.AddSize("size", &o.size, "value size");
  flags.AddDuration("lease_ms", &o.lease_ms, 1, "the master's read lease");
  mooncake::ParseFlagsOrExit(&flags, argc, argv);

  setenv("MC_BUILD_DIR", o.build_dir.c_str(), 1);
  std::fprintf(stderr, "spawning mooncake-master and 2 mooncaked from %s ...\n",
               o.build_dir.c_str());
  mc_cluster_options options{2, 256ull << 20, static_cast<int>(o.lease_ms), nullptr, nullptr};
  mc_cluster* cluster = mc_cluster_start_with(&options);
  if (cluster == nullptr) return 1;
  Bench bench{};
  bench.run = static_cast<int>(getpid());
  bench.size = o.size;
  bench.a = mooncake_store_create();
  bench.b = mooncake_store_create();
  int rc = mooncake_store_connect(bench.a, mc_cluster_socket_at(cluster, 0), 64ull << 20);
  if (rc == 0) rc = mooncake_store_connect(bench.b, mc_cluster_socket_at(cluster, 1), 64ull << 20);
  if (rc != 0) Die("connect", rc);
  const char* a_name[] = {mc_cluster_name_at(cluster, 0)};
  bench.on_a = mooncake_replicate_config_t{1, 0, 0, a_name, 1};
  bench.value = static_cast<char*>(mooncake_store_alloc(bench.a, o.size));
  bench.scratch = static_cast<char*>(mooncake_store_alloc(bench.b, o.size));
  if (bench.value == nullptr || bench.scratch == nullptr) Die("alloc", -1);
  std::memset(bench.value, 7, o.size);

  double rtt = 0, hit = 0;
  Baselines(bench, &rtt, &hit);
  std::printf("machine: %ld cores; %s values, %" PRId64 " changes per phase, lease %" PRId64
              " ms\n", sysconf(_SC_NPROCESSORS_ONLN), std::to_string(o.size).c_str(), o.ops,
              o.lease_ms);
  std::printf("baselines (p50, same run): Unix-socket round trip %.1f us; get on A from its "
              "read cache %.1f us\n\n", rtt, hit);
  std::vector<Row> rows = {
      RunPhase(bench, "upsert, 0 holders", true, false, o.ops),
      RunPhase(bench, "upsert, 1 holder", true, true, o.ops),
      RunPhase(bench, "remove, 0 holders", false, false, o.ops),
      RunPhase(bench, "remove, 1 holder", false, true, o.ops),
  };
  std::printf("%-20s %10s %10s %12s\n", "change on A", "p50 us", "p99 us", "stale on B");
  for (const Row& r : rows) {
    std::printf("%-20s %10.1f %10.1f %8" PRId64 "/%" PRId64 "\n", r.what, r.p50, r.p99, r.stale,
                o.ops);
  }
  std::printf("\nadded by one remote holder (p50): upsert %+.1f us, remove %+.1f us\n",
              rows[1].p50 - rows[0].p50, rows[3].p50 - rows[2].p50);
  mooncake_store_free(bench.a, bench.value);
  mooncake_store_free(bench.b, bench.scratch);
  mooncake_store_destroy(bench.a);
  mooncake_store_destroy(bench.b);
  mc_cluster_stop(cluster);
  return 0;
}
