"""The tensor calls of Mooncake's MooncakeDistributedStore (docs/mooncake-api.md, "Tensors"):
the stored bytes checked field by field against the documented layout (so Mooncake's client
reads what is stored here, and the other way round), objects written by hand the way
Mooncake writes them read back, every dtype, the _with_tp split and its keys, the _from /
_into forms over pool and registered memory, the codes and return shapes of bad requests,
get_tensor_into_cuda without CUDA, and the module without torch."""
import ctypes
import os
import struct
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import mooncake_store  # noqa: E402
from mooncake.store import ReplicateConfig  # noqa: E402

INVALID_PARAMS = -600
FILE_NOT_FOUND = -1100
HEADER = 304

# The documented layout (docs/mooncake-api.md, "The stored layout"): offsets of the header.
MAGIC, VERSION, HEADER_SIZE, DTYPE, NDIM, LAYOUT, FLAGS = 0, 4, 6, 8, 12, 16, 20
DATA_OFFSET, DATA_BYTES, GLOBAL_SHAPE, LOCAL_SHAPE, AXIS_COUNT, AXES = 24, 32, 40, 104, 168, 176
DTYPE_CODES = {"float32": 0, "float64": 1, "int8": 2, "uint8": 3, "int16": 4, "uint16": 5,
               "int32": 6, "uint32": 7, "int64": 8, "uint64": 9, "bool": 10, "float16": 11,
               "bfloat16": 12, "float8_e4m3fn": 13, "float8_e5m2": 14}


def i32(b, at):
    return struct.unpack_from("<i", b, at)[0]


def i64(b, at):
    return struct.unpack_from("<q", b, at)[0]


def tensor_bytes(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def hand_built(dtype_code, shape, data, layout=0, global_shape=None, axes=()):
    """A tensor object written byte by byte from the documented layout, as Mooncake's client
    writes one: the header, then the elements."""
    g = list(global_shape if global_shape is not None else shape)
    h = bytearray(HEADER)
    struct.pack_into("<IHHiiIIQQ", h, 0, 0x4d4f4f4e, 1, HEADER, dtype_code, len(shape), layout,
                     0, HEADER, len(data))
    for i in range(8):
        struct.pack_into("<q", h, GLOBAL_SHAPE + 8 * i, g[i] if i < len(g) else -1)
        struct.pack_into("<q", h, LOCAL_SHAPE + 8 * i, shape[i] if i < len(shape) else -1)
    struct.pack_into("<I", h, AXIS_COUNT, len(axes))
    for i, (kind, rank, count, split, ident, extent) in enumerate(axes):
        struct.pack_into("<iiiiiiq", h, AXES + 32 * i, kind, i, rank, count, split, ident, extent)
    return bytes(h) + data


def assert_full_header(b, dtype_code, shape, nbytes):
    assert b[MAGIC:MAGIC + 4] == bytes([0x4e, 0x4f, 0x4f, 0x4d])
    assert struct.unpack_from("<HH", b, VERSION) == (1, HEADER)
    assert (i32(b, DTYPE), i32(b, NDIM), i32(b, LAYOUT), i32(b, FLAGS)) == (
        dtype_code, len(shape), 0, 0)
    assert (i64(b, DATA_OFFSET), i64(b, DATA_BYTES)) == (HEADER, nbytes)
    for i in range(8):
        want = shape[i] if i < len(shape) else -1
        assert i64(b, GLOBAL_SHAPE + 8 * i) == want and i64(b, LOCAL_SHAPE + 8 * i) == want
    assert i32(b, AXIS_COUNT) == 0 and b[AXIS_COUNT + 4:HEADER] == bytes(HEADER - AXIS_COUNT - 4)
    assert len(b) == HEADER + nbytes


def test_stored_bytes_are_mooncakes_layout(store, key):
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    assert store.put_tensor(key(), t) == 0
    raw = store.get(key())
    assert_full_header(raw, 0, (3, 4), 48)
    assert raw[HEADER:] == tensor_bytes(t)
    # Mooncake's module helpers give the same header.
    header, address, size, owner = mooncake_store._serialize_tensor(t)
    assert header == raw[:HEADER] and size == 48 and address == owner.data_ptr()
    assert mooncake_store._tensor_metadata_size() == HEADER
    assert torch.equal(mooncake_store._deserialize_tensor(raw), t)
    with pytest.raises(ValueError, match="invalid serialized Mooncake tensor payload"):
        mooncake_store._deserialize_tensor(raw[:-1])
    with pytest.raises(ValueError, match="unsupported tensor"):
        mooncake_store._serialize_tensor([1, 2])


def test_objects_written_as_mooncake_writes_them_are_read(store, key):
    # Every dtype this torch has: an object built from the layout, read by get_tensor.
    for name, code in DTYPE_CODES.items():
        dtype = getattr(torch, name, None)
        if dtype is None:
            continue
        t = (torch.arange(6) % 2).to(dtype).reshape(2, 3) if name != "bool" else \
            torch.tensor([[True, False, True], [False, True, False]])
        assert store.put(key(name), hand_built(code, (2, 3), tensor_bytes(t))) == 0
        got = store.get_tensor(key(name))
        assert got.dtype == dtype and tuple(got.shape) == (2, 3)
        assert tensor_bytes(got) == tensor_bytes(t), name
        # ... and what put_tensor stores of it is byte for byte that object.
        assert store.put_tensor(key(name + "-again"), got) == 0
        assert store.get(key(name + "-again")) == store.get(key(name))
    # A type this torch lacks (uint16 before PyTorch 2.3): None, and why.
    if not hasattr(torch, "uint16"):
        assert store.put(key("u16"), hand_built(5, (2,), b"\x01\x00\x02\x00")) == 0
        assert store.get_tensor(key("u16")) is None
        assert "uint16" in store.last_error()


def test_shapes_scalars_and_empty_tensors(store, key):
    cases = [torch.tensor(3.5, dtype=torch.float64), torch.empty((0, 7), dtype=torch.int16),
             torch.empty((2, 0, 3), dtype=torch.bfloat16), torch.arange(2 ** 8).reshape(*[2] * 8)]
    keys = [key(str(i)) for i in range(len(cases))]
    assert store.batch_put_tensor(keys, cases) == [0] * len(cases)
    for t, got in zip(cases, store.batch_get_tensor(keys)):
        assert got.dtype == t.dtype and got.shape == t.shape and torch.equal(got, t)
    assert len(store.get(keys[1])) == HEADER  # an empty tensor is its header alone
    # Non-contiguous tensors are stored as their contiguous copy.
    t = torch.arange(20).reshape(4, 5).t()
    assert store.put_tensor(key("t"), t) == 0 and torch.equal(store.get_tensor(key("t")), t)


def test_refusals_say_why(store, key):
    assert store.put_tensor(key(), [1, 2, 3]) == INVALID_PARAMS
    assert "not a torch.Tensor" in store.last_error()
    assert store.put_tensor(key(), torch.zeros(1, dtype=torch.complex64)) == INVALID_PARAMS
    assert "complex64" in store.last_error()
    assert store.put_tensor(key(), torch.zeros([1] * 9)) == INVALID_PARAMS
    assert "9 dimensions" in store.last_error()
    assert store.get_tensor(key("missing")) is None
    assert store.put(key("raw"), b"not a tensor at all" * 20) == 0
    assert store.get_tensor(key("raw")) is None and "magic" in store.last_error()
    # A batch stores what it can; lists of different lengths store nothing.
    assert store.batch_put_tensor([key("a"), key("b")], [torch.ones(2), "x"]) == [0, -600]
    assert store.get_tensor(key("a")) is not None
    assert store.batch_put_tensor([key("c"), key("d")], [torch.ones(2)]) == [-600, -600]
    assert store.batch_put_tensor([], []) == []
    assert store.get_tensor(key("c")) is None


def test_upsert_replaces_put_keeps(store, key):
    assert store.put_tensor(key(), torch.ones(3)) == 0
    assert store.put_tensor(key(), torch.zeros(5)) == 0  # put never overwrites
    assert torch.equal(store.get_tensor(key()), torch.ones(3))
    assert store.upsert_tensor(key(), torch.zeros(2, 2, dtype=torch.int64)) == 0
    assert torch.equal(store.get_tensor(key()), torch.zeros(2, 2, dtype=torch.int64))
    assert store.batch_upsert_tensor([key(), key("new")], [torch.ones(1), torch.ones(4)]) == [0, 0]
    assert torch.equal(store.get_tensor(key()), torch.ones(1))


def test_pub_takes_the_config(store, key):
    config = ReplicateConfig()
    config.with_hard_pin = True
    assert store.pub_tensor(key(), torch.ones(4), config) == 0
    store.remove(key())
    assert store.is_exist(key()) == 1  # hard-pinned: kept without force
    assert store.batch_pub_tensor([key("b")], [torch.ones(2)], config=config) == [0]
    assert store.upsert_pub_tensor(key("b"), torch.zeros(2), config) == 0
    assert torch.equal(store.get_tensor(key("b")), torch.zeros(2))
    bad = ReplicateConfig()
    bad.preferred_segments = ["a:1", "b:2"]  # two names for one replica
    assert store.pub_tensor(key("c"), torch.ones(1), bad) == INVALID_PARAMS
    assert "preferred_segments" in store.last_error()
    pairs = [key("c"), key("d")], [torch.ones(1)] * 2
    assert store.batch_upsert_pub_tensor(*pairs, bad) == [-600] * 2
    assert store.remove(key(), True) == 0


def shard_axis(b, i=0):
    return struct.unpack_from("<iiiiiiq", b, AXES + 32 * i)


def test_put_tensor_with_tp_stores_every_shard_under_key_tp_rank(store, key):
    t = torch.arange(48, dtype=torch.int32).reshape(4, 12)
    assert store.put_tensor_with_tp(key(), t, tp_rank=1, tp_size=3, split_dim=1) == 0
    for rank, chunk in enumerate(t.chunk(3, 1)):
        raw = store.get(key() + f"_tp_{rank}")
        assert i32(raw, LAYOUT) == 1 and i32(raw, AXIS_COUNT) == 1
        assert [i64(raw, GLOBAL_SHAPE + 8 * d) for d in range(2)] == [4, 12]
        assert [i64(raw, LOCAL_SHAPE + 8 * d) for d in range(2)] == [4, 4]
        assert shard_axis(raw) == (1, 0, rank, 3, 1, 0, 4)  # TP, index, rank, size, dim, id, extent
        assert raw[HEADER:] == tensor_bytes(chunk)
        assert torch.equal(store.get_tensor_with_tp(key(), tp_rank=rank, tp_size=3), chunk)
    assert store.is_exist(key()) == 0  # the whole tensor is not stored
    shards = store.batch_get_tensor_with_tp([key(), key("none")], tp_rank=2, tp_size=3)
    assert torch.equal(shards[0], t.chunk(3, 1)[2]) and shards[1] is None
    # tp_size 1 is the plain key; an uneven split stores nothing.
    assert store.put_tensor_with_tp(key("one"), t) == 0 and store.is_exist(key("one")) == 1
    assert store.put_tensor_with_tp(key("odd"), t, tp_size=5, split_dim=1) == INVALID_PARAMS
    assert "uniform" in store.last_error() and store.is_exist(key("odd") + "_tp_0") == 0
    assert store.put_tensor_with_tp(key("dim"), t, tp_size=2, split_dim=2) == INVALID_PARAMS
    assert store.batch_put_tensor_with_tp([key("b0"), key("b1")], [t, None], tp_size=2) == [0, -600]
    assert torch.equal(store.get_tensor_with_tp(key("b0"), 1, 2), t.chunk(2, 0)[1])
    config = ReplicateConfig()
    assert store.pub_tensor_with_tp(key("p"), t, config=config, tp_size=4, split_dim=0) == 0
    assert store.batch_pub_tensor_with_tp([key("q")], [t], config, tp_size=2) == [0]
    assert torch.equal(store.get_tensor_with_tp(key("p"), 3, 4), t[3:4])


def pool_buffer(store, n):
    view = store.alloc(n)
    return view, ctypes.addressof(ctypes.c_char.from_buffer(view))


def test_into_and_from_pool_memory_share_it(store, key):
    t = torch.randn(64, 32)
    assert store.put_tensor(key(), t) == 0
    view, ptr = pool_buffer(store, 1 << 16)
    got = store.get_tensor_into(key(), ptr, 1 << 16)
    assert torch.equal(got, t)
    assert got.data_ptr() == ptr + HEADER  # a view of the buffer: no copy
    got[0, 0] = 42.0  # change the object in the buffer, then store it as it is
    assert store.put_tensor_from(key("from"), ptr, HEADER + t.numel() * 4) == 0
    again = store.get_tensor(key("from"))
    assert again[0, 0] == 42.0 and torch.equal(again[1:], t[1:])
    assert store.upsert_tensor_from(key(), ptr, HEADER + t.numel() * 4) == 0
    assert store.get_tensor(key())[0, 0] == 42.0
    # A wrong size or a non-tensor buffer is refused before anything is stored.
    assert store.put_tensor_from(key("bad"), ptr, HEADER + 10) == INVALID_PARAMS
    assert "data_bytes" in store.last_error()
    assert store.put_tensor_from(key("bad"), 0, 400) == INVALID_PARAMS
    assert store.is_exist(key("bad")) == 0
    del got, again


def test_batch_into_and_from_registered_memory(store, key):
    tensors = [torch.arange(10, dtype=torch.float64), torch.ones(3, 3, dtype=torch.int8)]
    keys = [key("a"), key("b")]
    assert store.batch_put_tensor(keys, tensors) == [0, 0]
    buf = (ctypes.c_ubyte * 8192)()
    base = ctypes.addressof(buf)
    assert store.register_buffer(base, 8192) == 0
    ptrs, sizes = [base, base + 4096], [4096, 4096]
    got = store.batch_get_tensor_into(keys + [key("none")], ptrs + [base], sizes + [100])
    assert torch.equal(got[0], tensors[0]) and torch.equal(got[1], tensors[1]) and got[2] is None
    lengths = [HEADER + t.numel() * t.element_size() for t in tensors]
    assert store.batch_put_tensor_from([key("c"), key("d")], ptrs, lengths) == [0, 0]
    assert torch.equal(store.get_tensor(key("d")), tensors[1])
    assert store.batch_upsert_tensor_from([key("c")], [ptrs[1]], [lengths[1]]) == [0]
    assert torch.equal(store.get_tensor(key("c")), tensors[1])
    # Mooncake's shapes for bad requests: every key -600, nothing stored or read.
    assert store.batch_put_tensor_from([key("e"), key("f")], ptrs, [lengths[0], 5]) == [-600] * 2
    assert store.is_exist(key("e")) == 0
    assert store.batch_get_tensor_into(keys, ptrs, sizes[:1]) == [-600, -600]
    assert store.batch_get_tensor_into(keys, [base, 0], sizes) == [-600, -600]
    assert store.batch_put_tensor_from([], [], []) == []
    # The _tp forms: the whole object in the buffer split, the shards read into buffers.
    assert store.put_tensor_with_tp_from(key("w"), ptrs[0], lengths[0], tp_size=2) == 0
    assert store.batch_put_tensor_with_tp_from([key("x"), key("y")], ptrs, [lengths[0], 3],
                                               tp_size=2) == [0, -600]
    shards = store.batch_get_tensor_with_tp_into([key("w")], [base + 4096], [4096], 1, 2)
    assert torch.equal(shards[0], tensors[0][5:])
    assert torch.equal(store.get_tensor_with_tp_into(key("x"), base, 4096, 0, 2), tensors[0][:5])
    assert store.unregister_buffer(base) == 0


def test_get_tensor_into_cuda_without_cuda_is_mooncakes_invalid_params(store, key):
    assert store.put_tensor(key(), torch.ones(4)) == 0
    assert store.get_tensor_into_cuda(key(), torch.empty(4)) == INVALID_PARAMS
    assert "CUDA" in store.last_error()
    assert store.batch_get_tensor_into_cuda([key(), key()], [torch.empty(4)] * 2) == [-600] * 2
    assert store.batch_get_tensor_into_cuda([key()], []) == [-600]
    assert store.batch_get_tensor_into_cuda([], []) == []


def safetensors_bytes(name, dtype, shape, data):
    """A safetensors file as its format says: length, JSON header padded to 8, data."""
    header = ('{"%s":{"dtype":"%s","shape":%s,"data_offsets":[0,%d]}}'
              % (name, dtype, str(list(shape)).replace(" ", ""), len(data))).encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + data


def test_safetensors_files_byte_for_byte(store, key, tmp_path):
    t = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float32)
    assert store.put_tensor(key(), t) == 0
    path = tmp_path / "t.safetensors"
    assert store.save_tensor_to_safetensor(key(), str(path)) == 0
    assert path.read_bytes() == safetensors_bytes(key(), "F32", (2, 2), tensor_bytes(t))
    # A file written by the format (as the safetensors package writes it) loads.
    other = tmp_path / "o.safetensors"
    b = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    other.write_bytes(safetensors_bytes("weight", "BF16", (2,), tensor_bytes(b)))
    with pytest.warns(UserWarning, match="no tensor named"):  # its first tensor, as Mooncake
        loaded = store.load_tensor_from_safetensor(key("w"), str(other))
    assert torch.equal(loaded, b) and torch.equal(store.get_tensor(key("w")), b)
    assert store.load_tensor_from_safetensor(file_name=str(other)) is not None  # key = name
    assert torch.equal(store.get_tensor(str(other)), b)
    store.remove(str(other))
    # Misses and damaged files: Mooncake's codes and None.
    assert store.save_tensor_to_safetensor(key("none"), str(path)) == FILE_NOT_FOUND
    assert store.load_tensor_from_safetensor(key("x"), str(tmp_path / "missing")) is None
    damaged = tmp_path / "d.safetensors"
    damaged.write_bytes(safetensors_bytes("w", "F32", (3,), b"\0" * 8))  # 2 floats for 3
    assert store.load_tensor_from_safetensor(key("x"), str(damaged)) is None
    assert "data_offsets" in store.last_error()
    with pytest.raises(TypeError):
        store.load_tensor_from_safetensor(key("x"))


def test_module_imports_and_explains_without_torch(tmp_path):
    # torch made unimportable: the module and the store work, a tensor call raises
    # ImportError naming the package to install.
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import mooncake_store, mooncake.store\n"
        "s = mooncake_store.MooncakeDistributedStore()\n"
        "assert hasattr(s, 'put_tensor') and mooncake_store.ParallelAxis().size == 1\n"
        "try:\n"
        "    s.put_tensor('k', object())\n"
        "except ImportError as e:\n"
        "    print('ImportError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ImportError:" in out.stdout and "python3-torch" in out.stdout
