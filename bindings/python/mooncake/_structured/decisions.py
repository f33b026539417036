"""Which codec a non-tensor field's rows take (codecs.py), decided from the rows themselves:
the first of ragged_tensor (torch tensors of one dtype), media_list_ragged (lists of bytes or
images), typed_ragged (numeric ndarrays, or numeric lists), ndarray (numeric scalars),
bytes_ragged, media_bytes (images), utf8_ragged (str), msgpack_ragged (dicts, lists) whose
rows all qualify; None rows do not count. The decision, and the outcome of an encoding, are
the types here; MISSING marks a dict key a row lacks (inference.py), as opposed to None."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mooncake._structured.tensors import _torch


@dataclass
class _CodecDecision:
    accepted: bool
    codec: str
    reason: str
    normalized_type: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class _EncodedStructuredLeaf:
    """Rows encoded: the codec, the row count, the named payloads and the metadata."""

    codec: str
    rows: int
    payload: dict[str, Any]
    metadata: dict[str, Any]


@dataclass
class _InferredLeaf:
    """A column of values at a path of the rows' structure, and its codec."""

    path: str
    values: list[Any]
    decision: _CodecDecision


@dataclass
class _InferredNode:
    """A dict or list level of the rows' structure: its children (keys, or indices), the
    list lengths, and which rows have a container there."""

    path: str
    node_type: str
    children: list[Any]
    lengths: list[int] | None = None
    row_mask: list[bool] | None = None


class _Missing:
    """A dict key absent from a row (distinct from a None value)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<MISSING>"


MISSING = _Missing()


def _non_null(values: list[Any]) -> list[Any]:
    return [v for v in values if v is not None and not isinstance(v, _Missing)]


def _is_pil_image(value: Any) -> bool:
    module = getattr(value.__class__, "__module__", None) or ""
    return module.startswith("PIL.") and hasattr(value, "save")


def _is_bytes_like(value: Any) -> bool:
    return isinstance(value, (bytes, bytearray, memoryview))


def _is_media_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(
        _is_pil_image(item) or _is_bytes_like(item) for item in value)


def _choose_leaf_codec(values: list[Any]) -> _CodecDecision:
    present = _non_null(values)
    if not present:
        return _CodecDecision(False, "msgpack_ragged", "all rows are null", "msgpack")

    def every(predicate) -> bool:
        return all(predicate(v) for v in present)

    if _torch is not None and every(lambda v: isinstance(v, _torch.Tensor)):
        dtypes = {v.dtype for v in present}
        if len(dtypes) != 1:
            return _CodecDecision(False, "ragged_tensor",
                                  f"mixed tensor dtype: {sorted(str(d) for d in dtypes)}",
                                  "torch.Tensor")
        return _CodecDecision(True, "ragged_tensor", "all non-null rows are Tensor",
                              "torch.Tensor", {"dtype": str(present[0].dtype)})
    if every(_is_media_list):
        return _CodecDecision(True, "media_list_ragged", "all rows are media lists",
                              "media list")
    if every(lambda v: isinstance(v, np.ndarray)):
        if every(lambda v: np.issubdtype(v.dtype, np.number)):
            return _CodecDecision(True, "typed_ragged", "all rows are numeric ndarray",
                                  "numeric sequence", {"recursive_source": "ndarray"})
        return _CodecDecision(False, "msgpack_ragged", "object ndarray rows", "python object")
    if every(lambda v: isinstance(v, (list, tuple))):
        try:
            dtype = np.result_type(*[np.asarray(v).dtype for v in present])
        except (TypeError, ValueError, OverflowError):
            dtype = None
        if dtype is not None and np.issubdtype(dtype, np.number):
            return _CodecDecision(True, "typed_ragged", "all rows are numeric sequences",
                                  "numeric sequence", {"dtype": str(dtype)})
    if every(lambda v: isinstance(v, (bool, int, float, np.number))):
        return _CodecDecision(True, "ndarray", "all rows are numeric scalar", "numeric scalar",
                              {"dtype": str(np.result_type(*present))})
    if every(_is_bytes_like):
        return _CodecDecision(True, "bytes_ragged", "all rows are bytes-like", "bytes-like")
    if every(_is_pil_image):
        return _CodecDecision(True, "media_bytes", "all rows are media", "media")
    if every(lambda v: isinstance(v, str)):
        return _CodecDecision(True, "utf8_ragged", "all rows are str", "str")
    if every(lambda v: isinstance(v, (dict, list, tuple))):
        return _CodecDecision(True, "msgpack_ragged", "all rows are msgpack-like", "msgpack")
    return _CodecDecision(False, "msgpack_ragged", "no codec matched", "python object")
