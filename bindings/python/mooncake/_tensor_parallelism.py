"""Mooncake's parallelism requests (store_py_internal.h at 3b5a594), as the
*_with_parallelism calls read them: ParallelAxis / TensorParallelism / ReadTarget objects
(or any objects with their attributes) turned into tuples, checked by Mooncake's rules,
put in canonical order, matched against the axes a stored shard's header carries, and the
keys they name (the C ABI's mooncake_store_tensor_key).

An axis is ``Axis(kind, rank, size, split_dim, expert_id, stage_id)``: kind a code
(codec.AXIS_*), the optional fields None when unset. A parallelism is a list of axes in
the caller's order; its canonical form orders them DP, TP, EP, PP.
"""
import collections

import mooncake_store as _native
from mooncake import _tensor_codec as codec

Axis = collections.namedtuple("Axis", "kind rank size split_dim expert_id stage_id")

_KINDS = {"DP": codec.AXIS_DP, "TP": codec.AXIS_TP, "EP": codec.AXIS_EP, "PP": codec.AXIS_PP}
_NAMES = {v: k.lower() for k, v in _KINDS.items()}
MAX_AXES = 4


def kind_name(kind):
    return _NAMES.get(kind, str(kind))


def _optional_int(obj, name):
    value = getattr(obj, name, None)
    return None if value is None else int(value)


def parse_axis(obj):
    if not all(hasattr(obj, a) for a in ("kind", "rank", "size")):
        raise codec.Refused("ParallelAxis must provide kind, rank, and size")
    kind = _KINDS.get(str(obj.kind).upper())
    if kind is None:
        raise codec.Refused(f"unsupported parallel axis kind {obj.kind!r} (tp, dp, ep, pp)")
    return Axis(kind, int(obj.rank), int(obj.size), _optional_int(obj, "split_dim"),
                _optional_int(obj, "expert_id"), _optional_int(obj, "stage_id"))


def parse(obj):
    """The axes of a TensorParallelism (None for None)."""
    if obj is None:
        return None
    if not hasattr(obj, "axes"):
        raise codec.Refused("TensorParallelism must provide axes")
    return [parse_axis(a) for a in obj.axes]


def validate(axes):
    """Mooncake's validate_parallelism_spec: Refused saying which rule axes break."""
    if axes is None:
        raise codec.Refused("parallelism is required")
    if not axes:
        raise codec.Refused("parallelism axes cannot be empty")
    if len(axes) > MAX_AXES:
        raise codec.Refused(f"{len(axes)} axes; at most {MAX_AXES}")
    seen = set()
    for a in axes:
        name = kind_name(a.kind)
        if a.size <= 0 or not 0 <= a.rank < a.size:
            raise codec.Refused(f"invalid rank/size for axis {name}: rank {a.rank} of {a.size}")
        if a.kind in seen:
            raise codec.Refused("duplicate axis kinds are not supported")
        seen.add(a.kind)
        if a.kind == codec.AXIS_TP and a.split_dim is None:
            raise codec.Refused("TP axis requires split_dim")
        if a.kind != codec.AXIS_TP and a.split_dim is not None:
            raise codec.Refused(f"{name.upper()} axis must not provide split_dim")
        if a.kind == codec.AXIS_EP and a.expert_id is None:
            raise codec.Refused("EP axis requires expert_id")
        if a.kind == codec.AXIS_PP and a.stage_id is None:
            raise codec.Refused("PP axis requires stage_id")
    return axes


def parse_valid(obj):
    return validate(parse(obj))


def canonical(axes):
    return sorted(axes, key=lambda a: a.kind)


def tp_index(axes):
    """The index of the TP axis in axes, or None."""
    return next((i for i, a in enumerate(axes) if a.kind == codec.AXIS_TP), None)


def with_tp(axes, **fields):
    """axes with the TP axis's fields replaced."""
    i = tp_index(axes)
    out = list(axes)
    out[i] = out[i]._replace(**fields)
    return out


def is_single_tp(axes):
    return len(axes) == 1 and axes[0].kind == codec.AXIS_TP


def key(base, kind, axes=()):
    """The key of a shard (kind _TENSOR_KEY_SHARD or _WRITER_SHARD) or a manifest."""
    try:
        return _native._tensor_key(kind, base, [tuple(a) for a in axes])
    except ValueError as e:
        raise codec.Refused(e) from None


def shard_key(base, axes):
    return key(base, _native._TENSOR_KEY_SHARD, axes)


def writer_key(base, rank, size, split_dim):
    return key(base, _native._TENSOR_KEY_WRITER_SHARD,
               [Axis(codec.AXIS_TP, rank, size, split_dim, None, None)])


def writer_manifest_key(base):
    return key(base, _native._TENSOR_KEY_WRITER_MANIFEST)


def parallelism_manifest_key(base):
    return key(base, _native._TENSOR_KEY_PARALLELISM_MANIFEST)


def stored_axes(header):
    """The canonical axes a SHARD header carries; None for a FULL one."""
    if header.layout != codec.SHARD:
        return None
    return canonical(Axis(*a) for a in header.axes)


def matches(axes, header):
    """Mooncake's parallelism_matches_metadata: the stored shard is exactly this one."""
    stored = stored_axes(header)
    return stored is not None and stored == canonical(axes)


def tp_compatible(axes, header):
    """The stored shard is axes' shard for some TP rank: every non-TP axis equal, the TP
    axis in the same place with the same split_dim (Mooncake's
    resolve_tp_compatible_parallelism_from_metadata); rank and size are the caller's to
    compare. The stored canonical axes, or None."""
    stored = stored_axes(header)
    if stored is None or len(stored) != len(axes):
        return None
    request = canonical(axes)
    i = tp_index(request)
    if i is None or tp_index(stored) != i:
        return None
    for j, (a, b) in enumerate(zip(request, stored)):
        if j == i:
            if (a.split_dim, a.expert_id, a.stage_id) != (b.split_dim, b.expert_id, b.stage_id):
                return None
        elif a != b:
            return None
    return stored


class Writer:
    """A writer partition (Mooncake's WriterPartitionSpec): rank of size along split_dim."""
    __slots__ = ("rank", "size", "split_dim")

    def __init__(self, obj):
        if not all(hasattr(obj, a) for a in ("rank", "size", "split_dim")):
            raise codec.Refused("writer_partition must provide rank, size, and split_dim")
        self.rank, self.size, self.split_dim = int(obj.rank), int(obj.size), int(obj.split_dim)
        if self.size <= 0 or not 0 <= self.rank < self.size or self.split_dim < 0:
            raise codec.Refused(f"invalid writer partition: rank {self.rank} of {self.size}, "
                                f"split_dim {self.split_dim}")


# How a write stores its tensor (Mooncake's ParallelismWriteStorageRoute).
DIRECT, WRITER, TP, GENERIC = "direct", "writer", "tp", "generic"


def write_route(parallelism, writer_partition):
    """(route, axes or Writer or None) of a write; Refused for a bad request."""
    if writer_partition is not None:
        if parallelism is not None:
            raise codec.Refused("writer_partition cannot be combined with parallelism")
        return WRITER, Writer(writer_partition)
    if parallelism is None:
        return DIRECT, None
    axes = parse_valid(parallelism)
    return (TP if tp_index(axes) is not None else GENERIC), axes


# ReadTarget modes.
AS_STORED, SHARD, FULL = "AS_STORED", "SHARD", "FULL"


def parse_target(obj):
    """(mode, axes or None) of a ReadTarget (None: as stored)."""
    if obj is None:
        return AS_STORED, None
    if not (hasattr(obj, "mode") and hasattr(obj, "parallelism")):
        raise codec.Refused("ReadTarget must provide mode and parallelism")
    mode = str(obj.mode).upper()
    if mode not in (AS_STORED, SHARD, FULL):
        raise codec.Refused(f"unsupported ReadTarget mode {obj.mode!r}")
    return mode, parse(obj.parallelism)


def is_default_config(config):
    """Mooncake's is_default_replicate_config."""
    if config is None:
        return True
    return (config.replica_num == 1 and config.nof_replica_num == 0 and
            config.dfs_replica_num == 0 and
            config.soft_pin_action == _native.SoftPinAction.PRESERVE and
            config.soft_pin_ttl_ms is None and not config.with_hard_pin and
            not config.preferred_segments and not config.preferred_segment and
            not config.prefer_alloc_in_same_node and config.group_ids is None)


def check_batch_list(obj, count, name):
    """A batch's per-key requests: a list of count entries, else Refused."""
    if not isinstance(obj, list):
        raise codec.Refused(f"{name} must be a list or None")
    if len(obj) != count:
        raise codec.Refused(f"keys and {name} must have the same length")
    return obj
