"""Mooncake's EngramStore (mooncake-integration/store/engram_store_py.cpp at 3b5a594) over
this store, and the rest of Mooncake's module surface (issue 31, part groups): init_all,
get_offload_rpc_read_count, bind_to_numa_node, get_alloc_func_addr / get_free_func_addr,
MooncakeDistributedNoFRegister, _get_pyclient_capsule / _get_pyclient_from_wrapper.

EngramStore keeps one object per head, "engram:l<layer>:h<head>", of vocab_size rows of
embedding_dim float32; lookup() reads only the rows asked for (ranged reads) into a
[B, L, H, D] array; errors are Mooncake's exceptions and messages.
"""
import ctypes
import os
import uuid

import numpy as np
import pytest

import mooncake.store as mstore
from mooncake.store import EngramStore, EngramStoreConfig, MooncakeDistributedStore


def config(vocab=(17, 19, 23), dim=8):
    c = EngramStoreConfig()
    c.table_vocab_sizes = list(vocab)
    c.embedding_dim = dim
    return c


def tables_for(engram):
    d = engram.get_embedding_dim()
    return [np.arange(v * d, dtype=np.float32).reshape(v, d) + 1000 * h
            for h, v in enumerate(engram.get_table_vocab_sizes())]


@pytest.fixture
def layer():
    return uuid.uuid4().int & 0x7FFFFFFF


@pytest.fixture
def engram(store, layer):
    e = EngramStore(layer_id=layer, config=config(), store=store)
    yield e
    e.remove_from_store(force=True)


def test_config_defaults_and_metadata(layer):
    c = EngramStoreConfig()
    assert c.table_vocab_sizes == [1024] and c.embedding_dim == 64
    e = EngramStore(layer, config())  # no store: metadata only
    assert e.get_num_heads() == 3
    assert e.get_embedding_dim() == 8
    assert e.get_table_vocab_sizes() == [17, 19, 23]
    assert e.get_store_keys() == [f"engram:l{layer}:h{h}" for h in range(3)]
    with pytest.raises(RuntimeError, match="EngramStore lookup failed"):
        e.lookup([[[0, 1, 2]]])
    with pytest.raises(RuntimeError, match="populate failed"):
        e.populate(tables_for(e))
    with pytest.raises(RuntimeError, match="rc=-600"):
        e.remove_from_store()


def test_bad_configs(layer):
    with pytest.raises(ValueError, match="must not be empty"):
        EngramStore(layer, config(vocab=()))
    with pytest.raises(ValueError, match="must be positive"):
        EngramStore(layer, config(dim=0))
    with pytest.raises(ValueError, match="only positive values"):
        EngramStore(layer, config(vocab=(3, 0)))
    with pytest.raises(RuntimeError, match="_get_pyclient_capsule"):
        EngramStore(layer, config(), store=object())


def test_populate_and_lookup(engram, store):
    tables = tables_for(engram)
    engram.populate(tables)
    for key, table in zip(engram.get_store_keys(), tables):
        assert store.get(key) == table.tobytes()  # a head's table is one object
    ids = np.array([[[0, 1, 2], [16, 18, 22], [5, 5, 5]]], dtype=np.int64)
    out = engram.lookup(ids)
    assert out.shape == (1, 3, 3, 8) and out.dtype == np.float32
    for pos in range(3):
        for head in range(3):
            np.testing.assert_array_equal(out[0, pos, head], tables[head][ids[0, pos, head]])
    as_list = engram.lookup(ids.tolist())
    np.testing.assert_array_equal(as_list, out)
    assert engram.lookup(ids.astype(np.int32)).shape == (1, 3, 3, 8)  # converted


def test_lookup_errors(engram):
    engram.populate(tables_for(engram))
    with pytest.raises(RuntimeError, match="must not be empty"):
        engram.lookup([])
    with pytest.raises(RuntimeError, match="shape \\[B, L, H\\]"):
        engram.lookup(np.zeros((1, 3), dtype=np.int64))
    with pytest.raises(RuntimeError, match="must match num_heads"):
        engram.lookup(np.zeros((1, 1, 2), dtype=np.int64))
    with pytest.raises(RuntimeError, match="lookup failed"):
        engram.lookup([[[17, 0, 0]]])  # row 17 of a 17-row table
    with pytest.raises(RuntimeError, match="lookup failed"):
        engram.lookup([[[-1, 0, 0]]])
    with pytest.raises(RuntimeError, match="lookup failed"):
        engram.lookup([[[0, 0]]])  # two heads of three


def test_populate_errors_leave_nothing(engram, store):
    tables = tables_for(engram)
    with pytest.raises(RuntimeError, match="size must match num_heads"):
        engram.populate(tables[:2])
    bad = list(tables)
    bad[1] = bad[1][:-1]
    with pytest.raises(RuntimeError, match="shape does not match"):
        engram.populate(bad)
    with pytest.raises(RuntimeError, match="must be 2D"):
        engram.populate([t.reshape(-1) for t in tables])
    with pytest.raises(RuntimeError, match="NumPy arrays"):
        engram.populate([t.tolist() for t in tables])
    assert store.batch_is_exist(engram.get_store_keys()) == [0, 0, 0]
    # A layer already there is not overwritten (Mooncake's preflight).
    engram.populate(tables)
    with pytest.raises(RuntimeError, match="populate failed"):
        engram.populate([t + 1 for t in tables])
    np.testing.assert_array_equal(engram.lookup([[[3, 3, 3]]])[0, 0, 1], tables[1][3])


def test_remove_from_store(engram, store):
    engram.populate(tables_for(engram))
    assert engram.remove_from_store(force=True) == 3
    assert store.batch_is_exist(engram.get_store_keys()) == [0, 0, 0]
    assert engram.remove_from_store(force=True) == 0  # missing tables are skipped


def test_store_through_a_wrapper(store, layer):
    """EngramStore takes any object whose _get_pyclient_capsule() hands it the store."""
    class Wrapper:
        def _get_pyclient_capsule(self):
            return store._get_pyclient_capsule()

    e = EngramStore(layer, config(vocab=(4,), dim=2), Wrapper())
    table = np.arange(8, dtype=np.float32).reshape(4, 2)
    e.populate([table])
    np.testing.assert_array_equal(e.lookup([[[2]]])[0, 0, 0], table[2])
    assert e.remove_from_store(force=True) == 1
    capsule = mstore._get_pyclient_from_wrapper(store)
    assert type(capsule).__name__ == "PyCapsule"
    assert "mooncake.PyClient.shared_ptr" in repr(capsule)
    assert mstore._get_pyclient_from_wrapper(MooncakeDistributedStore()) is None
    assert MooncakeDistributedStore()._get_pyclient_capsule() is None

    class Bad:
        def _get_pyclient_capsule(self):
            return 42

    with pytest.raises(RuntimeError, match="non-capsule"):
        EngramStore(layer, config(), Bad())


# ---- the remaining members -----------------------------------------------------------


def test_init_all():
    s = MooncakeDistributedStore()
    try:
        assert s.init_all("tcp", "", 16 << 20) == 0
        assert s.put("init-all-" + uuid.uuid4().hex, b"x") == 0
        assert s.init_all("tcp", "") == -600  # already set up
    finally:
        s.close()


def test_offload_read_count_without_ssd(store, key):
    assert store.put(key(), b"x" * 100) == 0
    assert store.get(key()) == b"x" * 100
    assert store.get_offload_rpc_read_count() == 0
    assert MooncakeDistributedStore().get_offload_rpc_read_count() == 0


def test_numa_binding(capfd):
    """As Mooncake's: never raises; what cannot be done is said on stderr."""
    before = os.sched_getaffinity(0)
    try:
        mstore.bind_to_numa_node(100000)
        err = capfd.readouterr().err
        assert "invalid NUMA node 100000" in err or "NUMA is not available" in err
        node0 = "/sys/devices/system/node/node0/cpulist"
        if os.path.exists(node0):
            mstore.bind_to_numa_node(0)
            assert os.sched_getaffinity(0) <= before  # the node's CPUs, among those allowed
            assert "invalid" not in capfd.readouterr().err
    finally:
        os.sched_setaffinity(0, before)


def test_hugepage_allocator_addresses():
    alloc = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)(mstore.get_alloc_func_addr())
    free = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(mstore.get_free_func_addr())
    assert alloc(4096) is None  # no NVMe-oF: nothing handed out, as Mooncake without it
    free(None)


def test_nof_register_says_why(capfd):
    r = mstore.MooncakeDistributedNoFRegister()
    assert r.real_register("nqn.x", 1, "127.0.0.1", 4420, 0, 1024, "127.0.0.1:50051") == -1
    assert r.real_unregister_by_endpoint("nqn.x", 1, "127.0.0.1", 4420, "127.0.0.1:50051") == -1
    assert "NVMe-oF segments are not supported" in capfd.readouterr().err


# Mooncake's store_py.cpp at 3b5a594: the members of its module and MooncakeDistributedStore
# (besides the tensor family, task and copy/move calls, which other files test).
MOONCAKE_MEMBERS = [
    "init_all", "get_offload_rpc_read_count", "batch_put_session_start",
    "batch_put_from_multi_buffer_ranges", "batch_put_session_end", "batch_put_session_revoke",
    "batch_get_session_start", "batch_get_into_multi_buffer_ranges", "batch_get_session_end",
    "get_into_ranges", "batch_remove", "_get_pyclient_capsule",
]
MOONCAKE_MODULE = [
    "bind_to_numa_node", "get_alloc_func_addr", "get_free_func_addr",
    "MooncakeDistributedNoFRegister", "_get_pyclient_from_wrapper", "EngramStore",
    "EngramStoreConfig",
]


def test_mooncake_names_are_there():
    missing = [n for n in MOONCAKE_MEMBERS if not hasattr(MooncakeDistributedStore, n)]
    missing += [n for n in MOONCAKE_MODULE if not hasattr(mstore, n)]
    assert missing == []
