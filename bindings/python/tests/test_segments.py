"""Mooncake's segment calls, replica clearing and standalone mode (issue 17, part
segments): batch_remove, batch_replica_clear, mount_segment and its family, setup_dummy,
alloc_from_mem_pool, MooncakeHostMemAllocator and BufferPool, with Mooncake's argument
names, defaults and return shapes (mooncake-integration/store/store_py.cpp).

Every test lends memory of its own (setup with a global_segment_size), so the module runs
whatever the daemon's own --global_segment_size: CTest runs it in the default cluster and
again with `scripts/with-cluster.sh --segment 0` (python_segments_no_daemon_memory_test),
which is how close() and a second setup() are checked both when the daemon lends memory of
its own (the handle's objects move there at close) and when it lends none (they go).
"""
import ctypes
import os
import threading

import numpy as np
import pytest

import mooncake_store
from mooncake_store import MooncakeDistributedStore

INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704
SEGMENT_NOT_FOUND = -101
NOT_SUPPORTED = -1012
FILE_OPEN_FAIL = -1101
POOL = 32 << 20


def lending_store(master, segment="64MB", pool=POOL):
    s = MooncakeDistributedStore()
    assert s.setup("localhost", "P2PHANDSHAKE", segment, pool, "tcp", "", master) == 0
    return s


@pytest.fixture
def lender(master):
    s = lending_store(master)
    yield s
    assert s.close() == 0


# ---- batch_remove ----


def test_batch_remove(lender, key):
    assert lender.put(key("a"), b"1") == 0
    assert lender.put(key("b"), b"2") == 0
    assert lender.batch_remove([key("a"), key("missing"), "", key("b")]) == [
        0, OBJECT_NOT_FOUND, INVALID_PARAMS, 0]
    assert lender.is_exist(key("a")) == 0
    assert lender.batch_remove([]) == []
    # Without force a read lease keeps the object; with force it goes.
    assert lender.put(key("leased"), b"3") == 0
    assert lender.get(key("leased")) == b"3"
    assert lender.batch_remove([key("leased")]) == [-706]
    assert lender.batch_remove(keys=[key("leased")], force=True) == [0]
    with pytest.raises(TypeError):
        lender.batch_remove(key("a"), "no")
    assert MooncakeDistributedStore().batch_remove([key("a")]) == [INVALID_PARAMS]


# ---- batch_replica_clear ----


def test_batch_replica_clear_skips_leased_keys(lender, key):
    """A read lease keeps a key, and so does a put a moment ago (for one lease: Mooncake's
    test of clear expects it; docs/mooncake-api.md, "leases"). Clearing once the lease has
    run out is checked on a short lease by tests/integration/c_api_segments_test.c."""
    assert lender.put(key("idle"), b"i") == 0
    assert lender.put(key("read"), b"r") == 0
    assert lender.get(key("read")) == b"r"  # its read lease runs
    cleared = lender.batch_replica_clear([key("idle"), key("read"), key("missing"), ""])
    assert cleared == []
    assert lender.is_exist(key("idle")) == 1
    assert lender.get(key("read")) == b"r"
    assert lender.batch_replica_clear([]) == []


def test_batch_replica_clear_on_one_segment(lender, key):
    """The store's name names the memory it lends; other names hold nothing of the key."""
    here = lender.get_hostname()
    assert here.startswith("localhost:")
    config = mooncake_store.ReplicateConfig()
    config.preferred_segment = here
    assert lender.put(key("a"), b"a", config) == 0
    [r] = lender.get_replica_desc(key("a"))
    assert r.location == here
    for other in ("127.0.0.1:1", os.environ["MOONCAKE_HOSTNAME"]):
        assert lender.batch_replica_clear([key("a")], other) == []
        assert lender.is_exist(key("a")) == 1


def test_batch_replica_clear_bad_arguments(lender, key):
    with pytest.raises(TypeError):
        lender.batch_replica_clear(key("a"), 5)
    assert lender.batch_replica_clear([key("a")], "h" * 300) == []  # no such name: refused
    assert lender.batch_replica_clear([key("a")], "a\0b") == []
    assert MooncakeDistributedStore().batch_replica_clear([key("a")]) == []


def test_batch_replica_clear_while_readers_read(lender, key):
    """One writer puts and clears; readers see the value or a miss, never other bytes."""
    keys = [key("c%d" % i) for i in range(40)]
    values = {k: (k * 50).encode() for k in keys}
    errors = []
    done = threading.Event()

    def reader():
        while not done.is_set():
            for k in keys:
                got = lender.get(k)
                if got not in (b"", values[k]):
                    errors.append((k, got[:16]))

    readers = [threading.Thread(target=reader) for _ in range(4)]
    for t in readers:
        t.start()
    try:
        for _ in range(3):
            for k in keys:
                assert lender.put(k, values[k]) == 0
            lender.batch_replica_clear(keys)  # the leased ones stay
            lender.batch_remove(keys, force=True)
    finally:
        done.set()
        for t in readers:
            t.join()
    assert errors == []


# ---- segments ----


def test_mount_segment_lends_pool_memory(lender, key):
    address = lender.alloc_from_mem_pool(4 << 20)
    assert address != 0
    result = lender.mount_segment(address, 4 << 20)
    assert result["ret"] == 0, mooncake_store.strerror(result["ret"])
    assert len(result["segment_ids"]) == 1 and isinstance(result["segment_ids"][0], str)
    assert lender.put(key("x"), b"x" * 4096) == 0
    assert lender.unmount_segment(result["segment_ids"]) == 0
    assert lender.get(key("x")) == b"x" * 4096  # wherever it lived, it is kept
    assert lender.unmount_segment(result["segment_ids"]) == SEGMENT_NOT_FOUND  # once
    # An offset into a buffer of the pool.
    view = lender.alloc(2 << 20)
    result = lender.mount_segment(view, 1 << 20, offset=1 << 20, protocol="tcp", location="")
    assert result["ret"] == 0
    assert lender.unmount_segment(result["segment_ids"], grace_period_seconds=5) == 0


def test_mount_segment_refusals(lender, tmp_path):
    outside = np.zeros(1 << 20, dtype=np.uint8)
    assert lender.mount_segment(outside.ctypes.data, outside.nbytes) == {
        "ret": INVALID_PARAMS, "segment_ids": []}
    view = lender.alloc(1 << 20)
    assert lender.mount_segment(view, 2 << 20)["ret"] == INVALID_PARAMS  # past its end
    assert lender.mount_segment(view, 1 << 20, offset=1)["ret"] == INVALID_PARAMS
    assert lender.mount_segment(view, 4096, protocol="nvmeof")["ret"] == INVALID_PARAMS
    assert lender.mount_segment(str(tmp_path / "none"), 4096)["ret"] == FILE_OPEN_FAIL
    f = tmp_path / "segment"
    f.write_bytes(b"\0" * 8192)
    assert lender.mount_segment(str(f), 8192, 1)["ret"] == INVALID_PARAMS  # not page-aligned
    assert lender.mount_segment(str(f), 16384)["ret"] == INVALID_PARAMS  # past the file's end
    # A file that can shrink under the daemon: refused (a memfd is lent: test_tasks.py).
    assert lender.mount_segment(str(f), 4096)["ret"] == NOT_SUPPORTED
    with pytest.raises(TypeError):
        lender.mount_segment(view, -1)
    assert lender.unmount_segment(["not-an-id"]) == INVALID_PARAMS
    assert lender.unmount_segment(["12345"]) == SEGMENT_NOT_FOUND
    assert lender.unmount_segment([]) == 0
    assert MooncakeDistributedStore().mount_segment(view, 4096)["ret"] == INVALID_PARAMS


def test_allocate_and_mount_segment(lender, key):
    result = lender.allocate_and_mount_segment(8 << 20)
    assert result["ret"] == 0
    assert result["allocated_size"] == 8 << 20
    ids = result["segment_ids"]
    assert len(ids) == 1
    assert lender.put(key("y"), b"y" * 1000) == 0
    assert lender.unmount_and_free_segment(ids) == 0
    assert lender.get(key("y")) == b"y" * 1000
    assert lender.unmount_and_free_segment(ids, grace_period_seconds=0) == SEGMENT_NOT_FOUND
    assert lender.allocate_and_mount_segment(0) == {
        "ret": INVALID_PARAMS, "segment_ids": [], "allocated_size": 0}
    assert lender.allocate_and_mount_segment(4096, "carrier-pigeon")["ret"] == INVALID_PARAMS
    with pytest.raises(TypeError):
        lender.allocate_and_mount_segment(-1)
    # Another store's segment is not this one's to unmount.
    result = lender.allocate_and_mount_segment(1 << 20, protocol="tcp", location="cpu:0")
    other = lending_store(os.environ["MOONCAKE_MASTER"], segment=0)
    assert other.unmount_and_free_segment(result["segment_ids"]) == SEGMENT_NOT_FOUND
    assert other.close() == 0
    assert lender.unmount_and_free_segment(result["segment_ids"]) == 0


@pytest.mark.skipif(os.environ.get("MC_TEST_SSD") == "1", reason="the daemon has an SSD tier")
def test_unmount_local_disk_segment_without_ssd(lender):
    assert lender.unmount_local_disk_segment() == 0
    assert lender.unmount_local_disk_segment(grace_period_seconds=3) == 0
    assert MooncakeDistributedStore().unmount_local_disk_segment() == INVALID_PARAMS


# ---- close and setup again ----


def test_close_and_setup_again(master, key):
    """close() drains the lent segment: with daemon memory of its own the objects move there,
    without any they go with it. Either way the next setup() lends again and works."""
    s = MooncakeDistributedStore()
    for round in range(3):
        assert s.setup("localhost", "P2PHANDSHAKE", "32MB", "8MB", "tcp", "", master) == 0
        mounted = s.allocate_and_mount_segment(4 << 20)  # left mounted: close takes it too
        assert mounted["ret"] == 0
        assert s.put(key("r%d" % round), b"v" * 4096) == 0
        assert s.get(key("r%d" % round)) == b"v" * 4096
        assert s.close() == 0
        assert s.close() == 0
    probe = MooncakeDistributedStore()
    assert probe.connect(local_buffer_size=1 << 20) == 0
    present = [probe.get_size(key("r%d" % r)) for r in range(3)]
    daemon_lends = probe.put(key("probe"), b"p") == 0
    assert probe.close() == 0
    assert present == ([4096] * 3 if daemon_lends else [OBJECT_NOT_FOUND] * 3)


# ---- standalone mode ----


def test_setup_dummy(master, key):
    host = os.environ["MOONCAKE_HOSTNAME"]
    s = MooncakeDistributedStore()
    with pytest.warns(RuntimeWarning, match="not this host's daemon"):
        assert s.setup_dummy(1 << 30, 16 << 20, "127.0.0.1:1") == INVALID_PARAMS
    assert s.health_check() == 1
    assert s.setup_dummy(mem_pool_size=0, local_buffer_size=16 << 20, server_address=host) == 0
    address = s.alloc_from_mem_pool(1 << 20)
    assert address != 0
    assert s.alloc_from_mem_pool(1 << 30) == 0  # no room
    assert s.alloc_from_mem_pool(0) == 0
    s2 = lending_store(master)  # somewhere for the object to live whatever the daemon has
    arr = np.ctypeslib.as_array((ctypes.c_uint8 * (1 << 20)).from_address(address))
    assert s2.put(key("d"), b"\7" * (1 << 20)) == 0
    assert s.get_into(key("d"), address, 1 << 20) == 1 << 20  # zero-copy into the pool
    assert (arr == 7).all()
    assert s.close() == 0
    assert s2.close() == 0
    assert s.setup_dummy(0, 16 << 20, "") == 0
    assert s.close() == 0
    with pytest.raises(TypeError):
        s.setup_dummy(0, 16 << 20)


def test_host_mem_allocator(lender, key):
    alloc = mooncake_store.MooncakeHostMemAllocator(lender)
    p = alloc.alloc(1 << 20)
    assert p != 0
    arr = np.ctypeslib.as_array((ctypes.c_uint8 * (1 << 20)).from_address(p))
    arr[:] = 9
    assert lender.put_from(key("h"), p, 1 << 20) == 0
    arr[:] = 0
    assert lender.get_into(key("h"), p, 1 << 20) == 1 << 20
    assert (arr == 9).all()
    assert alloc.free(p) == 0
    assert alloc.free(p) == INVALID_PARAMS
    assert alloc.alloc(0) == 0
    assert alloc.alloc(1 << 40) == 0  # more than the pool
    private = mooncake_store.MooncakeHostMemAllocator()  # Mooncake's form: no store
    q = private.alloc(4096)
    assert q != 0 and q % 4096 == 0
    assert lender.put_from(key("q"), q, 4096) == 0  # staged through the pool
    assert private.free(q) == 0
    assert private.free(12345) == INVALID_PARAMS


def test_buffer_pool(lender, key):
    pool = mooncake_store.BufferPool(lender, max_bytes=0, block_on_exhaustion=False)
    assert mooncake_store.RegisteredBufferPool is mooncake_store.BufferPool
    with pool.acquire(1 << 20) as lease:
        assert lease.size == 1 << 20 and lease.ptr != 0
        view = lease.buffer
        view[:] = b"z" * (1 << 20)
        with pytest.raises(RuntimeError, match="exported views"):
            lease.release()
        del view
        assert lender.put_from(key("lease"), lease.ptr, lease.size) == 0
    with pytest.raises(RuntimeError, match="closed"):
        lease.ptr
    big = pool.buffer(24 << 20)  # most of the pool...
    over = pool.acquire(16 << 20)  # ...so this is overflow memory, registered
    assert lender.get_into(key("lease"), over.ptr, over.size) == 1 << 20
    with pytest.raises(RuntimeError, match="exhausted"):
        pool.acquire(POOL)  # past max_bytes (twice the pool)
    with pytest.raises(RuntimeError, match="exceeds"):
        pool.acquire(4 * POOL)
    with pytest.raises(RuntimeError, match="timed out"):
        pool.acquire(POOL, block=True, timeout=0.05)
    with pytest.raises(RuntimeError, match="active leases"):
        pool.close()
    big.release()
    over.release()
    pool.prewarm(4096, 2)
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.acquire(1)
    with pytest.raises(RuntimeError, match="alignment"):
        mooncake_store.BufferPool(lender, alignment=3)
    with pytest.raises(RuntimeError, match="local buffer"):
        mooncake_store.BufferPool(MooncakeDistributedStore())


def test_buffer_pool_threads(lender):
    """Threads leasing and releasing at once: a blocked acquire wakes on a release, and no
    lease's bytes are another's."""
    pool = mooncake_store.BufferPool(lender, max_bytes=2 * POOL, max_regions=3)
    errors = []

    def worker(n):
        for i in range(50):
            with pool.acquire(256 << 10, timeout=30) as lease:
                view = lease.buffer
                view[:] = bytes([n]) * len(view)
                if bytes(view[:64]) != bytes([n]) * 64:
                    errors.append(n)
                del view

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    pool.close()
