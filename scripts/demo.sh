#!/usr/bin/env bash
# `make demo`: the store end to end, then what it costs on this machine. Under
# scripts/with-cluster.sh (a real mooncake-master and two mooncaked on 127.0.0.1), engine B on
# the second daemon loads the KV-cache prefix engine A wrote on the first. Then short runs of
# the benchmarks in their digest form: every figure beside a baseline measured in the same run
# (memcpy, a Unix-socket round trip, Redis, raw loopback TCP), so a slow or noisy machine
# reads as such. The goals and their PASS/MISS lines are `make bench`'s, not the first run's.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
step() { printf '\n== %s\n' "$*"; }

step "1. Two engines on two hosts share a prompt prefix (examples/kvcache_demo.c)"
"$SRC/scripts/with-cluster.sh" --build "$BUILD" --segment 1GB --daemons 2 -- \
  "$BUILD/examples/kvcache_demo"

step "2. One host: what a put and a get cost, beside memcpy and a Redis on 127.0.0.1"
"$BUILD/bench/store_bench" --build_dir "$BUILD" --digest --sizes 4KB,1MB --threads 2 \
  --bytes_per_phase 64MB --max_ops 5000 --segment_size 1GB --lease_ms 10000

step "3. Two hosts: one daemon reads another's memory, beside raw loopback TCP"
"$BUILD/bench/store_bench" --build_dir "$BUILD" --digest --daemons 2 --sizes 4MB --threads 2 \
  --bytes_per_phase 256MB

step "4. The master alone, over Thrift: calls per second and memory per object"
"$BUILD/bench/master_bench" --spawn_master "$BUILD/master/mooncake-master" --targets=false \
  --threads 2 --keys 20000 --rss_objects 200000

step "What next"
B=${BUILD#"$PWD"/}
cat <<EOF
  From a shell (scripts/with-cluster.sh starts a master and a daemon for one command):
    scripts/with-cluster.sh -- sh -c '$B/cli/mooncake-cli put greeting hello && $B/cli/mooncake-cli get greeting'
  From Python, as vLLM, SGLang and LMCache import it:
    PYTHONPATH=$B/bindings/python scripts/with-cluster.sh -- /usr/bin/python3 -c \\
      'from mooncake.store import MooncakeDistributedStore as S; s = S(); s.connect(); s.put("k", b"v"); print(s.get("k"))'
  From C: include/mooncake_store.h documents every call; examples/kvcache_demo.c is step 1's program.
  On real hosts (systemd units, example configs, a cluster key): docs/operations.md
  The full comparison with Redis, and the performance goals: make bench-store (every benchmark: make bench)
EOF
