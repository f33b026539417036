// store_bench's one-daemon matrix, side by side with Redis: for every object size, 1 and N
// threads, single calls and batches of 32 and 128 keys, first the same operations against
// a redis-server on 127.0.0.1 (SET, GET, GET again; MSET, EXISTS, MGET of the batch; one
// blocking connection per thread), then ours on pool and plain buffers (put, batch exist,
// get, re-read). Each of our rows carries the Redis figure of its operation and the ratio:
// our p50 / Redis p50 for single calls (below 1: we are faster), our keys/s / Redis keys/s
// for batches (above 1: we are faster). Then one line per goal of issue 18, computed from
// the rows, and with --csv and --png a plot of the table (plot_store_bench.gnuplot).
#ifndef MOONCAKE_BENCH_STORE_BENCH_LOCAL_H_
#define MOONCAKE_BENCH_STORE_BENCH_LOCAL_H_

#include <cstdio>

#include "bench/redis_peer.h"
#include "bench/store_bench_util.h"

namespace mooncake {
namespace store_bench {

// redis: a started server, or nullptr to measure ours only (--redis off). csv: the
// rows' CSV (may be null).
void RunOneDaemon(const Options& o, mooncake_store_t store, const RedisServer* redis, FILE* csv);

}  // namespace store_bench
}  // namespace mooncake

#endif  // MOONCAKE_BENCH_STORE_BENCH_LOCAL_H_
