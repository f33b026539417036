"""The SSD tier as applications see it (issue 14): setup()'s enable_ssd_offload and
ssd_offload_path (keywords, Mooncake's positional order, the dict form), and
get_replica_desc / batch_get_replica_desc with ReplicaDescriptor.

The main suite's cluster has no SSD tier, so every replica is a memory one. The cases that
need disk replicas (a daemon with --ssd_path, a master with --enable_offload) run with
MC_TEST_SSD=1, under a cluster started that way -- CTest's python_binding_ssd_test does:

    scripts/with-cluster.sh --build build --master-flag --enable_offload \\
        --daemon-flag --ssd_path={dir}/ssd-{i} --daemon-flag --ssd_capacity=256MB -- \\
        env MC_TEST_SSD=1 PYTHONPATH=build/bindings/python \\
        /usr/bin/python3 -m pytest -q -p no:cacheprovider bindings/python/tests/test_ssd_api.py
"""
import os
import time

import pytest

import mooncake_store
from mooncake_store import MooncakeDistributedStore, ReplicaStatus

INVALID_PARAMS = -600
POOL = 16 << 20

needs_ssd = pytest.mark.skipif(
    os.environ.get("MC_TEST_SSD") != "1",
    reason="needs a cluster with an SSD tier and --enable_offload, and MC_TEST_SSD=1 "
           "(see this file's docstring)")


def setup_store(master, **ssd):
    s = MooncakeDistributedStore()
    rc = s.setup("localhost", "P2PHANDSHAKE", 0, POOL, "tcp", "", master, **ssd)
    return s, rc


@pytest.mark.parametrize("ssd", [
    {},
    {"enable_ssd_offload": False},
    {"enable_ssd_offload": True},
    {"enable_ssd_offload": True, "ssd_offload_path": "/var/lib/mooncake/ssd"},
    {"ssd_offload_path": ""},
])
def test_setup_ssd_keywords(master, key, ssd):
    s, rc = setup_store(master, **ssd)
    assert rc == 0
    # Puts asking for offload are stored as any other (no SSD tier here: memory only).
    assert s.put(key("v"), b"offload or not") == 0
    assert s.get(key("v")) == b"offload or not"
    assert s.close() == 0


def test_setup_ssd_positional_after_engine(master, key):
    s = MooncakeDistributedStore()
    # Mooncake's order: ..., master_server_addr, engine, enable_ssd_offload, ssd_offload_path.
    assert s.setup("localhost", "P2PHANDSHAKE", 0, POOL, "tcp", "", master, None, True,
                   "/mnt/nvme/mooncake") == 0
    assert s.put_batch([key("a"), key("b")], [b"a" * 100, b"b" * 200]) == 0
    assert s.get_batch([key("a"), key("b")]) == [b"a" * 100, b"b" * 200]
    assert s.close() == 0
    with pytest.raises(TypeError):
        s.setup("localhost", "P2PHANDSHAKE", 0, POOL, "tcp", "", master, None, True, "/x", 1)
    with pytest.raises(TypeError):  # positional and keyword at once
        s.setup("localhost", "P2PHANDSHAKE", 0, POOL, "tcp", "", master, None, True,
                enable_ssd_offload=True)


@pytest.mark.parametrize("flag", [True, False, "true", "True", "false", "1", "0", "", None, 1, 0])
def test_setup_dict_ssd_keys(master, flag):
    s = MooncakeDistributedStore()
    config = {"local_hostname": "localhost", "metadata_server": "P2PHANDSHAKE",
              "local_buffer_size": POOL, "master_server_address": master,
              "enable_ssd_offload": flag, "ssd_offload_path": "/data/ssd",
              "enable_ssd_prefetch": "true"}  # a key of a feature configured elsewhere
    assert s.setup(config) == 0
    assert s.close() == 0


@pytest.mark.parametrize("ssd", [
    {"ssd_offload_path": "relative/dir"},
    {"ssd_offload_path": "ssd"},
    {"ssd_offload_path": "/with\0nul"},
    {"enable_ssd_offload": "maybe"},
    {"enable_ssd_offload": 2},
])
def test_setup_rejects_bad_ssd_values(master, ssd):
    s, rc = setup_store(master, **ssd)
    assert rc == INVALID_PARAMS
    assert s.health_check() == 1  # nothing was connected
    s2 = MooncakeDistributedStore()
    config = {"master_server_address": master, "local_buffer_size": POOL}
    config.update(ssd)
    assert s2.setup(config) == INVALID_PARAMS


def test_setup_rejects_bad_ssd_types(master):
    with pytest.raises(TypeError):
        setup_store(master, enable_ssd_offload=1.5)
    with pytest.raises(TypeError):
        setup_store(master, ssd_offload_path=b"/bytes")


def test_replica_desc_of_a_memory_object(store, key):
    assert store.put(key(), b"x" * 1000) == 0
    replicas = store.get_replica_desc(key())
    assert isinstance(replicas, list) and len(replicas) == 1
    r = replicas[0]
    assert r.is_memory_replica()
    assert not r.is_disk_replica()
    assert not r.is_local_disk_replica()
    assert r.kind == mooncake_store.ReplicaKind.MEMORY
    assert r.status == ReplicaStatus.COMPLETE
    assert r.status.name == "COMPLETE"
    assert r.location == store.get_hostname() == os.environ["MOONCAKE_HOSTNAME"]
    assert r.size == 1000
    # Mooncake's view of a memory replica.
    buffer = r.get_memory_descriptor().buffer_descriptor
    assert buffer.transport_endpoint == r.location
    assert buffer.size == 1000
    assert "MEMORY" in repr(r)
    # Listing read no bytes and changed nothing.
    assert store.get(key()) == b"x" * 1000


def test_replica_desc_miss_is_empty(store, key):
    assert store.get_replica_desc(key("never-put")) == []
    assert store.get_replica_desc("") == []           # invalid key
    assert store.get_replica_desc("a\0b") == []       # not expressible in the C ABI


def test_batch_replica_desc_is_a_dict_of_found_keys(store, key):
    assert store.put(key("a"), b"a" * 10) == 0
    assert store.put(key("b"), b"b" * 20) == 0
    descs = store.batch_get_replica_desc([key("a"), key("missing"), key("b"), ""])
    assert isinstance(descs, dict)
    assert set(descs) == {key("a"), key("b")}  # as Mooncake: misses are left out
    assert [r.size for r in descs[key("a")]] == [10]
    assert [r.size for r in descs[key("b")]] == [20]
    assert all(r.is_memory_replica() for rs in descs.values() for r in rs)
    assert store.batch_get_replica_desc([]) == {}


def test_batch_replica_desc_over_many_keys(store, key):
    keys = [key(f"many-{i}") for i in range(3000)]
    present = keys[::700] + [keys[1023], keys[1024]]
    for k in present:
        assert store.put(k, k.encode()) == 0
    descs = store.batch_get_replica_desc(keys)
    assert set(descs) == set(present)
    for k in present:
        assert descs[k][0].size == len(k.encode())


def test_replica_desc_when_closed():
    s = MooncakeDistributedStore()
    assert s.get_replica_desc("k") == []
    assert s.batch_get_replica_desc(["k"]) == {}


def test_offload_asking_store_without_ssd_tier_has_memory_replicas(master, key):
    s, rc = setup_store(master, enable_ssd_offload=True)
    assert rc == 0
    assert s.put(key("asked"), b"z" * 64) == 0
    replicas = s.get_replica_desc(key("asked"))
    assert len(replicas) == 1 and replicas[0].is_memory_replica()
    assert s.close() == 0


# ---- disk replicas (MC_TEST_SSD=1) ----------------------------------------------------


def wait_for_disk_replica(s, k, timeout=60.0):  # generous: a loaded machine offloads late
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        disk = [r for r in s.get_replica_desc(k) if r.is_disk_replica()]
        if disk:
            return disk[0]
        time.sleep(0.1)
    return None


@needs_ssd
def test_ssd_disk_replica_is_listed(master, key):
    s, rc = setup_store(master, enable_ssd_offload=True, ssd_offload_path="/unchecked/path")
    assert rc == 0
    assert s.put(key("disk"), b"d" * 4096) == 0
    disk = wait_for_disk_replica(s, key("disk"))
    assert disk is not None, "no disk replica within 60 s"
    assert disk.is_local_disk_replica() and not disk.is_memory_replica()
    assert disk.kind == mooncake_store.ReplicaKind.LOCAL_DISK
    assert disk.status == ReplicaStatus.COMPLETE
    assert disk.location == os.environ["MOONCAKE_HOSTNAME"]  # the daemon's SSD tier
    assert disk.size == 4096
    with pytest.raises(RuntimeError):
        disk.get_memory_descriptor()
    descs = s.batch_get_replica_desc([key("disk")])
    kinds = {r.kind for r in descs[key("disk")]}
    assert mooncake_store.ReplicaKind.LOCAL_DISK in kinds
    assert s.get(key("disk")) == b"d" * 4096
    assert s.close() == 0
