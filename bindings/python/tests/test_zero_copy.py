"""The zero-copy API: alloc, put_from/get_into and their batch and multi-buffer forms,
get_into_ranges, get_buffer, register_buffer — with numpy."""
import ctypes

import numpy as np
import pytest

INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704


def pool_array(store, n, dtype=np.uint8):
    """A numpy array over pool memory (no copy)."""
    return np.frombuffer(store.alloc(n * np.dtype(dtype).itemsize), dtype=dtype)


def test_alloc_is_writable_pool_memory_numpy_wraps_without_copy(store):
    view = store.alloc(1 << 20)
    assert isinstance(view, memoryview)
    assert not view.readonly and view.nbytes == 1 << 20 and view.format == "B"
    arr = np.frombuffer(view, dtype=np.float32)
    arr[:] = 1.5
    assert view[:4].tobytes() == np.float32(1.5).tobytes()  # same memory, no copy
    assert np.shares_memory(arr, np.frombuffer(view, dtype=np.uint8))
    with pytest.raises(ValueError):
        store.alloc(0)
    with pytest.raises(MemoryError):
        store.alloc(1 << 40)


def test_alloc_memory_returns_to_the_pool(store):
    # The fixture's pool is 64 MiB: 64 x 8 MiB only fits if each block is freed when its
    # last view goes away.
    for _ in range(64):
        arr = pool_array(store, 8 << 20)
        arr[0] = 1
        del arr


def test_numpy_round_trip_through_pool_memory(store, key):
    src = pool_array(store, 256 * 1024, np.float32)
    src[:] = np.random.default_rng(0).standard_normal(src.size, dtype=np.float32)
    assert store.put_from(key(), src.ctypes.data, src.nbytes) == 0
    dst = pool_array(store, src.size, np.float32)
    assert store.get_into(key(), dst.ctypes.data, dst.nbytes) == src.nbytes
    assert np.array_equal(src, dst)
    # Also into ordinary numpy memory (staged by the library).
    plain = np.empty_like(src)
    assert store.get_into(key(), plain.ctypes.data, plain.nbytes) == src.nbytes
    assert np.array_equal(src, plain)


def test_put_from_plain_numpy_memory(store, key):
    src = np.arange(1000, dtype=np.int64)
    assert store.put_from(key(), src.ctypes.data, src.nbytes) == 0
    assert np.array_equal(np.frombuffer(store.get(key()), dtype=np.int64), src)


def test_get_into_codes(store, key):
    buf = pool_array(store, 100)
    assert store.get_into(key("missing"), buf.ctypes.data, buf.nbytes) == OBJECT_NOT_FOUND
    assert store.put(key(), b"x" * 100) == 0
    assert store.get_into(key(), buf.ctypes.data, 99) == INVALID_PARAMS  # too small
    assert store.get_into(key(), buf.ctypes.data, 100) == 100


def test_buffer_objects_may_stand_for_addresses(store, key):
    # An extension: a memoryview or array instead of an int address; sizes are checked.
    view = store.alloc(64)
    view[:] = b"z" * 64
    assert store.put_from(key(), view, 64) == 0
    assert store.put_from(key("big"), view, 65) == INVALID_PARAMS
    out = bytearray(64)
    assert store.get_into(key(), out, 64) == 64 and bytes(out) == b"z" * 64
    assert store.get_into(key(), out, 65) == INVALID_PARAMS
    with pytest.raises(BufferError):
        store.get_into(key(), b"read-only", 9)
    with pytest.raises(TypeError):
        store.get_into(key(), -1, 10)
    with pytest.raises(TypeError):
        store.get_into(key(), "not an address", 10)
    # numpy integer addresses are ints too
    arr = np.zeros(64, np.uint8)
    assert store.get_into(key(), np.uint64(arr.ctypes.data), 64) == 64 and arr[0] == ord("z")


def test_upsert_from(store, key):
    a = pool_array(store, 1000)
    a[:] = 1
    assert store.upsert_from(key(), a.ctypes.data, a.nbytes) == 0
    a[:] = 2
    assert store.put_from(key(), a.ctypes.data, a.nbytes) == 0  # put keeps the old value
    assert store.get(key()) == b"\1" * 1000
    assert store.upsert_from(key(), a.ctypes.data, 500) == 0
    assert store.get(key()) == b"\2" * 500


def test_register_buffer(store, key):
    buf = np.zeros(1 << 16, dtype=np.uint8)
    ptr = buf.ctypes.data
    assert store.register_buffer(ptr, buf.nbytes) == 0
    assert store.register_buffer(ptr + 100, 10) == INVALID_PARAMS  # overlaps
    buf[:] = 9
    assert store.put_from(key(), ptr, buf.nbytes) == 0
    assert store.put_from(key("past"), ptr + 10, buf.nbytes) == INVALID_PARAMS  # runs past the end
    assert store.unregister_buffer(ptr) == 0
    assert store.unregister_buffer(ptr) == INVALID_PARAMS


def test_batch_put_from_and_batch_get_into(store, key):
    n, size = 8, 64 << 10
    keys = [key(str(i)) for i in range(n)]
    srcs = [pool_array(store, size) for _ in range(n)]
    for i, a in enumerate(srcs):
        a[:] = i
    assert store.batch_put_from(keys, [a.ctypes.data for a in srcs], [size] * n) == [0] * n
    dsts = [np.empty(size, np.uint8) for _ in range(n)]
    ptrs = [d.ctypes.data for d in dsts] + [dsts[0].ctypes.data]
    got = store.batch_get_into(keys + [key("missing")], ptrs, [size] * (n + 1))
    assert got == [size] * n + [OBJECT_NOT_FOUND]
    assert all((d == i).all() for i, d in enumerate(dsts))


def test_batch_forms_empty_and_mismatched(store, key):
    assert store.batch_put_from([], [], []) == []
    assert store.batch_get_into([], [], []) == []
    buf = store.alloc(16)
    assert store.batch_put_from([key("a"), key("b")], [buf], [16]) == [INVALID_PARAMS] * 2
    assert store.batch_get_into([key("a"), key("b")], [buf, buf], [16]) == [INVALID_PARAMS] * 2
    assert store.batch_put_from_multi_buffers([key("a")], [], []) == [INVALID_PARAMS]
    assert store.batch_get_into_multi_buffers([key("a"), key("b")], [[buf]], [[16]]) == \
        [INVALID_PARAMS] * 2
    assert store.batch_put_from_multi_buffers([], [], []) == []
    assert store.batch_get_into_multi_buffers([], [], []) == []


def test_multi_buffers_round_trip(store, key):
    # Like vLLM's connector: each key's value is a run of per-layer blocks.
    layers, block = 6, 4096
    keys = [key(f"blk{i}") for i in range(3)]
    src = pool_array(store, len(keys) * layers * block)
    src[:] = np.arange(src.size) % 251
    def addresses(base):
        return [[base + (k * layers + j) * block for j in range(layers)] for k in range(len(keys))]

    ptrs = addresses(src.ctypes.data)
    sizes = [[block] * layers for _ in keys]
    assert store.batch_put_from_multi_buffers(keys, ptrs, sizes) == [0, 0, 0]
    assert store.get(keys[1]) == src[layers * block:2 * layers * block].tobytes()

    dst = np.zeros_like(src)
    dptrs = addresses(dst.ctypes.data)
    assert store.batch_get_into_multi_buffers(keys, dptrs, sizes, True) == [layers * block] * 3
    assert np.array_equal(src, dst)

    # A value shorter than its buffers fills them in order; one longer is refused.
    assert store.put(key("short"), b"abcdef") == 0
    a, b = bytearray(4), bytearray(4)
    assert store.batch_get_into_multi_buffers([key("short")], [[a, b]], [[4, 4]]) == [6]
    assert bytes(a) == b"abcd" and bytes(b[:2]) == b"ef"
    assert store.batch_get_into_multi_buffers([key("short")], [[a, b]], [[2, 2]]) == \
        [INVALID_PARAMS]
    # A per-key shape mismatch only fails that key.
    assert store.batch_put_from_multi_buffers([key("m1"), key("m2")], [[a], [a, b]],
                                              [[4], [4]]) == [0, INVALID_PARAMS]


def test_get_into_ranges_documented_example(store):
    # Mooncake's documentation example, with registered ctypes buffers.
    import uuid
    k1, k2 = "rng-" + uuid.uuid4().hex, "rng-" + uuid.uuid4().hex
    assert store.put(k1, bytes(range(40))) == 0
    assert store.put(k2, bytes(range(100, 140))) == 0
    buffer0 = (ctypes.c_ubyte * 32)()
    buffer1 = (ctypes.c_ubyte * 32)()
    p0, p1 = ctypes.addressof(buffer0), ctypes.addressof(buffer1)
    assert store.register_buffer(p0, 32) == 0
    assert store.register_buffer(p1, 32) == 0
    results = store.get_into_ranges(
        [p0, p1],
        [[k1, k2], [k2, k1]],
        [[[0, 20], [8]], [[4], [16]]],
        [[[1, 30], [2]], [[0], [10]]],
        [[[4, 3], [5]], [[6], [4]]],
    )
    assert results == [[[4, 3], [5]], [[6], [4]]]
    b0, b1 = bytes(buffer0), bytes(buffer1)
    assert b0[0:4] == bytes(range(1, 5)) and b0[20:23] == bytes(range(30, 33))
    assert b0[8:13] == bytes(range(102, 107))
    assert b1[4:10] == bytes(range(100, 106)) and b1[16:20] == bytes(range(10, 14))
    assert store.unregister_buffer(p0) == 0 and store.unregister_buffer(p1) == 0


def test_get_into_ranges_failures(store, key):
    assert store.put(key(), b"0123456789") == 0
    dst = store.alloc(16)  # alloc() blocks count as known destinations
    ptr = np.frombuffer(dst, np.uint8).ctypes.data
    r = store.get_into_ranges(
        [ptr],
        [[key(), key("missing")]],
        [[[0, 12, 0], [0]]],
        [[[0, 0, 8], [0]]],
        [[[4, 5, 3], [1]]],
    )
    # ok; past the destination's end; past the source's end; a missing key
    assert r == [[[4, INVALID_PARAMS, INVALID_PARAMS], [OBJECT_NOT_FOUND]]]
    assert dst[:4].tobytes() == b"0123"
    # A destination the binding knows nothing about is refused.
    plain = np.zeros(16, np.uint8)
    assert store.get_into_ranges([plain.ctypes.data], [[key()]], [[[0]]], [[[0]]], [[[4]]]) == \
        [[[INVALID_PARAMS]]]
    # ...but a buffer object carries its own size.
    assert store.get_into_ranges([plain], [[key()]], [[[0]]], [[[0]]], [[[4]]]) == [[[4]]]
    # Shape mismatches: top level, per buffer, per key, refused in Mooncake's shape (a row
    # per buffer, an entry per destination offset; one where a list is missing).
    refused = [[[INVALID_PARAMS]]]
    assert store.get_into_ranges([ptr, ptr], [[key()]], [[[0]]], [[[0]]], [[[4]]]) == \
        refused * 2
    assert store.get_into_ranges([ptr], [[key()]], [[]], [[[0]]], [[[4]]]) == refused
    assert store.get_into_ranges([ptr], [[key()]], [[[0, 1]]], [[[0]]], [[[4]]]) == \
        [[[INVALID_PARAMS, INVALID_PARAMS]]]
    assert store.get_into_ranges([], [], [], [], []) == []


def test_get_buffer(store, key):
    value = np.arange(1 << 18, dtype=np.uint32)
    assert store.put(key(), value) == 0
    h = store.get_buffer(key())
    assert len(h) == h.size() == value.nbytes
    arr = np.asarray(h)  # buffer protocol, no copy
    assert arr.dtype == np.uint8 and arr.ctypes.data == h.ptr()
    assert np.array_equal(arr.view(np.uint32), value)
    assert bytes(h) == value.tobytes()
    assert memoryview(h).nbytes == value.nbytes
    assert store.get_buffer(key("missing")) is None


def test_batch_get_buffer(store, key):
    assert store.put(key("a"), b"alpha") == 0
    assert store.put(key("b"), b"beta") == 0
    handles = store.batch_get_buffer([key("a"), key("missing"), key("b")])
    assert [bytes(h) if h is not None else None for h in handles] == [b"alpha", None, b"beta"]
    assert store.batch_get_buffer([]) == []
