"""The drop-in package (issue 17, part package): `import mooncake.store` as the engines
write it, every public name of the native module under it, setup() in Mooncake's positional,
keyword and dict forms (mooncake-integration/store/store_py.cpp) with a warning for each
setting accepted but not applied, master_server_addr compared as an endpoint, and
ReplicaDescriptor with Mooncake's methods, fields and enum values.

Runs in the main suite (ctest python_binding_test); the disk replica case also in
python_binding_ssd_test (MC_TEST_SSD=1, a daemon with an SSD tier: see test_ssd_api.py).
"""
import importlib
import os
import socket
import time
import uuid
import warnings

import pytest

import mooncake
import mooncake.store
import mooncake_store
from mooncake.store import MooncakeDistributedStore, ReplicaStatus

INVALID_PARAMS = -600
POOL = 16 << 20

needs_ssd = pytest.mark.skipif(
    os.environ.get("MC_TEST_SSD") != "1",
    reason="needs a cluster with an SSD tier and --enable_offload, and MC_TEST_SSD=1 "
           "(see test_ssd_api.py's docstring)")


def port_of(master):
    return int(master.rsplit(":", 1)[1])


def setup_args(master):
    """Mooncake's seven required positional arguments, as LMCache and vLLM pass them."""
    return ("localhost", "P2PHANDSHAKE", 0, POOL, "tcp", "", master)


def setup_warnings(call):
    """(result of call(), [messages of the UserWarnings setup() raised])."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = call()
    return rc, [str(w.message) for w in caught
                if issubclass(w.category, UserWarning) and "setup()" in str(w.message)]


# ---- import forms and names -----------------------------------------------------------


def test_import_forms_give_the_native_objects():
    from mooncake import store
    assert store is mooncake.store
    assert mooncake.store.MooncakeDistributedStore is mooncake_store.MooncakeDistributedStore
    assert MooncakeDistributedStore is mooncake_store.MooncakeDistributedStore
    assert mooncake.store.ReplicateConfig is mooncake_store.ReplicateConfig
    namespace = {}
    exec("from mooncake.store import *", namespace)
    assert {n for n in namespace if n != "__builtins__"} == set(mooncake.store.__all__)


def test_every_public_name_of_the_native_module():
    public = sorted(n for n in dir(mooncake_store) if not n.startswith("_"))
    assert mooncake.store.__all__ == public
    for name in public:
        assert getattr(mooncake.store, name) is getattr(mooncake_store, name), name
    assert not any(n.startswith("_") for n in mooncake.store.__all__)


def test_names_added_to_the_native_module_appear_without_editing_the_package():
    # What another part of the binding registers shows up: the list is read from the module.
    setattr(mooncake_store, "PackageTestAddedName", object())
    try:
        reloaded = importlib.reload(mooncake.store)
        assert "PackageTestAddedName" in reloaded.__all__
        assert reloaded.PackageTestAddedName is mooncake_store.PackageTestAddedName
    finally:
        delattr(mooncake_store, "PackageTestAddedName")
        importlib.reload(mooncake.store)
    assert "PackageTestAddedName" not in mooncake.store.__all__


# The names the engines import from mooncake.store, where, and which part provides each.
ENGINE_NAMES = {
    "MooncakeDistributedStore": "package",  # vLLM store/worker.py, SGLang mooncake_store.py,
                                            # LMCache mooncakestore_connector.py
    "ReplicateConfig": "package",           # the same three
    "ObjectDataType": "package",            # vLLM ec_connector mooncake_store_embedding
    "ReplicaStatus": "package",             # Mooncake's enums, exported like there
    "SoftPinAction": "package",
    "ReplicaDescriptor": "package",         # what batch_get_replica_desc returns (vLLM)
    "MooncakeHostMemAllocator": "segments",  # SGLang MooncakeHostTensorAllocator
}


@pytest.mark.parametrize("name", sorted(ENGINE_NAMES))
def test_engine_imports(name):
    part = ENGINE_NAMES[name]
    if part != "package" and not hasattr(mooncake.store, name):
        pytest.xfail(f"{name} comes with part {part} of issue 17")
    namespace = {}
    exec(f"from mooncake.store import {name}", namespace)
    assert namespace[name] is getattr(mooncake_store, name)


def test_mooncake_enum_values():
    s = mooncake.store
    # mooncake-store/include/types.h, replica.h, task_manager.h
    data_types = ["UNKNOWN", "KVCACHE", "TENSOR", "WEIGHT", "SAMPLE", "ACTIVATION", "GRADIENT",
                  "OPTIMIZER_STATE", "METADATA", "GENERAL"]
    assert [int(getattr(s.ObjectDataType, n)) for n in data_types] == list(range(10))
    assert [int(v) for v in (ReplicaStatus.UNDEFINED, ReplicaStatus.INITIALIZED,
                             ReplicaStatus.PROCESSING, ReplicaStatus.COMPLETE,
                             ReplicaStatus.REMOVED, ReplicaStatus.FAILED)] == list(range(6))
    assert [int(v) for v in (s.SoftPinAction.PRESERVE, s.SoftPinAction.ENABLE,
                             s.SoftPinAction.DISABLE)] == [0, 1, 2]
    assert [int(s.TaskType.REPLICA_COPY), int(s.TaskType.REPLICA_MOVE)] == [0, 1]
    assert [int(v) for v in (s.TaskStatus.PENDING, s.TaskStatus.PROCESSING,
                             s.TaskStatus.FAILED, s.TaskStatus.SUCCESS)] == [0, 1, 2, 3]
    # export_values(), as Mooncake: the values by themselves too; TaskStatus, registered
    # last, holds the names it shares with ReplicaStatus.
    assert s.COMPLETE is ReplicaStatus.COMPLETE and s.TENSOR is s.ObjectDataType.TENSOR
    assert s.PROCESSING is s.TaskStatus.PROCESSING and s.FAILED is s.TaskStatus.FAILED


# ---- setup(): positional, keyword and dict forms ----------------------------------------


def test_setup_positional_forms(master, key):
    s = MooncakeDistributedStore()
    for args in (setup_args(master),
                 setup_args(master) + (None,),                            # engine
                 setup_args(master) + (None, False, "", "default", False, 9300)):  # all 13
        rc, warned = setup_warnings(lambda: s.setup(*args))
        assert rc == 0 and warned == [], (args, warned)
        assert s.put(key("positional"), b"p") == 0
        assert s.get(key("positional")) == b"p"
        assert s.close() == 0
    with pytest.raises(TypeError, match="at most 13 positional"):
        s.setup(*(setup_args(master) + (None, False, "", "default", False, 9300, "x")))


def test_setup_keywords_with_mooncakes_names(master, key):
    s = MooncakeDistributedStore()
    rc, warned = setup_warnings(lambda: s.setup(
        local_hostname="localhost", metadata_server="P2PHANDSHAKE", global_segment_size=0,
        local_buffer_size=POOL, protocol="tcp", rdma_devices="", master_server_addr=master,
        engine=None, enable_ssd_offload=False, ssd_offload_path="", tenant_id="default",
        enable_client_http_server=False, client_http_port=9300))
    assert rc == 0 and warned == []
    assert s.put(key("kw"), b"kw") == 0
    assert s.close() == 0
    # SGLang's call: 8 positional (engine may be None), the rest as keywords.
    rc, warned = setup_warnings(lambda: s.setup(*setup_args(master), None, tenant_id="default"))
    assert rc == 0 and warned == []
    assert s.close() == 0
    with pytest.raises(TypeError, match="unexpected keyword argument 'ipc_socket_path'"):
        s.setup(*setup_args(master), ipc_socket_path="/x")  # a dict key only, as in Mooncake
    with pytest.raises(TypeError, match="multiple values for argument 'tenant_id'"):
        s.setup(*setup_args(master), None, False, "", "a", tenant_id="b")
    with pytest.raises(TypeError, match="client_http_port must be an int"):
        s.setup(*setup_args(master), client_http_port=1.5)


def test_tenant_default_is_mooncakes_default_tenant(master, key):
    plain = MooncakeDistributedStore()
    assert plain.connect(local_buffer_size=POOL) == 0
    s = MooncakeDistributedStore()
    assert s.setup(*setup_args(master), tenant_id="default") == 0
    assert s.put(key("default-tenant"), b"shared") == 0
    assert plain.get(key("default-tenant")) == b"shared"
    s.close()
    plain.close()


def test_dict_form_honours_the_keys(master, key):
    tenant = "pkg-" + uuid.uuid4().hex[:12]
    d = MooncakeDistributedStore()
    config = {"local_hostname": "localhost", "metadata_server": "P2PHANDSHAKE",
              "global_segment_size": "0", "local_buffer_size": "8MB", "protocol": "tcp",
              "rdma_devices": "", "master_server_addr": master, "enable_ssd_offload": "false",
              "ssd_offload_path": "", "tenant_id": tenant,
              "enable_client_http_server": "false", "client_http_port": "9300"}
    rc, warned = setup_warnings(lambda: d.setup(config))
    assert rc == 0 and warned == []
    # local_buffer_size: the pool is 8 MB.
    with pytest.raises(MemoryError):
        d.alloc(16 << 20)
    assert len(d.alloc(1 << 20)) == 1 << 20
    # tenant_id: the key is the tenant's, not the default tenant's.
    assert d.put(key("dict"), b"of the tenant") == 0
    plain = MooncakeDistributedStore()
    assert plain.connect(local_buffer_size=POOL) == 0
    assert plain.get(key("dict")) == b""
    assert d.remove_all(force=True) == 1
    plain.close()
    d.close()
    # Values the dict form refuses, as Mooncake's (-600).
    for bad in ({"client_http_port": "nine"}, {"local_buffer_size": "lots"},
                {"tenant_id": "not a tenant"}, {"enable_ssd_offload": "maybe"},
                {"master_server_addr": "nowhere"}):
        assert d.setup({**config, **bad}) == INVALID_PARAMS, bad
    # master_server_address: the engines' config files' spelling.
    assert d.setup({"master_server_address": master.replace("127.0.0.1", "localhost")}) == 0
    d.close()


# ---- warnings for settings accepted but not applied -------------------------------------


@pytest.mark.parametrize("extra, key_named", [
    ({"engine": object()}, "engine"),
    ({"ssd_offload_path": "/mnt/nvme"}, "ssd_offload_path"),
    ({"enable_client_http_server": True, "client_http_port": 9400}, "enable_client_http_server"),
])
def test_ignored_keyword_settings_warn(master, extra, key_named):
    s = MooncakeDistributedStore()
    with pytest.warns(UserWarning, match=key_named) as record:
        assert s.setup(*setup_args(master), **extra) == 0
    # Attributed to the caller's line, as warnings.warn(stacklevel=1) from Python would be.
    assert record[0].filename == __file__
    assert s.close() == 0


def test_ignored_dict_settings_warn(master):
    s = MooncakeDistributedStore()
    config = {"master_server_addr": master, "ipc_socket_path": "/tmp/mooncake.sock",
              "ssd_offload_path": "/mnt/nvme", "enable_client_http_server": "true",
              "client_http_port": "9400", "prefetch_threads": 4}
    rc, warned = setup_warnings(lambda: s.setup(config))
    assert rc == 0
    for named in ("ipc_socket_path", "ssd_offload_path", "enable_client_http_server, "
                  "client_http_port", "prefetch_threads: not a setting"):
        assert any(named in w for w in warned), (named, warned)
    assert len(warned) == 4
    assert s.close() == 0


def test_warnings_as_errors_stop_setup_before_connecting(master):
    s = MooncakeDistributedStore()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="engine"):
            s.setup(*setup_args(master), object())
    assert s.health_check() == 1  # not connected


# ---- master_server_addr: an endpoint, not a string --------------------------------------


def test_master_spellings_are_one_master(master, key):
    port = port_of(master)
    spellings = [f"127.0.0.1:{port}", f"localhost:{port}", f"127.1:{port}"]
    name = socket.gethostname()
    try:
        if socket.gethostbyname(name) == "127.0.0.1":
            spellings.append(f"{name}:{port}")  # this host's name, where it is loopback
    except OSError:
        pass
    for spelling in spellings:
        s = MooncakeDistributedStore()
        assert s.setup("localhost", "P2PHANDSHAKE", 0, POOL, "tcp", "", spelling) == 0, spelling
        assert s.put(key(spelling), b"same master") == 0
        assert s.close() == 0
    # The dict form likewise.
    s = MooncakeDistributedStore()
    assert s.setup({"master_server_addr": f"localhost:{port}"}) == 0
    assert s.close() == 0


@pytest.mark.parametrize("other", [
    "127.0.0.2:{port}",            # another address
    "127.0.0.1:1",                 # another port
    "[::1]:{port}",                # another family
    "no-such-host.invalid:{port}",  # a name that does not resolve
    "localhost",                   # no port
    "etcd://127.0.0.1:{port}",     # the daemon follows a fixed master
])
def test_other_masters_are_refused(master, other):
    s = MooncakeDistributedStore()
    started = time.monotonic()
    assert s.setup(*setup_args(other.format(port=port_of(master)))) == INVALID_PARAMS
    assert time.monotonic() - started < 30
    assert s.health_check() == 1
    assert s.setup(*setup_args(master)) == 0  # the handle is still usable
    assert s.close() == 0


# ---- ReplicaDescriptor ------------------------------------------------------------------


def classify_tier(replica_descs):
    """vLLM's _classify_replica_tier (store/worker.py), the way it reads a descriptor."""
    if not replica_descs:
        return "unknown"
    r = replica_descs[0]
    if r.is_memory_replica():
        return "memory"
    if r.is_disk_replica() or r.is_local_disk_replica():
        return "disk"
    return "unknown"


def test_memory_replica_descriptor(master, key):
    s = MooncakeDistributedStore()
    assert s.setup(*setup_args(master)) == 0
    assert s.put(key("mem"), b"m" * 3000) == 0
    [r] = s.get_replica_desc(key("mem"))
    assert r.is_memory_replica() and not r.is_disk_replica() and not r.is_local_disk_replica()
    assert r.status == ReplicaStatus.COMPLETE and int(r.status) == 3  # Mooncake's value
    buffer = r.get_memory_descriptor().buffer_descriptor
    assert isinstance(buffer, mooncake.store.Descriptor)
    assert buffer.size == 3000 and buffer.buffer_address == 0
    # The daemon's own memory holds it (the store lends none): the daemon's name, not the
    # store's ("localhost" with a port).
    assert buffer.transport_endpoint == r.location == os.environ["MOONCAKE_HOSTNAME"]
    assert s.get_hostname().startswith("localhost:")
    assert "transport_endpoint=" + r.location in repr(buffer)
    with pytest.raises(RuntimeError, match="Expected DiskDescriptor"):
        r.get_disk_descriptor()
    tiers = {k: classify_tier(v) for k, v in s.batch_get_replica_desc([key("mem")]).items()}
    assert tiers == {key("mem"): "memory"}
    assert s.close() == 0


@needs_ssd
def test_disk_replica_descriptor(master, key):
    s = MooncakeDistributedStore()
    assert s.setup(*setup_args(master), None, True) == 0  # enable_ssd_offload
    assert s.put(key("disk"), b"d" * 4096) == 0
    deadline = time.monotonic() + 60  # generous: a loaded machine offloads late
    disk = []
    while not disk and time.monotonic() < deadline:
        disk = [r for r in s.get_replica_desc(key("disk")) if r.is_disk_replica()]
        time.sleep(0.1)
    assert disk, "no disk replica within 60 s"
    r = disk[0]
    assert r.is_local_disk_replica() and not r.is_memory_replica()
    assert r.status == ReplicaStatus.COMPLETE
    d = r.get_disk_descriptor()
    assert isinstance(d, mooncake.store.DiskDescriptor)
    assert d.object_size == 4096 and d.file_path == ""
    with pytest.raises(RuntimeError, match="Expected MemoryDescriptor"):
        r.get_memory_descriptor()
    assert classify_tier(disk) == "disk"
    assert s.close() == 0
