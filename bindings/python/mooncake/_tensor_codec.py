"""Torch tensors as Mooncake's tensor objects, and back (docs/mooncake-api.md, "Tensors").

A tensor object is Mooncake's 304-byte header followed by the tensor's elements. The header's
bytes are the C ABI's to write and read (``mooncake_store._tensor_header_encode`` /
``_decode``, over ``mooncake_store_tensor_header_*``); this module only maps torch's side onto
it: element types, shapes, where a tensor's bytes are, and tensors made over bytes read.

torch is imported on first use, never at import: ``import mooncake_store`` works without it,
and a tensor call without it raises ImportError naming the package to install.

Also Mooncake's module functions ``_serialize_tensor`` and ``_deserialize_tensor`` (the
extension forwards them here).
"""
import ctypes
import types

import mooncake_store as _native

HEADER_SIZE = _native._tensor_metadata_size()
FULL, SHARD = 0, 1
# Axis kinds, as the C ABI numbers them (MOONCAKE_TENSOR_AXIS_*).
AXIS_DP, AXIS_TP, AXIS_EP, AXIS_PP = 0, 1, 2, 3

# torch's names of Mooncake's element types, by code (MOONCAKE_DTYPE_*).
_DTYPE_NAMES = ("float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                "int64", "uint64", "bool", "float16", "bfloat16", "float8_e4m3fn",
                "float8_e5m2")

_torch = None
_codes = None  # torch dtype -> code, for the types this torch has


class Refused(Exception):
    """A tensor call's argument (or an object it read) it cannot use; str() says why."""


def torch():
    """The torch module; ImportError naming what to install when there is none."""
    global _torch, _codes
    if _torch is None:
        try:
            import torch as module
        except ImportError as e:
            raise ImportError(
                "mooncake_store's tensor calls need PyTorch, which is not installed: "
                "apt-get install python3-torch (Debian), or pip install torch") from e
        _codes = {getattr(module, name): code for code, name in enumerate(_DTYPE_NAMES)
                  if hasattr(module, name)}
        _torch = module
    return _torch


def dtype_code(dtype):
    """Mooncake's code of a torch dtype; Refused for one it has none for."""
    torch()
    code = _codes.get(dtype)
    if code is None:
        raise Refused(f"dtype {dtype} has no Mooncake element type (it stores "
                      f"{', '.join(_DTYPE_NAMES)})")
    return code


def torch_dtype(code):
    """The torch dtype of a code; Refused when this torch lacks it."""
    t = torch()
    name = _DTYPE_NAMES[code]
    if not hasattr(t, name):
        raise Refused(f"the tensor's element type is {name}, which PyTorch {t.__version__} "
                      "lacks")
    return getattr(t, name)


class TensorInfo:
    """A tensor to store: a contiguous CPU tensor (the caller's, or a copy), its code and
    shape, and where its bytes are. Holding it keeps the bytes alive."""
    __slots__ = ("tensor", "code", "shape", "nbytes", "address")

    def __init__(self, tensor, code):
        self.tensor = tensor
        self.code = code
        self.shape = tuple(int(d) for d in tensor.shape)
        self.nbytes = tensor.numel() * tensor.element_size()
        self.address = tensor.data_ptr()

    def header(self):
        """The FULL header of the tensor."""
        return _native._tensor_header_encode(self.code, self.shape, self.shape, FULL, [],
                                             self.nbytes)

    def pieces(self):
        """The object's pieces for store._write_tensor_objects: header, then elements."""
        if self.nbytes == 0:
            return [self.header()]
        return [self.header(), (self.address, self.nbytes)]


def tensor_info(obj, what="tensor"):
    """The TensorInfo of obj. Mooncake's rules: a torch.Tensor of a type it stores, at most
    8 dimensions; a non-contiguous one is copied (as Mooncake does), and so is one in device
    memory (Mooncake copies it to the host too)."""
    t = torch()
    if not isinstance(obj, t.Tensor):
        raise Refused(f"{what} is a {type(obj).__name__}, not a torch.Tensor")
    code = dtype_code(obj.dtype)
    if obj.dim() > 8:
        raise Refused(f"{what} has {obj.dim()} dimensions; a tensor object holds at most 8")
    if obj.device.type != "cpu":
        obj = obj.cpu()
    if not obj.is_contiguous():
        obj = obj.contiguous()
    return TensorInfo(obj, code)


def decode(buffer, object_size=0):
    """The header at the start of buffer (bytes-like) of an object of object_size bytes
    (0: as the header says), as a namespace of its fields; Refused with the library's
    reason when it is not one."""
    try:
        return types.SimpleNamespace(**_native._tensor_header_decode(buffer, object_size))
    except ValueError as e:
        raise Refused(str(e)) from None


def memory_at(address, size):
    """A uint8 tensor over size bytes of memory at address (the caller's buffer): no copy."""
    return torch().frombuffer((ctypes.c_ubyte * size).from_address(address),
                              dtype=torch().uint8)


def header_at(address, object_size):
    """The header of the object of object_size bytes at address (the caller's memory);
    Refused when there is none."""
    if address == 0:
        raise Refused("buffer_ptr is 0 (NULL)")
    if object_size < HEADER_SIZE:
        raise Refused(f"size {object_size} is less than a tensor header ({HEADER_SIZE} bytes)")
    return decode((ctypes.c_char * HEADER_SIZE).from_address(address), object_size)


def header_of(raw, object_size=0):
    """The header at the start of raw, a uint8 tensor."""
    if raw.numel() < HEADER_SIZE:
        raise Refused(f"an object of {raw.numel()} bytes is shorter than a tensor header "
                      f"({HEADER_SIZE})")
    return decode(raw[:HEADER_SIZE].numpy(), object_size)


def tensor_of(raw, header):
    """The tensor an object holds, from raw (a uint8 tensor of the whole object), sharing
    raw's memory."""
    t = torch()
    dtype = torch_dtype(header.dtype)
    shape = tuple(header.local_shape)
    if header.data_bytes == 0:
        return t.empty(shape, dtype=dtype)
    data = raw[header.data_offset:header.data_offset + header.data_bytes]
    if data.storage_offset() % t.empty((), dtype=dtype).element_size() != 0:
        data = data.clone()  # elements not aligned in the object: view() needs them to be
    return data.view(dtype).reshape(shape)


def tensor_from_object(raw):
    """The tensor in raw, a uint8 tensor holding a whole object; Refused when the object
    is not a tensor this torch can hold."""
    return tensor_of(raw, header_of(raw, raw.numel()))


def serialize_tensor(tensor):
    """Mooncake's _serialize_tensor: (header bytes, data address, data bytes, owner), the
    owner a tensor keeping the data alive (tensor itself, or its contiguous copy)."""
    try:
        info = tensor_info(tensor)
        header = info.header()
    except (Refused, ValueError) as e:
        raise ValueError(f"unsupported tensor for Mooncake tensor serialization: {e}") from None
    return header, info.address, info.nbytes, info.tensor


def deserialize_tensor(payload):
    """Mooncake's _deserialize_tensor: the tensor of a header plus its elements (a copy of
    payload's bytes); ValueError when they are not one."""
    t = torch()
    if len(payload) == 0:
        raise ValueError("invalid serialized Mooncake tensor payload: it is empty")
    raw = t.frombuffer(bytearray(payload), dtype=t.uint8)
    try:
        return tensor_from_object(raw)
    except Refused as e:
        raise ValueError(f"invalid serialized Mooncake tensor payload: {e}") from None
