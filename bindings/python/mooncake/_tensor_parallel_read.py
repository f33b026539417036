"""Mooncake's *_with_parallelism reads (store_py_parallel_read.h at 3b5a594): a ReadTarget
says what comes back.

- ``as_stored`` (or no target): the object under the key, as get_tensor.
- ``full`` without parallelism: the whole tensor from its writer partitions (the writer
  manifest says how many, split along which dimension); without a manifest, the object
  under the key.
- ``shard``: the shard the parallelism names, when that very shard is stored (under its
  key, or as a writer partition for one TP axis); else, for a parallelism with a TP axis,
  assembled from the shards that are stored, however many the writer split into (a TP 2
  read of a tensor written as 4 shards takes two of them); for one TP axis, last, whatever
  is under ``<key>_tp_<rank>``.
- ``full`` with a parallelism (it needs a TP axis): the whole tensor assembled from the
  shards of that parallelism's other axes, found through the parallelism manifest, else by
  the shard keys.

Assembling reads each stored shard's header alone (304 bytes), plans which rows of which
shard land where, and reads just those rows: into a buffer of the result's size (a fresh
one, or the caller's for the _into forms, which must be registered or pool memory, as in
Mooncake), header first. Only uniform splits exist, so only those are assembled.
"""
import collections
import ctypes
import operator

import mooncake_store as _native
from mooncake import _tensor_codec as codec
from mooncake import _tensor_io as io
from mooncake import _tensor_parallelism as par
from mooncake import _tensor_store as plain

# Shards to assemble: (key, header) of each, the whole tensor's shape, its split dimension
# and element type.
Sources = collections.namedtuple("Sources", "shards global_shape split_dim dtype")


def _headers_or_none(store, keys):
    headers = io.read_headers(store, keys)
    return None if any(h is None for h in headers) else list(zip(keys, headers))


def _tp_of(header):
    return next((a for a in header.axes if a[0] == codec.AXIS_TP), None)


def _uniform(dim, count):
    return count > 0 and dim >= 0 and dim % count == 0


def _manifest(store, key):
    raw = io.read_object(store, key)
    if raw is None:
        return None
    try:
        return _native._tensor_manifest_decode(raw.numpy())
    except ValueError:
        return None


def _sources_by_manifest(store, key, axes):
    """Mooncake's load_parallelism_manifest_reconstruction: the shards the parallelism
    manifest says were written, with axes' other axes. None when it does not apply."""
    manifest = _manifest(store, par.parallelism_manifest_key(key))
    if manifest is None:
        return None
    request = axes[par.tp_index(axes)]
    shape, split, count = manifest["global_shape"], manifest["split_dim"], manifest["shard_count"]
    if request.split_dim != split or not (_uniform(shape[split], request.size) and
                                          _uniform(shape[split], count)):
        return None
    canonical = par.canonical(axes)
    shard_axes = [par.with_tp(canonical, rank=r, size=count) for r in range(count)]
    shards = _headers_or_none(store, [par.shard_key(key, a) for a in shard_axes])
    if shards is None:
        return None
    for wanted, (_, header) in zip(shard_axes, shards):
        stored = par.tp_compatible(wanted, header)
        if stored is None or stored[par.tp_index(stored)].size != count:
            return None
    return Sources(shards, tuple(shape), split, manifest["dtype"])


def _tp_read_key(key, rank, size):
    return key if size <= 1 else par.shard_key(key, [par.Axis(codec.AXIS_TP, rank, size, None,
                                                              None, None)])


def parallelism_sources(store, key, axes):
    """Mooncake's load_parallelism_full_reconstruction_sources: the stored shards of axes'
    tensor, or Refused."""
    found = _sources_by_manifest(store, key, axes)
    if found is not None:
        return found
    request = axes[par.tp_index(axes)]
    canonical = par.canonical(axes)
    if par.is_single_tp(canonical):
        first = io.read_headers(store, [_tp_read_key(key, 0, request.size)])[0]
        stored = _tp_of(first) if first is not None and first.layout == codec.SHARD else None
        if stored is None or stored[3] is None:
            raise codec.Refused("no shard matched requested layout for TP rank 0")
        split, count, shape = stored[3], stored[2], first.global_shape
        if request.split_dim != split:
            raise codec.Refused(f"split_dim {request.split_dim} differs from the stored "
                                f"shards' ({split})")
        if not (_uniform(shape[split], request.size) and _uniform(shape[split], count)):
            raise codec.Refused("only uniform sharding is supported")
        shards = _headers_or_none(store, [_tp_read_key(key, r, count) for r in range(count)])
        if shards is None:
            raise codec.Refused(f"a shard of the {count} stored is missing")
        for r, (shard_key, header) in enumerate(shards):
            axis = _tp_of(header) if header.layout == codec.SHARD else None
            if axis is None or (axis[1], axis[2], axis[3]) != (r, count, split):
                raise codec.Refused(f"shard metadata mismatch for TP rank {r} ({shard_key})")
        return Sources(shards, tuple(shape), split, first.dtype)
    shard_axes = [par.with_tp(canonical, rank=r) for r in range(request.size)]
    shards = _headers_or_none(store, [par.shard_key(key, a) for a in shard_axes])
    if shards is None:
        raise codec.Refused(f"a shard of the {request.size} requested is missing")
    for r, (wanted, (_, header)) in enumerate(zip(shard_axes, shards)):
        stored = par.tp_compatible(wanted, header)
        if stored is None or stored[par.tp_index(stored)].size != request.size:
            raise codec.Refused(f"shard metadata mismatch for TP rank {r}")
    first = shards[0][1]
    split, shape = _tp_of(first)[3], first.global_shape
    if request.split_dim != split:
        raise codec.Refused("split_dim mismatch")
    if not _uniform(shape[split], request.size):
        raise codec.Refused("only uniform sharding is supported")
    return Sources(shards, tuple(shape), split, first.dtype)


def writer_sources(store, key):
    """Mooncake's load_writer_shard_reconstruction: the writer partitions the writer
    manifest lists, or None (then the key itself is read)."""
    manifest = _manifest(store, par.writer_manifest_key(key))
    if manifest is None:
        return None
    split, count = manifest["split_dim"], manifest["shard_count"]
    shards = _headers_or_none(store, [par.writer_key(key, r, count, split) for r in range(count)])
    if shards is None:
        return None
    for r, (_, header) in enumerate(shards):
        if header.layout != codec.SHARD or len(header.axes) != 1:
            return None
        axis = header.axes[0]
        if (axis[0], axis[1], axis[2], axis[3]) != (codec.AXIS_TP, r, count, split):
            return None
    return Sources(shards, tuple(manifest["global_shape"]), split, manifest["dtype"])


def _source_range(header, shape, split):
    """(start, extent) along split of a stored shard, checked against the whole shape."""
    local = header.local_shape
    if len(local) != len(shape) or any(a != b for d, (a, b) in enumerate(zip(local, shape))
                                       if d != split):
        raise codec.Refused("shard shape mismatch")
    axis = _tp_of(header) if header.layout == codec.SHARD else None
    if axis is None or axis[3] != split or not 0 <= axis[1] < axis[2]:
        raise codec.Refused("missing or invalid TP shard metadata")
    if not _uniform(shape[split], axis[2]):
        raise codec.Refused("only uniform sharding is supported")
    start, extent = _native._tensor_shard_range(shape[split], axis[1], axis[2])
    if local[split] != extent:
        raise codec.Refused("shard extent mismatch")
    return start, extent


def plan(sources, start, extent):
    """The fragments (key, dst_offset, src_offset, size) that assemble [start, start +
    extent) along the split dimension from sources, the result's shape and bytes. dst
    offsets are from the result's header."""
    shape, split = sources.global_shape, sources.split_dim
    element = _native._tensor_dtype_size(sources.shards[0][1].dtype)
    if element == 0 or not 0 <= split < len(shape):
        raise codec.Refused("invalid shard tensor")
    outer, inner = 1, element
    for d in shape[:split]:
        outer *= d
    for d in shape[split + 1:]:
        inner *= d
    target = list(shape)
    target[split] = extent
    nbytes = outer * extent * inner
    covered = [False] * extent
    fragments = []
    for key, header in sources.shards:
        s_start, s_extent = _source_range(header, shape, split)
        lo, hi = max(s_start, start), min(s_start + s_extent, start + extent)
        if hi <= lo:
            continue
        covered[lo - start:hi - start] = [True] * (hi - lo)
        row = (hi - lo) * inner
        for i in range(outer):
            fragments.append((key, codec.HEADER_SIZE + (i * extent + lo - start) * inner,
                              header.data_offset + (i * s_extent + lo - s_start) * inner, row))
    if not all(covered):
        raise codec.Refused("shard extents do not cover the dimension")
    if not fragments and nbytes:
        raise codec.Refused("no fragments planned for reconstruction")
    return fragments, target, nbytes


def _assembly(sources, axes, rank=None, size=None):
    """The fragments and the result's header: the whole tensor (rank None), or shard rank
    of size of it, a SHARD with axes."""
    shape = list(sources.global_shape)
    if rank is None:
        fragments, target, nbytes = plan(sources, 0, shape[sources.split_dim])
        layout, header_axes = codec.FULL, []
    else:
        try:
            start, extent = _native._tensor_shard_range(shape[sources.split_dim], rank, size)
        except ValueError as e:
            raise codec.Refused(e) from None
        fragments, target, nbytes = plan(sources, start, extent)
        layout, header_axes = codec.SHARD, [tuple(a) for a in axes]
    try:
        header = _native._tensor_header_encode(sources.dtype, shape if layout == codec.SHARD
                                               else target, target, layout, header_axes, nbytes)
    except ValueError as e:
        raise codec.Refused(e) from None
    return fragments, header, nbytes


def _materialize(store, assembly):
    """The assembled tensor in fresh memory."""
    fragments, header, nbytes = assembly
    t = codec.torch()
    raw = t.empty(codec.HEADER_SIZE + nbytes, dtype=t.uint8)
    if not io.read_fragments(store, raw.numpy(), fragments):
        raise codec.Refused("reading the shards' rows failed (a shard changed or went away)")
    raw[:codec.HEADER_SIZE] = t.frombuffer(bytearray(header), dtype=t.uint8)
    return codec.tensor_from_object(raw)


def _room(store, buffer_ptr, size, total):
    """Mooncake's resolve_writable_buffer_region: an _into read needs registered (or pool)
    memory with room for the result."""
    capacity = min(size, store._writable_capacity(buffer_ptr))
    if capacity == 0:
        raise codec.Refused("the buffer is not Store-managed writable memory: register it "
                            "(register_buffer) or take it from the pool (alloc)")
    if total > capacity:
        raise codec.Refused(f"the buffer holds {capacity} bytes; the tensor needs {total}")
    return capacity


def _materialize_into(store, buffer_ptr, size, assembly):
    fragments, header, nbytes = assembly
    total = codec.HEADER_SIZE + nbytes
    _room(store, buffer_ptr, size, total)
    if not io.read_fragments(store, buffer_ptr, fragments):
        raise codec.Refused("reading the shards' rows failed (a shard changed or went away)")
    ctypes.memmove(buffer_ptr, header, codec.HEADER_SIZE)
    return codec.tensor_from_object(codec.memory_at(buffer_ptr, total))


def _read_whole_into(store, key, buffer_ptr, size):
    """The object under key read whole into the caller's registered buffer."""
    capacity = _room(store, buffer_ptr, size, 1)
    n = io.get_into(store, [key], [buffer_ptr], [capacity])[0]
    if n < 0:
        raise codec.Refused(f"reading {key!r} answered {n} ({_native.strerror(n)})")
    return codec.memory_at(buffer_ptr, n)


def _direct_shard_keys(key, axes):
    """Where the very shard axes name may be stored: its key, and for one TP axis its
    writer partition's key (Mooncake's resolve_parallelism_shard_read routes)."""
    keys = [par.shard_key(key, axes)]
    if par.is_single_tp(axes):
        a = axes[0]
        keys.append(par.writer_key(key, a.rank, a.size, a.split_dim))
    return keys


def _is_direct(header, axes, writer_route):
    if header is None or not par.matches(axes, header):
        return False
    return not writer_route or len(header.axes) == 1


def _direct_shard(store, key, axes):
    for i, shard_key in enumerate(_direct_shard_keys(key, axes)):
        raw = io.read_object(store, shard_key)
        if raw is None:
            continue
        try:
            header = codec.header_of(raw, raw.numel())
        except codec.Refused:
            continue
        if _is_direct(header, axes, i > 0):
            return codec.tensor_of(raw, header)
    return None


def _read(store, method, key, target):
    try:
        mode, axes = par.parse_target(target)
        if mode == par.AS_STORED and axes is None:
            return plain.get_tensor(store, key)
        if mode == par.FULL and axes is None:
            sources = writer_sources(store, key)
            if sources is None:
                return plain.get_tensor(store, key)
            return _materialize(store, _assembly(sources, None))
        axes = par.validate(axes)
        has_tp = par.tp_index(axes) is not None
        if mode == par.SHARD:
            tensor = _direct_shard(store, key, axes)
            if tensor is None and has_tp:
                try:
                    a = axes[par.tp_index(axes)]
                    tensor = _materialize(store, _assembly(parallelism_sources(store, key, axes),
                                                           axes, a.rank, a.size))
                except codec.Refused:
                    tensor = None
            if tensor is None and par.is_single_tp(axes):
                return plain.get_tensor(store, _tp_read_key(key, axes[0].rank, axes[0].size))
            if tensor is None:
                raise codec.Refused(f"parallelism metadata mismatch for key {key!r}")
            return tensor
        if mode == par.FULL:
            if not has_tp:
                raise codec.Refused("full reconstruction requires a TP axis")
            return _materialize(store, _assembly(parallelism_sources(store, key, axes), None))
        raise codec.Refused("unsupported ReadTarget mode (as_stored takes no parallelism)")
    except codec.Refused as e:
        return io.refuse(store, method, e, None)


def _read_into(store, method, key, buffer_ptr, size, target):
    try:
        buffer_ptr = operator.index(buffer_ptr)
        mode, axes = par.parse_target(target)
        if mode == par.AS_STORED and axes is None:
            return codec.tensor_from_object(_read_whole_into(store, key, buffer_ptr, size))
        if mode == par.FULL and axes is None:
            sources = writer_sources(store, key)
            if sources is None:
                return codec.tensor_from_object(_read_whole_into(store, key, buffer_ptr, size))
            return _materialize_into(store, buffer_ptr, size, _assembly(sources, None))
        axes = par.validate(axes)
        has_tp = par.tp_index(axes) is not None
        if mode == par.SHARD:
            keys = _direct_shard_keys(key, axes)
            for i, (shard_key, header) in enumerate(zip(keys, io.read_headers(store, keys))):
                if _is_direct(header, axes, i > 0):
                    raw = _read_whole_into(store, shard_key, buffer_ptr, size)
                    if not _is_direct(codec.header_of(raw, raw.numel()), axes, i > 0):
                        raise codec.Refused(f"{shard_key!r} changed while it was read")
                    return codec.tensor_from_object(raw)
            if not has_tp:
                raise codec.Refused(f"parallelism metadata mismatch for key {key!r}")
            a = axes[par.tp_index(axes)]
            return _materialize_into(store, buffer_ptr, size, _assembly(
                parallelism_sources(store, key, axes), axes, a.rank, a.size))
        if mode == par.FULL:
            return _materialize_into(store, buffer_ptr, size,
                                     _assembly(parallelism_sources(store, key, axes), None))
        raise codec.Refused("unsupported ReadTarget mode (as_stored takes no parallelism)")
    except codec.Refused as e:
        return io.refuse(store, method, e, None)


def get_tensor_with_parallelism(self, key, target=None):
    return _read(self, "get_tensor_with_parallelism", key, target)


def get_tensor_with_parallelism_into(self, key, buffer_ptr, size, target=None):
    return _read_into(self, "get_tensor_with_parallelism_into", key, buffer_ptr, size, target)


def batch_get_tensor_with_parallelism(self, keys, targets=None):
    keys = list(keys)
    if targets is None:
        return plain.batch_get_tensor(self, keys)
    method = "batch_get_tensor_with_parallelism"
    try:
        targets = par.check_batch_list(targets, len(keys), "targets")
    except codec.Refused as e:
        io.refuse(self, method, e)
        return [None] * len(keys)
    return [_read(self, method, k, t) for k, t in zip(keys, targets)]


def batch_get_tensor_with_parallelism_into(self, keys, buffer_ptrs, sizes, targets=None):
    method = "batch_get_tensor_with_parallelism_into"
    keys, buffer_ptrs, sizes = list(keys), list(buffer_ptrs), list(sizes)
    if len(keys) != len(buffer_ptrs) or len(keys) != len(sizes):
        io.refuse(self, method, "keys, buffer_ptrs, and sizes must have the same length")
        return [None] * len(keys)
    if targets is not None:
        try:
            targets = par.check_batch_list(targets, len(keys), "targets")
        except codec.Refused as e:
            io.refuse(self, method, e)
            return [None] * len(keys)
    else:
        targets = [None] * len(keys)
    return [_read_into(self, method, k, p, s, t)
            for k, p, s, t in zip(keys, buffer_ptrs, sizes, targets)]
