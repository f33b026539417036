#!/usr/bin/env bash
# `make demo`: two "hosts" end to end. Under scripts/with-cluster.sh (a real
# mooncake-master and two mooncaked on 127.0.0.1), runs the KV-cache demo through the C
# ABI — engine B on the second daemon loads what engine A wrote on the first. Then short
# runs of the benchmarks, each starting its own processes.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
"$(dirname "$0")/with-cluster.sh" --build "$BUILD" --segment 1GB --daemons 2 -- \
  bash -c 'echo "== examples/kvcache_demo: two engines on two hosts share a prompt prefix"
           "$0/examples/kvcache_demo"' "$BUILD"
echo
echo "== bench/store_bench (short): put/get through the C ABI vs memcpy in the same run"
"$BUILD/bench/store_bench" --sizes 4KB,1MB --threads 2 --bytes_per_phase 64MB --max_ops 5000 \
  --segment_size 1GB --lease_ms 10000
echo
echo "== bench/store_bench --daemons 2 (short): daemon to daemon vs raw loopback TCP"
"$BUILD/bench/store_bench" --daemons 2 --sizes 4MB --threads 2 --bytes_per_phase 256MB | tail -5
echo
echo "== bench/master_bench (short): the master alone, over Thrift"
"$BUILD/bench/master_bench" --spawn_master "$BUILD/master/mooncake-master" \
  --threads 2 --keys 20000 --rss_objects 200000
