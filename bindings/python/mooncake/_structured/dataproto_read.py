"""Reading DataProto batches: the fields asked for, of all rows, a slice of rows (each
member read as a structured-object slice: only the rows' bytes), or rows by index (a ranged
read gathering each row's bytes, repeats allowed). Encoded non-tensor fields read only the
payload parts their rows span (offsets first, then the data those name), and decode.
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

import numpy as np

from mooncake._structured.buffers import _decode_structured_metadata
from mooncake._structured.codecs import (
    _normalize_ragged_tensor_dict_keys, _ragged_tensor_dict_payload_items)
from mooncake._structured.handles import DataProtoRefLike, _resolve_dataproto_ref
from mooncake._structured.inference import (
    _copy_recursive_metadata_for_leaf_updates, _decode_structured_non_tensor_encoded,
    _is_recursive_encoded_non_tensor)
from mooncake._structured.model import (
    RemoteBundleRef, StructuredMemberSlice, _object_array_from_decoded_values,
    _RawDestinationBuffer, _TensorObjectBufferPayload)
from mooncake._structured.shapes import (
    _build_dataproto_like_result, _coerce_dataproto_row_selection,
    _resolve_dataproto_field_selection, _select_mapping)
from mooncake._structured.structured import (
    _normalized_member_slice, _resolve_ndarray_destination, _structured_field_specs,
    _tensor_slice_metadata)
from mooncake._structured.tensors import (
    _deserialize_tensor_payload, _deserialize_torch_save_payload, _select_nested_tensor_rows,
    _slice_tensor_metadata)

if TYPE_CHECKING:
    from mooncake._structured.transfer import MooncakeBundleTransfer

_OFFSET_CODECS = {"media_bytes", "bytes_ragged", "utf8_ragged", "msgpack_ragged", "json_ragged"}


def _get_dataproto(transfer: "MooncakeBundleTransfer", ref: DataProtoRefLike, *,
                   fields=None, batch_fields=None, non_tensor_fields=None, meta_info_keys=None,
                   data_cls=None, destinations: Optional[Mapping[str, Any]] = None, rows=None,
                   _flat_dict_output: bool = False) -> Any:
    ref = _resolve_dataproto_ref(ref)
    selection = _coerce_dataproto_row_selection(rows, ref.batch_size)
    row_slice = selection.member_slice if selection else None
    indices = selection.indices if selection else None
    out_rows = selection.count if selection else ref.batch_size
    batch_names, non_tensor_names = _resolve_dataproto_field_selection(
        ref, fields, batch_fields, non_tensor_fields)
    destinations = destinations or {}
    sections: dict[str, dict[str, Any]] = {"batch": {}, "non_tensor_batch": {}}
    plain: dict[str, list] = {}  # stage -> (name, location), stored as members
    encoded = []  # (name, location) of codec-encoded non-tensor fields
    for name in batch_names + non_tensor_names:
        location = ref.field_index[name]
        if location.section == "non_tensor_batch" and name in ref.encoded_non_tensor:
            encoded.append((name, location))
        else:
            plain.setdefault(location.stage, []).append((name, location))

    for stage, entries in plain.items():
        stage_ref = ref.stage_refs[stage]
        if indices is not None:
            for name, location in entries:
                sections[location.section][name] = _read_dataproto_member_indices(
                    transfer, stage_ref, location.member, indices, destinations.get(name))
            continue
        members = [location.member for _name, location in entries]
        spec = transfer.read_spec(stage_ref).select_members(members)
        if row_slice is not None:
            for member in members:
                spec = spec.slice_member(member, axis=row_slice.axis, start=row_slice.start,
                                         end=row_slice.end, step=row_slice.step)
        result = transfer.materialize_into(spec, {loc.member: destinations[n]
                                                  for n, loc in entries if n in destinations})
        for name, location in entries:
            sections[location.section][name] = result.objects[location.member]

    def finish(values: list[Any]) -> Any:
        return values if _flat_dict_output else _object_array_from_decoded_values(values)

    if selection is None and encoded:
        # Every row: one read per stage of all the fields' payloads.
        by_stage: dict[str, list[str]] = {}
        for name, location in encoded:
            by_stage.setdefault(location.stage, []).append(name)
        for stage, names in by_stage.items():
            members = [m for n in names for m in ref.encoded_non_tensor[n]["payload_members"]
                       .values()]
            objects = transfer.materialize(transfer.read_spec(ref.stage_refs[stage])
                                           .select_members(members)).objects
            for name in names:
                field = ref.encoded_non_tensor[name]
                payload = {p: objects[m] for p, m in field["payload_members"].items()}
                sections["non_tensor_batch"][name] = finish(_decode_structured_non_tensor_encoded(
                    field, payload, ref.batch_size, field.get("metadata")))
    else:
        for name, location in encoded:
            stage_ref, field = ref.stage_refs[location.stage], ref.encoded_non_tensor[name]
            if indices is not None:
                payload, metadata = _read_non_tensor_indices(transfer, stage_ref, field, indices)
            else:
                payload, metadata = _read_non_tensor_slice(transfer, stage_ref, field,
                                                           row_slice, ref.batch_size)
            sections["non_tensor_batch"][name] = finish(_decode_structured_non_tensor_encoded(
                field, payload, out_rows, metadata))
    return _build_dataproto_like_result(sections["batch"], sections["non_tensor_batch"],
                                        _select_mapping(ref.meta_info, meta_info_keys), data_cls)


def _stage_specs(transfer, stage_ref: RemoteBundleRef):
    """(manifest, field specs) of a stage."""
    bundles = transfer._bundle_store
    manifest = bundles.resolve_manifest(stage_ref)
    metadata = _decode_structured_metadata(bundles.read_payload(manifest["meta"]))
    return manifest, _structured_field_specs(metadata)


def _row_ranges(indices: Sequence[int], row_bytes: int, source_base: int = 0,
                destination_base: int = 0) -> list[tuple[int, int, int]]:
    """(source offset, destination offset, length) of each row asked for, in order."""
    return [(source_base + row * row_bytes, destination_base + out * row_bytes, row_bytes)
            for out, row in enumerate(indices)]


def _read_dataproto_member_indices(transfer, stage_ref: RemoteBundleRef, member: str,
                                   indices: Sequence[int], destination: Any) -> Any:
    manifest, specs = _stage_specs(transfer, stage_ref)
    field_spec = specs.get(member, {"encoding": "bytes"})
    payload_spec = manifest["buffers"][member]
    encoding = field_spec.get("encoding", "bytes")
    if encoding == "ndarray":
        return _read_ndarray_member_indices(transfer, member, payload_spec, field_spec, indices,
                                            destination)
    if encoding == "torch_tensor":
        if field_spec.get("nested"):
            result = transfer.materialize_into(
                transfer.read_spec(stage_ref).select_members([member]),
                None if destination is None else {member: destination})
            return _select_nested_tensor_rows(result.objects[member], indices)
        return _read_torch_tensor_member_indices(transfer, member, payload_spec, field_spec,
                                                 indices, destination)
    raise ValueError(f"structured member {member} does not support indexed rows")


def _read_ndarray_member_indices(transfer, name: str, payload_spec, field_spec,
                                 indices: Sequence[int], destination: Any) -> np.ndarray:
    bundles = transfer._bundle_store
    dtype, shape = field_spec.get("dtype"), field_spec.get("shape")
    if not isinstance(dtype, str) or not isinstance(shape, list):
        raise ValueError(f"structured ndarray field {name} is missing dtype or shape")
    dtype = np.dtype(dtype)
    full_shape = tuple(int(d) for d in shape)
    if not full_shape:
        raise ValueError("structured ndarray indexed read requires at least one dimension")
    out_shape = (len(indices), *full_shape[1:])
    row_bytes = dtype.itemsize * int(np.prod(full_shape[1:], dtype=np.int64))
    target = _resolve_ndarray_destination(name, destination, dtype, out_shape)
    if not indices:
        return target
    ranges = _row_ranges(indices, row_bytes)
    if not isinstance(destination, _RawDestinationBuffer):
        bundles.read_payload_ranges_into_array(payload_spec, target.view(np.uint8).reshape(-1),
                                               ranges)
    elif destination.pre_registered:
        bundles.read_payload_ranges_into_raw_destination(payload_spec, destination.ptr, ranges)
    else:
        data = bytearray(target.nbytes)
        bundles.read_payload_ranges_into_bytearray(payload_spec, data, ranges)
        ctypes.memmove(destination.ptr, bytes(data), len(data))
    return target


def _read_torch_tensor_member_indices(transfer, name: str, payload_spec, field_spec,
                                      indices: Sequence[int], destination: Any) -> Any:
    bundles = transfer._bundle_store
    if payload_spec.get("format") == "torch_save":
        if destination is not None:
            raise ValueError(f"structured torch_save tensor member {name} does not support "
                             "destinations")
        return _deserialize_torch_save_payload(bundles.read_payload(payload_spec))[list(indices)]
    header, shape, row_bytes = _tensor_slice_metadata(name, payload_spec, field_spec)
    if not shape:
        raise ValueError("structured tensor indexed read requires at least one dimension")
    length = len(indices) * row_bytes
    metadata = _slice_tensor_metadata(bundles.read_payload_range(payload_spec, 0, header),
                                      (len(indices), *shape[1:]), length)
    data_ranges = _row_ranges(indices, row_bytes, source_base=header)
    if destination is None:
        data = bytearray(length)
        if length:
            bundles.read_payload_ranges_into_bytearray(payload_spec, data, data_ranges)
        return _deserialize_tensor_payload(metadata + data)
    if not isinstance(destination, (_TensorObjectBufferPayload, _RawDestinationBuffer)):
        raise ValueError(f"structured tensor member {name} only supports tensor_object_buffer "
                         "or raw_destination destinations")
    if destination.size < header + length:
        raise ValueError(f"tensor destination has {destination.size} bytes, expected at least "
                         f"{header + length}")
    ctypes.memmove(destination.ptr, metadata, header)
    if length:
        if isinstance(destination, _RawDestinationBuffer) and destination.pre_registered:
            bundles.read_payload_ranges_into_raw_destination(
                payload_spec, destination.ptr,
                _row_ranges(indices, row_bytes, source_base=header, destination_base=header))
        else:
            data = bytearray(length)
            bundles.read_payload_ranges_into_bytearray(payload_spec, data, data_ranges)
            ctypes.memmove(destination.ptr + header, bytes(data), length)
    return destination


def _bounds(indices: Sequence[int]) -> list[int]:
    """Each row's offsets entries: row and row + 1."""
    return [i for row in indices for i in (row, row + 1)]


def _gathered_offsets(counts: Sequence[int], dtype) -> np.ndarray:
    """The offsets of rows of counts items each, placed back to back from 0."""
    offsets = np.zeros(len(counts) + 1, dtype=dtype)
    offsets[1:] = np.cumsum(counts)
    return offsets


def _read_non_tensor_indices(transfer, stage_ref: RemoteBundleRef, encoded: Mapping[str, Any],
                             indices: Sequence[int]):
    """(payload of the rows at indices, the metadata to decode it with) of an encoded
    field."""
    codec, members = encoded["codec"], encoded["payload_members"]
    manifest, specs = _stage_specs(transfer, stage_ref)
    metadata = dict(encoded.get("metadata") or {})

    def rows_of(payload_name: str, wanted: Sequence[int]) -> Any:
        return _read_dataproto_member_indices(transfer, stage_ref, members[payload_name],
                                              wanted, None)

    def data_ranges(payload_name: str, ranges, dtype: np.dtype | None = None) -> Any:
        total = sum(length for _src, _dst, length in ranges)
        spec = manifest["buffers"][members[payload_name]]
        if dtype is None:
            data = bytearray(total)
            transfer._bundle_store.read_payload_ranges_into_bytearray(spec, data, ranges)
            return bytes(data)
        array = np.empty(total // dtype.itemsize, dtype=dtype)
        transfer._bundle_store.read_payload_ranges_into_array(
            spec, array.view(np.uint8).reshape(-1), ranges)
        return array

    if _is_recursive_encoded_non_tensor(encoded):
        return _read_recursive(metadata, members, lambda name: rows_of(name, indices),
                               lambda field: _read_non_tensor_indices(transfer, stage_ref, field,
                                                                      indices))
    if codec == "ndarray":
        return {"data": rows_of("data", indices), "nulls": rows_of("nulls", indices)}, metadata
    if codec in ("ragged_tensor", "typed_ragged"):
        offsets = rows_of("offsets", _bounds(indices))
        begins, counts = offsets[0::2], offsets[1::2] - offsets[0::2]
        spec = specs.get(members["data"], {})
        if not isinstance(spec.get("dtype"), str):
            raise ValueError(f"structured non-tensor payload {members['data']} is missing dtype")
        dtype = np.dtype(spec["dtype"])
        gathered = _gathered_offsets(counts, offsets.dtype)
        ranges = [(int(b) * dtype.itemsize, int(p) * dtype.itemsize, int(c) * dtype.itemsize)
                  for b, p, c in zip(begins, gathered, counts) if c]
        return {"data": data_ranges("data", ranges, dtype), "offsets": gathered,
                "shapes": rows_of("shapes", indices), "ndims": rows_of("ndims", indices),
                "nulls": rows_of("nulls", indices)}, metadata
    if codec == "ragged_tensor_dict":
        return _read_ragged_tensor_dict_payload(
            members, metadata, read_null_mask=lambda: rows_of("null_mask", indices),
            read_key_payload=lambda field: _read_non_tensor_indices(transfer, stage_ref, field,
                                                                    indices))
    if codec in _OFFSET_CODECS:
        offsets = rows_of("offsets", _bounds(indices))
        begins, counts = offsets[0::2], offsets[1::2] - offsets[0::2]
        gathered = _gathered_offsets(counts, offsets.dtype)
        ranges = [(int(b), int(p), int(c)) for b, p, c in zip(begins, gathered, counts) if c]
        if "media_encodings" in metadata:
            metadata["media_encodings"] = [metadata["media_encodings"][i] for i in indices]
        return {"data": data_ranges("data", ranges), "offsets": gathered,
                "nulls": rows_of("nulls", indices)}, metadata
    if codec == "media_list_ragged":
        row_offsets = rows_of("row_offsets", _bounds(indices))
        item_begins = [int(b) for b in row_offsets[0::2]]
        item_counts = [int(e) - int(b) for b, e in zip(row_offsets[0::2], row_offsets[1::2])]
        byte_offsets = rows_of("byte_offsets", [i for b, c in zip(item_begins, item_counts)
                                                for i in range(b, b + c + 1)])
        ranges, sizes, encodings, at, placed = [], [], [], 0, 0
        for begin, count in zip(item_begins, item_counts):
            for item in range(count):
                lo, hi = int(byte_offsets[at + item]), int(byte_offsets[at + item + 1])
                if hi > lo:
                    ranges.append((lo, placed, hi - lo))
                sizes.append(hi - lo)
                placed += hi - lo
            if "media_encodings" in metadata:
                encodings.extend(metadata["media_encodings"][begin:begin + count])
            at += count + 1
        if "media_encodings" in metadata:
            metadata["media_encodings"] = encodings
        return {"data": data_ranges("data", ranges),
                "row_offsets": _gathered_offsets(item_counts, row_offsets.dtype),
                "byte_offsets": _gathered_offsets(sizes, byte_offsets.dtype),
                "nulls": rows_of("nulls", indices)}, metadata
    raise ValueError(f"unknown structured non-tensor codec: {codec}")


def _read_non_tensor_slice(transfer, stage_ref: RemoteBundleRef, encoded: Mapping[str, Any],
                           row_slice: StructuredMemberSlice, total_rows: int):
    """(payload of rows [start, end), the metadata to decode it with) of an encoded field."""
    start, end, step = _normalized_member_slice(row_slice, total_rows)
    if step != 1:
        raise ValueError("DataProto structured non-tensor slicing currently requires step=1")
    codec, members = encoded["codec"], encoded["payload_members"]
    manifest = transfer._bundle_store.resolve_manifest(stage_ref)
    metadata = dict(encoded.get("metadata") or {})

    def rows_of(payload_name: str, lo: int, hi: int) -> Any:
        member = members[payload_name]
        spec = transfer.read_spec(stage_ref).select_members([member]).slice_member(
            member, axis=0, start=lo, end=hi)
        return transfer.materialize(spec).objects[member]

    def bytes_of(payload_name: str, lo: int, hi: int) -> bytes:
        return transfer._bundle_store.read_payload_range(
            manifest["buffers"][members[payload_name]], lo, hi - lo)

    if _is_recursive_encoded_non_tensor(encoded):
        return _read_recursive(metadata, members, lambda name: rows_of(name, start, end),
                               lambda field: _read_non_tensor_slice(transfer, stage_ref, field,
                                                                    row_slice, total_rows))
    if codec == "ndarray":
        return ({"data": rows_of("data", start, end), "nulls": rows_of("nulls", start, end)},
                metadata)
    if codec in ("ragged_tensor", "typed_ragged"):
        offsets = rows_of("offsets", start, end + 1)
        base, limit = int(offsets[0]), int(offsets[-1])
        return {"data": rows_of("data", base, limit), "offsets": offsets - base,
                "shapes": rows_of("shapes", start, end), "ndims": rows_of("ndims", start, end),
                "nulls": rows_of("nulls", start, end)}, metadata
    if codec == "ragged_tensor_dict":
        return _read_ragged_tensor_dict_payload(
            members, metadata, read_null_mask=lambda: rows_of("null_mask", start, end),
            read_key_payload=lambda field: _read_non_tensor_slice(transfer, stage_ref, field,
                                                                  row_slice, total_rows))
    if codec in _OFFSET_CODECS:
        offsets = rows_of("offsets", start, end + 1)
        base, limit = int(offsets[0]), int(offsets[-1])
        if "media_encodings" in metadata:
            metadata["media_encodings"] = metadata["media_encodings"][start:end]
        return {"data": bytes_of("data", base, limit), "offsets": offsets - base,
                "nulls": rows_of("nulls", start, end)}, metadata
    if codec == "media_list_ragged":
        row_offsets = rows_of("row_offsets", start, end + 1)
        first, last = int(row_offsets[0]), int(row_offsets[-1])
        byte_offsets = rows_of("byte_offsets", first, last + 1)
        lo, hi = int(byte_offsets[0]), int(byte_offsets[-1])
        if "media_encodings" in metadata:
            metadata["media_encodings"] = metadata["media_encodings"][first:last]
        return {"data": bytes_of("data", lo, hi), "row_offsets": row_offsets - first,
                "byte_offsets": byte_offsets - lo, "nulls": rows_of("nulls", start, end)}, metadata
    raise ValueError(f"unknown structured non-tensor codec: {codec}")


def _read_recursive(metadata: Mapping[str, Any], members: Mapping[str, str],
                    read_rows: Callable[[str], Any], read_leaf: Callable[[Mapping[str, Any]], Any]):
    """A structured_recursive field's payload for some rows: its nodes' masks and lengths
    by read_rows, each leaf by read_leaf (as a field of its own)."""
    metadata = _copy_recursive_metadata_for_leaf_updates(metadata)
    payload: dict[str, Any] = {}
    for node in metadata.get("nodes", []):
        for key in ("missing_payload", "row_mask_payload", "lengths_payload"):
            if node.get(key) is not None:
                payload[node[key]] = read_rows(node[key])
    for leaf in metadata.get("leaves", []):
        leaf_members = leaf["payload_members"]
        leaf_payload, leaf["metadata"] = read_leaf({
            "codec": leaf["codec"], "metadata": leaf.get("metadata") or {},
            "payload_members": {n: members[g] for n, g in leaf_members.items()
                                if n != "missing"}})
        payload.update({leaf_members[n]: v for n, v in leaf_payload.items()})
        payload[leaf_members["missing"]] = read_rows(leaf_members["missing"])
    return payload, metadata


def _read_ragged_tensor_dict_payload(members: Mapping[str, str], metadata: dict[str, Any], *,
                                     read_null_mask: Callable[[], Any],
                                     read_key_payload: Callable[[Mapping[str, Any]], Any]):
    """A ragged_tensor_dict field's payload for some rows: its null mask, and each key's
    ragged_tensor payloads read as a field of their own."""
    key_codecs = dict(metadata.get("key_codecs") or {})
    metadata["key_codecs"] = key_codecs
    payload: dict[str, Any] = {"null_mask": read_null_mask()}
    for key in _normalize_ragged_tensor_dict_keys(metadata.get("keys", [])):
        key_payload, key_codecs[key] = read_key_payload({
            "codec": "ragged_tensor", "metadata": key_codecs.get(key) or {},
            "payload_members": _ragged_tensor_dict_payload_items(members, key, kind="manifest")})
        payload.update({f"{key}.{n}": v for n, v in key_payload.items()})
    return payload, metadata
