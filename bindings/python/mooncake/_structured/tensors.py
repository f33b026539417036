"""Tensor members: torch tensors stored in mooncake.store's serialized tensor format (a
metadata header, then the data: _serialize_tensor / _deserialize_tensor), or with torch.save
where that codec is missing (and for 0-d tensors); jagged nested tensors as their parts.

Slicing a stored tensor reads its header, patches the shape and data size in it, and reads
only the rows wanted. The header layout is Mooncake's: the data size, a little-endian
uint64, at byte 32; the global shape, int64s, from byte 40; the local shape, int64s, 64
bytes further.
"""
from __future__ import annotations

import ctypes
import io
from typing import Any, Mapping, Sequence

import numpy as np

from mooncake._structured import hooks
from mooncake._structured.model import _MultiBufferPayload, _TensorPayload

try:
    import torch as _torch
except ImportError:  # torch members then cannot be stored; everything else works
    _torch = None

_DATA_BYTES_OFFSET = 32
_GLOBAL_SHAPE_OFFSET = 40
_LOCAL_SHAPE_OFFSET = _GLOBAL_SHAPE_OFFSET + 8 * 8


def _is_tensor(value: Any) -> bool:
    return _torch is not None and isinstance(value, _torch.Tensor)


def _tensor_codec_helper(name: str) -> Any:
    helper = getattr(hooks.store_module(), name, None)
    if not callable(helper):
        raise RuntimeError("mooncake.store tensor serialization helpers are required for "
                           "structured tensor fields")
    return helper


def _tensor_metadata_size() -> int:
    """The header's size in mooncake.store's format (0 when it does not say)."""
    helper = getattr(hooks.store_module(), "_tensor_metadata_size", None)
    return int(helper()) if callable(helper) else 0


def _tensor_payload_parts(value: _TensorPayload) -> tuple[bytes, int, int, Any]:
    """(header, data address, data bytes, owner of the data) of a tensor."""
    metadata, data_ptr, data_bytes, owner = _tensor_codec_helper("_serialize_tensor")(
        value.tensor)
    return bytes(metadata), int(data_ptr), int(data_bytes), owner


def _tensor_payload_bytes(value: _TensorPayload) -> tuple[bytes, int]:
    """(header + data, header size)."""
    metadata, data_ptr, data_bytes, _owner = _tensor_payload_parts(value)
    if data_bytes == 0:
        return metadata, len(metadata)
    return metadata + ctypes.string_at(data_ptr, data_bytes), len(metadata)


def _deserialize_tensor_payload(payload: bytes) -> Any:
    return _tensor_codec_helper("_deserialize_tensor")(payload)


def _torch_save_payload_bytes(value: Any) -> bytes:
    buffer = io.BytesIO()
    _torch.save(value, buffer)
    return buffer.getvalue()


def _deserialize_torch_save_payload(payload: bytes) -> Any:
    # weights_only: a payload is data from the store, never code to run.
    return _torch.load(io.BytesIO(payload), weights_only=True)


def _slice_tensor_metadata(metadata: bytes, shape: Sequence[int], data_bytes: int) -> bytes:
    """The header of rows of a tensor: shape and data size replaced."""
    patched = bytearray(metadata)
    ctypes.c_uint64.from_buffer(patched, _DATA_BYTES_OFFSET).value = int(data_bytes)
    for index, dim in enumerate(shape):
        ctypes.c_int64.from_buffer(patched, _GLOBAL_SHAPE_OFFSET + 8 * index).value = int(dim)
        ctypes.c_int64.from_buffer(patched, _LOCAL_SHAPE_OFFSET + 8 * index).value = int(dim)
    return bytes(patched)


def _encode_torch_tensor_field(value: Any) -> tuple[dict[str, Any], Any]:
    """(field spec, what to store) of a tensor member."""
    if value.is_nested:
        if value.layout != getattr(_torch, "jagged", object()):
            raise ValueError("structured nested tensor fields require torch.jagged layout")
        return _encode_nested_tensor_field(value)
    return {"encoding": "torch_tensor", "dtype": str(value.dtype), "shape": list(value.shape),
            "element_size": int(value.element_size())}, _TensorPayload(tensor=value)


def _encode_nested_tensor_field(value: Any) -> tuple[dict[str, Any], Any]:
    """A jagged nested tensor: its values, offsets (and lengths) in the tensor format, one
    after the other ("tensor_parts"), or torch.save of the whole without the codec."""
    spec = {"encoding": "torch_tensor", "dtype": str(value.dtype), "nested": True,
            "format": "torch_save"}
    lengths = value.lengths()
    parts = [value.values(), value.offsets()] + ([lengths] if lengths is not None else [])
    if hooks.has_tensor_codec_helpers() and all(t.device.type == "cpu" for t in parts):
        blobs = [_tensor_payload_bytes(_TensorPayload(tensor=t))[0] for t in parts]
        spec.update({"format": "tensor_parts", "part_bytes": [len(b) for b in blobs],
                     "has_lengths": lengths is not None,
                     "ragged_idx": int(getattr(value, "_ragged_idx", 1))})
        return spec, _MultiBufferPayload(buffers=tuple(memoryview(b) for b in blobs))
    return spec, memoryview(_torch_save_payload_bytes(value))


def _deserialize_nested_tensor_payload(payload: bytes, field_spec: Mapping[str, Any]) -> Any:
    form = field_spec.get("format", "torch_save")
    if form == "torch_save":
        return _deserialize_torch_save_payload(payload)
    if form != "tensor_parts":
        raise ValueError(f"unsupported nested tensor payload format: {form}")
    sizes = field_spec.get("part_bytes")
    expected = 3 if field_spec.get("has_lengths") else 2
    if not isinstance(sizes, list) or len(sizes) != expected:
        raise ValueError("nested tensor payload has invalid part metadata")
    tensors, offset = [], 0
    for size in sizes:
        if not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise ValueError("nested tensor payload has invalid part size")
        if offset + size > len(payload):
            raise ValueError("nested tensor payload is truncated")
        tensors.append(_deserialize_tensor_payload(payload[offset:offset + size]))
        offset += size
    if offset != len(payload):
        raise ValueError("nested tensor payload has trailing bytes")
    return _torch.nested.nested_tensor_from_jagged(
        tensors[0], offsets=tensors[1], lengths=tensors[2] if expected == 3 else None,
        jagged_dim=int(field_spec.get("ragged_idx", 1)))


def _select_nested_tensor_rows(value: Any, indices: Sequence[int]) -> Any:
    """Rows of a jagged nested tensor, as one."""
    rows = value.unbind()
    chosen = [rows[int(index)] for index in indices]
    if chosen:
        result = _torch.nested.as_nested_tensor(chosen, layout=value.layout)
    else:
        offsets = _torch.zeros(1, dtype=value.offsets().dtype, device=value.offsets().device)
        result = _torch.nested.nested_tensor_from_jagged(value.values()[:0], offsets=offsets)
    if hasattr(value, "_ragged_idx"):
        result._ragged_idx = value._ragged_idx
    return result


def _parse_torch_dtype(name: str) -> Any:
    """torch.float32 for "torch.float32" (or "float32")."""
    dtype = getattr(_torch, name.removeprefix("torch."), None)
    if not isinstance(dtype, _torch.dtype):
        raise ValueError(f"unknown torch dtype: {name}")
    return dtype


def _torch_dtype_to_numpy(name: str) -> np.dtype:
    """The numpy dtype holding a torch dtype's values exactly."""
    dtype = _parse_torch_dtype(name)
    if dtype == _torch.bfloat16:
        raise ValueError("torch.bfloat16 has no value-preserving numpy dtype")
    return _torch.empty(0, dtype=dtype).numpy().dtype
