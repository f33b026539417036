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

Two more sections follow (--sections picks which of putget, ranges, multi run):

  ranges  a 64 KiB range of a 4 MiB object (get_into_ranges) next to the whole 4 MiB read
          (get_into), zero copy, from the reader's own daemon ("local") and, when a second
          daemon is there (MOONCAKE_SOCKET_2: run with --daemons 2), from its memory
          ("remote"): a ranged read costs about what its bytes cost;
  multi   batch_get_into_multi_buffers of 128 keys x 4 KiB (one buffer each, in the pool)
          next to the C ABI's mooncake_store_batch_get_into of the same keys into the same
          kind of buffers, called through ctypes on a handle of its own in this process,
          the two alternating batch by batch (aim: within 15 %).

(--build DIR puts DIR/bindings/python on sys.path and picks DIR/bench/store_bench and
DIR/libmc/libmooncake_store.so.)
"""
import argparse
import ctypes
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
         "--bytes_per_phase", str(bytes_per_phase), "--pool_size", str(pool_size),
         "--redis", "off"],
        capture_output=True, text=True)
    figures = {}
    for line in run.stdout.splitlines():
        f = line.split()
        # op buffer form size unit thr ops ops/s GB/s p50 p99 memcpy vs_cpy, then the
        # Redis columns (redis redis_p50 redis_op/s vs_redis: "-" with --redis off)
        if len(f) == 17 and f[1] == "pool" and f[2] == "single" and f[5] == "1":
            figures.setdefault(f[0], (float(f[8]), float(f[9])))  # GB/s, p50; first row per op
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["?"])[-1]
        print(f"python_bench: note: store_bench exited {run.returncode} ({last})", file=sys.stderr)
        if len(figures) < 2:
            sys.exit("python_bench: FATAL: store_bench gave no 'pool single' rows")
    return figures


def median_us(samples):
    return statistics.median(samples) * 1e6


def ranges_section(store, np, runs):
    """A 64 KiB range of a 4 MiB object vs the whole object: {where: (range_us, whole_us)}."""
    import mooncake_store
    size, part, reps = 4 << 20, 64 << 10, 200
    whole = np.frombuffer(store.alloc(size), dtype=np.uint8)
    piece = np.frombuffer(store.alloc(part), dtype=np.uint8)
    value = np.random.default_rng(7).integers(0, 256, size, dtype=np.uint8).tobytes()
    places = {"local": store}
    other = None
    if os.environ.get("MOONCAKE_SOCKET_2"):
        other = mooncake_store.MooncakeDistributedStore()
        check(other.connect(socket_path=os.environ["MOONCAKE_SOCKET_2"],
                            local_buffer_size=64 << 20), "connect to the second daemon")
        places["remote"] = other
    out = {}
    for where, writer in places.items():
        key = f"pybench-range-{os.getpid()}-{where}"
        cfg = mooncake_store.ReplicateConfig()
        cfg.preferred_segment = writer.get_hostname()
        check(writer.put(key, value, cfg), "put")
        src = 1 << 20
        want = value[src:src + part]
        range_t, whole_t = [], []
        for _ in range(runs):
            for i in range(reps):
                t = time.perf_counter()
                r = store.get_into_ranges([piece], [[key]], [[[0]]], [[[src]]], [[[part]]])
                range_t.append(time.perf_counter() - t)
                if r != [[[part]]]:
                    sys.exit(f"python_bench: FATAL: get_into_ranges returned {r}")
                t = time.perf_counter()
                check(store.get_into(key, whole.ctypes.data, size), "get_into", size)
                whole_t.append(time.perf_counter() - t)
            if piece.tobytes() != want:
                sys.exit("python_bench: FATAL: get_into_ranges returned wrong bytes")
        out[where] = (median_us(range_t), median_us(whole_t))
        store.remove(key, True)
    if other is not None:
        other.close()
    return out


def load_c_abi(build):
    path = os.path.join(build or ".", "libmc", "libmooncake_store.so")
    lib = ctypes.CDLL(path)
    lib.mooncake_store_create.restype = ctypes.c_void_p
    lib.mooncake_store_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64]
    lib.mooncake_store_alloc.restype = ctypes.c_void_p
    lib.mooncake_store_alloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    lib.mooncake_store_batch_get_into.argtypes = [
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t, ctypes.POINTER(ctypes.c_int64)]
    lib.mooncake_store_close.argtypes = [ctypes.c_void_p]
    lib.mooncake_store_destroy.argtypes = [ctypes.c_void_p]
    return lib


def multi_section(store, np, build, runs):
    """batch_get_into_multi_buffers of 128 x 4 KiB vs the C ABI's batch_get_into of the
    same keys: (python_us, c_us) per batch, medians."""
    size, batch, batches = 4096, 128, 40
    lib = load_c_abi(build)
    handle = lib.mooncake_store_create()
    check(lib.mooncake_store_connect(handle, os.environ["MOONCAKE_SOCKET"].encode(), 64 << 20),
          "C connect")
    keys = [f"pybench-multi-{os.getpid()}-{b}-{i}" for b in range(batches) for i in range(batch)]
    value = bytes(range(256)) * (size // 256)
    for i in range(0, len(keys), batch):
        rs = store.batch_put_from_multi_buffers(
            keys[i:i + batch], [[value]] * batch, [[size]] * batch)
        if any(r != 0 for r in rs):
            sys.exit(f"python_bench: FATAL: batch put returned {set(rs)}")
    py_bufs = [store.alloc(size) for _ in range(batch)]
    py_ptrs = [[np.frombuffer(b, dtype=np.uint8).ctypes.data] for b in py_bufs]
    sizes = [[size]] * batch
    c_bufs = (ctypes.c_void_p * batch)(*[lib.mooncake_store_alloc(handle, size)
                                         for _ in range(batch)])
    c_sizes = (ctypes.c_size_t * batch)(*([size] * batch))
    c_results = (ctypes.c_int64 * batch)()
    c_keys = [(ctypes.c_char_p * batch)(*[k.encode() for k in keys[b * batch:(b + 1) * batch]])
              for b in range(batches)]
    def python_batch(b):
        rs = store.batch_get_into_multi_buffers(keys[b * batch:(b + 1) * batch], py_ptrs, sizes)
        if rs != [size] * batch:
            sys.exit(f"python_bench: FATAL: batch_get_into_multi_buffers returned {set(rs)}")

    def c_batch(b):
        rc = lib.mooncake_store_batch_get_into(handle, c_keys[b], c_bufs, c_sizes, batch,
                                               c_results)
        if rc != 0 or any(r != size for r in c_results):
            sys.exit(f"python_bench: FATAL: C batch_get_into returned {rc}")

    # A first pass fills the daemon's read cache for every key, so that no timed batch pays
    # the master round trip of a miss; then the two alternate, each going first every
    # other batch.
    for b in range(batches):
        python_batch(b)
        c_batch(b)
    py_t, c_t = [], []
    for run in range(runs):
        for b in range(batches):
            order = ((python_batch, py_t), (c_batch, c_t))
            for fn, samples in (order if (run + b) % 2 == 0 else order[::-1]):
                t = time.perf_counter()
                fn(b)
                samples.append(time.perf_counter() - t)
    lib.mooncake_store_close(handle)
    lib.mooncake_store_destroy(handle)
    store.remove_all(True)
    return median_us(py_t), median_us(c_t)


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
    ap.add_argument("--sections", default="putget,ranges,multi",
                    help="which sections run, comma-separated (default: all three)")
    args = ap.parse_args()
    sections = set(args.sections.split(","))

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
    for run in range(args.runs if "putget" in sections else 0):
        for path, fn in (("zero-copy", zero_copy_run), ("bytes", bytes_run)):
            tag = f"pybench-{os.getpid()}-{run}-{path}"
            for op, (seconds, lat) in zip(("put", "get"), fn(store, np, size, ops, tag)):
                results.setdefault((path, op), []).append(
                    (gbps(ops, size, seconds), percentile(lat, 0.5), percentile(lat, 0.99)))
            store.remove_all(True)  # phases must not fill the segment: a cache would evict
        if args.store_bench:
            c_runs.append(c_figures(args.store_bench, args.size, args.bytes_per_phase,
                                    args.pool_size))

    if "putget" in sections:
        print_putget(args, size, ops, results, c_runs)
    if "ranges" in sections:
        print("\nranged read: a 64 KiB range of a 4 MiB object (get_into_ranges) vs the whole "
              "4 MiB (get_into), zero copy, 1 thread, median of %d x 200 reads" % args.runs)
        print(f"{'replica':<8} {'range_us':>9} {'whole_us':>9} {'whole/range':>11}")
        for where, (r_us, w_us) in ranges_section(store, np, args.runs).items():
            print(f"{where:<8} {r_us:9.1f} {w_us:9.1f} {w_us / r_us:10.1f}x")
    if "multi" in sections:
        py_us, c_us = multi_section(store, np, args.build, args.runs)
        print("\nbatch_get_into_multi_buffers: 128 keys x 4 KiB, one pool buffer each, 1 thread, "
              "median of %d x 40 batches, alternating with the C ABI" % args.runs)
        print(f"{'path':<30} {'us/batch':>9} {'GB/s':>6}")
        for name, us in (("python multi_buffers", py_us), ("C batch_get_into (ctypes)", c_us)):
            print(f"{name:<30} {us:9.1f} {128 * 4096 / us / 1e3:6.2f}")
        print(f"python vs C: {py_us / c_us * 100 - 100:+.1f} % time per batch")
    store.close()


def print_putget(args, size, ops, results, c_runs):
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


if __name__ == "__main__":
    main()
