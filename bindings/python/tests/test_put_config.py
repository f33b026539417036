"""Mooncake's ReplicateConfig (every field) and the write calls the binding lacked:
upsert_parts, upsert_batch, batch_upsert_from, put_from_with_metadata, with Mooncake's
argument names, defaults and return shapes (docs/mooncake-api.md, "put-config"). The soft
pin's fixed deadline is read from the master's admin HTTP /query_key."""
import json
import os
import threading
import time
import urllib.parse
import urllib.request

import numpy as np
import pytest

import mooncake_store
from mooncake_store import ObjectDataType, ReplicateConfig, SoftPinAction

INVALID_PARAMS = -600
NOT_SUPPORTED = -1012
OBJECT_NOT_FOUND = -704


def soft_pin_remaining_ms(key):
    url = os.environ["MOONCAKE_MASTER_ADMIN_URL"]
    request = urllib.request.Request(url + "/query_key?key=" + urllib.parse.quote(key))
    # The admin token of the cluster's key (scripts/with-cluster.sh exports it).
    request.add_header("Authorization", "Bearer " + os.environ["MOONCAKE_ADMIN_TOKEN"])
    with urllib.request.urlopen(request) as r:
        body = json.loads(r.read())
    return body["soft_pin_remaining_ms"] if body["soft_pinned"] else 0


def test_every_mooncake_field_with_its_default():
    c = ReplicateConfig()
    assert c.replica_num == 1
    assert c.nof_replica_num == 0
    assert c.dfs_replica_num == 0
    assert c.soft_pin_action == SoftPinAction.PRESERVE
    assert c.soft_pin_ttl_ms is None
    assert c.with_hard_pin is False
    assert c.preferred_segments == []
    assert c.preferred_segment == ""
    assert c.preferred_nof_segments == []
    assert c.prefer_alloc_in_same_node is False
    # An ObjectDataType, as Mooncake's field is (UNKNOWN by default); ints are accepted
    # on assignment and read back as the enum.
    assert c.data_type == ObjectDataType.UNKNOWN and isinstance(c.data_type, ObjectDataType)
    assert c.group_ids is None
    c.data_type = 1
    assert c.data_type == ObjectDataType.KVCACHE
    c.group_ids = ["", ""]
    text = str(c)
    for part in ["nof_replica_num=0", "dfs_replica_num=0", "data_type=1", "group_ids=['', '']",
                 "preferred_nof_segments=[]"]:
        assert part in text


def test_soft_pin_ttl_reaches_the_master_as_a_fixed_deadline(store, key):
    c = ReplicateConfig()
    c.soft_pin_action = SoftPinAction.ENABLE
    c.soft_pin_ttl_ms = 120000
    start = time.monotonic()
    assert store.put(key("pinned"), b"x" * 1000, c) == 0
    first = soft_pin_remaining_ms(key("pinned"))
    assert 0 < first <= 120000
    for _ in range(5):
        assert store.get(key("pinned")) == b"x" * 1000  # reads do not extend it
    later = soft_pin_remaining_ms(key("pinned"))
    assert later <= first
    assert later >= 120000 - (time.monotonic() - start) * 1000 - 50
    # A short TTL runs out, polled with a deadline, reads or not.
    c.soft_pin_ttl_ms = 300
    assert store.put(key("short"), b"y", c) == 0
    deadline = time.monotonic() + 20
    while soft_pin_remaining_ms(key("short")) != 0 and time.monotonic() < deadline:
        store.get(key("short"))
        time.sleep(0.05)
    assert soft_pin_remaining_ms(key("short")) == 0
    # None: the master's default TTL (30 minutes unless the master says otherwise).
    c.soft_pin_ttl_ms = None
    assert store.put(key("default"), b"z", c) == 0
    assert soft_pin_remaining_ms(key("default")) > 120000


def test_upsert_soft_pin_actions(store, key):
    enable = ReplicateConfig()
    enable.soft_pin_action = SoftPinAction.ENABLE
    enable.soft_pin_ttl_ms = 200000
    assert store.upsert(key(), b"a" * 100, enable) == 0
    before = soft_pin_remaining_ms(key())
    assert store.upsert(key(), b"b" * 100) == 0  # config None: PRESERVE
    assert 0 < soft_pin_remaining_ms(key()) <= before
    disable = ReplicateConfig()
    disable.soft_pin_action = SoftPinAction.DISABLE
    assert store.upsert(key(), b"c" * 100, disable) == 0
    assert soft_pin_remaining_ms(key()) == 0
    assert store.get(key()) == b"c" * 100


def test_bad_and_unsupported_configs(store, key):
    ttl_without_enable = ReplicateConfig()
    ttl_without_enable.soft_pin_ttl_ms = 10
    assert store.put(key(), b"v", ttl_without_enable) == INVALID_PARAMS
    too_long = ReplicateConfig()
    too_long.soft_pin_action = SoftPinAction.ENABLE
    too_long.soft_pin_ttl_ms = 10 ** 12  # above --max_kv_soft_pin_ttl
    assert store.put(key(), b"v", too_long) == INVALID_PARAMS
    for field, value in [("nof_replica_num", 1), ("dfs_replica_num", 2),
                         ("preferred_nof_segments", ["nof"])]:
        c = ReplicateConfig()
        setattr(c, field, value)
        assert store.put(key(), b"v", c) == NOT_SUPPORTED, field
        assert store.upsert_batch([key()], [b"v"], c) == NOT_SUPPORTED, field
    c = ReplicateConfig()
    c.group_ids = ["g", "g"]  # one group id per key (test_groups_sessions.py has the rest)
    assert store.put(key(), b"v", c) == INVALID_PARAMS
    assert store.upsert_batch([key()], [b"v"], c) == INVALID_PARAMS
    c = ReplicateConfig()
    c.data_type = 10
    assert store.put(key(), b"v", c) == INVALID_PARAMS
    c.replica_num = 0
    c.data_type = 0
    assert store.batch_upsert_from([key()], [0], [1], c) == [INVALID_PARAMS]
    assert store.is_exist(key()) == 0


def test_prefer_alloc_in_same_node_places_on_this_daemon(store, key):
    c = ReplicateConfig()
    c.prefer_alloc_in_same_node = True
    for i in range(8):
        assert store.put(key(str(i)), b"v" * 64, c) == 0
        descs = store.get_replica_desc(key(str(i)))
        assert descs, "no replica listed"


def test_upsert_parts(store, key):
    assert store.upsert_parts(key(), b"ab", bytearray(b"cd"), memoryview(b"ef")) == 0
    assert store.get(key()) == b"abcdef"
    assert store.upsert_parts(key(), b"x", b"yz", config=ReplicateConfig()) == 0
    assert store.get(key()) == b"xyz"
    assert store.upsert_parts(key("empty"), b"", b"") == 0  # Mooncake: 0, nothing stored
    assert store.is_exist(key("empty")) == 0
    with pytest.raises(TypeError):
        store.upsert_parts(key(), b"a", colour=1)
    with pytest.raises(TypeError):
        store.upsert_parts(key(), 12345)
    assert store.upsert_parts("", b"a") == INVALID_PARAMS


def test_upsert_batch(store, key):
    keys = [key(str(i)) for i in range(4)]
    assert store.upsert_batch(keys, [b"1" * 10, b"2" * 10, b"3" * 10, b"4" * 10]) == 0
    assert store.upsert_batch(keys[:2], [b"new", bytearray(b"newer")]) == 0
    assert store.get_batch(keys) == [b"new", b"newer", b"3" * 10, b"4" * 10]
    assert store.upsert_batch(keys, [b"x"]) == INVALID_PARAMS
    assert store.upsert_batch([], []) == 0
    assert store.upsert_batch([keys[0], ""], [b"ok", b"bad"]) == INVALID_PARAMS  # first failure
    assert store.get(keys[0]) == b"ok"


def test_batch_upsert_from(store, key):
    buf = np.frombuffer(store.alloc(3 * 4096), dtype=np.uint8)
    keys = [key(str(i)) for i in range(3)]
    for round_ in range(2):
        for i in range(3):
            buf[i * 4096:(i + 1) * 4096] = 10 * round_ + i
        ptrs = [buf.ctypes.data + i * 4096 for i in range(3)]
        assert store.batch_upsert_from(keys, ptrs, [4096] * 3) == [0, 0, 0]
        for i in range(3):
            assert store.get(keys[i]) == bytes([10 * round_ + i]) * 4096
    assert store.batch_upsert_from(keys, ptrs[:2], [4096] * 3) == [INVALID_PARAMS] * 3
    assert store.batch_upsert_from([], [], []) == []
    bad = store.batch_upsert_from([keys[0], ""], ptrs[:2], [4096, 4096])
    assert bad == [0, INVALID_PARAMS]


def test_put_from_with_metadata(store, key):
    data = np.arange(4096, dtype=np.uint8)
    meta = np.frombuffer(b"HEADER--", dtype=np.uint8).copy()
    assert store.put_from_with_metadata(key(), data.ctypes.data, meta.ctypes.data, data.nbytes,
                                        meta.nbytes) == 0
    assert store.get(key()) == meta.tobytes() + data.tobytes()  # metadata first
    # put never overwrites: 0, the first value kept.
    other = np.zeros(16, dtype=np.uint8)
    assert store.put_from_with_metadata(key(), other.ctypes.data, meta.ctypes.data, 16, 8) == 0
    assert store.get_size(key()) == 4096 + 8
    # size 0: Mooncake's 0, nothing stored; no metadata is fine.
    assert store.put_from_with_metadata(key("zero"), data.ctypes.data, meta.ctypes.data, 0, 8) == 0
    assert store.get_size(key("zero")) == OBJECT_NOT_FOUND
    assert store.put_from_with_metadata(key("nometa"), data.ctypes.data, 0, 4096, 0) == 0
    assert store.get(key("nometa")) == data.tobytes()
    # A buffer object shorter than the size given: -600.
    assert store.put_from_with_metadata(key("short"), bytearray(8), meta.ctypes.data, 9, 8) \
        == INVALID_PARAMS
    c = ReplicateConfig()
    c.with_hard_pin = True
    assert store.put_from_with_metadata(key("cfg"), data.ctypes.data, meta.ctypes.data, 4096,
                                        8, config=c) == 0


def test_one_writer_many_readers(store, key):
    """One thread upserts whole batches (upsert_batch, batch_upsert_from) while readers get:
    every value read is one version whole, never a mix."""
    keys = [key(str(i)) for i in range(4)]
    size = 64 * 1024
    assert store.upsert_batch(keys, [bytes([0]) * size] * 4) == 0
    stop = threading.Event()
    errors = []
    buf = np.frombuffer(store.alloc(4 * size), dtype=np.uint8)

    def writer():
        try:
            for version in range(1, 40):
                if version % 2:
                    assert store.upsert_batch(keys, [bytes([version]) * size] * 4) == 0
                else:
                    buf[:] = version
                    ptrs = [buf.ctypes.data + i * size for i in range(4)]
                    assert store.batch_upsert_from(keys, ptrs, [size] * 4) == [0] * 4
        except AssertionError as e:
            errors.append(e)
        finally:
            stop.set()

    def reader():
        while not stop.is_set():
            for k in keys:
                v = store.get(k)
                if len(v) != size or v.count(v[0]) != size:
                    errors.append("mixed value")

    threads = [threading.Thread(target=reader) for _ in range(4)]
    threads.append(threading.Thread(target=writer))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[:3]
    assert store.get(keys[0]) == bytes([39]) * size
