#include "bench/store_bench_local.h"

#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/base/spin_wait.h"
#include "common/base/units.h"

namespace mooncake {
namespace store_bench {

namespace {

[[noreturn]] void RedisDie(const std::string& what) {
  std::fprintf(stderr, "store_bench: FATAL: redis: %s\n", what.c_str());
  std::exit(1);
}

// What Redis did for one of our rows' operations; command empty when not measured.
struct RedisFigure {
  std::string command;                           // e.g. SET, MGET128
  double p50_us = 0, p99_us = 0, ops_per_s = 0;  // ops: keys
};

// Redis' figures of one (size, threads, batch), by our operation.
struct RedisFigures {
  RedisFigure put, exist, get, reread;
};

// A Redis phase: `threads` connections, each doing ops_per_thread keys in commands of
// `batch` keys; kExist is EXISTS of the batch, kGet checks each value's length and stamp.
struct RedisPhase {
  int port;
  uint64_t size;
  int threads;
  int64_t ops_per_thread;
  int batch;
  int run;
};

RedisFigure RunRedisPhase(const RedisPhase& p, Op op) {
  ThreadBody body = [&](int t, const std::function<void()>& ready, std::vector<double>* lat) {
    RedisClient client;
    if (!client.Connect(p.port)) RedisDie(client.error());
    std::vector<char*> bufs(p.batch);
    for (auto& b : bufs) {
      b = static_cast<char*>(std::aligned_alloc(64, (p.size + 63) / 64 * 64));
      std::memset(b, 0x5a, p.size);
    }
    std::vector<std::string> keys(p.batch);
    std::vector<const char*> key_ptrs(p.batch);
    std::vector<void*> buf_ptrs(bufs.begin(), bufs.end());
    std::vector<size_t> sizes(p.batch, p.size);
    std::vector<int64_t> lengths(p.batch);
    lat->reserve(p.ops_per_thread / p.batch + 1);
    ready();
    for (int64_t i = 0; i < p.ops_per_thread; i += p.batch) {
      for (int j = 0; j < p.batch; ++j) {
        keys[j] = Key(p.run, p.size, t, i + j);
        key_ptrs[j] = keys[j].c_str();
        if (op == Op::kPut) Stamp(bufs[j], p.size, i + j);
      }
      auto start = Clock::now();
      bool ok = true;
      int64_t present = p.batch;
      if (op == Op::kPut) {
        ok = p.batch == 1 ? client.Set(key_ptrs[0], bufs[0], p.size)
                          : client.MSet(key_ptrs.data(), buf_ptrs.data(), sizes.data(), p.batch);
      } else if (op == Op::kExist) {
        ok = client.Exists(key_ptrs.data(), p.batch, &present);
      } else {
        ok = p.batch == 1 ? client.Get(key_ptrs[0], bufs[0], p.size, &lengths[0])
                          : client.MGet(key_ptrs.data(), buf_ptrs.data(), sizes.data(), p.batch,
                                        lengths.data());
      }
      lat->push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      if (!ok) RedisDie(client.error());
      if (present != p.batch) {
        RedisDie("EXISTS of " + std::to_string(p.batch) + " keys found " + std::to_string(present));
      }
      if (op == Op::kGet) {
        for (int j = 0; j < p.batch; ++j) {
          if (lengths[j] != static_cast<int64_t>(p.size) || !StampMatches(bufs[j], p.size, i + j)) {
            RedisDie("GET of " + keys[j] + " returned " + std::to_string(lengths[j]) +
                     " bytes, or bytes other than those SET");
          }
        }
      }
    }
    for (char* b : bufs) std::free(b);
  };
  double seconds = 0;
  std::vector<double> latencies = RunThreads(p.threads, body, &seconds);
  std::string batch = p.batch == 1 ? "" : std::to_string(p.batch);
  const char* name = op == Op::kExist ? "EXISTS"
                     : op == Op::kPut ? (p.batch == 1 ? "SET" : "MSET")
                                      : (p.batch == 1 ? "GET" : "MGET");
  return {name + batch, Percentile(latencies, 0.5), Percentile(latencies, 0.99),
          static_cast<double>(p.ops_per_thread * p.threads) / seconds};
}

void FlushAll(int port) {
  RedisClient client;
  std::string ok;
  if (!client.Connect(port) || !client.Simple({"FLUSHALL"}, &ok)) RedisDie(client.error());
}

// SET (MSET), EXISTS (batches), GET (MGET), and GET again (single calls on one thread, as
// our re-read), then FLUSHALL so the next phase starts on an empty server. First the SETs
// once untimed, and FLUSHALL: a redis-server takes memory from the kernel as values
// arrive, and on this VM a page's first touch is dear (a 1 MiB SET paid 0.8 ms instead of
// 0.5); our daemon's segment is faulted in at its start, a long-running Redis' memory by
// its past, so both are measured warm. Its allocator reuses the freed pages at once.
RedisFigures MeasureRedis(const RedisPhase& p) {
  RunRedisPhase(p, Op::kPut);
  FlushAll(p.port);
  RedisFigures f;
  f.put = RunRedisPhase(p, Op::kPut);
  if (p.batch > 1) f.exist = RunRedisPhase(p, Op::kExist);
  f.get = RunRedisPhase(p, Op::kGet);
  if (p.batch == 1 && p.threads == 1) f.reread = RunRedisPhase(p, Op::kGet);
  FlushAll(p.port);
  return f;
}

// One of our rows with its same-run baselines.
struct LocalRow {
  Row ours;
  double memcpy_cold_warm = 0, memcpy_cold_cold = 0;
  RedisFigure redis;
  bool single() const { return ours.form == "single" || ours.form == "reread"; }
  // Single calls: our p50 / Redis p50; batches: our keys/s / Redis keys/s. 0: no figure.
  double redis_ratio() const {
    if (redis.command.empty()) return 0;
    return single() ? ours.p50_us / redis.p50_us : ours.ops_per_s() / redis.ops_per_s;
  }
};

// The table's header on stdout when shown, and the CSV's.
void PrintLocalHeader(FILE* csv, bool shown) {
  if (shown) std::printf("%-5s %-6s %-9s %9s %3s %7s %10s %8s %9s %9s %8s %7s %-9s %9s %10s %8s\n", "op",
              "buffer", "form", "size", "thr", "ops", "ops/s", "GB/s", "p50_us", "p99_us",
              "cpy_c>w", "vs_cpy", "redis", "redis_p50", "redis_op/s", "vs_redis");
  if (csv) {
    std::fprintf(csv,
                 "op,buffer,form,size,threads,ops,seconds,ops_per_s,gb_per_s,p50_us,p99_us,"
                 "memcpy_cold_warm_gb_per_s,ratio_to_memcpy,memcpy_cold_cold_gb_per_s,"
                 "redis_command,redis_p50_us,redis_p99_us,redis_ops_per_s,ratio_to_redis\n");
  }
}

void PrintLocal(const LocalRow& l, FILE* csv, bool shown) {
  const Row& r = l.ours;
  // An exist moves no value: no GB/s, no share of memcpy (0 in the CSV).
  const bool moves = r.op != "exist";
  const double gbps = moves ? r.gbps() : 0;
  const double cpy = moves && l.memcpy_cold_warm > 0 ? gbps / l.memcpy_cold_warm : 0;
  if (shown) {
    std::printf("%-5s %-6s %-9s %9s %3d %7" PRId64 " %10.0f", r.op.c_str(), r.buffer.c_str(),
                r.form.c_str(), FormatSize(r.size).c_str(), r.threads, r.ops, r.ops_per_s());
    if (moves) {
      std::printf(" %8.2f", gbps);
    } else {
      std::printf(" %8s", "-");
    }
    std::printf(" %9.1f %9.1f %8.2f", r.p50_us, r.p99_us, l.memcpy_cold_warm);
    if (moves) {
      std::printf(" %6.0f%%", cpy * 100);
    } else {
      std::printf(" %7s", "-");
    }
    if (l.redis.command.empty()) {
      std::printf(" %-9s %9s %10s %8s\n", "-", "-", "-", "-");
    } else {
      std::printf(" %-9s %9.1f %10.0f %7.2fx\n", l.redis.command.c_str(), l.redis.p50_us,
                  l.redis.ops_per_s, l.redis_ratio());
    }
  }
  std::fflush(stdout);
  if (csv) {
    std::fprintf(csv,
                 "%s,%s,%s,%" PRIu64 ",%d,%" PRId64
                 ",%.3f,%.0f,%.4f,%.2f,%.2f,%.4f,%.4f,"
                 "%.4f,%s,%.2f,%.2f,%.0f,%.4f\n",
                 r.op.c_str(), r.buffer.c_str(), r.form.c_str(), r.size, r.threads, r.ops,
                 r.seconds, r.ops_per_s(), gbps, r.p50_us, r.p99_us, l.memcpy_cold_warm, cpy,
                 l.memcpy_cold_cold, l.redis.command.c_str(), l.redis.p50_us, l.redis.p99_us,
                 l.redis.ops_per_s, l.redis_ratio());
  }
}

const LocalRow* Find(const std::vector<LocalRow>& rows, const char* op, const char* form,
                     uint64_t size, int threads) {
  for (const LocalRow& l : rows) {
    if (l.ours.op == op && l.ours.buffer == "pool" && l.ours.form == form && l.ours.size == size &&
        l.ours.threads == threads) {
      return &l;
    }
  }
  return nullptr;
}

// One goal line: what, the measured figure, the target, PASS or MISS; "not measured" when
// the run lacks the rows (another --sizes, --redis off).
void Goal(const char* what, bool known, const std::string& measured, const std::string& target,
          bool pass) {
  std::printf("  %-46s %-30s %-34s %s\n", what, known ? measured.c_str() : "not measured",
              known ? target.c_str() : "", known ? (pass ? "PASS" : "MISS") : "-");
}

std::string Text(const char* format, double a, double b = 0) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), format, a, b);
  return buf;
}

// Issue 18's goals, from the pool rows of this run (4 KiB unless said).
void PrintGoals(const std::vector<LocalRow>& rows, double uds_rtt_us, int threads) {
  std::printf("\ngoals of issue 18 (pool buffers; ratios within this run):\n");
  const uint64_t k4 = 4096, m1 = 1 << 20;
  const LocalRow* put = Find(rows, "put", "single", k4, 1);
  bool known = put != nullptr && !put->redis.command.empty();
  Goal("4 KiB put p50 <= 1.5x Redis SET p50", known, known ? Text("%.1f us", put->ours.p50_us) : "",
       known ? Text("<= %.1f us (Redis SET %.1f)", 1.5 * put->redis.p50_us, put->redis.p50_us) : "",
       known && put->ours.p50_us <= 1.5 * put->redis.p50_us);
  const LocalRow* puts = Find(rows, "put", "single", k4, threads);
  std::string what = "4 KiB puts, " + std::to_string(threads) + " threads >= 30k/s";
  Goal(what.c_str(), puts != nullptr, puts ? Text("%.0f puts/s", puts->ours.ops_per_s()) : "",
       ">= 30000 puts/s", puts && puts->ours.ops_per_s() >= 30000);
  const LocalRow* get = Find(rows, "get", "single", k4, 1);
  known = get != nullptr && !get->redis.command.empty();
  Goal("4 KiB first get p50 <= Redis GET p50", known,
       known ? Text("%.1f us", get->ours.p50_us) : "",
       known ? Text("<= %.1f us (Redis GET)", get->redis.p50_us) : "",
       known && get->ours.p50_us <= get->redis.p50_us);
  const LocalRow* reread = Find(rows, "get", "reread", k4, 1);
  Goal("4 KiB re-read p50 <= 2x Unix-socket round trip", reread != nullptr,
       reread ? Text("%.1f us", reread->ours.p50_us) : "",
       Text("<= %.1f us (2x %.1f us)", 2 * uds_rtt_us, uds_rtt_us),
       reread && reread->ours.p50_us <= 2 * uds_rtt_us);
  struct Batch {
    const char* what;
    const char* op;
    double target;
  };
  for (const Batch& b : {Batch{"batch128 x 4 KiB get >= 1M keys/s", "get", 1e6},
                         Batch{"batch128 x 4 KiB exist >= 1M keys/s", "exist", 1e6},
                         Batch{"batch128 x 4 KiB put >= 500k keys/s", "put", 5e5}}) {
    const LocalRow* l = Find(rows, b.op, "batch128", k4, 1);
    // The verdict is on the phase's keys/s; a batch's p50 gives the rate of a typical call
    // beside it, which a loaded machine's preemptions (whole milliseconds in a phase of
    // tens) move far less.
    Goal(b.what, l != nullptr,
         l ? Text("%.0f keys/s (p50: %.0f)", l->ours.ops_per_s(), 128 / l->ours.p50_us * 1e6)
           : "",
         Text(">= %.0f keys/s", b.target), l && l->ours.ops_per_s() >= b.target);
  }
  const LocalRow* big = Find(rows, "get", "single", m1, 1);
  Goal("1 MiB get_into >= 0.8x memcpy cold->warm", big != nullptr,
       big ? Text("%.2f GB/s (%.0f%%)", big->ours.gbps(),
                  big->ours.gbps() / big->memcpy_cold_warm * 100)
           : "",
       big ? Text(">= %.2f GB/s (0.8x %.2f)", 0.8 * big->memcpy_cold_warm, big->memcpy_cold_warm)
           : "",
       big && big->ours.gbps() >= 0.8 * big->memcpy_cold_warm);
  if (big != nullptr && HugePagesInUse() == 0) {
    std::printf(
        "  (the segment and the pool were on 4 KiB pages: reserve huge pages for large values, "
        "docs/operations.md \"Huge pages\")\n");
  }
  std::printf(
      "  (no regression elsewhere: store_bench --daemons 2 for remote gets vs raw TCP, "
      "master_bench for the master's bytes/object)\n");
}

// What the hops alone cost beside the two latency goals: a goal below its floor cannot be
// met by work done in any of the processes, only by fewer hops or by faster ones.
void PrintFloors(const std::vector<LocalRow>& rows, const HopFloor& hops) {
  const LocalRow* put = Find(rows, "put", "single", 4096, 1);
  const LocalRow* get = Find(rows, "get", "single", 4096, 1);
  if (hops.us[1] <= 0 || put == nullptr || get == nullptr || put->redis.command.empty()) return;
  std::printf("floors of the design in this run (the hops with no work, line \"hops\"):\n");
  std::printf("  4 KiB first get %.1f us = %.1f us of hops + %.1f us of work; goal <= %.1f us\n",
              get->ours.p50_us, hops.us[1], get->ours.p50_us - hops.us[1], get->redis.p50_us);
  std::printf("  4 KiB put       %.1f us = %.1f us of hops + %.1f us of work; goal <= %.1f us\n",
              put->ours.p50_us, hops.us[2], put->ours.p50_us - hops.us[2],
              1.5 * put->redis.p50_us);
}

// The lines above the table: pages, the Redis server, what the columns mean.
void PrintTableIntro(const RedisServer* redis) {
  std::printf("pages: %s\n", SharedPagesSummary().c_str());
  if (redis != nullptr) {
    std::printf(
        "redis: redis-server %s on 127.0.0.1:%d (%s); our client: one blocking TCP "
        "connection per thread, TCP_NODELAY\n",
        redis->version().c_str(), redis->port(), redis->config().c_str());
  }
  std::printf(
      "cpy_c>w: memcpy of the size from a cold source into one warm buffer; vs_redis: "
      "single calls p50 ours/Redis (< 1: faster), batches keys/s ours/Redis (> 1: "
      "faster)\n");
}

// What make demo shows: for each size, a few plain lines of ours beside the baselines of
// the same run (Redis on 127.0.0.1, memcpy, a Unix-socket round trip), no goals.
void PrintDigest(const std::vector<LocalRow>& rows, double uds_rtt_us, int threads) {
  std::printf("\none host: p50 of single calls, keys/s of 128-key batches; beside each, what "
              "this machine did in the same run\n");
  for (uint64_t size : {uint64_t{4096}, uint64_t{1} << 20}) {
    const LocalRow* put = Find(rows, "put", "single", size, 1);
    const LocalRow* get = Find(rows, "get", "single", size, 1);
    if (put == nullptr || get == nullptr) continue;
    const std::string name = FormatSize(size);
    const bool redis = !put->redis.command.empty();
    std::printf("  %-8s put       %8.1f us", name.c_str(), put->ours.p50_us);
    if (redis) std::printf("    Redis SET %.1f us", put->redis.p50_us);
    std::printf("\n  %-8s get       %8.1f us", "", get->ours.p50_us);
    if (redis) std::printf("    Redis GET %.1f us", get->redis.p50_us);
    std::printf("  (a first read: the daemon asks the master where the bytes are)\n");
    if (const LocalRow* again = Find(rows, "get", "reread", size, 1)) {
      std::printf("  %-8s re-read   %8.1f us    a Unix-socket round trip %.1f us  (within the "
                  "read lease the daemon skips the master)\n",
                  "", again->ours.p50_us, uds_rtt_us);
    }
    const double copy = get->memcpy_cold_warm;
    if (size >= (1 << 20) && copy > 0) {
      std::printf("  %-8s get_into  %8.2f GB/s = %.0f%% of memcpy (%.2f GB/s, cold source); "
                  "put_from %.2f GB/s\n",
                  "", get->ours.gbps(), get->ours.gbps() / copy * 100, copy, put->ours.gbps());
    }
    const LocalRow* many_put = Find(rows, "put", "single", size, threads);
    const LocalRow* many_get = Find(rows, "get", "single", size, threads);
    if (threads > 1 && many_put != nullptr && many_get != nullptr) {
      std::printf("  %-8s %d threads %8.0f puts/s, %.0f gets/s", "", threads,
                  many_put->ours.ops_per_s(), many_get->ours.ops_per_s());
      if (redis) {
        std::printf("    Redis %.0f SET/s, %.0f GET/s", many_put->redis.ops_per_s,
                    many_get->redis.ops_per_s);
      }
      std::printf("\n");
    }
    const LocalRow* bput = Find(rows, "put", "batch128", size, 1);
    const LocalRow* bexist = Find(rows, "exist", "batch128", size, 1);
    const LocalRow* bget = Find(rows, "get", "batch128", size, 1);
    if (bput != nullptr && bexist != nullptr && bget != nullptr) {
      std::printf("  %-8s 128 keys  put %.0f, exist %.0f, get %.0f keys/s", "",
                  bput->ours.ops_per_s(), bexist->ours.ops_per_s(), bget->ours.ops_per_s());
      if (redis) {
        std::printf("    Redis MSET %.0f, EXISTS %.0f, MGET %.0f", bput->redis.ops_per_s,
                    bexist->redis.ops_per_s, bget->redis.ops_per_s);
      }
      std::printf("\n");
    }
  }
}

}  // namespace

void RunOneDaemon(const Options& o, mooncake_store_t store, const RedisServer* redis, FILE* csv) {
  double uds_rtt = UnixRoundTripUs();
  std::printf(
      "machine: %u cores; Unix-socket round trip (p50, same run; both threads block in "
      "read()): %.1f us\n",
      std::thread::hardware_concurrency(), uds_rtt);
  HopFloor hops;
  if (o.digest) {
    std::printf("measuring %s with %s, %" PRId64 " threads for the multi-thread rows ...\n",
                o.sizes.c_str(), redis != nullptr ? "Redis beside" : "no Redis", o.threads);
  } else if (MeasureHopFloor(&hops)) {
    std::printf(
        "hops: client -> daemon -> master with no work (3 processes, each waiting side "
        "polling %lld us as ours do; p50): client <-> daemon %.1f us, + 1 master round trip "
        "(a first get) %.1f us, + 2 (a put) %.1f us\n",
        static_cast<long long>(kDefaultSpinMicros), hops.us[0], hops.us[1], hops.us[2]);
  } else {
    std::printf("hops: not measured (%s)\n", std::strerror(errno));
  }
  if (!o.digest) PrintTableIntro(redis);
  PrintLocalHeader(csv, !o.digest);

  int run = static_cast<int>(getpid());
  LeasedSpace space(o.segment_size, o.lease_ms);
  std::vector<LocalRow> rows;
  const int threads_n = static_cast<int>(o.threads);
  // --threads 1 would measure the same configuration twice.
  const std::vector<int> thread_counts =
      threads_n == 1 ? std::vector<int>{1} : std::vector<int>{1, threads_n};
  for (uint64_t size : ParseSizes(o.sizes)) {
    double cold_warm = MemcpyColdToWarmGbps(size, o.bytes_per_phase);
    double cold_cold = MemcpyColdToColdGbps(size, o.bytes_per_phase);
    if (o.digest) {
      std::printf("  %s ...\n", FormatSize(size).c_str());
    } else {
      std::printf("-- %s: memcpy cold->warm %.2f GB/s, cold->cold %.2f GB/s\n",
                  FormatSize(size).c_str(), cold_warm, cold_cold);
    }
    for (int threads : thread_counts) {
      for (int batch : o.digest ? std::vector<int>{1, 128} : std::vector<int>{1, 32, 128}) {
        // A batch is one call; batches bigger than a phase's data are not a use case.
        // Phases must not fill the segment: a cache evicts.
        if (batch > 1 && (threads > 1 || size * batch > o.bytes_per_phase)) continue;
        int64_t ops = PhaseOps(o, size, static_cast<int64_t>(threads) * batch);
        RedisFigures theirs;
        if (redis != nullptr) {
          theirs = MeasureRedis({redis->port(), size, threads, ops / threads, batch, ++run});
        }
        std::string form = batch == 1 ? "single" : "batch" + std::to_string(batch);
        // The digest shows the pool path, the one engines take.
        for (bool pool : o.digest ? std::vector<bool>{true} : std::vector<bool>{true, false}) {
          Phase p{store, size, threads, ops / threads, batch, pool, ++run};
          space.WaitForRoom(static_cast<uint64_t>(ops) * size);
          // Put; exist of the batches; get, the first read (a miss in the daemon's read
          // cache: it asks the master); for single calls on one thread, get again: a
          // re-read within the lease, a hit in the read cache that skips the master.
          struct Pass {
            Op op;
            const char* name;
            std::string form;
            const RedisFigure* redis;
          };
          std::vector<Pass> passes{{Op::kPut, "put", form, &theirs.put}};
          if (batch > 1) passes.push_back({Op::kExist, "exist", form, &theirs.exist});
          passes.push_back({Op::kGet, "get", form, &theirs.get});
          if (batch == 1 && threads == 1)
            passes.push_back({Op::kGet, "get", "reread", &theirs.reread});
          for (const Pass& pass : passes) {
            LocalRow l;
            l.ours = Row{pass.name, pool ? "pool" : "plain",   pass.form, size,
                         threads,   p.ops_per_thread * threads};
            std::vector<double> lat = RunPhase(p, pass.op, &l.ours.seconds);
            l.ours.p50_us = Percentile(lat, 0.5);
            l.ours.p99_us = Percentile(lat, 0.99);
            l.memcpy_cold_warm = cold_warm;
            l.memcpy_cold_cold = cold_cold;
            l.redis = *pass.redis;
            PrintLocal(l, csv, !o.digest);
            rows.push_back(l);
          }
          mooncake_store_remove_all(store, 1);
          space.Removed(static_cast<uint64_t>(ops) * size);
        }
      }
    }
  }
  if (o.digest) {
    PrintDigest(rows, uds_rtt, threads_n);
    return;
  }
  PrintGoals(rows, uds_rtt, threads_n);
  PrintFloors(rows, hops);
}

}  // namespace store_bench
}  // namespace mooncake
