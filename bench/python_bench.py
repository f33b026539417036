#!/usr/bin/env python3
"""python_bench: put/get throughput of the Python binding, next to the C ABI's.

Times one thread putting and getting 1 MiB numpy arrays (by default) two ways:

  zero-copy  the arrays live in pool memory (store.alloc), moved with put_from/get_into,
             i.e. the same calls and buffers as store_bench's "pool single" rows;
  bytes      put(key, bytes) and get(key) -> bytes: the copying API.

Every figure is the median of --runs runs. With --store-bench, C's store_bench is run as
many times (--sizes SIZE --threads 1) and its "pool single" 1-thread rows are printed
alongside, with the zero-copy path's ratio to them (aim: within 10 %).

Run it against a daemon (MOONCAKE_SOCKET), e.g.:

  scripts/with-cluster.sh --build build --segment 4GB -- \
      /usr/bin/python3 bench/python_bench.py --build build

The runs put --runs x 2 x --bytes-per-phase bytes in all (1.5 GiB by default); a segment
of 4GB leaves room, since the master does not always hand removed objects' space back
before it evicts.

(--build DIR puts DIR/bindings/python on sys.path and picks DIR/bench/store_bench.)
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text, re.I)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))


def gbps(ops, size, seconds):
    return ops * size / seconds / 1e9


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def stamp(arr, i):
    """Marks an array with its op index (head and tail), as store_bench does."""
    arr[:8] = memoryview(i.to_bytes(8, "little"))
    arr[-8:] = memoryview(i.to_bytes(8, "little"))


def stamped(buf, i):
    b = i.to_bytes(8, "little")
    return bytes(buf[:8]) == b and bytes(buf[-8:]) == b


def timed(ops, one):
    """Runs one(i) for every op; returns (seconds, per-op latencies in us)."""
    lat = []
    start = time.perf_counter()
    for i in range(ops):
        t = time.perf_counter()
        one(i)
        lat.append((time.perf_counter() - t) * 1e6)
    return time.perf_counter() - start, lat


def check(rc, what, want=0):
    if rc != want:
        sys.exit(f"python_bench: FATAL: {what} returned {rc}, expected {want}")


def zero_copy_run(store, np, size, ops, tag):
    src = np.frombuffer(store.alloc(size), dtype=np.uint8)
    dst = np.frombuffer(store.alloc(size), dtype=np.uint8)
    src[:] = 0x5A
    keys = [f"{tag}-{i}" for i in range(ops)]
    src_ptr, dst_ptr = src.ctypes.data, dst.ctypes.data

    def put(i):
        stamp(src, i)
        check(store.put_from(keys[i], src_ptr, size), "put_from")

    def get(i):
        check(store.get_into(keys[i], dst_ptr, size), "get_into", size)
        if not stamped(dst, i):
            sys.exit("python_bench: FATAL: get_into returned wrong bytes")

    return timed(ops, put), timed(ops, get)


def bytes_run(store, np, size, ops, tag):
    value = np.full(size, 0x5A, dtype=np.uint8).tobytes()
    keys = [f"{tag}-{i}" for i in range(ops)]

    def put(i):
        check(store.put(keys[i], value), "put")

    def get(i):
        got = store.get(keys[i])
        if len(got) != size or got[:8] != value[:8]:
            sys.exit(f"python_bench: FATAL: get({keys[i]!r}) returned {len(got)} bytes "
                     f"(get_size {store.get_size(keys[i])})")

    return timed(ops, put), timed(ops, get)


def c_figures(store_bench, size_text, bytes_per_phase, pool_size):
    """store_bench's single-thread, single-key, pool-buffer put and get: {op: (GB/s, p50)}.

    store_bench spawns its own master and daemon (from the build tree it lives in), so
    every C run, like every Python run, starts on an empty segment. Only its first rows are
    needed; a failure in a later phase is reported but does not lose them."""
    build_dir = os.path.dirname(os.path.dirname(os.path.abspath(store_bench)))
    run = subprocess.run(
        [store_bench, "--build_dir", build_dir, "--sizes", size_text, "--threads", "1",
         "--bytes_per_phase", str(bytes_per_phase), "--pool_size", str(pool_size)],
        capture_output=True, text=True)
    figures = {}
    for line in run.stdout.splitlines():
        f = line.split()
        # op buffer form size unit thr ops ops/s GB/s p50 p99 memcpy vs_cpy
        if len(f) == 13 and f[1] == "pool" and f[2] == "single" and f[5] == "1":
            figures.setdefault(f[0], (float(f[8]), float(f[9])))  # GB/s, p50; first row per op
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["?"])[-1]
        print(f"python_bench: note: store_bench exited {run.returncode} ({last})", file=sys.stderr)
        if len(figures) < 2:
            sys.exit("python_bench: FATAL: store_bench gave no 'pool single' rows")
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", help="CMake build dir: module and store_bench from there")
    ap.add_argument("--size", default="1MB", help="object size (default 1MB)")
    ap.add_argument("--bytes-per-phase", type=parse_size, default=256 << 20,
                    help="data moved per phase, as store_bench (default 256MB)")
    ap.add_argument("--pool-size", type=parse_size, default=1 << 30,
                    help="the client pool, local_buffer_size (default 1GB, as store_bench)")
    ap.add_argument("--runs", type=int, default=3, help="runs per figure; the median is shown")
    ap.add_argument("--store-bench", help="C store_bench to compare with (default: from --build)")
    args = ap.parse_args()

    if args.build:
        sys.path.insert(0, os.path.join(args.build, "bindings", "python"))
        default_c = os.path.join(args.build, "bench", "store_bench")
        if args.store_bench is None and os.path.exists(default_c):
            args.store_bench = default_c
    import numpy as np
    import mooncake_store

    size = parse_size(args.size)
    ops = max(32, args.bytes_per_phase // size)  # store_bench's rule
    store = mooncake_store.MooncakeDistributedStore()
    rc = store.connect(local_buffer_size=args.pool_size)
    if rc != 0:
        sys.exit(f"python_bench: connect: {rc} ({mooncake_store.strerror(rc)}); "
                 "is MOONCAKE_SOCKET set?")

    # Python and C runs alternate, so that both meet the same machine load.
    results = {}  # (path, op) -> list of (GB/s, p50, p99)
    c_runs = []  # one {op: (GB/s, p50)} per run
    for run in range(args.runs):
        for path, fn in (("zero-copy", zero_copy_run), ("bytes", bytes_run)):
            tag = f"pybench-{os.getpid()}-{run}-{path}"
            for op, (seconds, lat) in zip(("put", "get"), fn(store, np, size, ops, tag)):
                results.setdefault((path, op), []).append(
                    (gbps(ops, size, seconds), percentile(lat, 0.5), percentile(lat, 0.99)))
            store.remove_all(True)  # phases must not fill the segment: a cache would evict
        if args.store_bench:
            c_runs.append(c_figures(args.store_bench, args.size, args.bytes_per_phase,
                                    args.pool_size))

    print(f"python_bench: {size} B objects, {ops} ops per phase, 1 thread, "
          f"pool {args.pool_size >> 20} MiB, median of {args.runs} runs")
    header = f"{'path':<10} {'op':<4} {'GB/s':>7} {'p50_us':>8} {'p99_us':>8}"
    if c_runs:
        header += f" | {'C GB/s':>7} {'C p50':>7} | {'GB/s vs C':>9} {'p50 vs C':>8}"
    print(header)
    for (path, op), rows in results.items():
        g = statistics.median(r[0] for r in rows)
        p50 = statistics.median(r[1] for r in rows)
        p99 = statistics.median(r[2] for r in rows)
        line = f"{path:<10} {op:<4} {g:7.2f} {p50:8.1f} {p99:8.1f}"
        if c_runs:
            cg = statistics.median(r[op][0] for r in c_runs)
            cp50 = statistics.median(r[op][1] for r in c_runs)
            # ratios as "Python relative to C": 100 % is equal, above is faster
            line += f" | {cg:7.2f} {cp50:7.1f} | {g / cg * 100:8.0f}% {cp50 / p50 * 100:7.0f}%"
        print(line)
    if c_runs:
        print("C: store_bench --sizes %s --threads 1, rows 'pool single' (put_from/get_into "
              "of pool memory, 1 thread), on a master and daemon of its own" % args.size)
    store.close()


if __name__ == "__main__":
    main()
