"""LMCache's Mooncake store connector, replayed against this store: the calls
MooncakestoreConnector makes on MooncakeDistributedStore, with the same argument shapes and
the same checks on the answers, against the real master and daemon of the fixture
(scripts/with-cluster.sh), through `import mooncake.store` as LMCache imports it.

Read from LMCache/LMCache at commit 01aed921caf3d2597bbf1b6570d61a7b1a70e3a9,
lmcache/v1/storage_backend/connector/mooncakestore_connector.py (and
mooncakestore_adapter.py at 0e65d2fc0ec3975c78c3ce33a48e81505f315a21):

- MooncakestoreConnectorAdapter.create_connector: remote_url "mooncakestore://host:port/
  ?device=NAME" (one host only) -> MooncakestoreConnector(host, port, dev_name, ...).
- MooncakeStoreConfig: the JSON file MOONCAKE_CONFIG_PATH (from_file) if set, else the
  LMCache config's extra_config (load_from_lmcache_config: local_hostname, metadata_server,
  master_server_address required); keys global_segment_size (3355443200),
  local_buffer_size (1 GiB), protocol ("tcp"), device_name, transfer_timeout (1 s),
  storage_root_dir (exported as MOONCAKE_STORAGE_ROOT_DIR), prefer_local_alloc.
  A URL with a host and a port replaces master_server_address with "host:port".
- MooncakestoreConnector.__init__: `from mooncake.store import MooncakeDistributedStore,
  ReplicateConfig`; store.setup(local_hostname, metadata_server, global_segment_size,
  local_buffer_size, protocol, device_name, master_server_address) -- its return value is
  NOT checked; ReplicateConfig() with replica_num = 1 and, with prefer_local_alloc,
  preferred_segment = store.get_hostname(); _register_cpu_buffer: store.register_buffer(
  buffer.data_ptr(), buffer.numel()) of the local CPU backend's pinned uint8 buffer, `== 0`
  keeps the pointer (else a warning).
- exists / exists_sync: `return store.is_exist(key.to_string())`, used as a bool.
- put: save_chunk_meta False -> _put_without_metadata: asyncio.wait_for(asyncio.to_thread(
  store.put_from, key, ptr, size, replica_config), timeout=transfer_timeout); True ->
  _put_with_metadata: store.put_parts(key, metadata_bytes (28), kv_bytes) the same way.
  Neither looks at the returned code.
- batched_get: save_chunk_meta False -> _batch_get_into: asyncio.to_thread(
  store.batch_get_into, keys, ptrs, sizes) into full-chunk buffers; `n_read <= 0` is a miss
  (buffer released), else reshape_partial_chunk(obj, n_read) (the last chunk is shorter);
  True -> _batch_get_buffer: asyncio.to_thread(store.batch_get_buffer, keys); None is a
  miss, else memoryview(buffer)[:28] is the metadata, `len == length + 28`, and
  torch.frombuffer(buffer, offset=28) the data.
- close: _unregister_cpu_buffer (store.unregister_buffer(ptr), `== 0`), store.close().

The concurrency is asyncio's: every store call runs in the default executor's threads
(asyncio.to_thread), puts and gets of many chunks in flight at once.
"""
import asyncio
import json
import os
import struct
import urllib.parse
import uuid

import numpy as np
import pytest

try:
    import torch  # LMCache's buffers are torch CPU tensors (Debian's python3-torch)
except ImportError:  # numpy arrays stand in for them
    torch = None

from mooncake.store import MooncakeDistributedStore, ReplicateConfig

METADATA_BYTES_LEN = 28
CHUNK_BYTES = 64 << 10  # a full chunk: LMCache's chunk_size tokens of KV
BUFFER_CHUNKS = 64
INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704


def write_config(tmp_path, monkeypatch, **overrides):
    """The file MOONCAKE_CONFIG_PATH names, as an LMCache deployment writes it. The sizes are
    small for the data-path tests' sake (a setup faults its whole segment in);
    test_setup_with_lmcaches_default_sizes uses LMCache's own."""
    config = {
        "local_hostname": "localhost",
        "metadata_server": "P2PHANDSHAKE",
        "master_server_address": os.environ["MOONCAKE_MASTER"],
        "protocol": "tcp",
        "device_name": "",
        "global_segment_size": 32 << 20,
        "local_buffer_size": 64 << 20,
        "transfer_timeout": 5,
    }
    config.update(overrides)
    path = tmp_path / "mooncake.json"
    path.write_text(json.dumps(config))
    monkeypatch.setenv("MOONCAKE_CONFIG_PATH", str(path))


def load_config(extra_config=None):
    """MooncakeStoreConfig.from_file, else load_from_lmcache_config, with their defaults."""
    path = os.environ.get("MOONCAKE_CONFIG_PATH")
    if path is not None:
        with open(path) as f:
            c = json.load(f)
    elif extra_config is not None:
        c = dict(extra_config)
        for required in ("local_hostname", "metadata_server", "master_server_address"):
            c[required]  # noqa: B018 -- a KeyError, as LMCache's extra_config[...] raises
    else:
        raise ValueError("MOONCAKE_CONFIG_PATH/lmcache_config must be provided")
    return {
        "local_hostname": c.get("local_hostname"),
        "metadata_server": c.get("metadata_server"),
        "global_segment_size": c.get("global_segment_size", 3355443200),
        "local_buffer_size": c.get("local_buffer_size", 1073741824),
        "protocol": c.get("protocol", "tcp"),
        "device_name": c.get("device_name", ""),
        "master_server_address": c.get("master_server_address"),
        "transfer_timeout": c.get("transfer_timeout", 1),
        "prefer_local_alloc": c.get("prefer_local_alloc", False),
    }


class PinnedBuffer:
    """The local CPU backend's pinned buffer (one uint8 CPU tensor, registered by its
    data_ptr() and numel() as LMCache does) and a chunk allocator over a numpy view of it."""

    def __init__(self):
        n = BUFFER_CHUNKS * CHUNK_BYTES
        self.tensor = torch.zeros(n, dtype=torch.uint8) if torch is not None else None
        self.buffer = self.tensor.numpy() if torch is not None else np.zeros(n, dtype=np.uint8)
        self.next = 0

    def ptr_and_size(self):
        if self.tensor is not None:
            return self.tensor.data_ptr(), self.tensor.numel()
        return self.buffer.ctypes.data, self.buffer.size

    def allocate(self):
        assert self.next < BUFFER_CHUNKS, "the test allocates more chunks than the buffer has"
        chunk = self.buffer[self.next * CHUNK_BYTES:(self.next + 1) * CHUNK_BYTES]
        self.next += 1
        return chunk


class Connector:
    """MooncakestoreConnector's calls, each through asyncio.to_thread as LMCache runs them."""

    def __init__(self, host="", port=0, dev_name="", extra_config=None):
        self.store = MooncakeDistributedStore()
        self.config = load_config(extra_config)
        if host != "" and port != 0:
            self.config["master_server_address"] = host + ":" + str(port)
        if dev_name != "":
            self.config["device_name"] = dev_name
        c = self.config
        # LMCache ignores this answer; the replay keeps it to assert on.
        self.setup_rc = self.store.setup(c["local_hostname"], c["metadata_server"],
                                         c["global_segment_size"], c["local_buffer_size"],
                                         c["protocol"], c["device_name"],
                                         c["master_server_address"])
        self.replica_config = ReplicateConfig()
        self.replica_config.replica_num = 1
        if c["prefer_local_alloc"]:
            self.replica_config.preferred_segment = self.store.get_hostname()
        self.cpu = PinnedBuffer()
        ptr, size = self.cpu.ptr_and_size()
        self.registered_buffer_ptr = ptr
        if self.store.register_buffer(ptr, size) != 0:
            self.registered_buffer_ptr = None

    def exists_sync(self, key):
        return self.store.is_exist(key)

    async def put_without_metadata(self, key, chunk):
        return await asyncio.wait_for(
            asyncio.to_thread(self.store.put_from, key, chunk.ctypes.data, chunk.nbytes,
                              self.replica_config),
            timeout=self.config["transfer_timeout"])

    async def put_with_metadata(self, key, kv_bytes, shape=(2, 1, 1, 1), dtype=0, fmt=1):
        metadata_bytes = struct.pack("<7i", len(kv_bytes), *shape, dtype, fmt)
        assert len(metadata_bytes) == METADATA_BYTES_LEN
        return await asyncio.wait_for(
            asyncio.to_thread(self.store.put_parts, key, metadata_bytes, kv_bytes),
            timeout=self.config["transfer_timeout"])

    async def batch_get_into(self, keys):
        """_batch_get_into: (chunk, n_read) per key, None for a miss."""
        chunks = [self.cpu.allocate() for _ in keys]
        n_reads = await asyncio.to_thread(self.store.batch_get_into, keys,
                                          [c.ctypes.data for c in chunks],
                                          [c.nbytes for c in chunks])
        assert len(n_reads) == len(keys)
        return [(c[:n], n) if n > 0 else (None, n) for c, n in zip(chunks, n_reads)]

    async def batch_get_buffer(self, keys):
        """_batch_get_buffer + _process_buffer_with_metadata: the data bytes, or None."""
        buffers = await asyncio.to_thread(self.store.batch_get_buffer, keys)
        assert len(buffers) == len(keys)
        results = []
        for buffer in buffers:
            if buffer is None:
                results.append(None)
                continue
            view = memoryview(buffer)
            length = struct.unpack("<7i", view[:METADATA_BYTES_LEN])[0]
            assert len(view) == length + METADATA_BYTES_LEN
            if torch is not None:  # LMCache: torch.frombuffer(buffer, offset=28)
                data = torch.frombuffer(buffer, dtype=torch.uint8, offset=METADATA_BYTES_LEN,
                                        count=length)
                results.append(data.numpy().tobytes())
            else:
                results.append(np.frombuffer(buffer, dtype=np.uint8, offset=METADATA_BYTES_LEN,
                                             count=length).tobytes())
        return results

    def close(self):
        rc = None
        if self.registered_buffer_ptr is not None:
            rc = self.store.unregister_buffer(self.registered_buffer_ptr)
            self.registered_buffer_ptr = None
        return rc, self.store.close()


def engine_key(name):
    """CacheEngineKey.to_string(): fmt@model@world_size@worker_id@chunk_hash."""
    return f"vllm@test-model@1@0@{name}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def connector(tmp_path, monkeypatch):
    write_config(tmp_path, monkeypatch)
    c = Connector()
    assert c.setup_rc == 0
    yield c
    c.close()


def test_setup_from_config_file_registers_and_closes(tmp_path, monkeypatch):
    write_config(tmp_path, monkeypatch, prefer_local_alloc=True)
    c = Connector()
    assert c.setup_rc == 0
    assert c.registered_buffer_ptr is not None
    assert c.replica_config.replica_num == 1
    assert c.replica_config.preferred_segment == c.store.get_hostname() != ""
    assert c.close() == (0, 0)


def test_setup_from_extra_config(monkeypatch):
    monkeypatch.delenv("MOONCAKE_CONFIG_PATH", raising=False)
    c = Connector(extra_config={"local_hostname": "localhost", "metadata_server": "P2PHANDSHAKE",
                                "master_server_address": os.environ["MOONCAKE_MASTER"],
                                "global_segment_size": 0, "local_buffer_size": 16 << 20})
    assert c.setup_rc == 0
    assert c.close() == (0, 0)


def test_setup_with_lmcaches_default_sizes(monkeypatch):
    """extra_config naming no sizes: LMCache's defaults, a 3355443200-byte segment lent and a
    1 GiB local buffer, against a daemon started with no budget flag. Issue 30: the daemon's
    old default budget refused this setup with -1300 (which LMCache does not even check).
    A chunk put and read back, then close. (transfer_timeout is raised from LMCache's 1 s so
    that a loaded test machine does not time the put out.)"""
    monkeypatch.delenv("MOONCAKE_CONFIG_PATH", raising=False)
    c = Connector(extra_config={"local_hostname": "localhost", "metadata_server": "P2PHANDSHAKE",
                                "master_server_address": os.environ["MOONCAKE_MASTER"],
                                "transfer_timeout": 60})
    assert (c.config["global_segment_size"], c.config["local_buffer_size"]) == (3355443200,
                                                                                1 << 30)
    assert c.setup_rc == 0

    async def run():
        k = engine_key("default-sizes")
        chunk = c.cpu.allocate()
        chunk[:] = np.random.default_rng(9).integers(0, 255, CHUNK_BYTES, dtype=np.uint8)
        assert await c.put_without_metadata(k, chunk) == 0
        [(data, n)] = await c.batch_get_into([k])
        assert n == CHUNK_BYTES and np.array_equal(data, chunk)

    asyncio.run(run())
    assert c.close() == (0, 0)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_remote_url_names_the_master(tmp_path, monkeypatch, host):
    """remote_url mooncakestore://HOST:PORT/ replaces the config's master: "localhost:P"
    names the same master as the daemon's 127.0.0.1:P."""
    write_config(tmp_path, monkeypatch, master_server_address="10.0.0.1:1")
    url = urllib.parse.urlsplit(
        f"mooncakestore://{host}:{os.environ['MOONCAKE_MASTER'].split(':')[1]}/?device=")
    device = urllib.parse.parse_qs(url.query).get("device", [""])[0]
    c = Connector(host=url.hostname, port=url.port, dev_name=device)
    try:
        assert c.config["master_server_address"] == f"{host}:{url.port}"
        assert c.setup_rc == 0
    finally:
        c.close()


def test_put_from_then_batch_get_into_with_a_partial_chunk(connector):
    async def run():
        keys = [engine_key(f"c{i}") for i in range(3)]
        chunks = []
        for i, k in enumerate(keys):
            chunk = connector.cpu.allocate()
            chunk[:] = np.random.default_rng(i).integers(0, 255, CHUNK_BYTES, dtype=np.uint8)
            if i == 2:
                chunk = chunk[:CHUNK_BYTES // 4]  # the last chunk of the prompt is shorter
            chunks.append(chunk)
            assert await connector.put_without_metadata(k, chunk) == 0
            assert connector.exists_sync(k)
        got = await connector.batch_get_into(keys)
        assert [n for _, n in got] == [CHUNK_BYTES, CHUNK_BYTES, CHUNK_BYTES // 4]
        for (data, _), chunk in zip(got, chunks):
            assert np.array_equal(data, chunk)

    asyncio.run(run())


def test_put_parts_then_batch_get_buffer(connector):
    async def run():
        keys = [engine_key(f"m{i}") for i in range(3)]
        values = [os.urandom(1000 + i) for i in range(3)]
        for k, v in zip(keys, values):
            assert await connector.put_with_metadata(k, memoryview(v)) == 0
        assert await connector.batch_get_buffer(keys) == values

    asyncio.run(run())


def test_misses_and_a_chunk_larger_than_the_buffer(connector):
    async def run():
        missing = engine_key("missing")
        assert not connector.exists_sync(missing)
        assert await connector.batch_get_buffer([missing]) == [None]
        stored, big = engine_key("stored"), engine_key("big")
        assert await connector.put_without_metadata(stored, connector.cpu.allocate()) == 0
        # A chunk from a differently configured writer: more bytes than a chunk buffer.
        assert connector.store.put(big, bytes(CHUNK_BYTES + 1)) == 0
        got = await connector.batch_get_into([stored, missing, big])
        assert [n for _, n in got] == [CHUNK_BYTES, OBJECT_NOT_FOUND, INVALID_PARAMS]
        assert got[1][0] is None and got[2][0] is None

    asyncio.run(run())


def test_many_puts_and_gets_in_flight(connector):
    """LMCache's remote backend: puts of new chunks and batched gets of stored ones, each
    in asyncio's executor threads, all in flight at once."""
    chunks_total, readers = 24, 4

    async def run():
        keys = [engine_key(f"x{i}") for i in range(chunks_total)]
        sources = []
        for i in range(chunks_total):
            chunk = connector.cpu.allocate()
            chunk[:] = np.random.default_rng(100 + i).integers(0, 255, CHUNK_BYTES, dtype=np.uint8)
            sources.append(chunk)
        stored = [asyncio.Event() for _ in keys]

        async def put(i):
            assert await connector.put_without_metadata(keys[i], sources[i]) == 0
            stored[i].set()

        async def reader(r):
            mine = list(range(r, chunks_total, readers))
            for i in mine:
                await stored[i].wait()
            for start in range(0, len(mine), 3):
                batch = mine[start:start + 3]
                got = await connector.batch_get_into([keys[i] for i in batch])
                for i, (data, n) in zip(batch, got):
                    assert n == CHUNK_BYTES and np.array_equal(data, sources[i])

        await asyncio.gather(*(put(i) for i in range(chunks_total)),
                             *(reader(r) for r in range(readers)))

    asyncio.run(run())
