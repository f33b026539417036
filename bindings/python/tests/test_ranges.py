"""Partial reads (issue 17, part ranges): get_into_ranges() and vLLM's layer-wise get
session calls (batch_get_session_start, batch_get_into_multi_buffer_ranges,
batch_get_session_end) read only the requested bytes, over mooncake_store_batch_get_ranges.

Every fragment shape Mooncake's get_into_ranges() takes, from a replica in the reader's own
daemon, in another daemon (MOONCAKE_SOCKET_2: CTest's python_binding_ranges_test runs two
daemons) and on an SSD tier (MC_TEST_SSD=1: python_binding_ranges_ssd_test); misses; bad
fragments; one writer with reader threads; and the daemon's /metrics byte counters, which
move by the fragments' sizes, not the object's.
"""
import os
import random
import re
import threading
import time
import urllib.request

import pytest

import mooncake_store

MB = 1 << 20
KB = 1 << 10
INVALID = -600
NOT_FOUND = -704
NOT_READY = -703


def value_of(seed, size):
    return random.Random(seed).randbytes(size)


def metric(name, **labels):
    """The sum of the daemon's (the first daemon's) samples of name whose labels match."""
    url = os.environ.get("MOONCAKE_DAEMON_ADMIN_URL")
    assert url, "MOONCAKE_DAEMON_ADMIN_URL is not set (scripts/with-cluster.sh sets it)"
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total


def second_store():
    socket = os.environ.get("MOONCAKE_SOCKET_2")
    if not socket:
        pytest.skip("needs a second daemon (MOONCAKE_SOCKET_2: python_binding_ranges_test)")
    s = mooncake_store.MooncakeDistributedStore()
    assert s.connect(socket_path=socket, local_buffer_size=64 * MB) == 0
    return s


def put_on_daemon_2(k, value):
    """Puts value under k with its one replica in the second daemon's memory."""
    other = second_store()
    cfg = mooncake_store.ReplicateConfig()
    cfg.preferred_segment = other.get_hostname()
    assert other.put(k, value, cfg) == 0
    other.close()


# ---- shapes, local replica ------------------------------------------------------------


def test_fragments_of_one_key(store, key):
    v = value_of(1, 1 * MB)
    assert store.put(key("a"), v) == 0
    dest = bytearray(256 * KB)
    frags = [(0, 4096, 0), (777, 1000, 8192), (MB - 4096, 4096, 100000), (5000, 0, 3)]
    r = store.get_into_ranges([dest], [[key("a")]], [[[f[2] for f in frags]]],
                              [[[f[0] for f in frags]]], [[[f[1] for f in frags]]])
    assert r == [[[4096, 1000, 4096, 0]]]
    for src, n, dst in frags:
        assert dest[dst:dst + n] == v[src:src + n]
    assert dest[4096:8192] == bytes(4096)  # nothing else written


def test_several_keys_and_buffers(store, key):
    va, vb = value_of(2, 64 * KB), value_of(3, 300 * KB)
    assert store.put(key("a"), va) == 0
    assert store.put(key("b"), vb) == 0
    d0, d1 = bytearray(64 * KB), store.alloc(64 * KB)  # staged, and zero copy in the pool
    r = store.get_into_ranges(
        [d0, d1], [[key("a"), key("b")], [key("b"), key("a")]],
        [[[0], [1000, 5000]], [[0], [32 * KB]]],
        [[[100], [0, 200 * KB]], [[299 * KB], [0]]],
        [[[500], [2000, 3000]], [[KB], [32 * KB]]])
    assert r == [[[500], [2000, 3000]], [[KB], [32 * KB]]]
    assert d0[0:500] == va[100:600]
    assert d0[1000:3000] == vb[0:2000]
    assert d0[5000:8000] == vb[200 * KB:200 * KB + 3000]
    assert bytes(d1[0:KB]) == vb[299 * KB:300 * KB]
    assert bytes(d1[32 * KB:64 * KB]) == va[0:32 * KB]


def test_whole_object_as_one_fragment(store, key):
    v = value_of(4, 100 * KB)
    assert store.put(key("a"), v) == 0
    dest = bytearray(100 * KB)
    assert store.get_into_ranges([dest], [[key("a")]], [[[0]]], [[[0]]], [[[100 * KB]]]) == \
        [[[100 * KB]]]
    assert dest == v


def test_registered_int_address(store, key):
    v = value_of(5, 64 * KB)
    assert store.put(key("a"), v) == 0
    buf = bytearray(16 * KB)
    addr = memoryview_address(buf)
    assert store.register_buffer(addr, len(buf)) == 0
    try:
        r = store.get_into_ranges([addr], [[key("a")]], [[[8 * KB]]], [[[KB]]], [[[8 * KB]]])
        assert r == [[[8 * KB]]]
        assert buf[8 * KB:] == v[KB:9 * KB]
    finally:
        store.unregister_buffer(addr)


def memoryview_address(buf):
    import ctypes
    return ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))


def test_more_fragments_than_one_request_holds(store, key):
    # 40000 fragments: libmc splits them over requests of at most 16384.
    n = 40000
    v = value_of(7, n)
    assert store.put(key("a"), v) == 0
    dest = bytearray(n)
    src = [(i * 7919) % n for i in range(n)]
    r = store.get_into_ranges([dest], [[key("a")]], [[list(range(n))]], [[src]], [[[1] * n]])
    assert r == [[[1] * n]]
    assert dest == bytes(v[s] for s in src)


def test_empty_fragment_lists_have_mooncakes_shape(store, key):
    assert store.put(key("a"), b"x" * 100) == 0
    dest = bytearray(100)
    # An empty fragment list is an empty result list, hit or miss; no key, no list.
    r = store.get_into_ranges([dest], [[key("a"), key("missing")]], [[[], []]], [[[], []]],
                              [[[], []]])
    assert r == [[[], []]]
    assert store.get_into_ranges([dest], [[]], [[]], [[]], [[]]) == [[]]
    assert store.get_into_ranges([], [], [], [], []) == []


def test_missing_key(store, key):
    dest = bytearray(4096)
    r = store.get_into_ranges([dest], [[key("missing")]], [[[0, 100]]], [[[0, 0]]],
                              [[[10, 10]]])
    assert r == [[[NOT_FOUND, NOT_FOUND]]]


def test_bad_fragments(store, key):
    v = value_of(6, 4096)
    assert store.put(key("a"), v) == 0
    dest = bytearray(4096)
    r = store.get_into_ranges(
        [dest], [[key("a")]],
        [[[0, 0, 4000, 0, 0]]],          # dst
        [[[4000, 4097, 0, 0, 2 ** 63]]],  # src
        [[[200, 0, 200, 4096, 1]]])      # length
    # past the object, a start past it, past the buffer, the whole object, an overflow
    assert r == [[[INVALID, INVALID, INVALID, 4096, INVALID]]]
    assert dest == v


def test_malformed_plans_are_refused_in_mooncakes_shape(store, key):
    assert store.put(key("a"), b"y" * 64) == 0
    dest = bytearray(64)
    # Lists of different lengths for one key: that key's entries stay -600.
    r = store.get_into_ranges([dest], [[key("a")]], [[[0, 1]]], [[[0]]], [[[1, 1]]])
    assert r == [[[INVALID, INVALID]]]
    # Top-level lengths that differ: everything -600, shaped by buffers, keys and dsts.
    r = store.get_into_ranges([dest, dest], [[key("a")]], [[[0]]], [[[0]]], [[[1]]])
    assert r == [[[INVALID]], [[INVALID]]]
    # A bare int address the binding knows no size of.
    r = store.get_into_ranges([12345678], [[key("a")]], [[[0]]], [[[0]]], [[[1]]])
    assert r == [[[INVALID]]]


# ---- session calls (vLLM's layer-wise path) ------------------------------------------


def test_get_session_layer_by_layer(store, key):
    layers, page = 4, 16 * KB
    keys = [key("p%d" % i) for i in range(3)]
    values = [value_of(10 + i, layers * page) for i in range(3)]
    for k, v in zip(keys, values):
        assert store.put(k, v) == 0
    assert store.batch_get_session_start(keys) == [0, 0, 0]
    dest = [bytearray(layers * page) for _ in keys]
    views = [memoryview(d) for d in dest]
    for layer in range(layers):
        ptrs = [[views[i][layer * page:(layer + 1) * page]] for i in range(3)]
        sizes = [[page]] * 3
        offsets = [[layer * page]] * 3
        assert store.batch_get_into_multi_buffer_ranges(keys, ptrs, sizes, offsets) == [page] * 3
    assert [bytes(d) for d in dest] == values
    assert store.batch_get_session_end(keys) == 0
    # Without a session: -600, as Mooncake.
    assert store.batch_get_into_multi_buffer_ranges(keys[:1], [[views[0][:page]]], [[page]],
                                                    [[0]]) == [INVALID]


def test_get_session_codes(store, key):
    assert store.batch_get_session_start([]) == []
    assert store.put(key("a"), b"z" * 8192) == 0
    assert store.batch_get_session_start([key("a"), key("missing")]) == [0, NOT_FOUND]
    buf = bytearray(8192)
    mv = memoryview(buf)
    r = store.batch_get_into_multi_buffer_ranges(
        [key("a"), key("missing"), key("a")],
        [[mv[0:100], mv[100:300]], [mv[0:1]], [mv[0:10]]],
        [[100, 200], [1], [10, 10]],   # the third key's lists differ in length
        [[0, 7992], [0], [0]])
    assert r == [300, INVALID, INVALID]
    # A fragment past the object: its code for the key.
    assert store.batch_get_into_multi_buffer_ranges([key("a")], [[mv[0:300]]], [[300]],
                                                    [[8000]]) == [INVALID]
    # Several buffers for one key, and a key with no buffer at all.
    assert store.batch_get_into_multi_buffer_ranges([key("a"), key("a")],
                                                    [[mv[0:10], mv[10:20]], []],
                                                    [[10, 10], []], [[0, 10], []]) == [20, 0]
    assert bytes(buf[0:20]) == b"z" * 20
    assert store.batch_get_session_end([key("a"), key("missing")]) == 0


# ---- only the range moves ------------------------------------------------------------


def test_only_the_range_moves_locally(store, key):
    v = value_of(20, 4 * MB)
    here = mooncake_store.ReplicateConfig()
    here.preferred_segment = store.get_hostname()  # the replica in the reader's daemon
    assert store.put(key("big"), v, here) == 0
    dest = store.alloc(64 * KB)
    before = metric("mooncake_transfer_read_bytes_total", tier="local_memory")
    r = store.get_into_ranges([dest], [[key("big")]], [[[0]]], [[[2 * MB]]], [[[64 * KB]]])
    assert r == [[[64 * KB]]]
    after = metric("mooncake_transfer_read_bytes_total", tier="local_memory")
    assert after - before == 64 * KB
    assert bytes(dest) == v[2 * MB:2 * MB + 64 * KB]


def test_remote_replica_fragments(store, key):
    v = value_of(21, 4 * MB)
    put_on_daemon_2(key("remote"), v)
    desc = store.get_replica_desc(key("remote"))
    assert [r.is_memory_replica() for r in desc] == [True]
    assert desc[0].location != store.get_hostname(), "the replica must be on the other daemon"
    dest = bytearray(200 * KB)
    read_before = metric("mooncake_transfer_read_bytes_total", tier="remote_memory")
    wire_before = metric("mooncake_daemon_transfer_bytes_total", kind="read")
    r = store.get_into_ranges([dest], [[key("remote")]], [[[0, 64 * KB, 128 * KB]]],
                              [[[3 * MB, 17, 4 * MB - 64 * KB]]],
                              [[[64 * KB, 64 * KB, 64 * KB]]])
    assert r == [[[64 * KB] * 3]]
    assert dest[0:64 * KB] == v[3 * MB:3 * MB + 64 * KB]
    assert dest[64 * KB:128 * KB] == v[17:17 + 64 * KB]
    assert dest[128 * KB:192 * KB] == v[4 * MB - 64 * KB:]
    # Only the fragments crossed the transfer port.
    assert metric("mooncake_transfer_read_bytes_total", tier="remote_memory") - read_before == \
        3 * 64 * KB
    assert metric("mooncake_daemon_transfer_bytes_total", kind="read") - wire_before == \
        3 * 64 * KB


def test_remote_replica_session(store, key):
    v = value_of(22, 256 * KB)
    put_on_daemon_2(key("remote-s"), v)
    assert store.batch_get_session_start([key("remote-s")]) == [0]
    dest = bytearray(256 * KB)
    mv = memoryview(dest)
    for layer in range(4):
        part = mv[layer * 64 * KB:(layer + 1) * 64 * KB]
        assert store.batch_get_into_multi_buffer_ranges(
            [key("remote-s")], [[part]], [[64 * KB]], [[layer * 64 * KB]]) == [64 * KB]
    assert dest == v
    store.batch_get_session_end([key("remote-s")])


# ---- one writer, N readers ----------------------------------------------------------


def test_one_writer_many_readers(store, key):
    count, size, readers = 24, 64 * KB, 4
    keys = [key("w%d" % i) for i in range(count)]
    errors = []

    def writer():
        for i, k in enumerate(keys):
            if store.put(k, value_of(100 + i, size)) != 0:
                errors.append("put %s" % k)

    def reader(r):
        deadline = time.monotonic() + 60
        done = set()
        dest = bytearray(3 * KB)
        while len(done) < count and time.monotonic() < deadline:
            for i, k in enumerate(keys):
                if i in done:
                    continue
                src = [(r * 997 + 13 * i) % (size - KB), 0, size - KB]
                got = store.get_into_ranges([dest], [[k]], [[[0, KB, 2 * KB]]], [[src]],
                                            [[[KB, KB, KB]]])
                if got in ([[[NOT_FOUND] * 3]], [[[NOT_READY] * 3]]):
                    continue  # not written yet, or being written
                v = value_of(100 + i, size)
                if got != [[[KB] * 3]] or any(dest[j * KB:(j + 1) * KB] != v[s:s + KB]
                                              for j, s in enumerate(src)):
                    errors.append("reader %d key %d: %r" % (r, i, got))
                done.add(i)
        if len(done) < count:
            errors.append("reader %d saw %d of %d keys" % (r, len(done), count))

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader, args=(r,)) for r in range(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ---- SSD replica (MC_TEST_SSD=1) ----------------------------------------------------

ssd = pytest.mark.skipif(
    os.environ.get("MC_TEST_SSD") != "1",
    reason="needs a cluster with an SSD tier, --enable_offload, a small segment, and "
           "MC_TEST_SSD=1 (CTest's python_binding_ranges_ssd_test)")


def disk_only_keys(s, keys, timeout=30.0):
    """The keys whose every replica is a disk one, once some are (memory filled up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = []
        for k in keys:
            desc = s.get_replica_desc(k)
            if desc and all(r.is_disk_replica() for r in desc):
                found.append(k)
        if found:
            return found
        time.sleep(0.2)
    return []


@ssd
def test_ssd_replica_fragments(store, key):
    # More than the daemon's 32 MB segment: offloaded at put, the oldest memory replicas
    # are evicted and their disk replicas remain.
    size = 4 * MB
    keys = [key("ssd%d" % i) for i in range(16)]
    for i, k in enumerate(keys):
        assert store.put(k, value_of(200 + i, size)) == 0
        time.sleep(0.05)
    disk = disk_only_keys(store, keys)
    assert disk, "no object is on the SSD alone"
    k = disk[0]
    v = value_of(200 + keys.index(k), size)
    dest = bytearray(256 * KB)
    before = metric("mooncake_transfer_read_bytes_total", tier="local_disk")
    disk_reads = store.get_offload_rpc_read_count()
    r = store.get_into_ranges([dest], [[k]], [[[0, 64 * KB, 128 * KB]]],
                              [[[3 * MB + 5, 0, size - 100]]], [[[64 * KB, 64 * KB, 100]]])
    assert r == [[[64 * KB, 64 * KB, 100]]]
    # Mooncake's count of reads served from an SSD: one per range read there.
    assert store.get_offload_rpc_read_count() - disk_reads == 3
    assert dest[0:64 * KB] == v[3 * MB + 5:3 * MB + 5 + 64 * KB]
    assert dest[64 * KB:128 * KB] == v[0:64 * KB]
    assert dest[128 * KB:128 * KB + 100] == v[size - 100:]
    assert metric("mooncake_transfer_read_bytes_total", tier="local_disk") - before == \
        2 * 64 * KB + 100
    # Past the object, from the disk replica too.
    assert store.get_into_ranges([dest], [[k]], [[[0]]], [[[size - 10]]], [[[11]]]) == \
        [[[INVALID]]]
