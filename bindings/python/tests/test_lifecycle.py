"""setup / connect / close / health_check / get_hostname, and what happens to pool memory
across close() and a new connect."""
import os

import numpy as np
import pytest

import mooncake_store
from mooncake_store import MooncakeDistributedStore

INVALID_PARAMS = -600


def test_setup_seven_positional(master, key):
    s = MooncakeDistributedStore()
    # Mooncake's order: hostname, metadata server, global segment, local buffer, protocol,
    # device, master. The ones the daemon decides are accepted and ignored.
    assert s.setup("localhost", "http://127.0.0.1:8080/metadata", 16 << 20, 16 << 20,
                   "tcp", "", master) == 0
    assert s.put(key(), b"via setup") == 0
    assert s.get(key()) == b"via setup"
    assert s.close() == 0


def test_setup_as_mooncakes_own_tests_do(master, key):
    """The setup of Mooncake's mooncake-wheel/tests/test_distributed_object_store.py
    (get_client): a 3200 MB segment lent, a 512 MB local buffer, TCP, device "ibp6s0",
    against a daemon started with no budget flag. Issue 30: the daemon's old default budget
    refused it with -1300."""
    s = MooncakeDistributedStore()
    assert s.setup("localhost", "http://127.0.0.1:8080/metadata", 3200 * 1024 * 1024,
                   512 * 1024 * 1024, "tcp", "ibp6s0", master) == 0
    assert s.put(key(), b"Hello, World!") == 0
    assert s.get(key()) == b"Hello, World!"
    assert s.close() == 0


def test_setup_keywords_and_mooncake_spellings(master):
    s = MooncakeDistributedStore()
    assert s.setup(local_hostname="localhost", metadata_server="P2PHANDSHAKE",
                   global_segment_size=0, local_buffer_size="8MB", protocol="tcp",
                   rdma_devices="", master_server_address=master, engine=None) == 0
    assert s.close() == 0


@pytest.mark.parametrize("size", [16 << 20, "16MB", "16 MB", "16mb", "16MiB", "0.5GB"])
def test_setup_dict_sizes(master, size):
    s = MooncakeDistributedStore()
    config = {"local_hostname": "localhost", "metadata_server": "P2PHANDSHAKE",
              "global_segment_size": size, "local_buffer_size": size, "protocol": "tcp",
              "device_name": "", "master_server_address": master,
              "enable_ssd_offload": False}  # a key of a feature configured elsewhere: ignored
    assert s.setup(config) == 0
    assert s.health_check() == 0
    assert s.close() == 0


@pytest.mark.parametrize("bad", ["50%", "-1", "12XB", "", "1.5", -1, 2 ** 64, 1.5, None])
def test_setup_rejects_bad_sizes(master, bad):
    s = MooncakeDistributedStore()
    config = {"local_hostname": "localhost", "metadata_server": "P2PHANDSHAKE",
              "local_buffer_size": bad, "master_server_address": master}
    assert s.setup(config) == INVALID_PARAMS
    assert s.setup("localhost", "P2PHANDSHAKE", bad, 1 << 20, "tcp", "", master) == INVALID_PARAMS
    assert s.health_check() == 1  # nothing was connected


def test_setup_dict_minimal_uses_defaults(master):
    s = MooncakeDistributedStore()
    assert s.setup({"master_server_address": master}) == 0
    assert s.close() == 0


def test_setup_argument_errors(master):
    s = MooncakeDistributedStore()
    with pytest.raises(TypeError, match="missing required argument 'master_server_addr'"):
        s.setup("localhost", "P2PHANDSHAKE", 0, 1 << 20, "tcp", "")
    with pytest.raises(TypeError, match="unexpected keyword"):
        s.setup("localhost", "P2PHANDSHAKE", 0, 1 << 20, "tcp", "", master, bogus=1)
    with pytest.raises(TypeError, match="multiple values"):
        s.setup("localhost", "P2PHANDSHAKE", 0, 1 << 20, "tcp", "", master, protocol="tcp")
    with pytest.raises(TypeError, match="must be a str"):
        s.setup(1, "P2PHANDSHAKE", 0, 1 << 20, "tcp", "", master)


def test_setup_wrong_master_is_refused():
    s = MooncakeDistributedStore()
    rc = s.setup("localhost", "P2PHANDSHAKE", 0, 1 << 20, "tcp", "", "127.0.0.1:1")
    assert rc == INVALID_PARAMS


def test_setup_twice_is_refused(master):
    s = MooncakeDistributedStore()
    assert s.setup("localhost", "P2PHANDSHAKE", 0, 1 << 20, "tcp", "", master) == 0
    assert s.setup("localhost", "P2PHANDSHAKE", 0, 1 << 20, "tcp", "", master) == INVALID_PARAMS
    assert s.close() == 0


def test_setup_global_segment_adds_capacity(master, key):
    # global_segment_size > 0 mounts extra memory in the daemon for this handle; its objects
    # go away at close. With it, the handle can hold its own objects.
    s = MooncakeDistributedStore()
    assert s.setup("localhost", "P2PHANDSHAKE", "32MB", "8MB", "tcp", "", master) == 0
    assert s.put(key(), b"x" * 1000) == 0
    assert s.close() == 0


def test_connect_defaults_and_explicit_socket(key):
    s = MooncakeDistributedStore()
    assert s.connect() == 0  # $MOONCAKE_SOCKET, DEFAULT_LOCAL_BUFFER_SIZE
    assert mooncake_store.DEFAULT_LOCAL_BUFFER_SIZE == 1 << 30
    assert s.connect() == INVALID_PARAMS  # already connected
    assert s.close() == 0
    assert s.connect(os.environ["MOONCAKE_SOCKET"], local_buffer_size="4 MB") == 0
    assert s.close() == 0
    assert s.connect(socket_path="/nonexistent/mooncaked.sock") == -900  # nobody answers
    assert s.connect(local_buffer_size="50%") == INVALID_PARAMS


def test_close_is_safe_twice_and_before_connect():
    s = MooncakeDistributedStore()
    assert s.close() == 0
    assert s.connect() == 0
    assert s.close() == 0
    assert s.close() == 0


def test_health_check_and_hostname(store):
    assert store.health_check() == 0
    assert store.get_hostname() == os.environ["MOONCAKE_HOSTNAME"]
    assert store.close() == 0
    assert store.health_check() == 1
    assert store.get_hostname() == ""


def test_calls_on_an_unconnected_store_return_codes(key):
    s = MooncakeDistributedStore()
    assert s.put(key(), b"v") == INVALID_PARAMS
    assert s.get(key()) == b""
    assert s.get_buffer(key()) is None
    assert s.is_exist(key()) == INVALID_PARAMS
    assert s.batch_is_exist([key()]) == [INVALID_PARAMS]
    assert s.get_size(key()) == INVALID_PARAMS
    with pytest.raises(MemoryError):
        s.alloc(4096)


def test_context_manager(key):
    with MooncakeDistributedStore() as s:
        assert s.connect() == 0
        assert s.put(key(), b"v") == 0
    assert s.health_check() == 1


def test_strerror():
    assert mooncake_store.strerror(-704) == "object not found"
    assert mooncake_store.strerror(0) == "success"
    assert mooncake_store.ABI_VERSION >= 1


def test_pool_memory_survives_close_and_reconnect(key):
    s = MooncakeDistributedStore()
    assert s.connect(local_buffer_size=4 << 20) == 0
    view = s.alloc(1 << 20)
    arr = np.frombuffer(view, dtype=np.uint8)
    arr[:] = 42
    assert s.close() == 0
    arr[:] = 43  # close() keeps the pool mapped

    # Same pool size: the library reuses the pool, so the memory is still zero-copy.
    assert s.connect(local_buffer_size=4 << 20) == 0
    assert s.put_from(key("same"), arr.ctypes.data, arr.nbytes) == 0
    assert s.close() == 0

    # Another size: a fresh handle; the old pool stays mapped while views of it live.
    assert s.connect(local_buffer_size=8 << 20) == 0
    arr[:] = 44
    assert s.put_from(key("other"), arr.ctypes.data, arr.nbytes) == 0
    out = np.empty_like(arr)
    assert s.get_into(key("other"), out.ctypes.data, out.nbytes) == out.nbytes
    assert (out == 44).all()
    assert s.close() == 0


def test_pool_memory_outlives_the_store(key):
    s = MooncakeDistributedStore()
    assert s.connect(local_buffer_size=4 << 20) == 0
    arr = np.frombuffer(s.alloc(4096), dtype=np.uint8)
    handle = s.get_buffer(key("missing"))
    assert handle is None
    assert s.put(key(), b"abc") == 0
    handle = s.get_buffer(key())
    del s  # the handle (and its pool) is destroyed only when arr and handle are gone
    arr[:] = 1
    assert bytes(handle) == b"abc"
    assert arr.sum() == 4096


def test_registered_buffers_survive_a_new_handle(key):
    s = MooncakeDistributedStore()
    assert s.connect(local_buffer_size=4 << 20) == 0
    buf = np.zeros(4096, dtype=np.uint8)
    assert s.register_buffer(buf.ctypes.data, buf.nbytes) == 0
    assert s.close() == 0
    assert s.connect(local_buffer_size=8 << 20) == 0  # fresh handle: registration replayed
    # Registered, so a size past its end is refused by the library, as before.
    assert s.put_from(key(), buf.ctypes.data, buf.nbytes + 1) == INVALID_PARAMS
    assert s.unregister_buffer(buf.ctypes.data) == 0
    assert s.close() == 0
