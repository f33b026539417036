#!/usr/bin/env bash
# `make demo`: one host end to end. Under scripts/with-cluster.sh (a real mooncake-master
# and mooncaked on 127.0.0.1), runs the KV-cache demo through the C ABI and short runs of
# both benchmarks.
set -euo pipefail
BUILD_DIR=${1:-build}
exec "$(dirname "$0")/with-cluster.sh" --build "$BUILD_DIR" --segment 2GB -- bash -c '
set -e
echo "== examples/kvcache_demo: two engines share a prompt prefix through the store"
"$0/examples/kvcache_demo"
echo
echo "== bench/store_bench (short): put/get through the C ABI vs memcpy in the same run"
"$0/bench/store_bench" --socket "$MOONCAKE_SOCKET" --sizes 4KB,1MB --threads 2 \
  --bytes_per_phase 64MB --max_ops 5000 --segment_size 2GB --lease_ms 10000
echo
echo "== bench/master_bench (short): the master alone, over Thrift"
"$0/bench/master_bench" --spawn_master "$0/master/mooncake-master" \
  --threads 2 --keys 20000 --rss_objects 200000
' "$(cd "$BUILD_DIR" && pwd)"
