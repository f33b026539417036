"""Mooncake's tensor-parallel calls (the *_with_tp family), and the splitting every split
write shares.

``put_tensor_with_tp(key, tensor, tp_size=N, split_dim=d)`` stores every shard of the
tensor, whatever tp_rank says (Mooncake's), shard r under ``<key>_tp_<r>`` as a SHARD object
(global shape the whole tensor's, one TP axis r of N along d). Only uniform splits: N must
divide the dimension. ``get_tensor_with_tp`` reads one shard back; tp_size 1 reads (and
writes) the key itself.

A shard's elements are rows of the whole tensor: the product of the dimensions before
split_dim rows of (its extent x the elements after split_dim), one every (the dimension x
those elements). They go to the store as one strided piece, gathered with the header into
one pool block: no intermediate torch copy.
"""
import operator

import mooncake_store as _native
from mooncake import _tensor_codec as codec
from mooncake import _tensor_io as io
from mooncake import _tensor_store as plain


class Whole:
    """A whole tensor's elements to split: where they are, its shape and element type."""
    __slots__ = ("address", "shape", "code", "element_size", "keep")

    def __init__(self, address, shape, code, keep=None):
        self.address = address
        self.shape = tuple(shape)
        self.code = code
        self.element_size = _native._tensor_dtype_size(code)
        self.keep = keep  # what keeps the elements alive (a TensorInfo), if anything

    @classmethod
    def of_info(cls, info):
        return cls(info.address, info.shape, info.code, info)

    @classmethod
    def at(cls, buffer_ptr, size):
        """The tensor object [header][elements] at buffer_ptr (size bytes); its elements
        are those of local_shape, as Mooncake decodes such a buffer."""
        header = codec.header_at(buffer_ptr, size)
        return cls(buffer_ptr + header.data_offset, header.local_shape, header.dtype)


def shard_range(shape, split_dim, rank, count):
    """(start, extent) of shard rank of count along split_dim; Refused unless uniform."""
    if not 0 <= split_dim < len(shape):
        raise codec.Refused(f"split_dim {split_dim} is not a dimension of a tensor of shape "
                            f"{tuple(shape)}")
    try:
        return _native._tensor_shard_range(shape[split_dim], rank, count)
    except ValueError as e:
        raise codec.Refused(e) from None


def shard_rows(whole, split_dim, start, extent):
    """The strided piece of the rows of [start, start + extent) along split_dim, and its
    bytes (no piece when there are none)."""
    outer = 1
    for d in whole.shape[:split_dim]:
        outer *= d
    inner = whole.element_size
    for d in whole.shape[split_dim + 1:]:
        inner *= d
    row = extent * inner
    if row == 0 or outer == 0:
        return [], 0
    dim = whole.shape[split_dim]
    return [(whole.address + start * inner, row, dim * inner, outer)], row * outer


def shard_object(whole, split_dim, rank, count, axes, global_shape=None):
    """The pieces of shard rank of count of whole along split_dim: its SHARD header (axes,
    global_shape: whole's shape by default) and its rows."""
    start, extent = shard_range(whole.shape, split_dim, rank, count)
    local = list(whole.shape)
    local[split_dim] = extent
    rows, nbytes = shard_rows(whole, split_dim, start, extent)
    try:
        header = _native._tensor_header_encode(
            whole.code, list(global_shape if global_shape is not None else whole.shape), local,
            codec.SHARD, axes, nbytes)
    except ValueError as e:
        raise codec.Refused(e) from None
    return [header] + rows


def tp_axis(rank, size, split_dim):
    return (codec.AXIS_TP, rank, size, split_dim, None, None)


def tp_key(key, rank, size):
    """key_tp_<rank>: the key of one shard of put_tensor_with_tp."""
    try:
        return _native._tensor_key(_native._TENSOR_KEY_SHARD, key, [tp_axis(rank, size, None)])
    except ValueError as e:
        raise codec.Refused(e) from None


def tp_objects(whole, key, tp_size, split_dim):
    """Every shard of whole, as put_tensor_with_tp stores them: (keys, objects)."""
    keys, objects = [], []
    for rank in range(tp_size):
        keys.append(tp_key(key, rank, tp_size))
        objects.append(shard_object(whole, split_dim, rank, tp_size,
                                    [tp_axis(rank, tp_size, split_dim)]))
    return keys, objects


def _first_failure(codes):
    return next((rc for rc in codes if rc != 0), 0)


def write_tp(store, method, key, whole, config, tp_size, split_dim, upsert=False):
    """Every shard of whole under key's shard keys: 0, or the first shard's failure."""
    try:
        keys, objects = tp_objects(whole, key, tp_size, split_dim)
    except codec.Refused as e:
        return io.refuse(store, method, e)
    return _first_failure(io.write_objects(store, keys, objects, config, upsert))


def write_tp_many(store, method, base_keys, wholes, config, tp_size, split_dim):
    """Every shard of each whole (None: refused already) in one batch; per base key 0 or
    its first shard's failure, -600 for one that cannot be split."""
    results = [io.INVALID_PARAMS] * len(base_keys)
    all_keys, all_objects, owners, refusal = [], [], [], None
    for i, (key, whole) in enumerate(zip(base_keys, wholes)):
        if whole is None:
            continue
        try:
            keys, objects = tp_objects(whole, key, tp_size, split_dim)
        except codec.Refused as e:
            refusal = refusal or f"entry {i}: {e}"
            continue
        all_keys += keys
        all_objects += objects
        owners += [i] * len(keys)
    codes = io.write_objects(store, all_keys, all_objects, config)
    for i in set(owners):
        results[i] = _first_failure(c for o, c in zip(owners, codes) if o == i)
    if refusal:
        io.refuse(store, method, refusal)
    return results


def _wholes(store, method, tensors_list):
    wholes, refusal = [], None
    for i, tensor in enumerate(tensors_list):
        try:
            wholes.append(Whole.of_info(codec.tensor_info(tensor, f"tensor {i}")))
        except codec.Refused as e:
            wholes.append(None)
            refusal = refusal or e
    if refusal:
        io.refuse(store, method, refusal)
    return wholes


def _put_with_tp(store, method, key, tensor, config, tp_size, split_dim):
    try:
        whole = Whole.of_info(codec.tensor_info(tensor))
    except codec.Refused as e:
        return io.refuse(store, method, e)
    return write_tp(store, method, key, whole, config, tp_size, split_dim)


def put_tensor_with_tp(self, key, tensor, tp_rank=0, tp_size=1, split_dim=0):
    if tp_size <= 1:
        return plain.put_tensor(self, key, tensor)
    return _put_with_tp(self, "put_tensor_with_tp", key, tensor, None, tp_size, split_dim)


def pub_tensor_with_tp(self, key, tensor, config=None, tp_rank=0, tp_size=1, split_dim=0):
    why = io.check_preferred_segments(config)
    if why:
        return io.refuse(self, "pub_tensor_with_tp", why)
    if tp_size <= 1:
        return plain.pub_tensor(self, key, tensor, config)
    return _put_with_tp(self, "pub_tensor_with_tp", key, tensor, config, tp_size, split_dim)


def _batch_with_tp(store, method, base_keys, tensors_list, config, tp_size, split_dim):
    base_keys = list(base_keys)
    if len(base_keys) != len(tensors_list) or not base_keys:
        if base_keys:
            io.refuse(store, method, f"{len(base_keys)} keys but {len(tensors_list)} tensors")
        return [io.INVALID_PARAMS] * len(base_keys)
    why = io.check_preferred_segments(config)
    if why:
        io.refuse(store, method, why)
        return [io.INVALID_PARAMS] * len(base_keys)
    wholes = _wholes(store, method, tensors_list)
    return write_tp_many(store, method, base_keys, wholes, config, tp_size, split_dim)


def batch_put_tensor_with_tp(self, base_keys, tensors_list, tp_rank=0, tp_size=1, split_dim=0):
    if tp_size <= 1:
        return plain.batch_put_tensor(self, base_keys, tensors_list)
    return _batch_with_tp(self, "batch_put_tensor_with_tp", base_keys, tensors_list, None,
                          tp_size, split_dim)


def batch_pub_tensor_with_tp(self, base_keys, tensors_list, config=None, tp_rank=0, tp_size=1,
                             split_dim=0):
    if tp_size <= 1:
        return plain.batch_pub_tensor(self, base_keys, tensors_list, config)
    return _batch_with_tp(self, "batch_pub_tensor_with_tp", base_keys, tensors_list, config,
                          tp_size, split_dim)


def put_tensor_with_tp_from(self, key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0):
    """The whole tensor object at buffer_ptr, split into every shard: its rows go from the
    buffer to the store, no tensor is made."""
    if tp_size <= 1:
        return plain.put_tensor_from(self, key, buffer_ptr, size)
    method = "put_tensor_with_tp_from"
    try:
        whole = Whole.at(operator.index(buffer_ptr), size)
    except codec.Refused as e:
        return io.refuse(self, method, e)
    return write_tp(self, method, key, whole, None, tp_size, split_dim)


def batch_put_tensor_with_tp_from(self, base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1,
                                  split_dim=0):
    if tp_size <= 1:
        return plain.batch_put_tensor_from(self, base_keys, buffer_ptrs, sizes)
    method = "batch_put_tensor_with_tp_from"
    base_keys = list(base_keys)
    if len(base_keys) != len(buffer_ptrs) or len(base_keys) != len(sizes) or not base_keys:
        if base_keys:
            io.refuse(self, method, "base_keys, buffer_ptrs and sizes must be as long")
        return [io.INVALID_PARAMS] * len(base_keys)
    wholes, refusal = [], None
    for i, (ptr, size) in enumerate(zip(buffer_ptrs, sizes)):
        try:
            wholes.append(Whole.at(operator.index(ptr), size))
        except codec.Refused as e:
            wholes.append(None)
            refusal = refusal or f"entry {i}: {e}"
    results = write_tp_many(self, method, base_keys, wholes, None, tp_size, split_dim)
    if refusal:
        io.refuse(self, method, refusal)
    return results


def _shard_key_or_refuse(store, method, key, tp_rank, tp_size):
    try:
        return tp_key(key, tp_rank, tp_size)
    except codec.Refused as e:
        io.refuse(store, method, e)
        return None


def get_tensor_with_tp(self, key, tp_rank=0, tp_size=1, split_dim=0):
    if tp_size <= 1:
        return plain.get_tensor(self, key)
    shard = _shard_key_or_refuse(self, "get_tensor_with_tp", key, tp_rank, tp_size)
    return None if shard is None else plain.get_tensor(self, shard)


def batch_get_tensor_with_tp(self, base_keys, tp_rank=0, tp_size=1):
    if tp_size <= 1:
        return plain.batch_get_tensor(self, base_keys)
    keys = [_shard_key_or_refuse(self, "batch_get_tensor_with_tp", k, tp_rank, tp_size)
            for k in base_keys]
    if None in keys:
        return [None] * len(keys)
    return plain.batch_get_tensor(self, keys)


def get_tensor_with_tp_into(self, key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0):
    if tp_size <= 1:
        return plain.get_tensor_into(self, key, buffer_ptr, size)
    shard = _shard_key_or_refuse(self, "get_tensor_with_tp_into", key, tp_rank, tp_size)
    return None if shard is None else plain.get_tensor_into(self, shard, buffer_ptr, size)


def batch_get_tensor_with_tp_into(self, base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1):
    if tp_size <= 1:
        return plain.batch_get_tensor_into(self, base_keys, buffer_ptrs, sizes)
    keys = [_shard_key_or_refuse(self, "batch_get_tensor_with_tp_into", k, tp_rank, tp_size)
            for k in base_keys]
    if None in keys:
        return [None] * len(keys)
    return plain.batch_get_tensor_into(self, keys, buffer_ptrs, sizes)
