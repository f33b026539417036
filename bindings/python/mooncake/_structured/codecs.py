"""The codecs of DataProto non-tensor fields (object arrays of rows): each turns rows into a
few named payloads (flat arrays and byte strings, stored as members) plus JSON metadata, and
back. Their names, payloads and metadata are Mooncake's, so each side reads the other's:

==================  ==========================================  ===========================
codec               rows                                        payloads
==================  ==========================================  ===========================
typed_ragged        numeric arrays or lists of any shape        data, offsets, shapes,
                                                                ndims, nulls
ragged_tensor       torch tensors of one dtype                  (typed_ragged's)
ragged_tensor_dict  {key: tensor} dicts                         null_mask, <key>.<payload>
ndarray             numeric scalars                             data, nulls
bytes_ragged,       bytes-like values; PIL images (raw pixels)  data, offsets, nulls
media_bytes
media_list_ragged   lists of bytes or images                    data, row_offsets,
                                                                byte_offsets, nulls
utf8_ragged         str                                         data, offsets, nulls
msgpack_ragged,     dicts/lists                                 data, offsets, nulls
json_ragged
==================  ==========================================  ===========================

Every codec takes None rows (nulls). A payload is an ndarray, bytes, or a
_MultiBufferPayload / _DirectCopyPayload of the rows' own buffers, which the put gathers
without joining them first. Decoded ndarray rows may be views of the payload read (which may
be pool memory: the rows then hold its owner).
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence

import msgpack as _msgpack
import numpy as np

from mooncake._structured import hooks
from mooncake._structured.decisions import (
    _CodecDecision, _EncodedStructuredLeaf, _is_pil_image)
from mooncake._structured.model import (
    FieldSchema, _DirectCopyPayload, _MultiBufferPayload, _OwnerBackedList)
from mooncake._structured.tensors import (
    _is_tensor, _parse_torch_dtype, _torch, _torch_dtype_to_numpy)

_TYPED_RAGGED_DEFAULT_DTYPE = "int64"
_RAGGED_TENSOR_DEFAULT_DTYPE = "torch.float32"
_RAGGED_TENSOR_PAYLOAD_NAMES = frozenset({"data", "offsets", "shapes", "ndims", "nulls"})
# What a codec raises for rows it cannot take (the caller may try another).
_ENCODING_FALLBACK_ERRORS = (TypeError, ValueError, OverflowError, RuntimeError,
                             RecursionError)


def _flat_data_payload(flat_arrays: list[np.ndarray], dtype: np.dtype, total: int) -> Any:
    """Flat arrays stored back to back: gathered by the native copy when there is one."""
    if hooks.concat_arrays_into() is not None:
        return _DirectCopyPayload.from_flat_arrays(flat_arrays, dtype, total)
    return _MultiBufferPayload(buffers=tuple(memoryview(a.data).cast("B") for a in flat_arrays),
                               owners=tuple(flat_arrays), dtype=np.dtype(dtype).str,
                               shape=(total,))


def _empty_data_payload(dtype: np.dtype) -> _MultiBufferPayload:
    empty = np.empty(0, dtype=dtype)
    return _MultiBufferPayload(buffers=(memoryview(empty.data).cast("B"),), owners=(empty,),
                               dtype=np.dtype(dtype).str, shape=(0,))


def _as_contiguous_array_preserve_ndim(value: Any, dtype: np.dtype) -> np.ndarray:
    if isinstance(value, np.ndarray) and value.dtype == dtype and value.flags.c_contiguous:
        return value
    array = np.asarray(value, dtype=dtype)
    return array if array.flags.c_contiguous else np.array(array, dtype=dtype, order="C")


def _ndarray_layout_metadata(dtype: np.dtype, max_ndim: int) -> dict[str, Any]:
    return {"dtype": str(dtype), "max_ndim": int(max_ndim), "shape_policy": "ragged",
            "row_format": "ndarray", "ndarray_rows": None,
            "physical_layout": "contiguous_flat"}


# ---- typed_ragged -----------------------------------------------------------------------


def _encode_typed_ragged_regular_ndarray_rows(values: list[Any], dtype: np.dtype):
    """Two or more C-contiguous ndarray rows of one dtype and shape (no None): stored as one
    flat array. None when the rows are not so."""
    if len(values) < 2:
        return None
    first = values[0]
    for value in values:
        if (not isinstance(value, np.ndarray) or value.dtype != dtype
                or not value.flags.c_contiguous or value.shape != first.shape):
            return None
    rows, row_elems = len(values), int(first.size)
    total = rows * row_elems
    if row_elems:
        data = _flat_data_payload([v.reshape(-1) for v in values], dtype, total)
    else:
        data = np.asarray(values, dtype=dtype).reshape(-1)
    ndim = int(first.ndim)
    if ndim == 0:
        shapes, ndims = np.zeros((rows, 1), np.int64), np.zeros(rows, np.int16)
    else:
        shapes = np.empty((rows, ndim), np.int64)
        shapes[:] = first.shape
        ndims = np.full(rows, ndim, np.int16)
    payload = {"data": data, "offsets": np.arange(rows + 1, dtype=np.int64) * row_elems,
               "shapes": shapes, "ndims": ndims, "nulls": np.zeros(rows, np.bool_)}
    return payload, _ndarray_layout_metadata(dtype, ndim)


def _encode_typed_ragged_ndarray_rows(values: list[Any], dtype: np.dtype):
    """ndarray (or None) rows, stored contiguously; the rows' shapes recorded in the most
    compact form that holds them. None when a row is not an ndarray."""
    regular = _encode_typed_ragged_regular_ndarray_rows(values, dtype)
    if regular is not None:
        return regular
    rows = len(values)
    if rows == 0:
        return None
    nulls = np.empty(rows, np.bool_)
    lengths = np.empty(rows, np.int64)
    arrays: list[np.ndarray] = []
    tail: tuple[int, ...] | None = None  # the shape after the first axis, if shared
    row_ndim: int | None = None
    compatible, scalars, non_scalars = True, False, False
    for row, value in enumerate(values):
        if value is None:
            nulls[row], lengths[row] = True, 0
            continue
        if not isinstance(value, np.ndarray):
            return None
        array = _as_contiguous_array_preserve_ndim(value, dtype)
        arrays.append(array)
        nulls[row], lengths[row] = False, array.size
        if array.ndim == 0:
            scalars = True
            compatible = compatible and not non_scalars
            continue
        non_scalars = True
        compatible = compatible and not scalars
        if tail is None:
            tail, row_ndim = array.shape[1:], array.ndim
        elif array.ndim != row_ndim or array.shape[1:] != tail:
            compatible = False
    if compatible and tail is not None and 0 in tail:
        compatible = False  # row lengths could not be recovered from element counts
    offsets = np.empty(rows + 1, np.int64)
    offsets[0] = 0
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if len(arrays) == 1:
        flat = arrays[0].reshape(-1)
        data = _MultiBufferPayload(buffers=(memoryview(flat.data).cast("B"),), owners=(flat,),
                                   dtype=np.dtype(dtype).str, shape=(total,))
    elif total:
        data = _flat_data_payload([a.reshape(-1) for a in arrays], dtype, total)
    else:
        data = _empty_data_payload(dtype)

    if not arrays or (scalars and not non_scalars):
        max_ndim = 0
    elif compatible:
        max_ndim = int(row_ndim or 1)
    else:
        max_ndim = max(a.ndim for a in arrays)
    ndims = np.zeros(rows, np.int16)
    shapes = np.zeros((rows, max(max_ndim, 1)), np.int64)
    if max_ndim and compatible:
        tail_elems = int(np.prod(tail, dtype=np.int64)) if tail else 1
        shapes[:, 0] = lengths // tail_elems
        shapes[:, 1:] = tail
        ndims[~nulls] = max_ndim
    elif max_ndim:
        present = iter(arrays)
        for row in np.flatnonzero(~nulls):
            array = next(present)
            ndims[row] = array.ndim
            shapes[row, :array.ndim] = array.shape
    payload = {"data": data, "offsets": offsets, "shapes": shapes, "ndims": ndims,
               "nulls": nulls}
    return payload, _ndarray_layout_metadata(dtype, max_ndim)


def _encode_typed_ragged_values(values: list[Any], dtype_hint: np.dtype | None = None):
    """Numeric rows of any shapes (arrays, nested lists, scalars, None) as one flat array;
    ndarray rows decode as ndarrays, list rows as lists."""
    if dtype_hint is None:
        present = [np.asarray(v) for v in values if v is not None]
        dtype = (np.result_type(*present) if present
                 else np.dtype(_TYPED_RAGGED_DEFAULT_DTYPE))
    else:
        dtype = np.dtype(dtype_hint)
    if dtype.hasobject:
        raise ValueError("typed_ragged codec requires non-object dtype")
    packed = _encode_typed_ragged_ndarray_rows(values, dtype)
    if packed is not None:
        return packed
    arrays = [np.asarray([], dtype=dtype) if v is None
              else _as_contiguous_array_preserve_ndim(v, dtype) for v in values]
    max_ndim = max((a.ndim for a in arrays), default=0)
    offsets = np.zeros(len(arrays) + 1, np.int64)
    ndims = np.zeros(len(arrays), np.int16)
    shapes = np.zeros((len(arrays), max(max_ndim, 1)), np.int64)
    flats = []
    for row, array in enumerate(arrays):
        flats.append(array.reshape(-1))
        offsets[row + 1] = offsets[row] + array.size
        ndims[row] = array.ndim
        shapes[row, :array.ndim] = array.shape
    total = int(offsets[-1])
    data = _flat_data_payload(flats, dtype, total) if flats else _empty_data_payload(dtype)
    is_array = [v is not None and isinstance(v, np.ndarray) for v in values]
    if all(v is None or a for v, a in zip(values, is_array)):
        row_format = "ndarray"
    else:
        row_format = "mixed" if any(is_array) else "list"
    payload = {"data": data, "offsets": offsets, "shapes": shapes, "ndims": ndims,
               "nulls": np.asarray([v is None for v in values], np.bool_)}
    return payload, {"dtype": str(dtype), "max_ndim": int(max_ndim), "shape_policy": "ragged",
                     "row_format": row_format,
                     "ndarray_rows": is_array if row_format == "mixed" else None}


def _regular_offsets_width(offsets: np.ndarray, rows: int) -> int | None:
    """The one row width of offsets 0, w, 2w, ...; None when the rows differ."""
    if rows <= 0 or int(offsets[0]) != 0:
        return None
    total = int(offsets[-1])
    if total < 0 or total % rows:
        return None
    width = total // rows
    return width if bool(np.all(np.diff(offsets) == width)) else None


def _decode_typed_ragged_ndarray_rows_fast(data: np.ndarray, offsets, shapes, ndims, nulls,
                                           rows: int, metadata: Mapping[str, Any]):
    """ndarray rows sharing one shape after their first axis, as views of data (None: the
    general decode is needed)."""
    max_ndim = int(metadata.get("max_ndim", 0))
    owner = getattr(data, "_mooncake_pool_owner", None)
    # Rows are views of data itself: a view of data.view(np.ndarray) would take data's own
    # base (the lease's raw memory) as its base, skipping data and so its lease's owner,
    # which could then be collected -- and the lease reused -- while the rows live.
    source = data
    present = np.flatnonzero(~nulls)
    if rows == 0 or max_ndim == 0:
        return None
    if present.size == 0:
        return [None] * rows
    if any(int(ndims[row]) != max_ndim for row in present):
        return None
    tail = tuple(int(v) for v in shapes[present[0], 1:max_ndim])
    if 0 in tail or any(tuple(int(v) for v in shapes[row, 1:max_ndim]) != tail
                        for row in present):
        return None
    tail_elems = int(np.prod(tail, dtype=np.int64)) if tail else 1
    if int(offsets[-1]) % tail_elems:
        return None
    units = source.reshape((-1, *tail))
    bounds = offsets // tail_elems
    width = None if nulls.any() else _regular_offsets_width(bounds, rows)
    if width is not None:
        values = list(units.reshape((rows, width, *tail)))
    else:
        values = [None if nulls[row] else units[int(bounds[row]):int(bounds[row + 1])]
                  for row in range(rows)]
    return values if owner is None else _OwnerBackedList(values, owner)


def _decode_typed_ragged_values(payload: dict[str, Any], rows: int,
                                metadata: Optional[Mapping[str, Any]] = None) -> list[Any]:
    metadata = metadata or {}
    dtype = np.dtype(metadata.get("dtype", _TYPED_RAGGED_DEFAULT_DTYPE))
    raw = payload["data"]
    if _is_tensor(raw):
        data = raw.numpy()
    elif isinstance(raw, (bytes, bytearray, memoryview)):
        data = np.frombuffer(raw, dtype=dtype)
    elif isinstance(raw, np.ndarray):
        data = raw if raw.dtype == dtype else raw.view(dtype)
    else:
        data = np.asarray(raw, dtype=dtype)
    offsets, shapes, ndims, nulls = (payload[n] for n in ("offsets", "shapes", "ndims", "nulls"))
    row_format = metadata.get("row_format")
    if row_format == "ndarray" and metadata.get("physical_layout") == "contiguous_flat":
        fast = _decode_typed_ragged_ndarray_rows_fast(data, offsets, shapes, ndims, nulls,
                                                      rows, metadata)
        if fast is not None:
            return fast
    ndarray_rows = metadata.get("ndarray_rows") or []
    values = []
    for row in range(rows):
        if bool(nulls[row]):
            values.append(None)
            continue
        ndim = int(ndims[row])
        array = data[int(offsets[row]):int(offsets[row + 1])].reshape(
            tuple(int(v) for v in shapes[row, :ndim]))
        as_array = row_format == "ndarray" or (row_format == "mixed" and ndarray_rows[row])
        values.append(array if as_array else array.tolist())
    return values


# ---- ragged_tensor, ragged_tensor_dict ----------------------------------------------------


def _encode_ragged_tensor_values(values: list[Any]):
    """Tensors (or numeric ndarrays) of one dtype: typed_ragged of their data, the torch
    dtype kept."""
    if _torch is None:
        raise RuntimeError("torch is required to encode ragged tensor fields")
    torch_dtype, arrays = None, []
    for value in values:
        if value is None:
            arrays.append(None)
            continue
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                raise ValueError("ragged tensor codec requires numeric ndarray values")
            tensor = _torch.as_tensor(value if value.flags.writeable else value.copy())
        else:
            tensor = value.detach()
        if tensor.device.type != "cpu" or not tensor.is_contiguous():
            tensor = tensor.cpu().contiguous()
        if tensor.dtype == _torch.bfloat16:
            raise ValueError("ragged tensor codec does not support torch.bfloat16")
        torch_dtype = torch_dtype or tensor.dtype
        if tensor.dtype != torch_dtype:
            raise ValueError(f"mixed tensor dtype: {torch_dtype} vs {tensor.dtype}")
        arrays.append(tensor.numpy())
    torch_dtype = torch_dtype or _parse_torch_dtype(_RAGGED_TENSOR_DEFAULT_DTYPE)
    payload, metadata = _encode_typed_ragged_values(
        arrays, np.dtype(_torch_dtype_to_numpy(str(torch_dtype))))
    metadata["dtype"] = str(torch_dtype)
    return payload, metadata


def _decode_ragged_tensor_values(payload: dict[str, Any], rows: int,
                                 metadata: Optional[Mapping[str, Any]] = None) -> list[Any]:
    if _torch is None:
        raise RuntimeError("torch is required to decode ragged tensor fields")
    torch_name = (metadata or {}).get("dtype", _RAGGED_TENSOR_DEFAULT_DTYPE)
    as_numpy = {**(metadata or {}), "dtype": str(_torch_dtype_to_numpy(torch_name))}
    torch_dtype = _parse_torch_dtype(torch_name)
    return [None if v is None
            else _torch.from_numpy(v).to(torch_dtype) if isinstance(v, np.ndarray)
            else _torch.as_tensor(v, dtype=torch_dtype)
            for v in _decode_typed_ragged_values(payload, rows, as_numpy)]


def _normalize_ragged_tensor_dict_keys(keys: Any) -> list[str]:
    """The keys (of a mapping, or a sequence), checked: non-empty strings without ".", "/"
    or "\\" (they name payloads), each once."""
    names: list[str] = []
    for key in (keys.keys() if isinstance(keys, Mapping) else keys):
        if not isinstance(key, str):
            raise TypeError("ragged_tensor_dict keys must be strings")
        if not key:
            raise ValueError("ragged_tensor_dict keys must not be empty")
        if any(sep in key for sep in (".", "/", "\\")):
            raise ValueError("ragged_tensor_dict keys must not contain '.', '/', or '\\'")
        if key in names:
            raise ValueError(f"ragged_tensor_dict keys contain duplicate key {key!r}")
        names.append(key)
    return names


def _ragged_tensor_dict_payload_items(payload: Mapping[str, Any], key: str, *,
                                      kind: str) -> dict[str, Any]:
    """key's ragged_tensor payloads (named "<key>.<payload>" in the dict's)."""
    prefix = f"{key}."
    items = {name[len(prefix):]: value for name, value in payload.items()
             if name.startswith(prefix)}
    missing = sorted(_RAGGED_TENSOR_PAYLOAD_NAMES - set(items))
    if missing:
        raise ValueError(f"ragged_tensor_dict {kind} for key {key!r} is missing payloads: "
                         f"{missing}")
    return items


def _encode_ragged_tensor_dict_values(values: list[Any],
                                      schema: FieldSchema) -> _EncodedStructuredLeaf:
    """{key: tensor} rows (or None): one ragged_tensor per key (FieldSchema
    metadata["keys"], else every key seen), so each key is read on its own."""
    declared = schema.metadata.get("keys")
    keys = None if declared is None else _normalize_ragged_tensor_dict_keys(declared)
    seen: set[str] = set()
    for row, item in enumerate(values):
        if item is None:
            continue
        if not isinstance(item, Mapping):
            raise TypeError("ragged_tensor_dict rows must be mappings or None; "
                            f"row {row} is {type(item).__name__}")
        nulls = sorted(k for k, v in item.items() if v is None)
        if nulls:
            raise TypeError("ragged_tensor_dict rows cannot contain explicit None tensor "
                            f"values; row {row} has explicit None for {nulls}")
        row_keys = _normalize_ragged_tensor_dict_keys(item.keys())
        if keys is None:
            seen.update(row_keys)
        elif set(row_keys) - set(keys):
            raise ValueError("ragged_tensor_dict rows contain keys not declared in FieldSchema "
                             f"metadata['keys']; row {row} has keys not declared: "
                             f"{sorted(set(row_keys) - set(keys))}")
    if keys is None:
        keys = _normalize_ragged_tensor_dict_keys(sorted(seen))
    if keys and _torch is None:
        raise RuntimeError("torch is required to encode ragged_tensor_dict fields")
    payload: dict[str, Any] = {"null_mask": np.asarray([v is None for v in values], np.bool_)}
    key_codecs: dict[str, Any] = {}
    for key in keys:
        try:
            sub_payload, key_codecs[key] = _encode_ragged_tensor_values(
                [None if v is None else v.get(key) for v in values])
        except _ENCODING_FALLBACK_ERRORS as error:
            raise ValueError(f"failed to encode ragged_tensor_dict key {key!r}") from error
        payload.update({f"{key}.{name}": value for name, value in sub_payload.items()})
    return _EncodedStructuredLeaf(codec="ragged_tensor_dict", rows=len(values),
                                  payload=payload,
                                  metadata={"keys": keys, "key_codecs": key_codecs})


def _decode_ragged_tensor_dict_values(payload: dict[str, Any], rows: int,
                                      metadata: Mapping[str, Any]) -> list[Any]:
    null_mask = payload["null_mask"]
    if isinstance(null_mask, (bytes, bytearray)):
        null_mask = np.frombuffer(null_mask, dtype=np.bool_)
    keys = metadata.get("keys", [])
    columns = {key: _decode_ragged_tensor_values(
        {name[len(key) + 1:]: value for name, value in payload.items()
         if name.startswith(f"{key}.")}, rows, metadata.get("key_codecs", {}).get(key))
        for key in keys}
    return [None if bool(null_mask[row])
            else {key: columns[key][row] for key in keys if columns[key][row] is not None}
            for row in range(rows)]


# ---- scalars, bytes, media, msgpack, json ---------------------------------------------------


def _encode_numeric_scalar_values(values: list[Any], decision: _CodecDecision):
    dtype = np.dtype(decision.metadata["dtype"])
    fill = False if dtype == np.bool_ else 0
    data = np.asarray([fill if v is None else v for v in values], dtype=dtype)
    return ({"data": data, "nulls": np.asarray([v is None for v in values], np.bool_)},
            {"dtype": str(data.dtype), "shape": list(data.shape)})


def _decode_numeric_scalar_values(payload: dict[str, Any]) -> list[Any]:
    data, nulls = payload["data"], payload["nulls"]
    if not bool(nulls.any()):
        return data.tolist()
    values = data.astype(object)
    values[nulls] = None
    return values.tolist()


def _value_to_media_bytes(value: Any) -> tuple[bytes, str | None, dict[str, Any]]:
    """(bytes, media type, how to rebuild it) of a bytes-like value or a PIL image."""
    if value is None:
        return b"", None, {"kind": "null"}
    if _is_pil_image(value):
        image = value.convert(value.mode) if getattr(value, "readonly", False) else value
        return image.tobytes(), "image/raw", {"kind": "pil_raw", "mode": image.mode,
                                              "size": list(image.size),
                                              "format": getattr(value, "format", None)}
    return bytes(value), None, {"kind": "bytes"}


def _multi_buffer_bytes_payload(parts: Sequence[bytes]) -> _MultiBufferPayload:
    return _MultiBufferPayload(tuple(memoryview(p).cast("B") for p in parts if p), tuple(parts))


def _encode_bytes_like_values(values: list[Any]):
    parts, media_types, encodings, offsets = [], [], [], [0]
    for value in values:
        data, media_type, encoding = _value_to_media_bytes(value)
        parts.append(data)
        media_types.append(media_type)
        encodings.append(encoding)
        offsets.append(offsets[-1] + len(data))
    metadata: dict[str, Any] = {}
    if any(e.get("kind") == "pil_raw" for e in encodings):
        metadata["media_encodings"] = encodings
    types = sorted({t for t in media_types if t})
    if types:
        metadata["media_types"] = types
        metadata["encode_source"] = "raw_pixels_from_object"
    return ({"data": _multi_buffer_bytes_payload(parts),
             "offsets": np.asarray(offsets, np.int64),
             "nulls": np.asarray([v is None for v in values], np.bool_)}, metadata)


def _decode_media_bytes(data: Any, encoding: Optional[Mapping[str, Any]]) -> Any:
    if not encoding or encoding.get("kind") != "pil_raw":
        return bytes(data)
    try:
        from PIL import Image
    except ImportError:  # no Pillow: the raw pixels
        return bytes(data)
    image = Image.frombuffer(encoding["mode"], tuple(encoding["size"]), data, "raw",
                             encoding["mode"], 0, 1)
    image.format = encoding.get("format")
    return image


def _decode_bytes_like_values(payload: dict[str, Any], rows: int,
                              metadata: Optional[Mapping[str, Any]] = None) -> list[Any]:
    data, offsets, nulls = payload["data"], payload["offsets"], payload["nulls"]
    encodings = (metadata or {}).get("media_encodings", [])
    view = memoryview(data)
    return [None if bool(nulls[row]) else _decode_media_bytes(
        view[int(offsets[row]):int(offsets[row + 1])],
        encodings[row] if row < len(encodings) else None) for row in range(rows)]


def _encode_media_list_values(values: list[Any]):
    parts, media_types, encodings = [], [], []
    row_offsets, byte_offsets = [0], [0]
    for value in values:
        items = [] if value is None else list(value)
        for item in items:
            data, media_type, encoding = _value_to_media_bytes(item)
            parts.append(data)
            media_types.append(media_type)
            encodings.append(encoding)
            byte_offsets.append(byte_offsets[-1] + len(data))
        row_offsets.append(row_offsets[-1] + len(items))
    metadata: dict[str, Any] = {"encode_source": "raw_pixels_from_object",
                                "media_encodings": encodings}
    types = sorted({t for t in media_types if t})
    if types:
        metadata["media_types"] = types
    return ({"data": b"".join(parts), "row_offsets": np.asarray(row_offsets, np.int64),
             "byte_offsets": np.asarray(byte_offsets, np.int64),
             "nulls": np.asarray([v is None for v in values], np.bool_)}, metadata)


def _decode_media_list_values(payload: dict[str, Any], rows: int,
                              metadata: Optional[Mapping[str, Any]] = None) -> list[Any]:
    view = memoryview(payload["data"])
    row_offsets, byte_offsets = payload["row_offsets"], payload["byte_offsets"]
    encodings = (metadata or {}).get("media_encodings", [])
    values = []
    for row in range(rows):
        if bool(payload["nulls"][row]):
            values.append(None)
            continue
        values.append([_decode_media_bytes(
            view[int(byte_offsets[i]):int(byte_offsets[i + 1])],
            encodings[i] if i < len(encodings) else None)
            for i in range(int(row_offsets[row]), int(row_offsets[row + 1]))])
    return values


def _encode_msgpack_ragged_values(path: str, values: list[Any]):
    """Rows packed one after the other in one buffer (strict types: a tuple is refused)."""
    offsets = np.zeros(len(values) + 1, np.int64)
    nulls = np.asarray([v is None for v in values], np.bool_)
    packer = _msgpack.Packer(use_bin_type=True, strict_types=True)
    data = bytearray()
    try:
        for row, value in enumerate(values):
            if value is not None:
                data += packer.pack(value)
            offsets[row + 1] = len(data)
    except TypeError as error:
        raise ValueError(f"unsupported structured non-tensor field {path}: msgpack codec "
                         "cannot encode value") from error
    return {"data": data, "offsets": offsets, "nulls": nulls}, {}


def _decode_msgpack_ragged_values(payload: dict[str, Any], rows: int) -> list[Any]:
    offsets, nulls = payload["offsets"], payload["nulls"]
    if len(offsets) != rows + 1:
        raise ValueError(f"msgpack_ragged offsets length {len(offsets)} does not match rows "
                         f"{rows}")
    if len(nulls) != rows:
        raise ValueError(f"msgpack_ragged nulls length {len(nulls)} does not match rows {rows}")
    unpacker = _msgpack.Unpacker(raw=False)
    unpacker.feed(bytes(payload["data"]))
    if rows == 0 or not bool(nulls.any()):
        values = list(unpacker)
        if len(values) != rows:
            raise ValueError(f"msgpack_ragged decoded {len(values)} rows, expected {rows}")
        return values
    present = iter(unpacker)
    return [None if bool(is_null) else next(present) for is_null in nulls]


def _json_row(value: Any) -> bytes | None:
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# ---- one leaf ----------------------------------------------------------------------------


def _encode_structured_leaf(values: list[Any], decision: _CodecDecision) -> _EncodedStructuredLeaf:
    """Rows with the codec decision chose; the decision is recorded in the metadata."""
    if not decision.accepted:
        raise ValueError(f"unsupported structured non-tensor field: {decision.reason}")
    codec = decision.codec
    if codec == "ragged_tensor":
        payload, metadata = _encode_ragged_tensor_values(values)
    elif codec == "typed_ragged":
        payload, metadata = _encode_typed_ragged_values(values)
    elif codec == "media_list_ragged":
        payload, metadata = _encode_media_list_values(values)
    elif codec == "ndarray":
        payload, metadata = _encode_numeric_scalar_values(values, decision)
    elif codec in ("bytes_ragged", "media_bytes"):
        payload, metadata = _encode_bytes_like_values(values)
    elif codec == "utf8_ragged":
        payload, metadata = _encode_bytes_like_values(
            [None if v is None else v.encode("utf-8") for v in values])
    elif codec == "msgpack_ragged":
        payload, metadata = _encode_bytes_like_values(
            [None if v is None else _msgpack.packb(v, use_bin_type=True, strict_types=True)
             for v in values])
    elif codec == "json_ragged":
        payload, metadata = _encode_bytes_like_values([_json_row(v) for v in values])
    else:
        raise ValueError(f"unsupported structured non-tensor codec: {codec}")
    metadata.update({"schema_source": "inferred_from_runtime_values",
                     "decision_reason": decision.reason,
                     "normalized_type": decision.normalized_type, **decision.metadata})
    return _EncodedStructuredLeaf(codec=codec, rows=len(values), payload=payload,
                                  metadata=metadata)


def _decode_structured_leaf(codec: str, payload: dict[str, Any], rows: int,
                            metadata: Optional[Mapping[str, Any]] = None) -> list[Any]:
    if codec == "ragged_tensor":
        return _decode_ragged_tensor_values(payload, rows, metadata)
    if codec == "typed_ragged":
        return _decode_typed_ragged_values(payload, rows, metadata)
    if codec == "media_list_ragged":
        return _decode_media_list_values(payload, rows, metadata)
    if codec == "ndarray":
        return _decode_numeric_scalar_values(payload)
    if codec == "media_bytes":
        return _decode_bytes_like_values(payload, rows, metadata)
    if codec == "bytes_ragged":
        return _decode_bytes_like_values(payload, rows)
    if codec == "utf8_ragged":
        return [None if v is None else v.decode("utf-8")
                for v in _decode_bytes_like_values(payload, rows)]
    if codec == "msgpack_ragged":
        return _decode_msgpack_ragged_values(payload, rows)
    if codec == "json_ragged":
        return [None if v is None else json.loads(v)
                for v in _decode_bytes_like_values(payload, rows)]
    raise ValueError(f"unknown structured non-tensor codec: {codec}")
