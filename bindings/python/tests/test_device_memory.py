"""Device memory through the binding (docs/mooncake-api.md, "Device memory").

vLLM's Mooncake store connector hands the store CUDA device addresses as ints: its KV
cache to register_buffer, and the layers' blocks to batch_put_from_multi_buffers and
batch_get_into_multi_buffers (put_from, get_into and the batch calls take them too). The
binding passes them through to the C library, which moves device bytes with the CUDA
driver's copies; where the binding itself gathers or scatters parts, it copies with
mooncake_store_copy_memory.

The CUDA driver is what MOONCAKE_CUDA_DRIVER names (default libcuda.so.1). CTest's
python_device_memory_test points it at tests/integration/fake_cuda_driver.c, whose device memory is
PROT_NONE to this process: a single dereference by the binding or the library kills the
test with SIGSEGV. On a GPU machine, MOONCAKE_CUDA_DRIVER=libcuda.so.1 runs the same tests
on real device memory. Without a driver the device tests skip, and memory that is not
host memory must be refused with -600 and a message, never dereferenced.
"""
import ctypes
import mmap
import os

import numpy as np
import pytest

import mooncake_store

MAP_FAILED = ctypes.c_void_p(-1).value


class Cuda:
    """The few driver calls a test needs to make and read device memory."""

    def __init__(self, lib):
        self.lib = lib
        self.allocations = []
        device, context = ctypes.c_int(), ctypes.c_void_p()
        for rc in (lib.cuInit(0), lib.cuDeviceGet(ctypes.byref(device), 0),
                   lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device),
                   lib.cuCtxSetCurrent(context)):
            assert rc == 0, rc
        lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_ulonglong, ctypes.c_void_p, ctypes.c_size_t]
        lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_size_t]

    def alloc(self, data):
        """Device memory holding data (bytes); its address as an int."""
        ptr = ctypes.c_ulonglong()
        assert self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(len(data))) == 0
        self.allocations.append(ptr.value)
        assert self.lib.cuMemcpyHtoD_v2(ptr.value, data, len(data)) == 0
        return ptr.value

    def read(self, ptr, n):
        out = ctypes.create_string_buffer(n)
        assert self.lib.cuMemcpyDtoH_v2(out, ptr, n) == 0
        return out.raw

    def free_all(self):
        for ptr in self.allocations:
            self.lib.cuMemFree_v2(ctypes.c_ulonglong(ptr))
        self.allocations = []


@pytest.fixture(scope="module")
def driver():
    path = os.environ.get("MOONCAKE_CUDA_DRIVER") or "libcuda.so.1"
    if path == "none":
        pytest.skip("MOONCAKE_CUDA_DRIVER=none")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        pytest.skip(f"no CUDA driver to test with ({e})")
    return lib


@pytest.fixture
def cuda(driver):
    c = Cuda(driver)
    yield c
    c.free_all()


def fake_stats(cuda):
    """The fake driver's copy counts, or None on a real driver."""
    try:
        get = cuda.lib.fake_cuda_stats_get
    except AttributeError:
        return None
    out = (ctypes.c_uint64 * 9)()
    get(out)
    return {"to_host": out[1], "to_device": out[3], "refused": out[6]}


def payload(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


@pytest.fixture
def not_host_memory():
    """An address of this process that is no host memory it may touch (PROT_NONE, 0)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    size = 1 << 20
    ptr = libc.mmap(None, size, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    assert ptr not in (None, MAP_FAILED)
    yield ptr
    libc.munmap(ctypes.c_void_p(ptr), ctypes.c_size_t(size))


# ---- without touching device memory: refused, never dereferenced ------------------------------


def test_memory_that_is_not_host_memory_is_refused(store, key, not_host_memory):
    assert store.put_from(key("a"), not_host_memory, 4096) == -600
    assert "is not host memory" in store.last_error()
    assert store.upsert_from(key("a"), not_host_memory, 4096) == -600
    assert store.put(key("b"), b"x" * 4096) == 0
    assert store.get_into(key("b"), not_host_memory, 4096) == -600
    assert store.register_buffer(not_host_memory, 4096) == -600
    host = np.zeros(64, np.uint8)
    assert store.batch_put_from([key("c"), key("d")], [not_host_memory, host.ctypes.data],
                                [4096, 64]) == [-600, 0]
    assert "entry 0: buffer at 0x" in store.last_error()


def test_multi_buffer_parts_that_are_not_host_memory(store, key, not_host_memory):
    host = np.arange(256, dtype=np.uint8)
    keys = [key("bad"), key("good")]
    results = store.batch_put_from_multi_buffers(
        keys, [[host.ctypes.data, not_host_memory], [host.ctypes.data, host.ctypes.data]],
        [[128, 128], [128, 128]])
    assert results[0] == -600 and results[1] == 0
    assert store.get(keys[1]) == bytes(host[:128]) * 2
    got = store.batch_get_into_multi_buffers(
        [keys[1]], [[host.ctypes.data, not_host_memory]], [[128, 128]])
    assert got == [-600]
    assert store.put_from_with_metadata(key("meta"), not_host_memory, host.ctypes.data, 64,
                                        8) == -600


# ---- device memory ------------------------------------------------------------------------------


def test_put_from_and_get_into_device_memory(store, key, cuda):
    data = payload(100000, 1)
    src = cuda.alloc(data)
    dst = cuda.alloc(bytes(len(data)))
    before = fake_stats(cuda)
    assert store.put_from(key(), src, len(data)) == 0
    assert store.get(key()) == data
    assert store.get_into(key(), dst, len(data)) == len(data)
    assert cuda.read(dst, len(data)) == data
    after = fake_stats(cuda)
    if after is not None:
        assert after["to_host"] > before["to_host"]
        assert after["to_device"] > before["to_device"]
        assert after["refused"] == before["refused"]


def test_batches_mix_device_and_host_memory(store, key, cuda):
    values = [payload(5000, 10 + i) for i in range(3)]
    host = np.frombuffer(values[1], dtype=np.uint8).copy()
    pool = store.alloc(5000)
    pool[:] = values[2]
    keys = [key(str(i)) for i in range(3)]
    ptrs = [cuda.alloc(values[0]), host.ctypes.data, pool]
    assert store.batch_put_from(keys, ptrs, [5000] * 3) == [0, 0, 0]
    back = [cuda.alloc(bytes(5000)), cuda.alloc(bytes(5000)), np.zeros(5000, np.uint8)]
    got = store.batch_get_into(keys, [back[0], back[1], back[2].ctypes.data], [5000] * 3)
    assert got == [5000] * 3
    assert cuda.read(back[0], 5000) == values[0]
    assert cuda.read(back[1], 5000) == values[1]
    assert back[2].tobytes() == values[2]


def test_vllm_layers_in_registered_device_memory(store, key, cuda):
    """vLLM's store worker: the KV cache registered, each block's layers one value."""
    layers, block = 4, 2048
    kv = payload(layers * 8 * block, 20)
    base = cuda.alloc(kv)
    assert store.register_buffer(base, len(kv)) == 0
    try:
        keys = [key(f"block{b}") for b in range(8)]
        addrs = [[base + (layer * 8 + b) * block for layer in range(layers)] for b in range(8)]
        sizes = [[block] * layers for _ in range(8)]
        assert store.batch_put_from_multi_buffers(keys, addrs, sizes) == [0] * 8
        expect = [b"".join(kv[a - base:a - base + block] for a in row) for row in addrs]
        assert store.get_batch(keys) == expect
        # Read back into another registered device buffer, the layers rotated.
        dest = cuda.alloc(bytes(len(kv)))
        assert store.register_buffer(dest, len(kv)) == 0
        back = [[dest + (((layer + 1) % layers) * 8 + b) * block for layer in range(layers)]
                for b in range(8)]
        assert store.batch_get_into_multi_buffers(keys, back, sizes) == [layers * block] * 8
        for b in range(8):
            for layer in range(layers):
                part = cuda.read(back[b][layer], block)
                assert part == expect[b][layer * block:(layer + 1) * block]
        assert store.unregister_buffer(dest) == 0
    finally:
        assert store.unregister_buffer(base) == 0


def test_ranges_into_registered_device_memory(store, key, cuda):
    data = payload(65536, 30)
    assert store.put(key(), data) == 0
    dest = cuda.alloc(bytes(65536))
    assert store.register_buffer(dest, 65536) == 0
    try:
        # The binding knows the destination's size from the registered range.
        got = store.get_into_ranges([dest], [[key()]], [[[0, 40000]]], [[[100, 5000]]],
                                    [[[1000, 2000]]])
        assert got == [[[1000, 2000]]]
        back = cuda.read(dest, 65536)
        assert back[0:1000] == data[100:1100]
        assert back[40000:42000] == data[5000:7000]
    finally:
        assert store.unregister_buffer(dest) == 0


def test_put_from_with_metadata_from_device_memory(store, key, cuda):
    data = payload(3000, 40)
    meta = b"header-0123456"
    assert store.put_from_with_metadata(key(), cuda.alloc(data), np.frombuffer(
        meta, np.uint8).ctypes.data, len(data), len(meta)) == 0
    assert store.get(key()) == meta + data
