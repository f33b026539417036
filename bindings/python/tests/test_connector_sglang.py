"""SGLang's HiCache Mooncake backend, replayed against this store: the calls MooncakeStore
makes on MooncakeDistributedStore, with the same argument shapes and the same checks on the
answers, against the real master and daemon of the fixture (scripts/with-cluster.sh),
through `import mooncake.store` as SGLang imports it.

Read from sgl-project/sglang at commit 00fe477f32b3878f64d44cc36895e1de4a113afe,
python/sglang/srt/mem_cache/storage/mooncake_store/mooncake_store.py:

- MooncakeBaseStore._load_config: storage_config.extra_config when it names
  master_server_address (or client_server_address) -> load_from_extra_config; else the JSON
  file SGLANG_HICACHE_MOONCAKE_CONFIG_PATH -> from_file; else the environment ->
  load_from_env: MOONCAKE_MASTER, MOONCAKE_LOCAL_HOSTNAME ("localhost"),
  MOONCAKE_TE_META_DATA_SERVER ("P2PHANDSHAKE"), MOONCAKE_GLOBAL_SEGMENT_SIZE ("4gb"),
  MOONCAKE_PROTOCOL ("rdma"), MOONCAKE_DEVICE (""), MOONCAKE_STANDALONE_STORAGE,
  MOONCAKE_CLIENT, MOONCAKE_ENABLE_SSD_OFFLOAD, MOONCAKE_OFFLOAD_FILE_STORAGE_PATH,
  MOONCAKE_TENANT_ID ("default"). The same names, lower-cased, are the file's and
  extra_config's keys. (Defaults: python/sglang/srt/environ.py.)
- MooncakeStore.__init__: `from mooncake.store import MooncakeDistributedStore`;
  ReplicateConfig probed for `group_ids` (hasattr on the class, then on an instance);
  store.setup(local_hostname, metadata_server, global_segment_size // (tp_size * pp_size),
  16 MiB, protocol, device_name, master_server_address, transfer_engine (None), **kwargs)
  with kwargs enable_client_http_server/client_http_port (storage metrics on),
  enable_ssd_offload, ssd_offload_path, tenant_id (when not "default"); a TypeError naming
  one of the kwargs drops it and retries (tenant_id: RuntimeError); a nonzero ret_code
  raises RuntimeError. Standalone storage instead: MooncakeHostMemAllocator().alloc(size)
  for the host pool and store.setup_dummy(required_bytes, 16 MiB, client_server_address).
- MooncakeStore.warmup: store.put(key, bytes(4096)) == 0 (10 tries), then
  `store.is_exist(key) == 1` and `store.get(key) == value` asserted.
- MooncakeBaseStore.register_buffer (from register_mem_pool_host): store.register_buffer(
  tensor.data_ptr(), numel * element_size), nonzero -> RuntimeError.
- batch_set_v1 -> _batch_exist (store.batch_is_exist; `!= 1` is missing) and
  _put_batch_zero_copy_impl: store.batch_put_from(keys, ptrs, sizes) (MHA page_first: keys
  `{key}_{tp_rank}_k` / `_v`, one pointer each), store.batch_put_from_multi_buffers(keys,
  [[ptr per layer]], [[size per layer]], ReplicateConfig()) (MLA layer_first: key
  `{key}__k`), or batch_put_from(..., config) with config.group_ids; _batch_postprocess:
  a page is stored when every result `== 0`.
- batch_get_v1 -> _get_batch_zero_copy_impl: store.batch_get_into(keys, ptrs, sizes) or
  store.batch_get_into_multi_buffers(keys, ptrs, sizes); a page is read when every result
  `> 0`. batch_exists: pages up to the first component key whose batch_is_exist `!= 1`.
- clear: store.remove_all(); close: nothing (the store's destructor closes it).

HiCacheController drives a backup thread (batch_set) and a prefetch thread (batch_exists,
batch_get) per TP rank, and every rank has its own store: the concurrency test does both.
"""
import gc
import json
import os
import threading
import time
import uuid

import numpy as np
import pytest

from mooncake.store import MooncakeDistributedStore, ReplicateConfig

DEFAULT_LOCAL_BUFFER_SIZE = 16 * 1024 * 1024
DEFAULT_TENANT_ID = "default"
PAGE_BYTES = 8192  # one page of K (or V) across every layer: page_first layout
NUM_PAGES = 32
NUM_LAYERS = 3
# The data-path tests lend 32 MiB: a setup faults its whole segment in, and SGLang's 4 GiB
# per test would only make the suite slow. test_setup_with_the_default_environment lends
# SGLang's own 4 GiB.
SEGMENT = 32 << 20

ENV_DEFAULTS = {  # environ.py's defaults for the variables load_from_env reads
    "MOONCAKE_LOCAL_HOSTNAME": "localhost",
    "MOONCAKE_TE_META_DATA_SERVER": "P2PHANDSHAKE",
    "MOONCAKE_GLOBAL_SEGMENT_SIZE": "4gb",
    "MOONCAKE_PROTOCOL": "rdma",
    "MOONCAKE_DEVICE": "",
    "MOONCAKE_TENANT_ID": DEFAULT_TENANT_ID,
}


def parse_segment_size(value):
    """_parse_global_segment_size: an int, "<n>gb" or a decimal string."""
    if isinstance(value, int):
        return value
    s = str(value).strip().lower()
    return int(s[:-2]) << 30 if s.endswith("gb") else int(s)


def load_config(extra_config=None):
    """MooncakeBaseStore._load_config with the three sources in SGLang's order."""
    if extra_config and extra_config.get("master_server_address") is not None:
        source = extra_config
    elif os.environ.get("SGLANG_HICACHE_MOONCAKE_CONFIG_PATH"):
        with open(os.environ["SGLANG_HICACHE_MOONCAKE_CONFIG_PATH"]) as f:
            source = json.load(f)
    else:
        env = lambda name: os.environ.get(name, ENV_DEFAULTS.get(name))  # noqa: E731
        source = {
            "local_hostname": env("MOONCAKE_LOCAL_HOSTNAME"),
            "metadata_server": env("MOONCAKE_TE_META_DATA_SERVER"),
            "global_segment_size": env("MOONCAKE_GLOBAL_SEGMENT_SIZE"),
            "protocol": env("MOONCAKE_PROTOCOL"),
            "device_name": env("MOONCAKE_DEVICE"),
            "master_server_address": env("MOONCAKE_MASTER"),
            "tenant_id": env("MOONCAKE_TENANT_ID"),
        }
    return {
        "local_hostname": source.get("local_hostname", "localhost"),
        "metadata_server": source.get("metadata_server", "P2PHANDSHAKE"),
        "global_segment_size": parse_segment_size(source.get("global_segment_size", "4gb")),
        "protocol": source.get("protocol", "rdma"),
        "device_name": source.get("device_name", ""),
        "master_server_address": source.get("master_server_address"),
        "enable_ssd_offload": source.get("enable_ssd_offload", False),
        "ssd_offload_path": source.get("ssd_offload_path"),
        "tenant_id": (str(source.get("tenant_id") or "").strip() or DEFAULT_TENANT_ID),
    }


def setup_store(config, tp_size=1, pp_size=1, client_http_port=None):
    """MooncakeStore.__init__'s non-standalone branch. Returns (store, kwargs the installed
    store refused with a TypeError and SGLang dropped)."""
    store = MooncakeDistributedStore()
    setup_kwargs = {}
    if client_http_port is not None:
        setup_kwargs.update(enable_client_http_server=True, client_http_port=client_http_port)
    if config["enable_ssd_offload"]:
        setup_kwargs["enable_ssd_offload"] = True
    if config["ssd_offload_path"] is not None:
        setup_kwargs["ssd_offload_path"] = config["ssd_offload_path"]
    if config["tenant_id"] != DEFAULT_TENANT_ID:
        setup_kwargs["tenant_id"] = config["tenant_id"]
    dropped = []
    while True:
        try:
            ret_code = store.setup(config["local_hostname"], config["metadata_server"],
                                   config["global_segment_size"] // (tp_size * pp_size),
                                   DEFAULT_LOCAL_BUFFER_SIZE, config["protocol"],
                                   config["device_name"], config["master_server_address"],
                                   None, **setup_kwargs)
            break
        except TypeError as e:
            unsupported = [k for k in list(setup_kwargs) if k in str(e)]
            if not unsupported:
                raise
            if "tenant_id" in unsupported:
                raise RuntimeError("setup() does not support tenant_id") from e
            for k in unsupported:
                setup_kwargs.pop(k)
            dropped += unsupported
    if ret_code:
        raise RuntimeError(f"Failed to setup Mooncake store, error code: {ret_code}")
    warmup(store)
    return store, dropped


def warmup(store):
    """MooncakeStore.warmup."""
    warmup_key = "sglang_mooncake_store_warmup_key" + uuid.uuid4().hex
    warmup_value = bytes(4 * 1024)
    for _ in range(10):
        if store.put(warmup_key, warmup_value) == 0:
            break
    else:
        raise RuntimeError("Warmup put failed after 10 attempts")
    assert store.is_exist(warmup_key) == 1
    assert store.get(warmup_key) == warmup_value


def register_buffer(store, array):
    """MooncakeBaseStore.register_buffer."""
    ret_code = store.register_buffer(array.ctypes.data, array.nbytes)
    if ret_code != 0:
        raise RuntimeError(f"Failed to register buffer to Mooncake Store, error code: {ret_code}")


class MHAHostPool:
    """An MHA host KV pool in page_first layout: page i's K (all layers) is one contiguous
    run, its V another; get_page_buffer_meta gives [k_ptr, v_ptr] per page."""

    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        self.kv_buffer = rng.integers(0, 255, (2, NUM_PAGES, PAGE_BYTES), dtype=np.uint8)

    def get_page_buffer_meta(self, pages):
        base, stride = self.kv_buffer.ctypes.data, self.kv_buffer.strides[0]
        ptrs, sizes = [], []
        for p in pages:
            ptrs += [base + p * PAGE_BYTES, base + stride + p * PAGE_BYTES]
            sizes += [PAGE_BYTES, PAGE_BYTES]
        return ptrs, sizes

    def page(self, p):
        return self.kv_buffer[:, p].tobytes()


class MLAHostPool:
    """An MLA host KV pool in layer_first layout: a page is one run per layer, so one key
    gets a buffer per layer (batch_*_multi_buffers)."""

    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        self.kv_buffer = rng.integers(0, 255, (NUM_LAYERS, NUM_PAGES, PAGE_BYTES), dtype=np.uint8)

    def get_page_buffer_meta(self, pages):
        base, stride = self.kv_buffer.ctypes.data, self.kv_buffer.strides[0]
        return ([[base + l * stride + p * PAGE_BYTES for l in range(NUM_LAYERS)] for p in pages],
                [[PAGE_BYTES] * NUM_LAYERS for _ in pages])

    def page(self, p):
        return self.kv_buffer[:, p].tobytes()


class HiCacheBackend:
    """MooncakeStore's batch_set_v1 / batch_get_v1 / batch_exists over one host pool."""

    def __init__(self, store, pool, tp_rank=0, group_semantics=False):
        self.store, self.pool = store, pool
        self.mla = isinstance(pool, MLAHostPool)
        self.suffix = "" if self.mla else f"{tp_rank}"
        self.key_multiplier = 1 if self.mla else 2
        self.group_semantics = group_semantics and hasattr(ReplicateConfig, "group_ids")

    def component_keys(self, keys):
        if self.mla:
            return [f"{k}_{self.suffix}_k" for k in keys]
        return [f"{k}_{self.suffix}_{kv}" for k in keys for kv in ("k", "v")]

    def postprocess(self, results, is_set):
        m = self.key_multiplier
        groups = [results[i:i + m] for i in range(0, len(results), m)]
        return [all(r == 0 for r in g) if is_set else all(r > 0 for r in g) for g in groups]

    def put_zero_copy(self, keys, ptrs, sizes, group_ids=None):
        config = None
        if self.group_semantics and group_ids is not None:
            config = ReplicateConfig()
            config.group_ids = group_ids
        if ptrs and isinstance(ptrs[0], list):
            return self.store.batch_put_from_multi_buffers(keys, ptrs, sizes,
                                                           config or ReplicateConfig())
        if config is not None:
            return self.store.batch_put_from(keys, ptrs, sizes, config)
        return self.store.batch_put_from(keys, ptrs, sizes)

    def get_zero_copy(self, keys, ptrs, sizes):
        if ptrs and isinstance(ptrs[0], list):
            return self.store.batch_get_into_multi_buffers(keys, ptrs, sizes)
        return self.store.batch_get_into(keys, ptrs, sizes)

    def batch_set_v1(self, keys, pages, sizes_override=None):
        key_strs = self.component_keys(keys)
        ptrs, sizes = self.pool.get_page_buffer_meta(pages)
        if sizes_override is not None:
            sizes = sizes_override
        group_ids = [f"sglang-hicache:{k}" for k in keys for _ in range(self.key_multiplier)]
        exist = self.store.batch_is_exist(key_strs)
        results = [-1] * len(key_strs)
        todo = [i for i in range(len(key_strs)) if exist[i] != 1]
        for i in range(len(key_strs)):
            if exist[i] == 1:
                results[i] = 0
        if todo:
            put = self.put_zero_copy([key_strs[i] for i in todo], [ptrs[i] for i in todo],
                                     [sizes[i] for i in todo], [group_ids[i] for i in todo])
            assert len(put) == len(todo)
            for i, r in zip(todo, put):
                results[i] = r
        return self.postprocess(results, is_set=True), len(todo)

    def batch_get_v1(self, keys, pages):
        key_strs = self.component_keys(keys)
        ptrs, sizes = self.pool.get_page_buffer_meta(pages)
        res = self.get_zero_copy(key_strs, ptrs, sizes)
        assert len(res) == len(key_strs)
        return self.postprocess(res, is_set=False)

    def batch_exists(self, keys):
        query = self.component_keys(keys)
        exist = self.store.batch_is_exist(query)
        for i, e in enumerate(exist):
            if e != 1:
                return i // self.key_multiplier
        return len(query) // self.key_multiplier


@pytest.fixture
def sglang_env(monkeypatch):
    """load_from_env's variables as a deployment sets them for this store (MOONCAKE_MASTER
    is scripts/with-cluster.sh's own)."""
    monkeypatch.delenv("SGLANG_HICACHE_MOONCAKE_CONFIG_PATH", raising=False)
    monkeypatch.setenv("MOONCAKE_PROTOCOL", "tcp")
    monkeypatch.setenv("MOONCAKE_GLOBAL_SEGMENT_SIZE", str(SEGMENT))


@pytest.fixture
def backend_store(sglang_env):
    store, dropped = setup_store(load_config())
    assert dropped == []
    yield store
    store.close()


def test_setup_from_environment(sglang_env):
    config = load_config()
    assert config["master_server_address"] == os.environ["MOONCAKE_MASTER"]
    store, dropped = setup_store(config)
    assert dropped == []
    assert store.close() == 0


def test_setup_with_the_default_environment(monkeypatch):
    """SGLang as a fresh deployment runs it: only MOONCAKE_MASTER set, so each rank lends
    environ.py's default MOONCAKE_GLOBAL_SEGMENT_SIZE, 4 GiB, with a 16 MiB local buffer and
    protocol "rdma" (the daemon's to choose here), against a daemon started with no budget
    flag. Issue 30: the daemon's old default budget refused this setup with -1300."""
    monkeypatch.delenv("SGLANG_HICACHE_MOONCAKE_CONFIG_PATH", raising=False)
    for name in ENV_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    config = load_config()
    assert config["global_segment_size"] == 4 << 30
    store, dropped = setup_store(config)  # a nonzero setup raises; warmup puts and gets
    assert dropped == []
    assert store.close() == 0


def test_setup_from_config_file(tmp_path, monkeypatch):
    path = tmp_path / "mooncake.json"
    path.write_text(json.dumps({
        "local_hostname": "localhost", "metadata_server": "P2PHANDSHAKE",
        "global_segment_size": "0", "protocol": "tcp", "device_name": "",
        "master_server_address": os.environ["MOONCAKE_MASTER"]}))
    monkeypatch.setenv("SGLANG_HICACHE_MOONCAKE_CONFIG_PATH", str(path))
    store, dropped = setup_store(load_config())
    assert dropped == []
    assert store.close() == 0


def test_setup_from_extra_config_with_tp_split_and_metrics_server(sglang_env, unused_port):
    """--hicache-storage-backend-extra-config, tp_size 2 (each rank lends half), storage
    metrics on: enable_client_http_server/client_http_port must not be refused (a TypeError
    would make SGLang drop them); this store accepts them with a warning (the daemon serves
    the host's metrics)."""
    extra = {"master_server_address": os.environ["MOONCAKE_MASTER"], "protocol": "tcp",
             "global_segment_size": str(2 * SEGMENT), "device_name": ""}
    with pytest.warns(UserWarning, match="enable_client_http_server"):
        store, dropped = setup_store(load_config(extra), tp_size=2, client_http_port=unused_port)
    assert dropped == []
    assert store.close() == 0


def test_setup_with_a_tenant(sglang_env, monkeypatch):
    monkeypatch.setenv("MOONCAKE_TENANT_ID", "sglang-" + uuid.uuid4().hex[:8])
    store, dropped = setup_store(load_config())
    assert dropped == []
    assert store.close() == 0


def test_setup_failure_raises(sglang_env, monkeypatch):
    monkeypatch.setenv("MOONCAKE_MASTER", "127.0.0.1:1")
    with pytest.raises(RuntimeError, match="Failed to setup Mooncake store"):
        setup_store(load_config())


def test_register_buffer_failure_raises(backend_store):
    """A tensor whose data_ptr() is 0: register_buffer answers nonzero and SGLang raises."""
    with pytest.raises(RuntimeError, match="Failed to register buffer"):
        ret_code = backend_store.register_buffer(0, 4096)
        if ret_code != 0:
            raise RuntimeError(f"Failed to register buffer to Mooncake Store, error code: {ret_code}")


@pytest.mark.parametrize("pool_cls", [MHAHostPool, MLAHostPool])
def test_backup_then_prefetch(backend_store, key, pool_cls):
    src, dst = pool_cls(1), pool_cls(2)
    register_buffer(backend_store, src.kv_buffer)
    register_buffer(backend_store, dst.kv_buffer)
    b_src, b_dst = HiCacheBackend(backend_store, src), HiCacheBackend(backend_store, dst)
    keys = [key(f"page{i}") for i in range(6)]
    assert b_src.batch_exists(keys) == 0
    stored, put_count = b_src.batch_set_v1(keys, list(range(6)))
    assert stored == [True] * 6 and put_count == 6 * b_src.key_multiplier
    # A second backup of the same pages finds them all and puts nothing.
    assert b_src.batch_set_v1(keys, list(range(6))) == ([True] * 6, 0)
    assert b_dst.batch_exists(keys) == 6
    assert b_dst.batch_get_v1(keys, list(range(10, 16))) == [True] * 6
    for i in range(6):
        assert dst.page(10 + i) == src.page(i)


def test_group_semantics_off_stores_with_plain_puts(backend_store, key):
    """enable_group_semantics is false by default: batch_put_from without a config."""
    pool = MHAHostPool(3)
    register_buffer(backend_store, pool.kv_buffer)
    b = HiCacheBackend(backend_store, pool, group_semantics=False)
    keys = [key("g0"), key("g1")]
    assert b.batch_set_v1(keys, [0, 1])[0] == [True, True]
    assert b.batch_exists(keys) == 2


@pytest.mark.parametrize("pool_cls", [MHAHostPool, MLAHostPool])
def test_group_semantics_on_stores_and_reads_back(backend_store, key, pool_cls):
    """enable_group_semantics: SGLang probes hasattr(ReplicateConfig, "group_ids"); with it,
    every component key's put carries its page's group id ("sglang-hicache:<key>"), one
    per key (MHA: batch_put_from; MLA: batch_put_from_multi_buffers). The pages are
    stored in their groups and read back; reading one component of a page leases the
    page's other components too (Mooncake's group lease: docs/mooncake-api.md, "groups")."""
    src, dst = pool_cls(3), pool_cls(4)
    register_buffer(backend_store, src.kv_buffer)
    register_buffer(backend_store, dst.kv_buffer)
    b = HiCacheBackend(backend_store, src, group_semantics=True)
    b_dst = HiCacheBackend(backend_store, dst)
    assert b.group_semantics
    keys = [key("g0"), key("g1")]
    stored, put_count = b.batch_set_v1(keys, [0, 1])
    assert stored == [True, True] and put_count == 2 * b.key_multiplier
    assert b_dst.batch_exists(keys) == 2
    assert b_dst.batch_get_v1(keys, [5, 6]) == [True, True]
    assert dst.page(5) == src.page(0) and dst.page(6) == src.page(1)
    if b.key_multiplier == 2:  # MHA: a page's K and V are one group
        fresh = [key("fresh")]
        assert b.batch_set_v1(fresh, [2])[0] == [True]
        fk, fv = b.component_keys(fresh)
        assert len(backend_store.get(fk)) == PAGE_BYTES  # a read of K leases V
        assert backend_store.remove(fv) == -706
    config = ReplicateConfig()
    config.group_ids = ["sglang-hicache:" + keys[0]] * 2  # two ids for one key
    ptr, size = src.kv_buffer.ctypes.data, PAGE_BYTES
    assert backend_store.batch_put_from([keys[0] + "_x"], [ptr], [size], config) == [-600]


def test_misses_and_negative_codes(backend_store, key):
    pool, dst = MHAHostPool(4), MHAHostPool(5)
    register_buffer(backend_store, pool.kv_buffer)
    register_buffer(backend_store, dst.kv_buffer)
    b, b_dst = HiCacheBackend(backend_store, pool), HiCacheBackend(backend_store, dst)
    keys = [key("p0"), key("p1"), key("p2")]
    # Page p1's V gets no bytes: its put answers a negative code, so the page is not stored.
    _, sizes = pool.get_page_buffer_meta([0, 1, 2])
    sizes[3] = 0
    stored, _ = b.batch_set_v1(keys, [0, 1, 2], sizes_override=sizes)
    assert stored == [True, False, True]
    # Prefetch: the hit stops at the first page with a component missing.
    assert b_dst.batch_exists(keys) == 1
    assert b_dst.batch_get_v1(keys, [20, 21, 22]) == [True, False, True]
    res = backend_store.batch_get_into(b.component_keys([keys[1]]), *dst.get_page_buffer_meta([21]))
    assert res[0] == PAGE_BYTES and res[1] == -704
    assert b_dst.batch_get_v1([key("never")], [23]) == [False]


def test_clear_removes_everything(backend_store, key):
    pool = MHAHostPool(6)
    register_buffer(backend_store, pool.kv_buffer)
    b = HiCacheBackend(backend_store, pool)
    keys = [key("c0"), key("c1")]
    assert b.batch_set_v1(keys, [0, 1])[0] == [True, True]
    assert backend_store.remove_all() >= 4
    assert b.batch_exists(keys) == 0


def test_close_is_left_to_the_destructor(sglang_env, key):
    """MooncakeStore.close does nothing: dropping the store must release it, and the next
    backend (a restarted scheduler) sets up again."""
    store, _ = setup_store(load_config())
    pool = MHAHostPool(7)
    register_buffer(store, pool.kv_buffer)
    assert HiCacheBackend(store, pool).batch_set_v1([key("d0")], [0])[0] == [True]
    del store
    gc.collect()
    again, _ = setup_store(load_config())
    try:
        dst = MHAHostPool(8)
        register_buffer(again, dst.kv_buffer)
        assert HiCacheBackend(again, dst).batch_get_v1([key("d0")], [1]) == [True]
        assert dst.page(1) == pool.page(0)
    finally:
        again.close()


def test_standalone_storage_setup_dummy(monkeypatch, key):
    """MOONCAKE_STANDALONE_STORAGE: the host pool comes from MooncakeHostMemAllocator (as
    MooncakeHostTensorAllocator.allocate wraps it with ctypes) and the store is a dummy
    client of the real one (setup_dummy)."""
    import ctypes

    from mooncake.store import MooncakeHostMemAllocator

    size = 2 * NUM_PAGES * PAGE_BYTES
    allocator = MooncakeHostMemAllocator()
    ptr = allocator.alloc(size)
    assert isinstance(ptr, int) and ptr != 0
    array = np.frombuffer((ctypes.c_byte * size).from_address(ptr), dtype=np.uint8)
    pool = MHAHostPool(9)
    pool.kv_buffer = array.reshape(2, NUM_PAGES, PAGE_BYTES)
    pool.kv_buffer[:] = np.random.default_rng(9).integers(0, 255, pool.kv_buffer.shape)

    store = MooncakeDistributedStore()
    ret_code = store.setup_dummy(size, DEFAULT_LOCAL_BUFFER_SIZE, os.environ["MOONCAKE_HOSTNAME"])
    assert ret_code == 0
    try:
        warmup(store)
        register_buffer(store, pool.kv_buffer)
        b = HiCacheBackend(store, pool)
        keys = [key("s0"), key("s1")]
        assert b.batch_set_v1(keys, [0, 1])[0] == [True, True]
        expected = [pool.page(0), pool.page(1)]
        pool.kv_buffer[:] = 0
        assert b.batch_get_v1(keys, [0, 1]) == [True, True]
        assert [pool.page(0), pool.page(1)] == expected
    finally:
        store.close()


def test_tp_ranks_with_backup_and_prefetch_threads(sglang_env, key):
    """Two TP ranks, each its own store; per rank HiCacheController's backup thread stores
    pages while its prefetch thread polls batch_exists and reads what is there."""
    ranks, rounds, pages_per_round = 2, 8, 4
    stores = [setup_store(load_config(), tp_size=ranks)[0] for _ in range(ranks)]
    errors = []

    def rank_keys(r):
        return [key(f"r{r}-p{i}") for i in range(pages_per_round)]

    def backup(rank, backend):
        try:
            for r in range(rounds):
                pages = [(r * pages_per_round + i) % NUM_PAGES for i in range(pages_per_round)]
                stored, _ = backend.batch_set_v1(rank_keys(r), pages)
                assert stored == [True] * pages_per_round
        except Exception as e:
            errors.append((f"backup{rank}", repr(e)))

    def prefetch(rank, src, backend):
        try:
            done, deadline = 0, time.monotonic() + 60
            while done < rounds:
                assert time.monotonic() < deadline, f"round {done} never backed up"
                keys = rank_keys(done)
                hit = backend.batch_exists(keys)
                if hit < pages_per_round:
                    time.sleep(0.001)  # not backed up yet: the next prefetch round asks again
                    continue
                assert backend.batch_get_v1(keys, list(range(pages_per_round))) == [True] * hit
                for i in range(pages_per_round):
                    assert backend.pool.page(i) == src.page((done * pages_per_round + i) % NUM_PAGES)
                done += 1
        except Exception as e:
            errors.append((f"prefetch{rank}", repr(e)))

    threads = []
    try:
        for rank, store in enumerate(stores):
            src, dst = MHAHostPool(20 + rank), MHAHostPool(30 + rank)
            register_buffer(store, src.kv_buffer)
            register_buffer(store, dst.kv_buffer)
            threads.append(threading.Thread(
                target=backup, args=(rank, HiCacheBackend(store, src, tp_rank=rank))))
            threads.append(threading.Thread(
                target=prefetch, args=(rank, src, HiCacheBackend(store, dst, tp_rank=rank))))
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=120)
        assert not any(th.is_alive() for th in threads)
        assert errors == []
    finally:
        for store in stores:
            store.close()


@pytest.fixture
def unused_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
