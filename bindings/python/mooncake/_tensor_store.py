"""Mooncake's plain tensor calls: put/get/upsert/pub of whole tensors, their batch, _from
(a tensor object already laid out in caller memory) and _into (read into caller memory)
forms, get_tensor_into_cuda, and the safetensors calls. Each function is the method of
MooncakeDistributedStore of its name (the extension forwards to it; self is the store).

Return shapes and codes are Mooncake's (store_py.cpp at 3b5a594): -600 for a bad argument,
None for a read that found nothing usable; why is in store.last_error(). Where this store
differs: docs/mooncake-api.md, "Tensors".
"""
import operator
import warnings

from mooncake import _safetensors
from mooncake import _tensor_codec as codec
from mooncake import _tensor_io as io

FILE_NOT_FOUND = -1100


# ---- writes of torch tensors ---------------------------------------------------------------

def _write_one(store, method, key, tensor, config, upsert):
    try:
        info = codec.tensor_info(tensor)
    except codec.Refused as e:
        return io.refuse(store, method, e)
    return io.write_objects(store, [key], [info.pieces()], config, upsert)[0]


def _write_many(store, method, keys, tensors_list, config, upsert):
    """The batch writes: one code per key; a tensor that cannot be stored gets -600 and the
    others are stored (Mooncake's); keys and tensors of different lengths: -600 for all."""
    keys = list(keys)
    if len(keys) != len(tensors_list) or not keys:
        if keys:
            io.refuse(store, method, f"{len(keys)} keys but {len(tensors_list)} tensors")
        return [io.INVALID_PARAMS] * len(keys)
    results = [io.INVALID_PARAMS] * len(keys)
    valid, objects, refusal = [], [], None
    for i, tensor in enumerate(tensors_list):
        try:
            objects.append(codec.tensor_info(tensor, f"tensor {i}").pieces())
            valid.append(i)
        except codec.Refused as e:
            refusal = refusal or e
    for i, rc in zip(valid, io.write_objects(store, [keys[i] for i in valid], objects, config,
                                             upsert)):
        results[i] = rc
    if refusal is not None:
        io.refuse(store, method, refusal)
    return results


def put_tensor(self, key, tensor):
    return _write_one(self, "put_tensor", key, tensor, None, False)


def upsert_tensor(self, key, tensor):
    return _write_one(self, "upsert_tensor", key, tensor, None, True)


def batch_put_tensor(self, keys, tensors_list):
    return _write_many(self, "batch_put_tensor", keys, tensors_list, None, False)


def batch_upsert_tensor(self, keys, tensors_list):
    return _write_many(self, "batch_upsert_tensor", keys, tensors_list, None, True)


def pub_tensor(self, key, tensor, config=None):
    why = io.check_preferred_segments(config)
    if why:
        return io.refuse(self, "pub_tensor", why)
    return _write_one(self, "pub_tensor", key, tensor, config, False)


def upsert_pub_tensor(self, key, tensor, config=None):
    why = io.check_preferred_segments(config)
    if why:
        return io.refuse(self, "upsert_pub_tensor", why)
    return _write_one(self, "upsert_pub_tensor", key, tensor, config, True)


def _pub_many(store, method, keys, tensors_list, config, upsert):
    keys = list(keys)
    why = io.check_preferred_segments(config)
    if why and keys and len(keys) == len(tensors_list):
        io.refuse(store, method, why)
        return [io.INVALID_PARAMS] * len(keys)
    return _write_many(store, method, keys, tensors_list, config, upsert)


def batch_pub_tensor(self, keys, tensors_list, config=None):
    return _pub_many(self, "batch_pub_tensor", keys, tensors_list, config, False)


def batch_upsert_pub_tensor(self, keys, tensors_list, config=None):
    return _pub_many(self, "batch_upsert_pub_tensor", keys, tensors_list, config, True)


# ---- writes of tensor objects laid out in caller memory ------------------------------------

def _write_from(store, method, key, buffer_ptr, size, upsert):
    """The object [header][elements] at buffer_ptr stored as it is: checked, then put_from
    (zero copy when the buffer is pool memory)."""
    buffer_ptr = operator.index(buffer_ptr)
    try:
        codec.header_at(buffer_ptr, size)
    except codec.Refused as e:
        return io.refuse(store, method, e)
    return (store.upsert_from if upsert else store.put_from)(key, buffer_ptr, size)


def put_tensor_from(self, key, buffer_ptr, size):
    return _write_from(self, "put_tensor_from", key, buffer_ptr, size, False)


def upsert_tensor_from(self, key, buffer_ptr, size):
    return _write_from(self, "upsert_tensor_from", key, buffer_ptr, size, True)


def check_objects(keys, buffer_ptrs, sizes):
    """Why the batch of tensor objects at buffer_ptrs cannot be written, or None."""
    if len(keys) != len(buffer_ptrs) or len(keys) != len(sizes):
        return (f"{len(keys)} keys, {len(buffer_ptrs)} buffer_ptrs and {len(sizes)} sizes: "
                "the lists must be as long")
    for i, (ptr, size) in enumerate(zip(buffer_ptrs, sizes)):
        try:
            codec.header_at(operator.index(ptr), size)
        except codec.Refused as e:
            return f"entry {i}: {e}"
    return None


def _write_many_from(store, method, keys, buffer_ptrs, sizes, upsert):
    """Mooncake's: one bad entry fails them all (-600 each); an empty batch is []."""
    keys = list(keys)
    if not keys:
        return []
    why = check_objects(keys, buffer_ptrs, sizes)
    if why:
        io.refuse(store, method, why)
        return [io.INVALID_PARAMS] * len(keys)
    write = store.batch_upsert_from if upsert else store.batch_put_from
    return list(write(keys, list(buffer_ptrs), list(sizes)))


def batch_put_tensor_from(self, keys, buffer_ptrs, sizes):
    return _write_many_from(self, "batch_put_tensor_from", keys, buffer_ptrs, sizes, False)


def batch_upsert_tensor_from(self, keys, buffer_ptrs, sizes):
    return _write_many_from(self, "batch_upsert_tensor_from", keys, buffer_ptrs, sizes, True)


# ---- reads ---------------------------------------------------------------------------------

def tensor_or_none(store, method, raw):
    """The tensor in raw (a whole object's bytes), or None (and why) when it holds none."""
    if raw is None:
        return None
    try:
        return codec.tensor_from_object(raw)
    except codec.Refused as e:
        return io.refuse(store, method, e, None)


def get_tensor(self, key):
    return tensor_or_none(self, "get_tensor", io.read_object(self, key))


def batch_get_tensor(self, keys):
    keys = list(keys)
    return [tensor_or_none(self, "batch_get_tensor", raw) for raw in io.read_objects(self, keys)]


def read_into(store, method, key, buffer_ptr, size):
    """The object of key read into the caller's buffer, and the tensor over its elements
    there (no copy); None when it could not be read or is not a tensor."""
    buffer_ptr = operator.index(buffer_ptr)
    if buffer_ptr == 0:
        return io.refuse(store, method, "buffer_ptr is 0 (NULL)", None)
    n = io.get_into(store, [key], [buffer_ptr], [size])[0]
    if n < 0:
        return None
    return tensor_or_none(store, method, codec.memory_at(buffer_ptr, n))


def get_tensor_into(self, key, buffer_ptr, size):
    return read_into(self, "get_tensor_into", key, buffer_ptr, size)


def batch_get_tensor_into(self, keys, buffer_ptrs, sizes):
    """Mooncake's shape: a tensor or None per key; but a bad request (lists of different
    lengths, a NULL buffer) is -600 for every key."""
    method = "batch_get_tensor_into"
    keys, buffer_ptrs, sizes = list(keys), [operator.index(p) for p in buffer_ptrs], list(sizes)
    if len(keys) != len(buffer_ptrs) or len(keys) != len(sizes):
        io.refuse(self, method, "keys, buffer_ptrs and sizes must be as long")
        return [io.INVALID_PARAMS] * len(keys)
    if 0 in buffer_ptrs:
        io.refuse(self, method, f"buffer_ptrs[{buffer_ptrs.index(0)}] is 0 (NULL)")
        return [io.INVALID_PARAMS] * len(keys)
    if not keys:
        return []
    out = []
    for ptr, n in zip(buffer_ptrs, io.get_into(self, keys, buffer_ptrs, sizes)):
        out.append(None if n < 0 else tensor_or_none(self, method, codec.memory_at(ptr, n)))
    return out


def get_tensor_into_cuda(self, key, tensor):
    results = batch_get_tensor_into_cuda(self, [key], [tensor])
    return results[0] if results else io.INVALID_PARAMS


def batch_get_tensor_into_cuda(self, keys, tensors_list):
    """The elements of each key's tensor read into the matching CUDA tensor (same dtype and
    shape, contiguous): per key the bytes read, or -600 (every key when the lists differ
    in length). Mooncake reads through CUDA IPC (a dummy client only; its real client
    answers -600); here the elements are read into host memory and copied to the device
    by torch. Without CUDA no destination qualifies: -600 for each key, as Mooncake."""
    method = "batch_get_tensor_into_cuda"
    keys, tensors_list = list(keys), list(tensors_list)
    results = [io.INVALID_PARAMS] * len(keys)
    if len(keys) != len(tensors_list):
        io.refuse(self, method, f"{len(keys)} keys but {len(tensors_list)} tensors")
        return results
    t = codec.torch() if keys else None
    refusal = None
    for i, (key, dest) in enumerate(zip(keys, tensors_list)):
        if not isinstance(dest, t.Tensor) or not dest.is_cuda:
            refusal = refusal or (f"tensor {i} is not a tensor in CUDA memory (this store has "
                                  "no CUDA path for other destinations; use get_tensor_into)")
            continue
        if not dest.is_contiguous():
            refusal = refusal or f"tensor {i} is not contiguous"
            continue
        raw = io.read_object(self, key)
        host = tensor_or_none(self, method, raw)
        if host is None:
            continue
        if host.dtype != dest.dtype or tuple(host.shape) != tuple(dest.shape):
            refusal = refusal or (f"key {key!r} holds a {host.dtype} tensor of shape "
                                  f"{tuple(host.shape)}, tensor {i} is a {dest.dtype} one of "
                                  f"shape {tuple(dest.shape)}")
            continue
        dest.copy_(host)
        results[i] = host.numel() * host.element_size()
    if refusal:
        io.refuse(self, method, refusal)
    return results


# ---- safetensors files ---------------------------------------------------------------------

def save_tensor_to_safetensor(self, key, file_name=None):
    tensor = get_tensor(self, key)
    if tensor is None:
        return io.refuse(self, "save_tensor_to_safetensor",
                         f"no tensor under key {key!r}", FILE_NOT_FOUND)
    path = key if file_name is None else str(file_name)
    try:
        _safetensors.save_file({key: tensor}, path)
    except (OSError, ValueError) as e:
        return io.refuse(self, "save_tensor_to_safetensor", f"writing {path!r}: {e}")
    return 0


def load_tensor_from_safetensor(self, key=None, file_name=None):
    """Mooncake's order: key first (default None), file_name required."""
    if file_name is None:
        raise TypeError("load_tensor_from_safetensor() missing required argument 'file_name'")
    method = "load_tensor_from_safetensor"
    try:
        tensors = _safetensors.load_file(str(file_name))
    except (OSError, ValueError) as e:
        return io.refuse(self, method, f"reading {file_name!r}: {e}", None)
    if not tensors:
        return io.refuse(self, method, f"{file_name!r} holds no tensor", None)
    target = str(file_name) if key is None else key
    name = key if key is not None and key in tensors else next(iter(tensors))
    tensor = tensors[name]
    rc = put_tensor(self, target, tensor)
    if rc != 0:
        return None
    if key is not None and name != key:
        warnings.warn(f"{method}: {file_name!r} has no tensor named {key!r}: its first, "
                      f"{name!r}, was stored under {key!r}", UserWarning, stacklevel=2)
    return tensor
