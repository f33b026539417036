"""The *_with_parallelism calls (docs/mooncake-api.md, "Tensors"): ParallelAxis,
TensorParallelism and ReadTarget; what each write stores (the keys and the shard and
manifest bytes, field by field against the documented layout); shards assembled from the
shards of another split, whole tensors from writer partitions; the _into forms and their
need for registered memory; and the codes of bad requests."""
import ctypes
import struct

import pytest

torch = pytest.importorskip("torch")

from mooncake.store import ParallelAxis, ReadTarget, TensorParallelism  # noqa: E402

INVALID_PARAMS = -600
HEADER = 304
LAYOUT, GLOBAL_SHAPE, LOCAL_SHAPE, AXIS_COUNT, AXES = 16, 40, 104, 168, 176
DP, TP, EP, PP = 0, 1, 2, 3


def axis(kind, rank, size, split_dim=None, expert_id=None, stage_id=None):
    return ParallelAxis(kind, rank, size, split_dim, expert_id, stage_id)


def tp(rank, size, split_dim):
    return TensorParallelism([axis("tp", rank, size, split_dim)])


def header_axes(raw):
    count = struct.unpack_from("<I", raw, AXIS_COUNT)[0]
    return [struct.unpack_from("<iiiiiiq", raw, AXES + 32 * i) for i in range(count)]


def shapes(raw, ndim):
    g = [struct.unpack_from("<q", raw, GLOBAL_SHAPE + 8 * i)[0] for i in range(ndim)]
    local = [struct.unpack_from("<q", raw, LOCAL_SHAPE + 8 * i)[0] for i in range(ndim)]
    return g, local


def manifest_fields(raw):
    assert len(raw) == 96 and raw[:4] == bytes([0x4e, 0x41, 0x4d, 0x57])
    assert struct.unpack_from("<HH", raw, 4) == (1, 96)
    dtype, ndim, split, count = struct.unpack_from("<iiii", raw, 8)
    shape = [struct.unpack_from("<q", raw, 32 + 8 * i)[0] for i in range(8)]
    assert shape[ndim:] == [-1] * (8 - ndim)
    return dtype, split, count, shape[:ndim]


@pytest.fixture
def registered(store):
    buf = (ctypes.c_ubyte * (1 << 16))()
    base = ctypes.addressof(buf)
    assert store.register_buffer(base, 1 << 16) == 0
    yield base
    assert store.unregister_buffer(base) == 0


def test_request_classes():
    a = ParallelAxis()
    assert (a.kind, a.rank, a.size, a.split_dim, a.expert_id, a.stage_id) == ("", 0, 1, None,
                                                                               None, None)
    p = TensorParallelism()
    p.axes = [axis("dp", 0, 2), axis("tp", 1, 4, 1)]
    p.axes[1].rank = 3  # the list's own objects, as in Mooncake
    assert p.axes[1].rank == 3
    t = ReadTarget()
    assert (t.mode, t.parallelism) == ("as_stored", None)
    t.mode = "FULL"
    t.parallelism = p
    assert t.mode == "full" and t.parallelism.axes[0].kind == "dp"
    with pytest.raises(RuntimeError, match="Unsupported ReadTarget mode"):
        t.mode = "sideways"


def test_one_tp_axis_the_tensor_is_the_shard(store, key):
    whole = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for rank, shard in enumerate(whole.chunk(3, 1)):
        assert store.put_tensor_with_parallelism(key(), shard.contiguous(), tp(rank, 3, 1)) == 0
    raw = store.get(key() + "_tp_2")  # the key of put_tensor_with_tp's shards
    assert struct.unpack_from("<i", raw, LAYOUT)[0] == 1
    assert shapes(raw, 2) == ([4, 6], [4, 2])  # the whole shape, from the shard's
    assert header_axes(raw) == [(TP, 0, 2, 3, 1, 0, 2)]
    assert manifest_fields(store.get(key() + "__parallelism_manifest")) == (0, 1, 3, [4, 6])
    # Read as stored, as a shard of another split, whole.
    assert torch.equal(store.get_tensor_with_tp(key(), 1, 3), whole.chunk(3, 1)[1])
    assert torch.equal(store.get_tensor_with_parallelism(key(), ReadTarget("shard", tp(2, 3, 1))),
                       whole.chunk(3, 1)[2])
    assert torch.equal(store.get_tensor_with_parallelism(key(), ReadTarget("full", tp(0, 3, 1))),
                       whole)
    # A TP 2 read of the TP 3 shards (3 does not split 6 into 2 of them: assembled).
    target = ReadTarget("shard", tp(1, 2, 1))
    assert torch.equal(store.get_tensor_with_parallelism(key(), target), whole[:, 3:])
    # 4 does not split 6: nothing to assemble, and for one TP axis Mooncake then reads
    # whatever <key>_tp_<rank> holds (here a TP 3 shard), or None.
    assert torch.equal(store.get_tensor_with_parallelism(key(), ReadTarget("shard", tp(0, 4, 1))),
                       whole.chunk(3, 1)[0])
    assert store.get_tensor_with_parallelism(key(), ReadTarget("shard", tp(3, 4, 1))) is None


def test_resharding_reads_and_into_registered_memory(store, key, registered):
    whole = torch.arange(8 * 12 * 6, dtype=torch.int64).reshape(8, 12, 6)
    for rank, shard in enumerate(whole.chunk(4, 1)):
        assert store.put_tensor_with_parallelism(key(), shard.contiguous(), tp(rank, 4, 1)) == 0
    for rank in range(2):
        target = ReadTarget("shard", tp(rank, 2, 1))
        expected = whole.chunk(2, 1)[rank]
        assert torch.equal(store.get_tensor_with_parallelism(key(), target), expected)
        got = store.get_tensor_with_parallelism_into(key(), registered, 1 << 16, target)
        assert torch.equal(got, expected) and got.data_ptr() == registered + HEADER
        assert shapes(bytes((ctypes.c_ubyte * HEADER).from_address(registered)), 3) == (
            [8, 12, 6], [8, 6, 6])
    full = ReadTarget("full", tp(1, 4, 1))
    assert torch.equal(store.get_tensor_with_parallelism_into(key(), registered, 1 << 16, full),
                       whole)
    # Too small a buffer, memory that is neither registered nor pool: None, and why.
    assert store.get_tensor_with_parallelism_into(key(), registered, 1000, full) is None
    assert "needs" in store.last_error()
    plain = (ctypes.c_ubyte * (1 << 16))()
    assert store.get_tensor_with_parallelism_into(key(), ctypes.addressof(plain), 1 << 16,
                                                  full) is None
    assert "register_buffer" in store.last_error()
    batch = store.batch_get_tensor_with_parallelism_into(
        [key(), key("none")], [registered, registered + 32768], [32768, 32768],
        [ReadTarget("shard", tp(0, 2, 1)), None])
    assert torch.equal(batch[0], whole.chunk(2, 1)[0]) and batch[1] is None


def test_several_axes_the_tensor_is_whole(store, key):
    whole = torch.arange(48, dtype=torch.float16).reshape(6, 8)
    for rank in range(2):
        p = TensorParallelism([axis("pp", 1, 2, stage_id=7), axis("tp", rank, 2, 0),
                               axis("dp", 0, 2)])
        assert store.put_tensor_with_parallelism(key(), whole, p) == 0
    shard_key = key() + "__dp_0of2__tp_1of2_sd0__pp_1of2_sid7"  # DP, TP, EP, PP order
    raw = store.get(shard_key)
    assert shapes(raw, 2) == ([6, 8], [3, 8])
    assert header_axes(raw) == [(PP, 0, 1, 2, -1, 7, 0), (TP, 1, 1, 2, 0, 0, 3),
                                (DP, 2, 0, 2, -1, 0, 0)]  # the writer's order, with ids
    assert manifest_fields(store.get(key() + "__parallelism_manifest")) == (11, 0, 2, [6, 8])
    target = TensorParallelism([axis("dp", 0, 2), axis("tp", 1, 2, 0), axis("pp", 1, 2,
                                                                            stage_id=7)])
    assert torch.equal(store.get_tensor_with_parallelism(key(), ReadTarget("shard", target)),
                       whole[3:])
    assert torch.equal(store.get_tensor_with_parallelism(key(), ReadTarget("full", target)), whole)
    other_stage = TensorParallelism([axis("tp", 0, 2, 0), axis("pp", 1, 2, stage_id=8)])
    assert store.get_tensor_with_parallelism(key(), ReadTarget("full", other_stage)) is None
    # No TP axis: the tensor stored as it is, under the axes' key.
    ep = TensorParallelism([axis("ep", 1, 4, expert_id=3)])
    assert store.put_tensor_with_parallelism(key("e"), whole, ep) == 0
    assert header_axes(store.get(key("e") + "__ep_1of4_eid3")) == [(EP, 0, 1, 4, -1, 3, 0)]
    assert torch.equal(store.get_tensor_with_parallelism(key("e"), ReadTarget("shard", ep)), whole)


def test_from_a_buffer_every_shard_is_written(store, key, registered):
    whole = torch.arange(32, dtype=torch.int32).reshape(4, 8)
    assert store.put_tensor(key("seed"), whole) == 0
    assert store.get_tensor_into(key("seed"), registered, 1 << 16) is not None
    size = HEADER + 128
    p = TensorParallelism([axis("dp", 1, 2), axis("tp", 0, 4, 1)])
    assert store.put_tensor_with_parallelism_from(key(), registered, size, p) == 0
    for rank in range(4):
        raw = store.get(key() + f"__dp_1of2__tp_{rank}of4_sd1")
        assert header_axes(raw)[1][2] == rank
        assert raw[HEADER:] == whole[:, 2 * rank:2 * rank + 2].contiguous().numpy().tobytes()
    assert store.is_exist(key() + "__parallelism_manifest") == 0
    assert store.upsert_tensor_with_parallelism_from(key("one"), registered, size, tp(3, 4, 0)) == 0
    assert torch.equal(store.get_tensor_with_tp(key("one"), 2, 4), whole[2:3])


def test_writer_partitions(store, key):
    class Writer:  # any object with rank, size and split_dim (Mooncake's tests: a dataclass)
        def __init__(self, rank, size, split_dim):
            self.rank, self.size, self.split_dim = rank, size, split_dim

    whole = torch.arange(36, dtype=torch.float64).reshape(6, 6)
    for rank in range(3):
        assert store.put_tensor_with_parallelism(key(), whole,
                                                 writer_partition=Writer(rank, 3, 0)) == 0
    raw = store.get(key() + "__writer_1of3_sd0")
    assert shapes(raw, 2) == ([6, 6], [2, 6]) and header_axes(raw) == [(TP, 0, 1, 3, 0, 0, 2)]
    assert manifest_fields(store.get(key() + "__writer_manifest")) == (1, 0, 3, [6, 6])
    assert torch.equal(store.get_tensor_with_parallelism(key(), ReadTarget("full")), whole)
    shard = ReadTarget("shard", tp(2, 3, 0))  # a writer partition is a TP shard
    assert torch.equal(store.get_tensor_with_parallelism(key(), shard), whole[4:])
    updated = whole + 1
    results = store.batch_upsert_tensor_with_parallelism(
        [key()] * 3, [updated] * 3, writer_partitions=[Writer(r, 3, 0) for r in range(3)])
    assert results == [0, 0, 0]
    assert torch.equal(store.get_tensor_with_parallelism(key(), ReadTarget("full")), updated)
    # Without a writer manifest, "full" reads the key itself.
    assert store.put_tensor(key("plain"), whole) == 0
    assert torch.equal(store.get_tensor_with_parallelism(key("plain"), ReadTarget("full")), whole)
    assert store.put_tensor_with_parallelism(key("odd"), whole,
                                             writer_partition=Writer(0, 4, 1)) == INVALID_PARAMS
    assert store.get_tensor_with_parallelism(key("odd"), ReadTarget("full")) is None


def test_bad_requests(store, key):
    t = torch.ones(4, 4)
    cases = [
        (TensorParallelism([axis("dp", 0, 2, split_dim=0)]), "DP axis must not provide split_dim"),
        (TensorParallelism([axis("ep", 0, 2)]), "EP axis requires expert_id"),
        (TensorParallelism([axis("pp", 0, 2)]), "PP axis requires stage_id"),
        (TensorParallelism([axis("tp", 0, 2)]), "TP axis requires split_dim"),
        (TensorParallelism([axis("tp", 2, 2, 0)]), "invalid rank/size"),
        (TensorParallelism([axis("tp", 0, 2, 0), axis("TP", 1, 2, 0)]), "duplicate axis kinds"),
        (TensorParallelism([axis("xp", 0, 2)]), "unsupported parallel axis kind"),
        (TensorParallelism([]), "cannot be empty"),
        (TensorParallelism([axis("dp", 0, 2), axis("tp", 0, 3, 1)]), "uniform"),
    ]
    for parallelism, why in cases:
        assert store.put_tensor_with_parallelism(key(), t, parallelism) == INVALID_PARAMS, why
        assert why in store.last_error()
    assert store.put_tensor_with_parallelism(key(), t, tp(0, 2, 0),
                                             writer_partition=ParallelAxis()) == INVALID_PARAMS
    assert "cannot be combined" in store.last_error()
    keys = [key("a"), key("b")]
    assert store.batch_put_tensor_with_parallelism(keys, [t, t], tp(0, 2, 0)) == [-600, -600]
    assert "must be a list" in store.last_error()
    assert store.batch_put_tensor_with_parallelism(keys, [t], [tp(0, 2, 0)]) == [-600, -600]
    assert store.batch_put_tensor_with_parallelism(
        keys, [t, t], [tp(0, 2, 0), TensorParallelism([axis("dp", 0, 2), axis("tp", 0, 3, 0)])]
    ) == [0, -600]
    assert store.batch_put_tensor_with_parallelism(keys, [t, t]) == [0, 0]  # neither: plain
    assert store.get_tensor_with_parallelism(key("a"), ReadTarget("as_stored", tp(0, 2, 0))) is None
    assert store.get_tensor_with_parallelism(key("a"), ReadTarget("full",
                                             TensorParallelism([axis("dp", 0, 2)]))) is None
    assert "requires a TP axis" in store.last_error()
    assert store.batch_get_tensor_with_parallelism(keys, [None]) == [None, None]
    got = store.batch_get_tensor_with_parallelism(keys)
    assert torch.equal(got[0], t) and torch.equal(got[1], t)
