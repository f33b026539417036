"""_StructuredObjectLayer: a structured object is a bundle whose metadata is JSON holding,
under "__mooncake_structured_fields__", how each member is encoded:

* {"encoding": "ndarray", "dtype": "<f4", "shape": [...]}: the array's bytes, C order;
* {"encoding": "torch_tensor", "dtype", "shape", "element_size"}: a tensor (tensors.py);
  with "nested": true, a jagged nested tensor;
* {"encoding": "bytes"} (or no entry): raw bytes.

Reads materialize members: arrays into new arrays, caller destinations (checked against
dtype, shape, contiguity, writability) or pool-backed arrays; row slices along axis 0 read
only the bytes of the rows covered.
"""
from __future__ import annotations

import ctypes
from typing import Any, Mapping, Optional

import numpy as np

from mooncake._structured.buffers import (
    _decode_structured_metadata, _encode_structured_metadata, _validate_key_segment)
from mooncake._structured.bundle import _BundleManifestStore
from mooncake._structured.model import (
    STRUCTURED_FIELD_SPECS_KEY, BundleTransferPolicy, RemoteBundleRef, StructuredMemberSlice,
    StructuredObjectPayload, StructuredObjectReadSpec, StructuredObjectResult,
    _DirectCopyPayload, _MultiBufferPayload, _NdarrayReadPlan, _RawDestinationBuffer,
    _TensorObjectBufferPayload, _TensorPayload)
from mooncake._structured.tensors import (
    _deserialize_nested_tensor_payload, _deserialize_tensor_payload,
    _deserialize_torch_save_payload, _encode_torch_tensor_field, _is_tensor,
    _select_nested_tensor_rows, _slice_tensor_metadata)

_TENSOR_DESTINATIONS = (_TensorObjectBufferPayload, _RawDestinationBuffer)


def _structured_field_specs(metadata: Mapping[str, Any]) -> dict[str, Any]:
    specs = metadata.get(STRUCTURED_FIELD_SPECS_KEY, {})
    if not isinstance(specs, dict):
        raise ValueError("structured field specs must be a dict")
    return specs


def _encode_structured_field(value: Any) -> tuple[dict[str, Any], Any]:
    """(field spec, what to store) of a member."""
    if isinstance(value, _TensorObjectBufferPayload):
        return {"encoding": "torch_tensor"}, value
    if isinstance(value, _TensorPayload):
        return _encode_torch_tensor_field(value.tensor)
    if isinstance(value, (_DirectCopyPayload, _MultiBufferPayload)):
        if value.dtype is not None and value.shape is not None:
            return {"encoding": "ndarray", "dtype": value.dtype,
                    "shape": list(value.shape)}, value
        return {"encoding": "bytes"}, value
    if _is_tensor(value):
        return _encode_torch_tensor_field(value)
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        return ({"encoding": "ndarray", "dtype": array.dtype.str, "shape": list(array.shape)},
                array.view(np.uint8).reshape(-1))
    return {"encoding": "bytes"}, value


def _encode_structured_fields(metadata: Mapping[str, Any],
                              fields: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metadata with the members' specs, what to store per member)."""
    if not isinstance(metadata, Mapping):
        raise TypeError("structured metadata must be a mapping")
    normalized = dict(metadata)
    if STRUCTURED_FIELD_SPECS_KEY in normalized:
        raise ValueError(f"structured metadata key {STRUCTURED_FIELD_SPECS_KEY!r} is reserved")
    if not isinstance(normalized.get("layout", "structured"), str):
        raise ValueError("structured metadata layout must be a string")
    normalized.setdefault("layout", "structured")
    specs, encoded = {}, {}
    for name, value in fields.items():
        _validate_key_segment(name, "buffer name")
        specs[name], encoded[name] = _encode_structured_field(value)
    if specs:
        normalized[STRUCTURED_FIELD_SPECS_KEY] = specs
    return normalized, encoded


def _normalized_member_slice(member_slice: StructuredMemberSlice,
                             total_rows: int) -> tuple[int, int, int]:
    if member_slice.step <= 0:
        raise ValueError("structured ndarray slicing step must be positive")
    return slice(member_slice.start, member_slice.end, member_slice.step).indices(total_rows)


def _resolve_ndarray_read_plan(shape: tuple[int, ...], dtype: np.dtype,
                               member_slice: StructuredMemberSlice | None) -> _NdarrayReadPlan:
    if member_slice is None:
        nbytes = (int(np.prod(shape, dtype=np.int64)) if shape else 1) * dtype.itemsize
        return _NdarrayReadPlan(dtype, shape, shape, 0, nbytes, 1, shape[0] if shape else 1)
    if member_slice.axis != 0:
        raise ValueError("structured ndarray slicing currently supports axis=0 only")
    if not shape:
        raise ValueError("structured ndarray slicing requires at least one dimension")
    start, end, step = _normalized_member_slice(member_slice, shape[0])
    row_bytes = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
    if start >= end:
        return _NdarrayReadPlan(dtype, shape, (0, *shape[1:]), start * row_bytes, 0, step, 0)
    count = 1 + (end - 1 - start) // step
    cover = (count - 1) * step + 1  # rows from the first to the last selected
    return _NdarrayReadPlan(dtype, shape, (count, *shape[1:]), start * row_bytes,
                            cover * row_bytes, step, cover)


def _resolve_ndarray_destination(name: str, destination: Any, dtype: np.dtype,
                                 shape: tuple[int, ...]) -> np.ndarray:
    """The array to read member name into: a new one, the caller's (checked), or one over
    a raw destination."""
    if destination is None:
        return np.empty(shape, dtype=dtype)
    if isinstance(destination, _RawDestinationBuffer):
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if destination.size < nbytes:
            raise ValueError(f"raw destination has {destination.size} bytes, expected at least "
                             f"{nbytes}")
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(destination.ptr))
        return raw.view(dtype).reshape(shape)
    if not isinstance(destination, np.ndarray):
        raise TypeError(f"structured ndarray field {name} destination must be a numpy.ndarray "
                        "or raw_destination")
    if destination.dtype != dtype:
        raise ValueError(f"structured ndarray field {name} destination dtype mismatch: expected "
                         f"{dtype.str}, got {destination.dtype.str}")
    if tuple(destination.shape) != shape:
        raise ValueError(f"structured ndarray field {name} destination shape mismatch: expected "
                         f"{shape}, got {tuple(destination.shape)}")
    if not destination.flags["C_CONTIGUOUS"]:
        raise ValueError(f"structured ndarray field {name} destination must be C-contiguous")
    if not destination.flags["WRITEABLE"]:
        raise ValueError(f"structured ndarray field {name} destination must be writeable")
    return destination


def _tensor_slice_metadata(name: str, payload_spec: Mapping[str, Any],
                           field_spec: Mapping[str, Any]) -> tuple[int, list, int]:
    """(header bytes, shape, bytes of one row) of a stored tensor, for a row read."""
    header = int(payload_spec.get("metadata_bytes", -1))
    shape = field_spec.get("shape")
    element_size = int(field_spec.get("element_size", 0))
    if header < 0 or not isinstance(shape, list) or element_size <= 0:
        raise ValueError(f"structured tensor field {name} is missing slice metadata")
    return header, shape, element_size * int(np.prod(shape[1:], dtype=np.int64))


def _check_tensor_destination(name: str, destination: Any, needed: int) -> None:
    if not isinstance(destination, _TENSOR_DESTINATIONS):
        raise ValueError(f"structured tensor member {name} only supports tensor_object_buffer "
                         "or raw_destination destinations")
    if destination.size < needed:
        raise ValueError(f"tensor destination has {destination.size} bytes, expected at least "
                         f"{needed}")


class _StructuredObjectLayer:
    def __init__(self, bundle_store: _BundleManifestStore) -> None:
        self._bundle_store = bundle_store

    def put_structured_object(self, payload: StructuredObjectPayload, partition: str,
                              chunk_bytes: Optional[int], policy: Optional[BundleTransferPolicy],
                              max_inflight_put: Optional[int],
                              config: Any = None) -> RemoteBundleRef:
        metadata, buffers = _encode_structured_fields(payload.metadata, payload.buffers)
        policy = self._bundle_store._policy(policy, max_inflight_put=max_inflight_put)
        return self._bundle_store.put_bundle(meta=_encode_structured_metadata(metadata),
                                             buffers=buffers, partition=partition,
                                             chunk_bytes=chunk_bytes, policy=policy,
                                             max_inflight_put=None, config=config)

    def read_spec(self, ref: RemoteBundleRef | Mapping[str, Any]) -> StructuredObjectReadSpec:
        return StructuredObjectReadSpec(ref=ref)

    def materialize(self, spec: StructuredObjectReadSpec) -> StructuredObjectResult:
        return self.materialize_into(spec, destinations=None)

    def materialize_into(self, spec: StructuredObjectReadSpec,
                         destinations: Optional[Mapping[str, Any]]) -> StructuredObjectResult:
        if spec.member_names is not None and not spec.member_names:
            raise ValueError("structured read spec selected no members")
        manifest = self._bundle_store.resolve_manifest(spec.ref)
        metadata = _decode_structured_metadata(
            self._bundle_store.read_payload(manifest["meta"]))
        buffers = manifest["buffers"]
        names = list(buffers) if spec.member_names is None else list(spec.member_names)
        unknown = [name for name in names if name not in buffers]
        if unknown:
            raise KeyError(f"unknown bundle buffers: {unknown}")
        specs = _structured_field_specs(metadata)
        slices = dict(spec.member_slices)
        destinations = destinations or {}
        objects = {name: self._read_member(name, buffers[name],
                                           specs.get(name, {"encoding": "bytes"}),
                                           slices.get(name), destinations.get(name))
                   for name in names}
        return StructuredObjectResult(metadata=dict(metadata), objects=objects)

    def _read_member(self, name: str, payload_spec: Mapping[str, Any],
                     field_spec: Mapping[str, Any], member_slice: StructuredMemberSlice | None,
                     destination: Any) -> Any:
        encoding = field_spec.get("encoding", "bytes")
        if encoding == "bytes":
            return self._read_bytes_member(name, payload_spec, member_slice, destination)
        if encoding == "torch_tensor":
            return self._read_torch_tensor_member(name, payload_spec, field_spec, member_slice,
                                                  destination)
        if encoding == "ndarray":
            return self._read_ndarray_member(name, payload_spec, field_spec, member_slice,
                                             destination)
        raise ValueError(f"unsupported structured field encoding: {encoding}")

    def _read_bytes_member(self, name: str, payload_spec: Mapping[str, Any],
                           member_slice: StructuredMemberSlice | None,
                           destination: Any) -> bytes | np.ndarray:
        """Raw bytes: a uint8 array over a pool lease when there is a pool, else bytes."""
        if member_slice is not None:
            raise ValueError(f"structured bytes member {name} does not support slicing")
        if destination is not None:
            raise ValueError(f"structured bytes member {name} does not support materialize_into")
        size = int(payload_spec.get("bytes", 0))
        if size > 0:
            pooled = self._bundle_store.read_payload_range_into_pool_array(
                payload_spec, np.dtype(np.uint8), (size,), 0)
            if pooled is not None:
                return pooled
        return self._bundle_store.read_payload(payload_spec)

    def _read_ndarray_member(self, name: str, payload_spec: Mapping[str, Any],
                             field_spec: Mapping[str, Any],
                             member_slice: StructuredMemberSlice | None,
                             destination: Any) -> np.ndarray:
        dtype, shape = field_spec.get("dtype"), field_spec.get("shape")
        if not isinstance(dtype, str) or not isinstance(shape, list):
            raise ValueError(f"structured ndarray field {name} is missing dtype or shape")
        plan = _resolve_ndarray_read_plan(tuple(int(d) for d in shape), np.dtype(dtype),
                                          member_slice)
        if destination is None and plan.byte_length > 0 and plan.step == 1:
            pooled = self._bundle_store.read_payload_range_into_pool_array(
                payload_spec, plan.dtype, plan.output_shape, plan.byte_offset)
            if pooled is not None:
                return pooled
        target = _resolve_ndarray_destination(name, destination, plan.dtype, plan.output_shape)
        if plan.byte_length == 0:
            return target
        if plan.step == 1:
            self._bundle_store.read_payload_range_into_destination(
                payload_spec, target.view(np.uint8).reshape(-1), plan.byte_offset)
            return target
        # Every step-th row of those covered: read the cover, keep the rows.
        cover = np.empty((plan.cover_row_count, *plan.full_shape[1:]), dtype=plan.dtype)
        self._bundle_store.read_payload_range_into_destination(
            payload_spec, cover.view(np.uint8).reshape(-1), plan.byte_offset)
        target[...] = cover[::plan.step]
        return target

    def _read_torch_tensor_member(self, name: str, payload_spec: Mapping[str, Any],
                                  field_spec: Mapping[str, Any],
                                  member_slice: StructuredMemberSlice | None,
                                  destination: Any) -> Any:
        if field_spec.get("nested"):
            if destination is not None:
                raise ValueError(f"structured nested tensor member {name} does not support "
                                 "destinations")
            value = _deserialize_nested_tensor_payload(
                self._bundle_store.read_payload(payload_spec), field_spec)
            if member_slice is None:
                return value
            if member_slice.axis != 0:
                raise ValueError("structured nested tensor slicing currently supports axis=0 "
                                 "only")
            return _select_nested_tensor_rows(
                value, range(*_normalized_member_slice(member_slice, len(value))))
        if member_slice is not None:
            return self._read_sliced_torch_tensor_member(name, payload_spec, field_spec,
                                                         member_slice, destination)
        if destination is not None:
            if not isinstance(destination, _TENSOR_DESTINATIONS):
                raise ValueError(f"structured tensor member {name} only supports "
                                 "tensor_object_buffer or raw_destination destinations")
            read = self._bundle_store.read_tensor_payload_into(payload_spec, destination)
            return destination if read is None else read
        if payload_spec.get("kind") == "tensor":
            return self._bundle_store.read_tensor_payload(payload_spec)
        payload = self._bundle_store.read_payload(payload_spec)
        if payload_spec.get("format") == "torch_save":
            return _deserialize_torch_save_payload(payload)
        return _deserialize_tensor_payload(payload)

    def _read_sliced_torch_tensor_member(self, name: str, payload_spec: Mapping[str, Any],
                                         field_spec: Mapping[str, Any],
                                         member_slice: StructuredMemberSlice,
                                         destination: Any) -> Any:
        """Rows of a tensor: its header patched, and the rows' bytes alone."""
        if payload_spec.get("format") == "torch_save":
            if destination is not None:
                raise ValueError(f"structured torch_save tensor member {name} does not support "
                                 "destinations")
            if member_slice.axis != 0:
                raise ValueError("structured tensor slicing currently supports axis=0 only")
            value = _deserialize_torch_save_payload(self._bundle_store.read_payload(payload_spec))
            start, end, step = _normalized_member_slice(member_slice, len(value))
            return value[start:end:step]
        header, shape, row_bytes = _tensor_slice_metadata(name, payload_spec, field_spec)
        if member_slice.axis != 0:
            raise ValueError("structured tensor slicing currently supports axis=0 only")
        if not shape:
            raise ValueError("structured tensor slicing requires at least one dimension")
        start, end, step = _normalized_member_slice(member_slice, int(shape[0]))
        if step != 1:
            raise ValueError("structured tensor slicing currently requires step=1")
        data_offset, data_length = header + start * row_bytes, (end - start) * row_bytes
        metadata = _slice_tensor_metadata(
            self._bundle_store.read_payload_range(payload_spec, 0, header),
            (end - start, *shape[1:]), data_length)
        if destination is None:
            return _deserialize_tensor_payload(
                metadata + self._bundle_store.read_payload_range(payload_spec, data_offset,
                                                                 data_length))
        _check_tensor_destination(name, destination, header + data_length)
        ctypes.memmove(destination.ptr, metadata, header)
        if isinstance(destination, _RawDestinationBuffer) and destination.pre_registered:
            self._bundle_store.read_payload_range_into_raw_destination(
                payload_spec, destination.ptr, header, data_offset, data_length)
        else:
            data = self._bundle_store.read_payload_range(payload_spec, data_offset, data_length)
            ctypes.memmove(destination.ptr + header, data, data_length)
        return destination
