#!/usr/bin/env bash
# `make demo`: starts a real mooncake-master on a free loopback port and drives it through
# the object lifecycle at speed (mount a segment, PutStart/PutEnd, GetReplicaList,
# ExistKey, single and batch), then reports throughput and memory per object and stops it.
set -euo pipefail
BUILD_DIR=${1:-build}
echo "== mooncake-master demo: a master on 127.0.0.1 and a short master_bench run"
"$BUILD_DIR/bench/master_bench" --spawn_master "$BUILD_DIR/master/mooncake-master" \
  --threads 2 --keys 20000 --rss_objects 200000
