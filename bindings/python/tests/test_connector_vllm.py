"""vLLM's MooncakeStoreConnector, replayed against this store: the calls its worker makes on
MooncakeDistributedStore, with the same argument shapes and the same checks on the answers,
against the real master and daemon of the fixture (scripts/with-cluster.sh), through
`import mooncake.store` as vLLM imports it.

Read from vllm-project/vllm at commit 003df2961dd8830c317a61f9745ccd557da9fa06,
vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py:

- MooncakeStoreConfig.from_file / load_from_config: a JSON file named by
  MOONCAKE_CONFIG_PATH; keys metadata_server, master_server_address, protocol (default
  "rdma"), device_name, mode ("embedded": global_segment_size > 0, default 4 GiB;
  "standalone-store": global_segment_size == 0), global_segment_size, local_buffer_size
  (default 4 GiB), enable_offload.
- MooncakeStoreWorker.__init__: `from mooncake.store import MooncakeDistributedStore,
  ReplicateConfig`; store.setup(local_hostname, metadata_server, global_segment_size,
  local_buffer_size, protocol, device_name, master_server_address), seven positional
  arguments, `ret != 0` raises RuntimeError; ReplicateConfig(), with `.preferred_segment`
  set when kv_connector_extra_config names one.
- MooncakeStoreWorker.register_kv_caches: per KV-cache storage (deduplicated by base
  pointer) store.register_buffer(base_addr, region_len) with ints, `ret != 0` logged; a K/V
  first layout is split into one segment per outer index (base + idx * seg_stride, block
  length seg_stride // num_blocks). A block's value is that block in every segment.
- KVCacheStoreSendingThread._handle_request (the one writer thread): keys ->
  store.batch_is_exist(keys), a key is missing when `exists != 1`; the missing ones go to
  store.batch_put_from_multi_buffers(keys, addrs, sizes, replicate_config) (list of lists
  of ints); `v < 0` is a failed key; MOONCAKE_NO_AVAILABLE_HANDLE (-200) among the codes
  marks the request as under pressure (its later batches are skipped until one succeeds);
  the saved offset only advances when no key failed, so a failed key is put again next time.
- KVCacheStoreRecvingThread._handle_request (VLLM_MOONCAKE_LOAD_RECV_THREADS reader
  threads on one queue): store.batch_get_into_multi_buffers(keys, addrs, sizes); `value < 0`
  marks the key's block id as a load error, `value >= 0` is bytes read; with
  VLLM_MOONCAKE_STORE_TIER_LOG, _get_replica_tiers_by_key first: store.batch_get_replica_desc
  (keys) -> `.get(key)` -> descriptors[0].is_memory_replica() / is_disk_replica().
- MooncakeStoreWorker.lookup: store.batch_is_exist(candidate_keys), a block present when
  every rank namespace answers `== 1`.
- LookupKeyServer (RESET_MSG): store.remove_all(force=True); MooncakeStoreWorker.close:
  store.close(), called again from __del__ (idempotent).

vLLM's KV caches are GPU tensors in production; here they are torch CPU tensors (Debian's
python3-torch), their addresses passed as ints exactly as data_ptr() gives them, and numpy
arrays in host memory where torch is not installed (the round trip and the threads run
with both).

The main suite's cluster has 1 GB to lend; the NO_AVAILABLE_HANDLE case needs a full one
and runs with MC_TEST_SMALL_SEGMENT=1 under a daemon lending 16 MB -- CTest's
python_connector_pressure_test does:

    scripts/with-cluster.sh --build build --segment 16MB -- env MC_TEST_SMALL_SEGMENT=1 \
        PYTHONPATH=build/bindings/python /usr/bin/python3 -m pytest -q -p no:cacheprovider \
        -k pressure bindings/python/tests/test_connector_vllm.py
"""
import json
import os
import queue
import threading

import numpy as np
import pytest

from mooncake.store import MooncakeDistributedStore, ReplicateConfig

MOONCAKE_NO_AVAILABLE_HANDLE = -200
OBJECT_NOT_FOUND = -704
NUM_LAYERS = 2
NUM_BLOCKS = 16
BLOCK_BYTES = 4096  # one block of one K (or V) segment of one layer
POOL = 64 << 20

needs_small_segment = pytest.mark.skipif(
    os.environ.get("MC_TEST_SMALL_SEGMENT") != "1",
    reason="needs a cluster lending 16 MB and MC_TEST_SMALL_SEGMENT=1 (see the docstring)")


def write_config(tmp_path, monkeypatch, **overrides):
    """The file MOONCAKE_CONFIG_PATH names, as a vLLM deployment writes it for this store
    (an override of None leaves the key out: vLLM's default then). The sizes are small for
    the data-path tests' sake (a setup faults its whole segment in);
    test_worker_setup_with_vllms_default_sizes uses vLLM's own."""
    config = {
        "metadata_server": "P2PHANDSHAKE",
        "master_server_address": os.environ["MOONCAKE_MASTER"],
        "protocol": "tcp",
        "device_name": "",
        "mode": "embedded",
        "global_segment_size": 32 << 20,
        "local_buffer_size": POOL,
    }
    config.update(overrides)
    config = {k: v for k, v in config.items() if v is not None}
    path = tmp_path / "mooncake.json"
    path.write_text(json.dumps(config))
    monkeypatch.setenv("MOONCAKE_CONFIG_PATH", str(path))
    return config


def load_config():
    """MooncakeStoreConfig.load_from_config: the keys vLLM reads, with its defaults."""
    with open(os.environ["MOONCAKE_CONFIG_PATH"]) as f:
        c = json.load(f)
    return {
        "metadata_server": c.get("metadata_server", ""),
        "master_server_address": c.get("master_server_address", ""),
        "protocol": c.get("protocol", "rdma"),
        "device_name": c.get("device_name", ""),
        "mode": c.get("mode", "embedded"),
        "global_segment_size": c.get("global_segment_size", 4 << 30),
        "local_buffer_size": c.get("local_buffer_size", 4 << 30),
    }


try:
    import torch
except ImportError:  # the numpy cases still run
    torch = None

# The KV caches' kind: torch CPU tensors, as vLLM's worker holds them, and numpy arrays.
BACKENDS = ["torch", "numpy"] if torch is not None else ["numpy"]


class KVCaches:
    """Per layer one (2, NUM_BLOCKS, BLOCK_BYTES) tensor: FlashAttention's K/V-first layout,
    so register_kv_caches splits each into a K and a V segment. backend "torch": CPU
    tensors, addressed by data_ptr() and stride() as vLLM's register_kv_caches does;
    "numpy": arrays."""

    def __init__(self, seed, backend=BACKENDS[0]):
        rng = np.random.default_rng(seed)
        arrays = [rng.integers(0, 255, (2, NUM_BLOCKS, BLOCK_BYTES), dtype=np.uint8)
                  for _ in range(NUM_LAYERS)]
        self.layers = [torch.from_numpy(a).clone() for a in arrays] if backend == "torch" \
            else arrays
        self.segment_addrs, self.block_lens = [], []
        for layer in self.layers:
            base, seg_stride = self._base(layer), self._stride0(layer)
            for idx in range(layer.shape[0]):
                self.segment_addrs.append(base + idx * seg_stride)
                self.block_lens.append(seg_stride // NUM_BLOCKS)

    @staticmethod
    def _base(layer):
        return layer.data_ptr() if torch is not None and isinstance(layer, torch.Tensor) \
            else layer.ctypes.data

    @staticmethod
    def _stride0(layer):
        if torch is not None and isinstance(layer, torch.Tensor):
            return layer.stride(0) * layer.element_size()
        return layer.strides[0]

    @staticmethod
    def _nbytes(layer):
        if torch is not None and isinstance(layer, torch.Tensor):
            return layer.numel() * layer.element_size()
        return layer.nbytes

    def register(self, store):
        """register_kv_caches: one register_buffer per storage; vLLM logs a nonzero ret."""
        return [store.register_buffer(self._base(layer), self._nbytes(layer))
                for layer in self.layers]

    def prepare_value(self, block_id):
        """ChunkedTokenDatabase.prepare_value_for_block: the block in every segment."""
        return ([a + block_id * n for a, n in zip(self.segment_addrs, self.block_lens)],
                list(self.block_lens))

    def block(self, block_id):
        return b"".join(np.asarray(layer[kv, block_id]).tobytes()
                        for layer in self.layers for kv in (0, 1))


def setup_worker(config, preferred_segment=None):
    """MooncakeStoreWorker.__init__'s store part."""
    store = MooncakeDistributedStore()
    ret = store.setup("127.0.0.1", config["metadata_server"], config["global_segment_size"],
                      config["local_buffer_size"], config["protocol"], config["device_name"],
                      config["master_server_address"])
    if ret != 0:
        raise RuntimeError(f"Initialize MooncakeDistributedStore failed: {ret}")
    replicate_config = ReplicateConfig()
    if preferred_segment is not None:
        replicate_config.preferred_segment = preferred_segment
    return store, replicate_config


def save_blocks(store, replicate_config, caches, keys, block_ids):
    """KVCacheStoreSendingThread._handle_request: dedup by batch_is_exist, put the missing
    ones. Returns (keys put, their results)."""
    exists = store.batch_is_exist(keys)
    assert len(exists) == len(keys)
    missing = [i for i, e in enumerate(exists) if e != 1]
    if not missing:
        return [], []
    keys = [keys[i] for i in missing]
    addrs, sizes = zip(*(caches.prepare_value(block_ids[i]) for i in missing))
    res = store.batch_put_from_multi_buffers(keys, list(addrs), list(sizes), replicate_config)
    assert len(res) == len(keys)
    return keys, res


def load_blocks(store, caches, keys, block_ids):
    """KVCacheStoreRecvingThread._handle_request: returns (results, block ids with load
    errors)."""
    addrs, sizes = zip(*(caches.prepare_value(b) for b in block_ids))
    res = store.batch_get_into_multi_buffers(keys, list(addrs), list(sizes))
    assert len(res) == len(keys)
    return res, {b for b, v in zip(block_ids, res) if v < 0}


def lookup(store, keys):
    """MooncakeStoreWorker.lookup: blocks of the prefix present (every answer == 1)."""
    hits = 0
    for e in store.batch_is_exist(keys):
        if e != 1:
            break
        hits += 1
    return hits


def tier_of(store, keys):
    """_get_replica_tiers_by_key + _classify_replica_tier."""
    descs = store.batch_get_replica_desc(keys)
    tiers = {}
    for k in keys:
        d = descs.get(k) if hasattr(descs, "get") else descs[k]
        if not d:
            tiers[k] = "unknown"
        elif d[0].is_memory_replica():
            tiers[k] = "memory"
        elif d[0].is_disk_replica():
            tiers[k] = "disk"
        else:
            tiers[k] = "unknown"
    return tiers


def block_size_bytes():
    return NUM_LAYERS * 2 * BLOCK_BYTES


@pytest.fixture
def worker(tmp_path, monkeypatch):
    write_config(tmp_path, monkeypatch)
    store, rc = setup_worker(load_config())
    yield store, rc
    store.close()


@pytest.mark.parametrize("mode,segment", [("embedded", 32 << 20), ("standalone-store", 0)])
def test_worker_setup_from_config_file_and_close(tmp_path, monkeypatch, mode, segment):
    write_config(tmp_path, monkeypatch, mode=mode, global_segment_size=segment)
    store, rc = setup_worker(load_config())
    assert rc.replica_num == 1 and rc.preferred_segment == ""
    assert store.health_check() == 0
    # close() from the shutdown path, then again from __del__.
    assert store.close() == 0
    assert store.close() == 0


def test_worker_setup_with_vllms_default_sizes(tmp_path, monkeypatch, key):
    """A config file naming no sizes: vLLM's defaults, a 4 GiB segment lent ("embedded")
    and a 4 GiB local buffer, against a daemon started with no budget flag. Issue 30: the
    daemon's old default budget refused this setup with -1300. A block saved and loaded back
    through the worker's calls, then close."""
    write_config(tmp_path, monkeypatch, global_segment_size=None, local_buffer_size=None)
    config = load_config()
    assert (config["global_segment_size"], config["local_buffer_size"]) == (4 << 30, 4 << 30)
    store, rc = setup_worker(config)
    caches = KVCaches(7)
    assert caches.register(store) == [0] * NUM_LAYERS
    keys = [key("default-sizes")]
    assert save_blocks(store, rc, caches, keys, [0]) == (keys, [0])
    res, errors = load_blocks(store, caches, keys, [1])
    assert errors == set() and res == [block_size_bytes()]
    assert caches.block(1) == caches.block(0)
    assert store.close() == 0


def test_worker_setup_failure_raises(tmp_path, monkeypatch):
    """A master other than the daemon's: setup answers nonzero and vLLM raises."""
    write_config(tmp_path, monkeypatch, master_server_address="127.0.0.1:1")
    with pytest.raises(RuntimeError, match="Initialize MooncakeDistributedStore failed"):
        setup_worker(load_config())


@pytest.mark.parametrize("backend", BACKENDS)
def test_save_dedup_lookup_load_round_trip(worker, key, backend):
    store, rc = worker
    src, dst = KVCaches(1, backend), KVCaches(2, backend)
    assert src.register(store) == [0] * NUM_LAYERS
    assert dst.register(store) == [0] * NUM_LAYERS
    keys = [key(f"blk{i}") for i in range(8)]
    blocks = list(range(8))

    assert lookup(store, keys) == 0
    put_keys, res = save_blocks(store, rc, src, keys, blocks)
    assert put_keys == keys and res == [0] * len(keys)
    # The next step saves the same prefix again: every key exists, nothing is put.
    assert save_blocks(store, rc, src, keys, blocks) == ([], [])
    assert lookup(store, keys) == len(keys)

    # The consumer loads into other block ids of its own cache.
    dst_blocks = [b + 8 for b in blocks]
    res, errors = load_blocks(store, dst, keys, dst_blocks)
    assert errors == set()
    assert res == [block_size_bytes()] * len(keys)
    for s, d in zip(blocks, dst_blocks):
        assert dst.block(d) == src.block(s)


def test_preferred_segment_from_extra_config(tmp_path, monkeypatch, key):
    """kv_connector_extra_config's preferred segment: the daemon's own name places there."""
    write_config(tmp_path, monkeypatch)
    probe = MooncakeDistributedStore()
    assert probe.connect(local_buffer_size=1 << 20) == 0
    daemon = probe.get_hostname()
    probe.close()
    store, rc = setup_worker(load_config(), preferred_segment=daemon)
    try:
        caches = KVCaches(3)
        assert caches.register(store) == [0] * NUM_LAYERS
        keys = [key("pref0"), key("pref1")]
        assert save_blocks(store, rc, caches, keys, [0, 1])[1] == [0, 0]
        descs = store.batch_get_replica_desc(keys)
        for k in keys:
            assert [d.location for d in descs[k]] == [daemon]
    finally:
        store.close()


def test_tier_log_classifies_memory_replicas_and_misses(worker, key):
    store, rc = worker
    caches = KVCaches(4)
    caches.register(store)
    keys = [key("t0"), key("t1")]
    assert save_blocks(store, rc, caches, keys, [0, 1])[1] == [0, 0]
    missing = key("never-stored")
    assert tier_of(store, keys + [missing]) == {keys[0]: "memory", keys[1]: "memory",
                                                missing: "unknown"}


def test_load_miss_marks_only_the_missing_block(worker, key):
    store, rc = worker
    src, dst = KVCaches(5), KVCaches(6)
    src.register(store)
    dst.register(store)
    stored = [key("m0"), key("m2")]
    assert save_blocks(store, rc, src, stored, [0, 2])[1] == [0, 0]
    keys = [stored[0], key("m1-evicted"), stored[1]]
    res, errors = load_blocks(store, dst, keys, [10, 11, 12])
    assert res[0] == res[2] == block_size_bytes()
    assert res[1] == OBJECT_NOT_FOUND
    assert errors == {11}
    assert dst.block(10) == src.block(0) and dst.block(12) == src.block(2)


def test_failed_key_is_retried_by_the_next_save(worker, key):
    """A negative code for one key: vLLM counts it failed and does not advance the saved
    offset; the next save's batch_is_exist finds the good keys and puts only that one."""
    store, rc = worker
    caches = KVCaches(7)
    caches.register(store)
    keys = [key("ok0"), key("bad"), key("ok1")]
    addrs, sizes = zip(*(caches.prepare_value(b) for b in (0, 1, 2)))
    sizes = [list(s) for s in sizes]
    sizes[1] = [0] * len(sizes[1])  # a value of no bytes: refused
    res = store.batch_put_from_multi_buffers(keys, list(addrs), sizes, rc)
    failed = [i for i, v in enumerate(res) if v < 0]
    assert failed == [1] and res[0] == res[2] == 0
    assert MOONCAKE_NO_AVAILABLE_HANDLE not in {res[i] for i in failed}
    put_keys, res = save_blocks(store, rc, caches, keys, [0, 1, 2])
    assert put_keys == [keys[1]] and res == [0]


def test_reset_removes_everything(worker, key):
    store, rc = worker
    caches = KVCaches(8)
    caches.register(store)
    keys = [key(f"r{i}") for i in range(4)]
    assert save_blocks(store, rc, caches, keys, list(range(4)))[1] == [0] * 4
    assert store.remove_all(force=True) >= len(keys)
    assert store.batch_is_exist(keys) == [0] * len(keys)


def test_one_writer_thread_and_reader_threads(worker, key):
    """get_finished(): the sending thread saves requests while VLLM_MOONCAKE_LOAD_RECV_THREADS
    receiving threads, sharing one queue, look up and load the requests saved so far."""
    store, rc = worker
    requests, blocks_per_request, readers = 12, 4, 4
    src = KVCaches(9)
    assert src.register(store) == [0] * NUM_LAYERS
    dsts = [KVCaches(100 + r) for r in range(readers)]
    for d in dsts:
        assert d.register(store) == [0] * NUM_LAYERS
    recv_queue, errors = queue.Queue(), []

    def request_keys(r):
        return [key(f"req{r}-{i}") for i in range(blocks_per_request)]

    def request_blocks(r):
        return [(r * blocks_per_request + i) % NUM_BLOCKS for i in range(blocks_per_request)]

    def sending_thread():
        try:
            for r in range(requests):
                _, res = save_blocks(store, rc, src, request_keys(r), request_blocks(r))
                assert [v for v in res if v < 0] == []
                recv_queue.put(r)
        except Exception as e:
            errors.append(("send", repr(e)))
        finally:
            for _ in range(readers):
                recv_queue.put(None)

    def recving_thread(t):
        try:
            while (r := recv_queue.get()) is not None:
                keys = request_keys(r)
                assert lookup(store, keys) == blocks_per_request
                dst_blocks = list(range(blocks_per_request))
                res, load_errors = load_blocks(store, dsts[t], keys, dst_blocks)
                assert load_errors == set()
                assert res == [block_size_bytes()] * blocks_per_request
                for s, d in zip(request_blocks(r), dst_blocks):
                    assert dsts[t].block(d) == src.block(s)
        except Exception as e:
            errors.append((f"recv{t}", repr(e)))

    threads = [threading.Thread(target=sending_thread)]
    threads += [threading.Thread(target=recving_thread, args=(t,)) for t in range(readers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads)
    assert errors == []


@needs_small_segment
def test_pressure_skips_the_request_until_a_batch_succeeds(tmp_path, monkeypatch, key):
    """NO_AVAILABLE_HANDLE (-200) among a batch's codes: vLLM marks the request as under
    pressure and skips its store batches; the next batch that succeeds clears it."""
    write_config(tmp_path, monkeypatch, mode="standalone-store", global_segment_size=0)
    store, rc = setup_worker(load_config())
    try:
        big = np.ones(24 << 20, dtype=np.uint8)  # more than the 16 MB the cluster lends
        assert store.register_buffer(big.ctypes.data, big.nbytes) == 0
        half = big.nbytes // 2
        pressure, skipped = False, set()

        def store_batch(req_id, keys, addrs, sizes):
            nonlocal pressure
            if pressure and req_id in skipped:
                return None  # _should_skip_request
            res = store.batch_put_from_multi_buffers(keys, addrs, sizes, rc)
            failed_codes = {v for v in res if v < 0}
            if MOONCAKE_NO_AVAILABLE_HANDLE in failed_codes:
                pressure = True
                skipped.add(req_id)
            elif not failed_codes:
                pressure = False
                skipped.clear()
            return res

        res = store_batch("req-a", [key("huge"), key("fits")],
                          [[big.ctypes.data, big.ctypes.data + half], [big.ctypes.data]],
                          [[half, half], [4096]])
        assert res == [MOONCAKE_NO_AVAILABLE_HANDLE, 0]
        assert pressure and skipped == {"req-a"}
        assert store_batch("req-a", [key("next")], [[big.ctypes.data]], [[4096]]) is None
        assert store_batch("req-b", [key("other")], [[big.ctypes.data]], [[4096]]) == [0]
        assert not pressure and skipped == set()
        assert store.batch_is_exist([key("huge"), key("fits"), key("other")]) == [0, 1, 1]
    finally:
        store.close()


def test_earlier_revision_puts_without_a_config(worker, key):
    """vLLM's earlier worker (v1/mooncake/mooncake_store_worker.py at 0c7053c3abdf,
    KVCacheStoreSendingThread._handle_request) calls batch_put_from_multi_buffers(keys,
    addrs, sizes) with no ReplicateConfig; its reader the same batch_get_into_multi_buffers."""
    store, _ = worker
    src, dst = KVCaches(10), KVCaches(11)
    src.register(store)
    dst.register(store)
    keys = [key("old0"), key("old1")]
    addrs, sizes = zip(*(src.prepare_value(b) for b in (0, 1)))
    assert store.batch_put_from_multi_buffers(keys, list(addrs), list(sizes)) == [0, 0]
    res, errors = load_blocks(store, dst, keys, [5, 6])
    assert errors == set() and res == [block_size_bytes()] * 2
    assert dst.block(5) == src.block(0) and dst.block(6) == src.block(1)
