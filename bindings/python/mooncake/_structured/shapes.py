"""The shapes DataProto data comes and goes in: a DataProto-like object (batch,
non_tensor_batch, meta_info attributes), an envelope dict of those three, a plain dict of
batch fields, or a flat dict (put/get with type="dict") whose fields are sorted into
sections by their shape and FieldSchema; and the selections of a read (fields, rows).

Flat dict rules: FieldSchema metadata["section"] places a field; otherwise a dense tensor or
numeric array of the batch's row count is a batch field, a sequence of that length (when no
schema fixes the row count) a non_tensor_batch field, and anything else meta_info. The row
count is the schema-placed fields' length, else the dense fields', else the sequences'; they
must agree.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np

from mooncake._structured.inference import _schema_ndarray_dtype
from mooncake._structured.model import (
    FieldSchema, MooncakeDataProtoRef, StructuredMemberSlice, _DataProtoRowSelection)
from mooncake._structured.structured import _normalized_member_slice
from mooncake._structured.tensors import _is_tensor

_SECTIONS = frozenset({"batch", "non_tensor_batch", "meta_info"})


def _is_non_string_sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))


def _object_rows(values: Sequence[Any]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array


# ---- sections ---------------------------------------------------------------------------


def _schema_section(name: str, schema: FieldSchema) -> str | None:
    section = schema.metadata.get("section")
    if section is not None and section not in _SECTIONS:
        raise ValueError(f"FieldSchema for {name!r} metadata['section'] must be one of "
                         f"{sorted(_SECTIONS)}")
    return section


def _schema_for_section(field_schemas: Optional[Mapping[str, FieldSchema]], name: str,
                        section: str) -> FieldSchema | None:
    """name's schema when it applies to section (one declaring another section does not)."""
    schema = (field_schemas or {}).get(name)
    if schema is None:
        return None
    declared = _schema_section(name, schema)
    return schema if declared in (None, section) else None


def _validate_dataproto_schema_sections(batch: Mapping[str, Any],
                                        non_tensor_batch: Mapping[str, Any],
                                        meta_info: Mapping[str, Any],
                                        field_schemas: Optional[Mapping[str, FieldSchema]]
                                        ) -> None:
    """A schema declaring a section must find its field there (when the data has it)."""
    for name, schema in (field_schemas or {}).items():
        declared = _schema_section(name, schema)
        if declared is None:
            continue
        found = sorted(section for section, fields in (
            ("batch", batch), ("non_tensor_batch", non_tensor_batch), ("meta_info", meta_info))
            if name in fields)
        if found and declared not in found:
            raise ValueError(f"FieldSchema for {name!r} declares section {declared!r}, but data "
                             f"contains it in {', '.join(repr(s) for s in found)}")


def _coerce_schema_non_tensor_value(name: str, value: Any) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if _is_non_string_sequence(value):
        return _object_rows(value)
    raise TypeError(f"non_tensor_batch field {name!r} with FieldSchema must be an ndarray or "
                    "non-string sequence")


def _should_encode_non_tensor_field(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == object


# ---- DataProto-like values ------------------------------------------------------------------


def _is_mapping_like_or_none(value: Any) -> bool:
    return value is None or isinstance(value, Mapping) or callable(getattr(value, "items", None))


def _mapping_to_dict(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if callable(getattr(value, "items", None)):
        return dict(value.items())
    raise TypeError(f"expected mapping-like value, got {type(value).__name__}")


def _is_dataproto_envelope_mapping(data: Mapping[str, Any]) -> bool:
    return (bool(data) and set(data) <= _SECTIONS
            and all(_is_mapping_like_or_none(v) for v in data.values()))


def _split_dataproto_like(data: Any) -> tuple[dict, dict, dict]:
    """(batch, non_tensor_batch, meta_info) of a DataProto-like object, an envelope, or a
    plain dict (all batch fields, even one named "batch" holding an array)."""
    if isinstance(data, Mapping):
        if _is_dataproto_envelope_mapping(data):
            return tuple(_mapping_to_dict(data.get(s))
                         for s in ("batch", "non_tensor_batch", "meta_info"))
        return dict(data), {}, {}
    return tuple(_mapping_to_dict(getattr(data, s, None))
                 for s in ("batch", "non_tensor_batch", "meta_info"))


def _dataproto_batch_size(batch: Mapping[str, Any], non_tensor_batch: Mapping[str, Any]) -> int:
    sizes = {len(v) for fields in (batch, non_tensor_batch) for v in fields.values()}
    if len(sizes) > 1:
        raise ValueError(f"DataProto fields have inconsistent batch sizes: {sorted(sizes)}")
    return sizes.pop() if sizes else 0


def _build_dataproto_like_result(batch: dict, non_tensor_batch: dict, meta_info: dict,
                                 data_cls: Optional[Any]) -> Any:
    """The envelope dict (data_cls None or dict), or data_cls built from the sections (its
    from_dict when it has one)."""
    if data_cls is None or data_cls is dict:
        return {"batch": batch, "non_tensor_batch": non_tensor_batch, "meta_info": meta_info}
    from_dict = getattr(data_cls, "from_dict", None)
    try:
        if callable(from_dict):
            return from_dict(batch, non_tensor_batch, meta_info=meta_info)
        return data_cls(batch=batch, non_tensor_batch=non_tensor_batch, meta_info=meta_info)
    except TypeError as error:
        raise TypeError(f"{getattr(data_cls, '__name__', data_cls)!r} cannot be constructed "
                        "from batch, non_tensor_batch, and meta_info") from error


# ---- flat dicts ---------------------------------------------------------------------------


def _field_len(name: str, value: Any) -> int:
    try:
        return len(value)
    except TypeError as error:
        raise ValueError(f"flat dict row-aligned field {name!r} must be sized") from error


def _flat_dict_schema_row_count(data: Mapping[str, Any],
                                field_schemas: Mapping[str, FieldSchema]) -> int:
    sizes = {_field_len(name, data[name]) for name, schema in field_schemas.items()
             if name in data and _schema_section(name, schema) in ("batch", "non_tensor_batch")}
    if len(sizes) > 1:
        raise ValueError(f"flat dict fields have inconsistent batch sizes: {sorted(sizes)}")
    return sizes.pop() if sizes else 0


def _is_dense(value: Any) -> bool:
    if _is_tensor(value):
        return value.ndim > 0
    return isinstance(value, np.ndarray) and value.dtype != object and value.ndim > 0


def _flat_dict_auto_row_count(data: Mapping[str, Any], exclude: frozenset | set = frozenset()
                              ) -> int:
    candidates = {k: v for k, v in data.items() if k not in exclude}
    dense = {len(v) for v in candidates.values() if _is_dense(v)}
    if len(dense) > 1:
        raise ValueError(f"flat dict dense fields have ambiguous batch sizes: {sorted(dense)}")
    if dense:
        return dense.pop()
    sizes = {len(v) for v in candidates.values()
             if (isinstance(v, np.ndarray) and v.ndim > 0) or _is_non_string_sequence(v)}
    if len(sizes) > 1:
        raise ValueError(f"flat dict fields have ambiguous batch sizes: {sorted(sizes)}; pass "
                         "FieldSchema metadata['section'] for list-valued metadata fields")
    return sizes.pop() if sizes else 0


def _is_row_aligned_dense_field(value: Any, row_count: int) -> bool:
    if row_count == 0:
        return False
    if _is_tensor(value):
        return value.shape[:1] == (row_count,)
    return (isinstance(value, np.ndarray) and value.dtype != object
            and value.shape[:1] == (row_count,))


def _coerce_flat_dict_non_tensor_field(name: str, value: Any, row_count: int,
                                       schema: Optional[FieldSchema] = None) -> Any:
    """A non_tensor_batch field as an ndarray of row_count rows (an ndarray schema's dtype
    applied when no row is None)."""
    if isinstance(value, np.ndarray) or _is_non_string_sequence(value):
        if len(value) != row_count:
            raise ValueError(f"flat dict non_tensor_batch field {name!r} has batch size "
                             f"{len(value)}, expected {row_count}")
    if isinstance(value, np.ndarray):
        dtype = _schema_ndarray_dtype(schema) if schema is not None else None
        if (dtype is not None and schema.codec == "ndarray"
                and (value.dtype != object or all(item is not None for item in value))):
            return np.asarray(value, dtype=dtype)
        return value
    if _is_non_string_sequence(value):
        return _object_rows(value)
    raise TypeError(f"flat dict non_tensor_batch field {name!r} must be an ndarray or "
                    "non-string sequence")


def _flat_dict_to_envelope(data: Mapping[str, Any],
                           field_schemas: Optional[Mapping[str, FieldSchema]] = None
                           ) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise TypeError("flat dict payload must be a mapping")
    field_schemas = field_schemas or {}
    schema_rows = _flat_dict_schema_row_count(data, field_schemas)
    rows = schema_rows or _flat_dict_auto_row_count(data, exclude={
        name for name, schema in field_schemas.items()
        if name in data and _schema_section(name, schema) == "meta_info"})
    envelope: dict[str, dict[str, Any]] = {"batch": {}, "non_tensor_batch": {}, "meta_info": {}}
    for key, value in data.items():
        schema = field_schemas.get(key)
        section = None if schema is None else _schema_section(key, schema)
        if section is None:
            if _is_row_aligned_dense_field(value, rows):
                section = "batch"
            elif schema_rows == 0 and _is_non_string_sequence(value) and len(value) == rows:
                section = "non_tensor_batch"
            else:
                section = "meta_info"
        if section == "non_tensor_batch":
            value = _coerce_flat_dict_non_tensor_field(key, value, rows, schema)
        envelope[section][key] = value
    return envelope


def _envelope_to_flat_dict(data: Mapping[str, Any]) -> dict[str, Any]:
    """The sections merged (object arrays as lists); ValueError when a name is in two."""
    meta_info, batch, non_tensor_batch = (_mapping_to_dict(data.get(s))
                                          for s in ("meta_info", "batch", "non_tensor_batch"))
    overlap = ((set(meta_info) & set(batch)) | (set(meta_info) & set(non_tensor_batch))
               | (set(batch) & set(non_tensor_batch)))
    if overlap:
        raise ValueError(f"Duplicate keys found across DataProto sections: {sorted(overlap)}")
    result = {**meta_info, **batch}
    for name, value in non_tensor_batch.items():
        result[name] = (value.tolist() if isinstance(value, np.ndarray) and value.dtype == object
                        else value)
    return result


# ---- what a read selects ---------------------------------------------------------------


def _validate_dataproto_fields_exist(ref: MooncakeDataProtoRef, names: Sequence[str]) -> None:
    missing = [name for name in names if name not in ref.field_index]
    if missing:
        raise KeyError(f"unknown DataProto fields: {missing}")


def _resolve_dataproto_field_selection(ref: MooncakeDataProtoRef,
                                       fields: Optional[Sequence[str]],
                                       batch_fields: Optional[Sequence[str]],
                                       non_tensor_fields: Optional[Sequence[str]]
                                       ) -> tuple[list[str], list[str]]:
    """(batch field names, non_tensor_batch field names) to read: fields (either section),
    or batch_fields and non_tensor_fields, or every field."""
    if fields is not None and (batch_fields is not None or non_tensor_fields is not None):
        raise ValueError("fields cannot be combined with batch_fields or non_tensor_fields")
    if fields is not None:
        names = list(fields)
        _validate_dataproto_fields_exist(ref, names)
        return ([n for n in names if ref.field_index[n].section == "batch"],
                [n for n in names if ref.field_index[n].section == "non_tensor_batch"])
    if batch_fields is None and non_tensor_fields is None:
        return ([n for n, loc in ref.field_index.items() if loc.section == "batch"],
                [n for n, loc in ref.field_index.items() if loc.section == "non_tensor_batch"])
    batch_names = list(batch_fields or [])
    non_tensor_names = list(non_tensor_fields or [])
    _validate_dataproto_fields_exist(ref, batch_names + non_tensor_names)
    return batch_names, non_tensor_names


def _slice_length(member_slice: StructuredMemberSlice, total_rows: int) -> int:
    start, end, step = _normalized_member_slice(member_slice, total_rows)
    return 0 if start >= end else 1 + (end - 1 - start) // step


def _normalize_dataproto_row_index(index: Any, total_rows: int) -> int:
    if not isinstance(index, (int, np.integer)):
        raise TypeError("DataProto row indices must be integers")
    row = int(index) + (total_rows if int(index) < 0 else 0)
    if not 0 <= row < total_rows:
        raise IndexError(f"DataProto row index {index} out of range for {total_rows} rows")
    return row


def _coerce_dataproto_row_selection(rows: Any, total_rows: int) -> _DataProtoRowSelection | None:
    """rows (a slice, a StructuredMemberSlice, or row indices; None: all) checked."""
    if rows is None:
        return None
    if isinstance(rows, StructuredMemberSlice):
        if rows.axis != 0:
            raise ValueError("DataProto row slicing currently supports axis=0 only")
        return _DataProtoRowSelection(count=_slice_length(rows, total_rows), member_slice=rows)
    if isinstance(rows, slice):
        start, end, step = rows.indices(total_rows)
        if step <= 0:
            raise ValueError("DataProto row slicing step must be positive")
        member_slice = StructuredMemberSlice(axis=0, start=start, end=end, step=step)
        return _DataProtoRowSelection(count=_slice_length(member_slice, total_rows),
                                      member_slice=member_slice)
    if _is_non_string_sequence(rows):
        indices = tuple(_normalize_dataproto_row_index(i, total_rows) for i in rows)
        return _DataProtoRowSelection(count=len(indices), indices=indices)
    raise TypeError("DataProto rows must be a slice, StructuredMemberSlice, or row index "
                    "sequence")


def _select_mapping(value: Mapping[str, Any], keys: Optional[Sequence[str]]) -> dict[str, Any]:
    return dict(value) if keys is None else {k: value[k] for k in keys if k in value}
