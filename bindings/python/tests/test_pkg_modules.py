"""Mooncake's package layout (issue 31, part pkg): the modules of Mooncake's wheel besides
mooncake.store -- mooncake_config, buffer_pool (and the package's top-level BufferPool),
_fast_copy, engine -- with Mooncake's names and behaviour, and the setup/config
differences: ReplicateConfig.data_type an ObjectDataType, setup(enable_ssd_offload=True)
warning when the daemon has no SSD tier, BufferPool.acquire(0) of size 0.

Runs in the main suite (ctest python_binding_test), against its cluster (no SSD tier).
"""
import ctypes
import json
import logging
import os
import pathlib
import re
import warnings

import numpy as np
import pytest

import mooncake
import mooncake_store
from mooncake import BufferPool, RegisteredBufferPool
from mooncake import mooncake_config as cfg
from mooncake._fast_copy import concat_arrays_into
from mooncake.engine import ERR_NOT_IMPLEMENTED, TransferEngine, TransferOpcode
from mooncake.mooncake_config import MooncakeConfig
from mooncake.store import MooncakeDistributedStore, ObjectDataType, ReplicateConfig

GIB = 1 << 30


# ---- mooncake.mooncake_config ------------------------------------------------------------


@pytest.mark.parametrize("text, size", [
    (4096, 4096), (1.9, 1), ("4096", 4096), (" 3 gb ", 3 * GIB), ("1.5GB", 3 * GIB // 2),
    ("512k", 512 << 10), ("2m", 2 << 20), ("1t", 1 << 40), ("7b", 7), ("1.5", 1),
    ("1e3", 1000),
])
def test_config_sizes_read_as_mooncake_reads_them(text, size):
    assert cfg._parse_segment_size(text) == size


@pytest.mark.parametrize("text", ["", "  ", "gb", "k", "lots", "12XB"])
def test_config_sizes_refuse_what_is_no_size(text):
    with pytest.raises(ValueError):
        cfg._parse_segment_size(text)


def test_config_booleans_refuse_unknown_words():
    for word, value in [("On", True), ("enable", True), ("1", True), ("off", False),
                        ("", False), (None, False), (0, False), (2, True)]:
        assert cfg._parse_bool(word) is value
    with pytest.raises(ValueError, match="Invalid boolean value"):
        cfg._parse_bool("maybe")


def write(tmp_path, settings):
    path = tmp_path / "mooncake.json"
    path.write_text(json.dumps(settings))
    return str(path)


REQUIRED = {"local_hostname": "h", "metadata_server": "P2PHANDSHAKE",
            "master_server_address": "127.0.0.1:50051"}


def test_config_file_defaults_and_overrides(tmp_path):
    c = MooncakeConfig.from_file(write(tmp_path, REQUIRED))
    assert (c.global_segment_size, c.local_buffer_size) == (3355443200, GIB)
    assert (c.protocol, c.device_name, c.tenant_id, c.client_http_port) == ("tcp", "", "default",
                                                                            9300)
    assert c.enable_ssd_offload is False and c.ssd_offload_path == ""
    c = MooncakeConfig.from_file(write(tmp_path, {**REQUIRED, "global_segment_size": "2GB",
                                                  "protocol": " RDMA ", "tenant_id": None,
                                                  "enable_ssd_offload": "false",
                                                  "client_http_port": "19300"}))
    assert (c.global_segment_size, c.protocol, c.tenant_id) == (2 * GIB, "rdma", "default")
    assert c.enable_ssd_offload is False and c.client_http_port == 19300
    for name in REQUIRED:
        partial = {k: v for k, v in REQUIRED.items() if k != name}
        with pytest.raises(ValueError, match=f"Missing required config field: {name}"):
            MooncakeConfig.from_file(write(tmp_path, partial))


def test_config_checks_every_instance(caplog):
    base = dict(local_hostname="h", metadata_server="m", global_segment_size=0,
                local_buffer_size=0, protocol="tcp", device_name="",
                master_server_address="127.0.0.1:50051")
    with pytest.raises(ValueError, match="Invalid protocol"):
        MooncakeConfig(**{**base, "protocol": "  "})
    with pytest.raises(ValueError, match="global_segment_size"):
        MooncakeConfig(**{**base, "global_segment_size": -1})
    with pytest.raises(ValueError, match="master_server_address"):
        MooncakeConfig(**{**base, "master_server_address": ""})
    with caplog.at_level(logging.WARNING, logger=cfg.logger.name):
        assert MooncakeConfig(**{**base, "protocol": "Rmda"}).protocol == "rmda"
    assert "Unrecognised protocol" in caplog.text


def test_config_from_environment(monkeypatch, tmp_path):
    for name in ("MOONCAKE_CONFIG_PATH", "MOONCAKE_MASTER"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="Neither the environment variable"):
        MooncakeConfig.load_from_env()
    monkeypatch.setenv("MOONCAKE_MASTER", "10.0.0.1:50051")
    monkeypatch.setenv("MOONCAKE_GLOBAL_SEGMENT_SIZE", "1gb")
    monkeypatch.setenv("MOONCAKE_OFFLOAD_ENABLED", "yes")
    monkeypatch.setenv("MOONCAKE_TENANT_ID", "team-a")
    c = MooncakeConfig.load_from_env()
    assert (c.master_server_address, c.global_segment_size) == ("10.0.0.1:50051", GIB)
    assert (c.local_hostname, c.metadata_server) == ("localhost", "P2PHANDSHAKE")
    assert c.enable_ssd_offload is True and c.tenant_id == "team-a"
    monkeypatch.setenv("MOONCAKE_CONFIG_PATH", write(tmp_path, {**REQUIRED, "tenant_id": "f"}))
    assert MooncakeConfig.load_from_env().tenant_id == "f"  # the file wins


def test_config_drives_setup(monkeypatch, master, key):
    """What the engines do: setup() with a config's fields."""
    monkeypatch.delenv("MOONCAKE_CONFIG_PATH", raising=False)
    monkeypatch.setenv("MOONCAKE_MASTER", master)
    monkeypatch.setenv("MOONCAKE_LOCAL_BUFFER_SIZE", "16MB")
    monkeypatch.setenv("MOONCAKE_GLOBAL_SEGMENT_SIZE", "0")
    c = MooncakeConfig.load_from_env()
    s = MooncakeDistributedStore()
    assert s.setup(c.local_hostname, c.metadata_server, c.global_segment_size,
                   c.local_buffer_size, c.protocol, c.device_name,
                   c.master_server_address) == 0
    assert s.put(key(), b"configured") == 0 and s.get(key()) == b"configured"
    assert s.close() == 0


# ---- the package, mooncake.buffer_pool ------------------------------------------------


def test_readme_imports_of_the_modules_run():
    """bindings/python/README.md's list of Mooncake's modules imports as written."""
    readme = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme[readme.index("## Mooncake's other modules"):]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace = {}
    exec(block, namespace)
    assert namespace["BufferPool"] is mooncake_store.BufferPool
    assert namespace["TransferOpcode"].Write == 1


def test_package_exports_the_native_buffer_pool():
    assert BufferPool is RegisteredBufferPool is mooncake_store.BufferPool
    assert mooncake.buffer_pool.BufferPool is BufferPool
    assert mooncake.__all__ == ["BufferPool", "RegisteredBufferPool"]


def test_buffer_pool_lease_of_size_zero(store):
    pool = BufferPool(store, 1 << 20, min_size_class=4096, alignment=4096)
    lease = pool.acquire(0)
    assert lease.size == 0 and len(lease.buffer) == 0  # as Mooncake's
    one = pool.acquire(1)
    assert one.size == 1 and len(one.buffer) == 1
    one.release()
    lease.release()
    pool.close()


# ---- ReplicateConfig.data_type, setup(enable_ssd_offload) -----------------------------


def test_data_type_is_an_object_data_type(store, key):
    c = ReplicateConfig()
    assert isinstance(c.data_type, ObjectDataType) and c.data_type == ObjectDataType.UNKNOWN
    c.data_type = ObjectDataType.TENSOR
    assert c.data_type == ObjectDataType.TENSOR
    c.data_type = 9  # ints are accepted on assignment, and read back as the enum
    assert isinstance(c.data_type, ObjectDataType) and c.data_type == ObjectDataType.GENERAL
    assert store.put(key(), b"typed", c) == 0
    c.data_type = 10  # no such type: kept as the int, and refused by puts
    assert c.data_type == 10
    assert store.put(key("bad"), b"typed", c) == -600


def test_enable_ssd_offload_warns_without_a_daemon_ssd_tier(master, key):
    args = ("localhost", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master)
    for flag, warned in [(True, True), (False, False)]:
        s = MooncakeDistributedStore()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert s.setup(*args, enable_ssd_offload=flag) == 0
        messages = [str(w.message) for w in caught if "no SSD tier" in str(w.message)]
        assert bool(messages) is warned, messages
        # Puts are stored as any other: nothing asks for an offload of every put.
        assert s.put(key(str(flag)), b"v") == 0
        assert [r.is_memory_replica() for r in s.get_replica_desc(key(str(flag)))] == [True]
        assert s.close() == 0
    s = MooncakeDistributedStore()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # -W error: the setup does not stand
        with pytest.raises(UserWarning, match="no SSD tier"):
            s.setup(*args, enable_ssd_offload=True)
    assert s.health_check() == 1


@pytest.mark.skipif(os.environ.get("MC_TEST_SSD") != "1",
                    reason="needs a daemon with an SSD tier and MC_TEST_SSD=1 "
                           "(ctest python_binding_ssd_test)")
def test_ssd_tier_setup_is_quiet_with_enable_ssd_offload(master):
    s = MooncakeDistributedStore()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning to raise
        assert s.setup("localhost", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master,
                       enable_ssd_offload=True) == 0
    assert s.last_error() == ""  # the tier question left no failure behind
    assert s.close() == 0


# ---- mooncake._fast_copy ---------------------------------------------------------------


def test_fast_copy_gathers_a_range_of_arrays():
    arrays = [np.arange(n, dtype=np.int32) + 100 * n for n in range(1, 9)]
    want = np.concatenate(arrays[2:7]).tobytes()
    for threads in (1, 3, 16):
        out = ctypes.create_string_buffer(len(want))
        assert concat_arrays_into(arrays, ctypes.addressof(out), len(out), 2, 5, threads) \
            == len(want)
        assert out.raw == want
    out = ctypes.create_string_buffer(1 << 10)
    total = sum(a.nbytes for a in arrays)
    assert concat_arrays_into(arrays, ctypes.addressof(out), len(out)) == total  # all, clamped
    assert concat_arrays_into(arrays, ctypes.addressof(out), 0, 99, 5) == 0  # empty range


def test_fast_copy_refuses_before_writing():
    out = ctypes.create_string_buffer(b"\x7f" * 8)
    with pytest.raises(ValueError, match="destination buffer too small: need 16 bytes, got 8"):
        concat_arrays_into([np.zeros(2, np.int64)], ctypes.addressof(out), 8)
    with pytest.raises(ValueError, match=r"arrays\[1\] is not C-contiguous"):
        concat_arrays_into([np.zeros(1), np.zeros(8)[::2]], ctypes.addressof(out), 8)
    with pytest.raises(TypeError, match=r"arrays\[0\] is not an ndarray"):
        concat_arrays_into([b"bytes"], ctypes.addressof(out), 8)
    assert out.raw == b"\x7f" * 8 + b"\x00"


# ---- mooncake.engine -------------------------------------------------------------------


def test_transfer_engine_answers_not_implemented_and_says_why():
    assert int(TransferOpcode.Read) == 0 and int(TransferOpcode.Write) == 1
    assert TransferEngine.TransferOpcode is TransferOpcode
    engine = TransferEngine()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert engine.initialize("localhost", "P2PHANDSHAKE", "tcp", "") == ERR_NOT_IMPLEMENTED
        assert engine.initialize("localhost", "P2PHANDSHAKE", "tcp", "") == ERR_NOT_IMPLEMENTED
        assert engine.transfer_sync_write("peer:1", 0, 0, 8) == ERR_NOT_IMPLEMENTED
        assert engine.register_memory(0, 8) == ERR_NOT_IMPLEMENTED
        assert engine.allocate_managed_buffer(4096) == 0
        assert engine.get_notifies() == []
    reasons = [str(w.message) for w in caught]
    assert len(reasons) == 5  # once per method and engine
    assert all("mooncaked" in r and "MooncakeDistributedStore" in r for r in reasons)
    with pytest.raises(RuntimeError, match="not available here"):
        engine.transfer_write_on_cuda("peer:1", 0, 0, 8)


def test_setup_accepts_an_engine_with_a_warning(master):
    s = MooncakeDistributedStore()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert s.setup("localhost", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master,
                       TransferEngine()) == 0
    assert any("engine:" in str(w.message) for w in caught)
    assert s.close() == 0
