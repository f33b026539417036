"""One store object shared by many threads, and the GIL released around the C calls."""
import sys
import threading
import time

import numpy as np

THREADS = 16
ROUNDS = 40


def test_sixteen_threads_share_one_store(store, key):
    errors = []
    start = threading.Barrier(THREADS)

    def worker(t):
        try:
            rng = np.random.default_rng(t)
            src = np.frombuffer(store.alloc(64 << 10), dtype=np.uint8)
            dst = np.frombuffer(store.alloc(64 << 10), dtype=np.uint8)
            start.wait()
            for i in range(ROUNDS):
                size = int(rng.integers(1, 64 << 10))
                src[:size] = rng.integers(0, 255, size, dtype=np.uint8)
                k = key(f"t{t}-{i}")
                # zero-copy path
                assert store.put_from(k, src.ctypes.data, size) == 0
                assert store.get_into(k, dst.ctypes.data, dst.nbytes) == size
                assert np.array_equal(src[:size], dst[:size])
                # copying path, batch forms, queries
                assert store.put(k + "-b", src[:size]) == 0
                assert store.get(k + "-b") == src[:size].tobytes()
                assert store.batch_is_exist([k, k + "-b", k + "-none"]) == [1, 1, 0]
                h = store.get_buffer(k)
                assert h is not None and bytes(h) == src[:size].tobytes()
                assert store.upsert(k, b"v%d" % i) == 0
                assert store.get_batch([k]) == [b"v%d" % i]
                assert store.remove(k + "-b", force=True) == 0
        except Exception as e:  # reported below; a failing thread must fail the test
            errors.append((t, repr(e)))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


def test_data_path_releases_the_gil(store, key):
    """Another Python thread runs while this one is inside put/get_into of large values.

    Forced GIL switches are made rare (a 1 s switch interval) and the other thread yields
    the GIL on every iteration (time.sleep(0)). So it can only record timestamps inside a
    call's window if the call released the GIL: held, the window would contain none."""
    value = np.ones(32 << 20, dtype=np.uint8)
    out = np.empty_like(value)
    stamps, windows = [], []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0)

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        for i in range(3):
            t0 = time.perf_counter()
            assert store.put(key(str(i)), value) == 0
            t1 = time.perf_counter()
            assert store.get_into(key(str(i)), out.ctypes.data, out.nbytes) == out.nbytes
            t2 = time.perf_counter()
            windows += [(t0, t1), (t1, t2)]
    finally:
        stop.set()
        spinner.join()
        sys.setswitchinterval(old_interval)
    inside = sum(1 for t in stamps if any(a < t < b for a, b in windows))
    assert inside >= 10, (inside, len(stamps))


def test_reads_during_upserts_of_changing_size(store, key):
    """get/get_buffer read the size first, then the value; an upsert in between that makes
    the value larger is retried, so readers always see one whole value."""
    values = [bytes([65 + i]) * size for i, size in enumerate([1000, 70000, 5, 300000])]
    assert store.upsert(key(), values[0]) == 0
    stop = threading.Event()
    seen, errors = set(), []

    def writer():
        i = 0
        while not stop.is_set() and i < 2000:  # bounds the data put (a few hundred MB at most)
            i += 1
            if store.upsert(key(), values[i % len(values)]) != 0:
                errors.append("upsert failed")

    def reader():
        for _ in range(300):
            for got in (store.get(key()), bytes(store.get_buffer(key()) or b"")):
                if got not in values:
                    errors.append(f"read {len(got)} bytes that are no whole value")
                seen.add(got[:1])

    threads = [threading.Thread(target=writer)]
    threads += [threading.Thread(target=reader) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads[1:]:
        th.join()
    stop.set()
    threads[0].join()
    assert errors == []
    assert len(seen) > 1  # the readers really raced the writer
