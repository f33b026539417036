#!/usr/bin/env bash
# `make demo`: one host end to end. Starts a real mooncake-master and mooncaked on
# 127.0.0.1 (free ports, a temp dir), runs the KV-cache demo through the C ABI, then short
# runs of both benchmarks, and stops everything.
set -euo pipefail
BUILD_DIR=${1:-build}
DIR=$(mktemp -d /tmp/mooncake-demo.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

MASTER_PORT=$(free_port)
DAEMON_PORT=$(free_port)
SOCKET="$DIR/mooncaked.sock"

echo "== starting mooncake-master on 127.0.0.1:$MASTER_PORT (log: $DIR/master.log)"
"$BUILD_DIR/master/mooncake-master" --rpc_address 127.0.0.1 --rpc_port "$MASTER_PORT" \
  > "$DIR/master.log" 2>&1 &
PIDS+=($!)
echo "== starting mooncaked with a 1 GiB segment, socket $SOCKET (log: $DIR/daemon.log)"
"$BUILD_DIR/daemon/mooncaked" --master "127.0.0.1:$MASTER_PORT" --socket "$SOCKET" \
  --hostname 127.0.0.1 --port "$DAEMON_PORT" --global_segment_size 1GB \
  > "$DIR/daemon.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do [ -S "$SOCKET" ] && break; sleep 0.1; done
[ -S "$SOCKET" ] || { echo "mooncaked did not start:"; cat "$DIR/daemon.log"; exit 1; }

echo
echo "== examples/kvcache_demo: two engines share a prompt prefix through the store"
MOONCAKE_SOCKET="$SOCKET" "$BUILD_DIR/examples/kvcache_demo"

echo
echo "== bench/store_bench (short): put/get through the C ABI vs memcpy in the same run"
"$BUILD_DIR/bench/store_bench" --socket "$SOCKET" --sizes 4KB,1MB --threads 2 \
  --bytes_per_phase 64MB --max_ops 5000

echo
echo "== bench/master_bench (short): the master alone, over Thrift"
"$BUILD_DIR/bench/master_bench" --spawn_master "$BUILD_DIR/master/mooncake-master" \
  --threads 2 --keys 20000 --rss_objects 200000
