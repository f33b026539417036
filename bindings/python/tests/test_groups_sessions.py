"""Mooncake's object groups (ReplicateConfig.group_ids) and put sessions (issue 31, part
groups), through mooncake.store against the real master and daemon of the fixture.

Groups: one id per key of a call (else -600), "" for none; a read of one member leases the
whole group (a remove without force of another member then answers -706, Mooncake's
OBJECT_HAS_LEASE), never another group or an ungrouped key; an object stays in its group
(an upsert naming another: -600). Sessions: batch_put_session_start reserves without bytes,
batch_put_from_multi_buffer_ranges writes ranges in any order over several calls,
batch_put_session_end publishes (nothing is readable before), batch_put_session_revoke
drops; the codes and shapes of Mooncake's real client (real_client.cpp at 3b5a594).
"""
import ctypes

import numpy as np
import pytest

from mooncake.store import MooncakeDistributedStore, ReplicateConfig

INVALID = -600
NOT_FOUND = -704
NOT_READY = -703
EXISTS = -705
LEASED = -706
PAGE = 4096


def grouped(*ids):
    c = ReplicateConfig()
    c.group_ids = list(ids)
    return c


# ---- groups ---------------------------------------------------------------------------


def test_group_ids_field():
    """SGLang probes hasattr(ReplicateConfig, "group_ids"); None is the default."""
    assert hasattr(ReplicateConfig, "group_ids")
    c = ReplicateConfig()
    assert c.group_ids is None
    c.group_ids = ["g", ""]
    assert c.group_ids == ["g", ""]
    assert "group_ids=['g', '']" in str(c)


def test_a_read_leases_the_group(store, key):
    a, b, other, plain = key("a"), key("b"), key("other"), key("plain")
    assert store.put(a, b"a" * PAGE, grouped(key("g"))) == 0
    assert store.put(b, b"b" * PAGE, grouped(key("g"))) == 0
    assert store.put(other, b"o" * PAGE, grouped(key("h"))) == 0
    assert store.put(plain, b"p" * PAGE) == 0
    assert store.get(a) == b"a" * PAGE
    assert store.remove(b) == LEASED
    assert store.remove(other) == 0
    assert store.remove(plain) == 0
    assert store.remove(b, force=True) == 0


def test_group_ids_count_per_key(store, key):
    ks = [key(str(i)) for i in range(3)]
    buf = np.zeros(PAGE, dtype=np.uint8)
    ptrs, sizes = [buf.ctypes.data] * 3, [PAGE] * 3
    assert store.put(ks[0], b"x", grouped("g", "g")) == INVALID  # two for one key
    assert store.put(ks[0], b"x", grouped()) == INVALID          # none for one key
    assert store.batch_put_from(ks, ptrs, sizes, grouped("g", "g")) == [INVALID] * 3
    assert store.put_batch(ks, [b"x"] * 3, grouped("g", "", "h")) == 0
    assert store.batch_is_exist(ks) == [1, 1, 1]
    assert store.put(key("long"), b"x", grouped("g" * 4097)) == INVALID


def test_batch_groups_reach_the_master(store, key):
    """Each key of a batch in its own group: the lease follows each one's group."""
    ks = [key("k0"), key("k1"), key("k2"), key("k3")]
    buf = np.arange(PAGE, dtype=np.uint8)
    config = grouped(key("g1"), key("g1"), key("g2"), "")
    assert store.batch_put_from(ks, [buf.ctypes.data] * 4, [PAGE] * 4, config) == [0] * 4
    assert store.get(ks[0]) == buf.tobytes()
    assert store.batch_remove(ks[1:]) == [LEASED, 0, 0]


def test_multi_buffer_batch_groups(store, key):
    """batch_put_from_multi_buffers: each key's group id stays its own, also when another
    entry of the batch is refused before the batch is sent (its parts do not add up)."""
    ks = [key("m0"), key("m1"), key("m2")]
    a = np.arange(2 * PAGE, dtype=np.uint8)
    p = a.ctypes.data
    config = grouped(key("ga"), key("gb"), key("ga"))
    rcs = store.batch_put_from_multi_buffers(
        ks, [[p, p + PAGE], [p], [p + PAGE, p]], [[PAGE, PAGE], [PAGE, PAGE], [PAGE, PAGE]],
        config)
    assert rcs == [0, INVALID, 0]
    assert store.get(ks[0]) == a.tobytes()
    assert store.remove(ks[2]) == LEASED  # in ks[0]'s group
    assert store.remove(ks[2], force=True) == 0


def test_upsert_keeps_the_group(store, key):
    k = key("k")
    assert store.put(k, b"v1", grouped(key("g"))) == 0
    assert store.upsert(k, b"v2", grouped(key("another"))) == INVALID
    assert store.upsert(k, b"v2", grouped("")) == INVALID
    assert store.upsert(k, b"v2") == 0  # names none: keeps its own
    assert store.upsert(k, b"v3", grouped(key("g"))) == 0
    assert store.get(k) == b"v3"


def test_groups_are_per_tenant(key):
    a, b = MooncakeDistributedStore(), MooncakeDistributedStore()
    assert a.connect(local_buffer_size=16 << 20, tenant_id="groups-t1") == 0
    assert b.connect(local_buffer_size=16 << 20, tenant_id="groups-t2") == 0
    try:
        g = key("g")
        assert a.put(key("a"), b"a", grouped(g)) == 0
        assert a.put(key("a2"), b"a", grouped(g)) == 0
        assert b.put(key("b"), b"b", grouped(g)) == 0
        assert a.get(key("a")) == b"a"
        assert a.remove(key("a2")) == LEASED  # its tenant's group
        assert b.remove(key("b")) == 0        # the other tenant's "g" is another group
    finally:
        a.remove_all(force=True)
        a.close()
        b.close()


# ---- put sessions -----------------------------------------------------------------------


def test_put_session_layer_by_layer(store, key):
    """mooncake-store/tests/e2e/session_ranges_tcp_e2e.py's sequence: pages of every key
    written layer by layer, the end, then a get session reading them back."""
    layers, n = 4, 3
    size = PAGE * layers
    ks = [key(f"s{i}") for i in range(n)]
    src = (ctypes.c_char * (size * n))()
    dst = (ctypes.c_char * (size * n))()
    for i in range(len(src)):
        src[i] = ord("a") + i % 26
    base, out = ctypes.addressof(src), ctypes.addressof(dst)
    assert store.register_buffer(base, len(src)) == 0
    assert store.register_buffer(out, len(dst)) == 0
    assert store.batch_put_session_start(ks, [size] * n) == [0] * n
    for layer in reversed(range(layers)):
        rcs = store.batch_put_from_multi_buffer_ranges(
            ks, [[base + i * size + layer * PAGE] for i in range(n)], [[PAGE]] * n,
            [[layer * PAGE]] * n)
        assert rcs == [PAGE] * n
        assert store.is_exist(ks[0]) == 0  # not before the end
    assert store.get_into(ks[1], out, size) == NOT_READY
    assert store.batch_put_session_end(ks) == [0] * n
    assert store.batch_get_session_start(ks) == [0] * n
    rcs = store.batch_get_into_multi_buffer_ranges(
        ks, [[out + i * size] for i in range(n)], [[size]] * n, [[0]] * n)
    assert rcs == [size] * n
    assert store.batch_get_session_end(ks) == 0
    assert bytes(src) == bytes(dst)


def test_put_session_several_ranges_per_key(store, key):
    k = key("k")
    data = np.random.default_rng(1).integers(0, 256, 3 * PAGE, dtype=np.uint8)
    assert store.batch_put_session_start([k], [3 * PAGE]) == [0]
    p = data.ctypes.data
    assert store.batch_put_from_multi_buffer_ranges(
        [k], [[p + 2 * PAGE, p, p + PAGE]], [[PAGE, PAGE, PAGE]],
        [[2 * PAGE, 0, PAGE]]) == [3 * PAGE]
    assert store.batch_put_session_end([k]) == [0]
    assert store.get(k) == data.tobytes()


def test_put_session_codes(store, key):
    stored, k, none = key("stored"), key("k"), key("none")
    buf = np.zeros(PAGE, dtype=np.uint8)
    p = buf.ctypes.data
    assert store.put(stored, b"x") == 0
    assert store.batch_put_session_start([], []) == []
    assert store.batch_put_session_start([k, k], [PAGE]) == [INVALID, INVALID]
    assert store.batch_put_session_start([stored, k, k], [PAGE] * 3) == [EXISTS, 0, INVALID]
    # A range past the value: nothing written for the key; lists of other lengths: -600.
    assert store.batch_put_from_multi_buffer_ranges([k], [[p]], [[PAGE]], [[1]]) == [INVALID]
    assert store.batch_put_from_multi_buffer_ranges([k], [[p, p]], [[PAGE]], [[0]]) == [INVALID]
    assert store.batch_put_from_multi_buffer_ranges([k], [[p]], [[PAGE]], []) == [INVALID]
    assert store.batch_put_from_multi_buffer_ranges([none], [[p]], [[PAGE]], [[0]]) == [INVALID]
    assert store.batch_put_session_end([none]) == [INVALID]
    assert store.batch_put_session_revoke([none]) == [INVALID]
    assert store.batch_put_session_revoke([k]) == [0]
    assert store.get(k) == b""  # nothing was published
    assert store.batch_put_session_end([k]) == [INVALID]  # the session is gone
    assert store.put(k, b"after") == 0 and store.get(k) == b"after"


def test_put_session_groups(store, key):
    """A session's config names its keys' groups, as a batch put's does."""
    a, b = key("a"), key("b")
    buf = np.ones(PAGE, dtype=np.uint8)
    g = key("g")
    assert store.batch_put_session_start([a, b], [PAGE, PAGE], grouped(g, g)) == [0, 0]
    assert store.batch_put_from_multi_buffer_ranges(
        [a, b], [[buf.ctypes.data]] * 2, [[PAGE]] * 2, [[0]] * 2) == [PAGE, PAGE]
    assert store.batch_put_session_end([a, b]) == [0, 0]
    assert store.get(a) == buf.tobytes()
    assert store.remove(b) == LEASED
    assert store.batch_put_session_start([key("c")], [PAGE], grouped(g, g)) == [INVALID]


def test_sessions_belong_to_the_store(store, key):
    """Another store object (another handle) has sessions of its own."""
    k = key("k")
    other = MooncakeDistributedStore()
    assert other.connect(local_buffer_size=16 << 20) == 0
    try:
        assert store.batch_put_session_start([k], [PAGE]) == [0]
        assert other.batch_put_session_end([k]) == [INVALID]
        assert store.batch_put_session_revoke([k]) == [0]
    finally:
        other.close()
