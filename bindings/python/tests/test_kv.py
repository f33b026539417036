"""The copying API: put/get and their batch forms, upsert, put_parts, queries, removes."""
import numpy as np
import pytest

import mooncake_store

INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704
OBJECT_HAS_LEASE = -706


@pytest.mark.parametrize("make", [
    bytes, bytearray, memoryview,
    lambda b: np.frombuffer(b, dtype=np.uint8),
    lambda b: np.frombuffer(b, dtype=np.float32).reshape(4, -1),  # any C-contiguous shape
])
def test_put_accepts_any_contiguous_buffer(store, key, make):
    value = bytes(range(256)) * 16
    assert store.put(key(), make(value)) == 0
    got = store.get(key())
    assert isinstance(got, bytes) and got == value


def test_put_rejects_non_buffers_and_non_contiguous(store, key):
    with pytest.raises(TypeError):
        store.put(key(), "a str is not bytes")
    with pytest.raises((BufferError, ValueError)):  # numpy raises ValueError
        store.put(key(), np.arange(100, dtype=np.uint8)[::2])


def test_get_miss_is_empty_bytes(store, key):
    assert store.get(key("missing")) == b""
    assert store.get_size(key("missing")) == OBJECT_NOT_FOUND
    assert store.is_exist(key("missing")) == 0


def test_put_never_overwrites_upsert_does(store, key):
    assert store.put(key(), b"first") == 0
    assert store.put(key(), b"second") == 0  # an existing key returns 0 and keeps its value
    assert store.get(key()) == b"first"
    assert store.upsert(key(), b"replaced, and longer") == 0
    assert store.get(key()) == b"replaced, and longer"
    assert store.get_size(key()) == len(b"replaced, and longer")
    assert store.upsert(key("new"), np.frombuffer(b"fresh", dtype=np.uint8)) == 0
    assert store.get(key("new")) == b"fresh"


def test_invalid_keys_and_values(store, key):
    assert store.put("", b"v") == INVALID_PARAMS
    assert store.put("x" * 4097, b"v") == INVALID_PARAMS
    assert store.put("with\0nul", b"v") == INVALID_PARAMS
    assert store.put(key(), b"") == INVALID_PARAMS
    assert store.put(key(), bytearray()) == INVALID_PARAMS
    assert store.put("x" * 4096, b"longest key") == 0
    assert store.get("x" * 4096) == b"longest key"
    assert store.get("with\0nul") == b""
    assert store.is_exist("with\0nul") == INVALID_PARAMS
    # bytes keys work too (Mooncake's keys are std::string)
    assert store.put(key("b").encode(), b"bytes key") == 0
    assert store.get(key("b")) == b"bytes key"


def test_get_size_and_is_exist(store, key):
    assert store.put(key(), b"12345") == 0
    assert store.get_size(key()) == 5
    assert store.is_exist(key()) == 1


def test_batch_is_exist(store, key):
    assert store.batch_is_exist([]) == []
    assert store.put(key("a"), b"a") == 0
    assert store.batch_is_exist([key("a"), key("b"), ""]) == [1, 0, INVALID_PARAMS]


def test_put_batch_and_get_batch(store, key):
    keys = [key(str(i)) for i in range(10)]
    values = [bytes([i]) * (i * 1000 + 1) for i in range(10)]
    assert store.put_batch(keys, values) == 0
    assert store.get_batch(keys) == values
    assert store.get_batch(keys + [key("missing")]) == values + [b""]
    assert store.put_batch([], []) == 0
    assert store.get_batch([]) == []
    assert store.put_batch(keys, values[:-1]) == INVALID_PARAMS  # lengths differ
    assert store.put_batch([key("x"), ""], [b"x", b"y"]) == INVALID_PARAMS  # first failure


def test_put_parts(store, key):
    assert store.put_parts(key(), b"Hello, ", bytearray(b"World"), memoryview(b"!")) == 0
    assert store.get(key()) == b"Hello, World!"
    assert store.put_parts(key("empty")) == INVALID_PARAMS
    assert store.put_parts(key("np"), np.zeros(3, np.uint8), np.ones(2, np.uint8),
                           config=mooncake_store.ReplicateConfig()) == 0
    assert store.get(key("np")) == b"\0\0\0\1\1"
    with pytest.raises(TypeError, match="unexpected keyword"):
        store.put_parts(key("kw"), b"x", replicas=2)


def test_values_larger_than_the_pool(key):
    # Staged through the pool in chunks by the C library.
    s = mooncake_store.MooncakeDistributedStore()
    assert s.connect(local_buffer_size=1 << 20) == 0
    value = np.random.default_rng(1).integers(0, 255, 5 << 20, dtype=np.uint8)
    assert s.put(key(), value) == 0
    assert s.get(key()) == value.tobytes()
    h = s.get_buffer(key())
    assert len(h) == value.nbytes and np.array_equal(np.asarray(h), value)
    assert s.get_batch([key()]) == [value.tobytes()]
    assert s.close() == 0


def test_remove(store, key):
    assert store.put(key(), b"v") == 0
    assert store.remove(key()) == 0
    assert store.is_exist(key()) == 0
    assert store.remove(key()) == OBJECT_NOT_FOUND
    # A read takes a lease: removing without force is refused until it expires.
    assert store.put(key("read"), b"v") == 0
    assert store.get(key("read")) == b"v"
    assert store.remove(key("read")) == OBJECT_HAS_LEASE
    assert store.remove(key("read"), force=True) == 0


def test_remove_by_regex(store, key):
    for i in range(5):
        assert store.put(key(f"rx-{i}"), b"v") == 0
    assert store.put(key("keep"), b"v") == 0
    pattern = "^" + key("rx-") + ".*"  # keys are [a-z0-9-]: nothing to escape
    assert store.remove_by_regex(pattern) == 5
    assert store.batch_is_exist([key(f"rx-{i}") for i in range(5)] + [key("keep")]) == [0] * 5 + [1]
    assert store.remove_by_regex("([unclosed") == INVALID_PARAMS
    assert store.remove_by_regex(regex_pattern="^no-such-prefix", force=True) == 0


def test_remove_all(store, key):
    assert store.put(key("a"), b"v") == 0
    assert store.put(key("b"), b"v") == 0
    assert store.get(key("b")) == b"v"  # leased: kept without force
    assert store.remove_all() >= 1
    assert store.batch_is_exist([key("a"), key("b")]) == [0, 1]
    assert store.remove_all(force=True) >= 1
    assert store.is_exist(key("b")) == 0
