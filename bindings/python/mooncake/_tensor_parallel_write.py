"""Mooncake's *_with_parallelism writes (store_py_parallel_write.h at 3b5a594), put and
upsert, of torch tensors and of tensor objects in caller memory.

What each request stores (parallelism P, writer_partition W, key K):

- neither: the tensor under K, as put_tensor (with config).
- W (rank r of n along d): the whole tensor's shard r under ``K__writer_<r>of<n>_sd<d>``,
  then the writer manifest under ``K__writer_manifest``.
- P with one TP axis: the tensor *is* shard r (its whole tensor's split dimension n times
  larger), stored under ``K_tp_<r>``, then the parallelism manifest
  ``K__parallelism_manifest``. From a buffer: the buffer is the whole tensor, and every
  shard (all n ranks) is stored, without a manifest.
- P with a TP axis and others: the tensor is the whole tensor; P's shard of it is stored
  under P's key (``K__dp_..__tp_..``), then the parallelism manifest. From a buffer: every
  TP rank's shard, without a manifest.
- P without a TP axis: the tensor as it is, a SHARD object under P's key.

Only uniform splits are stored (-600 otherwise). Writes of a shard and then its manifest
are two requests, in that order: a failed shard write stores no manifest.
"""
import operator

import mooncake_store as _native
from mooncake import _tensor_codec as codec
from mooncake import _tensor_io as io
from mooncake import _tensor_parallelism as par
from mooncake import _tensor_store as plain
from mooncake import _tensor_tp as tp


def _write(store, key, pieces, config, upsert):
    return io.write_objects(store, [key], [pieces], config, upsert)[0]


def _with_manifest(store, key, shard_key, pieces, manifest_key, manifest, config, upsert):
    """A shard, then (if it was stored) the manifest: 0 or the first failure."""
    rc = _write(store, shard_key, pieces, config, upsert)
    if rc != 0:
        return rc
    return _write(store, manifest_key, [manifest], config, upsert)


def _manifest(whole_shape, code, split_dim, count):
    try:
        return _native._tensor_manifest_encode(code, split_dim, count, list(whole_shape))
    except ValueError as e:
        raise codec.Refused(e) from None


def _writer_write(store, key, whole, writer, config, upsert):
    pieces = tp.shard_object(whole, writer.split_dim, writer.rank, writer.size,
                             [tp.tp_axis(writer.rank, writer.size, writer.split_dim)])
    return _with_manifest(store, key, par.writer_key(key, writer.rank, writer.size,
                                                     writer.split_dim),
                          pieces, par.writer_manifest_key(key),
                          _manifest(whole.shape, whole.code, writer.split_dim, writer.size),
                          config, upsert)


def _tp_shard_write(store, key, whole, axes, config, upsert):
    """P with a TP axis, of a torch tensor (see the module's docstring)."""
    axis = axes[par.tp_index(axes)]
    if len(axes) == 1:
        # The tensor is the shard: its whole tensor is n times larger along split_dim.
        if not 0 <= axis.split_dim < len(whole.shape):
            raise codec.Refused(f"split_dim {axis.split_dim} is not a dimension of a tensor "
                                f"of shape {whole.shape}")
        shape = list(whole.shape)
        shape[axis.split_dim] *= axis.size
        pieces = tp.shard_object(whole, axis.split_dim, 0, 1, [tuple(axes[0])],
                                 global_shape=shape)
    else:
        shape = whole.shape
        pieces = tp.shard_object(whole, axis.split_dim, axis.rank, axis.size,
                                 [tuple(a) for a in axes])
    return _with_manifest(store, key, par.shard_key(key, axes), pieces,
                          par.parallelism_manifest_key(key),
                          _manifest(shape, whole.code, axis.split_dim, axis.size), config, upsert)


def _generic_object(whole, axes, global_shape, data_bytes, data_pieces):
    try:
        header = _native._tensor_header_encode(whole.code, list(global_shape), list(whole.shape),
                                               codec.SHARD, [tuple(a) for a in axes],
                                               data_bytes)
    except ValueError as e:
        raise codec.Refused(e) from None
    return [header] + data_pieces


def write_tensor(store, method, key, tensor, parallelism, config, writer_partition, upsert):
    """put_tensor_with_parallelism / upsert_tensor_with_parallelism."""
    try:
        route, spec = par.write_route(parallelism, writer_partition)
        if route == par.DIRECT:
            why = io.check_preferred_segments(config)
            if why:
                raise codec.Refused(why)
            return plain._write_one(store, method, key, tensor, config, upsert)
        info = codec.tensor_info(tensor)
        whole = tp.Whole.of_info(info)
        if route == par.WRITER:
            return _writer_write(store, key, whole, spec, config, upsert)
        if route == par.TP:
            return _tp_shard_write(store, key, whole, spec, config, upsert)
        data = [(info.address, info.nbytes)] if info.nbytes else []
        return _write(store, par.shard_key(key, spec),
                      _generic_object(whole, spec, whole.shape, info.nbytes, data), config,
                      upsert)
    except codec.Refused as e:
        return io.refuse(store, method, e)


def _whole_at(buffer_ptr, size):
    """The whole tensor in the object at buffer_ptr, for the writes that split it: Mooncake
    splits by the header's global shape, so the object must hold all of it."""
    header = codec.header_at(buffer_ptr, size)
    if tuple(header.global_shape) != tuple(header.local_shape):
        raise codec.Refused(f"the buffer holds a shard (shape {header.local_shape} of "
                            f"{header.global_shape}), not a whole tensor to split")
    return tp.Whole(buffer_ptr + header.data_offset, header.local_shape, header.dtype), header


def write_from(store, method, key, buffer_ptr, size, parallelism, config, writer_partition,
               upsert):
    """put_tensor_with_parallelism_from / upsert_tensor_with_parallelism_from."""
    try:
        buffer_ptr = operator.index(buffer_ptr)
        route, spec = par.write_route(parallelism, writer_partition)
        if route == par.DIRECT:
            if par.is_default_config(config):
                return plain._write_from(store, method, key, buffer_ptr, size, upsert)
            codec.header_at(buffer_ptr, size)
            why = io.check_preferred_segments(config)
            if why:
                raise codec.Refused(why)
            write = store.upsert_from if upsert else store.put_from
            return write(key, buffer_ptr, size, config)
        if route == par.WRITER:
            whole, _ = _whole_at(buffer_ptr, size)
            return _writer_write(store, key, whole, spec, config, upsert)
        if route == par.TP:
            whole, _ = _whole_at(buffer_ptr, size)
            axis = spec[par.tp_index(spec)]
            keys, objects = [], []
            for rank in range(axis.size):
                axes = par.with_tp(spec, rank=rank)
                keys.append(par.shard_key(key, axes))
                objects.append(tp.shard_object(whole, axis.split_dim, rank, axis.size,
                                               [tuple(a) for a in axes]))
            codes = io.write_objects(store, keys, objects, config, upsert)
            return next((rc for rc in codes if rc != 0), 0)
        header = codec.header_at(buffer_ptr, size)
        whole = tp.Whole(buffer_ptr + header.data_offset, header.local_shape, header.dtype)
        data = [(whole.address, header.data_bytes)] if header.data_bytes else []
        return _write(store, par.shard_key(key, spec),
                      _generic_object(whole, spec, header.global_shape, header.data_bytes, data),
                      config, upsert)
    except codec.Refused as e:
        return io.refuse(store, method, e)


def _batch(store, method, keys, count, parallelisms, config, writer_partitions, direct, one):
    """The batch forms: one request per key (Mooncake's), each with its config's group id;
    direct() when neither list is given; -600 for all on a malformed request."""
    keys = list(keys)
    invalid = [io.INVALID_PARAMS] * len(keys)
    groups = getattr(config, "group_ids", None)
    if groups is not None and len(groups) != len(keys):
        io.refuse(store, method, "group_ids size must match keys size")
        return invalid
    if parallelisms is not None and writer_partitions is not None:
        io.refuse(store, method, "writer_partitions cannot be combined with parallelisms")
        return invalid
    if count != len(keys):
        io.refuse(store, method, "values and keys must have the same length")
        return invalid
    if parallelisms is None and writer_partitions is None:
        return direct(keys)
    name = "parallelisms" if parallelisms is not None else "writer_partitions"
    try:
        requests = par.check_batch_list(parallelisms if parallelisms is not None
                                        else writer_partitions, len(keys), name)
    except codec.Refused as e:
        io.refuse(store, method, e)
        return invalid
    results = []
    for i, request in enumerate(requests):
        single = io.config_for_key(config, i)
        if parallelisms is not None:
            results.append(one(i, request, None, single))
        else:
            results.append(one(i, None, request, single))
    return results


def _direct_tensors(store, method, keys, tensors_list, config, upsert):
    why = io.check_preferred_segments(config)
    if why:
        io.refuse(store, method, why)
        return [io.INVALID_PARAMS] * len(keys)
    if not keys:
        return []
    return plain._write_many(store, method, keys, tensors_list, config, upsert)


def _batch_tensors(store, method, keys, tensors_list, parallelisms, config, writer_partitions,
                   upsert):
    tensors_list = list(tensors_list)
    return _batch(store, method, keys, len(tensors_list), parallelisms, config,
                  writer_partitions,
                  lambda ks: _direct_tensors(store, method, ks, tensors_list, config, upsert),
                  lambda i, p, w, c: write_tensor(store, method, keys[i], tensors_list[i], p, c,
                                                  w, upsert))


def _direct_from(store, method, keys, buffer_ptrs, sizes, config, upsert):
    if par.is_default_config(config):
        return plain._write_many_from(store, method, keys, buffer_ptrs, sizes, upsert)
    why = io.check_preferred_segments(config) or (
        plain.check_objects(keys, buffer_ptrs, sizes) if keys else None)
    if why:
        io.refuse(store, method, why)
        return [io.INVALID_PARAMS] * len(keys)
    if not keys:
        return []
    write = store.batch_upsert_from if upsert else store.batch_put_from
    return list(write(keys, list(buffer_ptrs), list(sizes), config))


def _batch_from(store, method, keys, buffer_ptrs, sizes, parallelisms, config,
                writer_partitions, upsert):
    keys, buffer_ptrs, sizes = list(keys), list(buffer_ptrs), list(sizes)
    return _batch(store, method, keys, len(buffer_ptrs), parallelisms, config,
                  writer_partitions,
                  lambda ks: _direct_from(store, method, ks, buffer_ptrs, sizes, config, upsert),
                  lambda i, p, w, c: write_from(store, method, keys[i], buffer_ptrs[i],
                                                sizes[i] if i < len(sizes) else 0, p, c, w,
                                                upsert))


def put_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None,
                                writer_partition=None):
    return write_tensor(self, "put_tensor_with_parallelism", key, tensor, parallelism, config,
                        writer_partition, False)


def upsert_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None,
                                   writer_partition=None):
    return write_tensor(self, "upsert_tensor_with_parallelism", key, tensor, parallelism,
                        config, writer_partition, True)


def put_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None,
                                     config=None, writer_partition=None):
    return write_from(self, "put_tensor_with_parallelism_from", key, buffer_ptr, size,
                      parallelism, config, writer_partition, False)


def upsert_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None,
                                        config=None, writer_partition=None):
    return write_from(self, "upsert_tensor_with_parallelism_from", key, buffer_ptr, size,
                      parallelism, config, writer_partition, True)


def batch_put_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None, config=None,
                                      writer_partitions=None):
    return _batch_tensors(self, "batch_put_tensor_with_parallelism", keys, tensors_list,
                          parallelisms, config, writer_partitions, False)


def batch_upsert_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None,
                                         config=None, writer_partitions=None):
    return _batch_tensors(self, "batch_upsert_tensor_with_parallelism", keys, tensors_list,
                          parallelisms, config, writer_partitions, True)


def batch_put_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes, parallelisms=None,
                                           config=None, writer_partitions=None):
    return _batch_from(self, "batch_put_tensor_with_parallelism_from", keys, buffer_ptrs, sizes,
                       parallelisms, config, writer_partitions, False)


def batch_upsert_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes, parallelisms=None,
                                              config=None, writer_partitions=None):
    return _batch_from(self, "batch_upsert_tensor_with_parallelism_from", keys, buffer_ptrs,
                       sizes, parallelisms, config, writer_partitions, True)
