"""Encoding a non-tensor field whose rows are structures (dicts, short lists) of leaves that
a codec handles well (tensors, arrays, bytes, media): the rows are taken apart into one
column per leaf path ("structured_recursive"), each column encoded by its own codec, and put
back together at read time, missing keys (MISSING) kept apart from None values. Also: the
FieldSchema-given codecs, and the "auto" fallback that tries the safe codecs in turn.

Paths name a place in a row: "root.key", "root[0]", keys escaped with "\\" for ".", "[" and
"\\". Limits keep the expansion small: at most 64 keys per dict level, lists of at most 8,
32 levels.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from mooncake._structured.codecs import (
    _ENCODING_FALLBACK_ERRORS, _decode_ragged_tensor_dict_values, _decode_structured_leaf,
    _encode_bytes_like_values, _encode_media_list_values, _encode_msgpack_ragged_values,
    _encode_numeric_scalar_values, _encode_ragged_tensor_dict_values,
    _encode_ragged_tensor_values, _encode_structured_leaf, _encode_typed_ragged_values,
    _json_row)
from mooncake._structured.decisions import (
    MISSING, _choose_leaf_codec, _CodecDecision, _EncodedStructuredLeaf, _InferredLeaf,
    _InferredNode, _Missing, _non_null)
from mooncake._structured.model import FieldSchema

_INFER_MAX_STRUCT_KEYS = 64
_INFER_MAX_LIST_LEN = 8
_INFER_MAX_DEPTH = 32
# Leaf codecs worth taking a structure apart for (the others serialize whole rows as well).
_RECURSIVE_CODECS = {"ragged_tensor", "bytes_ragged", "media_bytes", "media_list_ragged"}


def _escape_key(key: str) -> str:
    return key.replace("\\", "\\\\").replace(".", "\\.").replace("[", "\\[")


def _try_expand_dict(values: list[Any]) -> list[str] | None:
    present = _non_null(values)
    if not present or not all(isinstance(v, dict) for v in present):
        return None
    keys = {k for v in present for k in v}
    if not all(isinstance(k, str) for k in keys) or len(keys) > _INFER_MAX_STRUCT_KEYS:
        return None
    return sorted(keys)


def _try_expand_list(values: list[Any]) -> tuple[int, list[int]] | None:
    """(longest length, each row's length) of short lists of containers (or None)."""
    present = _non_null(values)
    if not present or not all(isinstance(v, (list, tuple)) for v in present):
        return None
    longest = max(len(v) for v in present)
    if longest > _INFER_MAX_LIST_LEN or not all(
            item is None or isinstance(item, (dict, list, tuple)) for v in present for item in v):
        return None
    return longest, [len(v) if isinstance(v, (list, tuple)) else 0 for v in values]


def infer_structure(path: str, values: list[Any], leaves: list[_InferredLeaf],
                    nodes: list[_InferredNode], *, _depth: int = 0) -> None:
    """Appends to nodes the dict/list levels of the rows at path, and to leaves their leaf
    columns (a child a row lacks: MISSING; a child under a None container: None)."""
    if _depth > _INFER_MAX_DEPTH:
        raise ValueError(f"infer_structure exceeded max depth {_INFER_MAX_DEPTH} at {path!r}")
    keys = _try_expand_dict(values)
    if keys is not None:
        nodes.append(_InferredNode(path, "dict", keys,
                                   row_mask=[isinstance(v, dict) for v in values]))
        for key in keys:
            column = [v.get(key, MISSING) if isinstance(v, dict) else None for v in values]
            infer_structure(f"{path}.{_escape_key(key)}", column, leaves, nodes,
                            _depth=_depth + 1)
        return
    expanded = _try_expand_list(values)
    if expanded is not None:
        longest, lengths = expanded
        is_list = [isinstance(v, (list, tuple)) for v in values]
        nodes.append(_InferredNode(path, "list", list(range(longest)), lengths,
                                   row_mask=is_list))
        for index in range(longest):
            column = [(v[index] if index < len(v) else MISSING) if listed else None
                      for v, listed in zip(values, is_list)]
            infer_structure(f"{path}[{index}]", column, leaves, nodes, _depth=_depth + 1)
        return
    leaves.append(_InferredLeaf(path, values, _choose_leaf_codec(values)))


def _structured_path_tokens(path: str) -> list[Any]:
    """The keys (str) and indices (int) a path is made of."""
    tokens: list[Any] = []
    current: list[str] = []
    index = 0
    while index < len(path):
        char = path[index]
        if char == "\\" and index + 1 < len(path):
            current.append(path[index + 1])
            index += 2
            continue
        if char in ".[":
            if current:
                tokens.append("".join(current))
                current = []
            if char == "[":
                end = path.index("]", index)
                tokens.append(int(path[index + 1:end]))
                index = end
        else:
            current.append(char)
        index += 1
    if current:
        tokens.append("".join(current))
    return tokens


def _lookup_structured_path(value: Any, root_path: str, target_path: str) -> Any:
    """What a row holds at target_path (below root_path); MISSING when it has nothing there."""
    suffix = target_path[len(root_path):].removeprefix(".")
    current = value
    for token in _structured_path_tokens(suffix) if suffix else []:
        if isinstance(token, str):
            if not isinstance(current, dict) or token not in current:
                return MISSING
        elif not isinstance(current, (list, tuple)) or token >= len(current):
            return MISSING
        current = current[token]
    return current


def _recursive_payload(path: str, values: list[Any], leaves: Sequence[_InferredLeaf],
                       nodes: Sequence[_InferredNode], encode_leaf) -> _EncodedStructuredLeaf:
    """The structured_recursive encoding: per node its missing mask (and row mask, list
    lengths), per leaf its codec's payloads and missing mask; encode_leaf(leaf, values with
    MISSING as None) encodes a leaf."""
    payload: dict[str, Any] = {}
    node_specs = []
    for node_id, node in enumerate(nodes):
        spec = {"id": node_id, "path": node.path, "node_type": node.node_type,
                "children": list(node.children),
                "missing_payload": f"node.{node_id}.missing"}
        payload[spec["missing_payload"]] = np.asarray(
            [_lookup_structured_path(v, path, node.path) is MISSING for v in values], np.bool_)
        if node.row_mask is not None:
            spec["row_mask_payload"] = f"node.{node_id}.row_mask"
            payload[spec["row_mask_payload"]] = np.asarray(node.row_mask, np.bool_)
        if node.lengths is not None:
            spec["lengths_payload"] = f"node.{node_id}.lengths"
            payload[spec["lengths_payload"]] = np.asarray(node.lengths, np.int64)
        node_specs.append(spec)
    leaf_specs = []
    for leaf_id, leaf in enumerate(leaves):
        missing = np.asarray([isinstance(v, _Missing) for v in leaf.values], np.bool_)
        encoded = encode_leaf(leaf, [None if m else v for m, v in zip(missing, leaf.values)])
        members = {}
        for name, value in encoded.payload.items():
            members[name] = f"leaf.{leaf_id}.{name}"
            payload[members[name]] = value
        members["missing"] = f"leaf.{leaf_id}.missing"
        payload[members["missing"]] = missing
        leaf_specs.append({"id": leaf_id, "path": leaf.path, "codec": encoded.codec,
                           "rows": encoded.rows, "metadata": encoded.metadata,
                           "payload_members": members})
    return _EncodedStructuredLeaf(
        codec="structured_recursive", rows=len(values), payload=payload,
        metadata={"schema_source": "inferred_from_runtime_values", "structure_version": 1,
                  "root_path": path, "nodes": node_specs, "leaves": leaf_specs})


def _null_column_decision(values: list[Any], decision: _CodecDecision) -> _CodecDecision:
    """A column of nothing but None/MISSING takes json_ragged (no codec accepts it)."""
    if decision.accepted or not all(v is None or isinstance(v, _Missing) for v in values):
        return decision
    return _CodecDecision(True, "json_ragged", "all rows are null or missing", "json")


def _worth_taking_apart(leaf: _InferredLeaf, ndarray_typed: bool) -> bool:
    codec = leaf.decision.codec
    if codec in _RECURSIVE_CODECS:
        return True
    if codec != "typed_ragged":
        return False
    if ndarray_typed:  # the inference's own mark of ndarray rows
        return leaf.decision.metadata.get("recursive_source") == "ndarray"
    return any(isinstance(v, np.ndarray) for v in _non_null(leaf.values))


def _encode_structured_non_tensor_field(path: str, value: np.ndarray) -> _EncodedStructuredLeaf:
    """An object-array field with the codec its rows call for: structured_recursive when
    they are structures holding tensors, arrays, bytes or media, else one leaf codec."""
    values = list(value)
    leaves: list[_InferredLeaf] = []
    nodes: list[_InferredNode] = []
    infer_structure(path, values, leaves, nodes)
    if nodes and any(_worth_taking_apart(leaf, False) for leaf in leaves):
        return _recursive_payload(path, values, leaves, nodes, lambda leaf, column:
                                  _encode_structured_leaf(column, _null_column_decision(
                                      leaf.values, leaf.decision)))
    return _encode_structured_leaf(values, _choose_leaf_codec(values))


def _is_recursive_encoded_non_tensor(encoded: Mapping[str, Any]) -> bool:
    return encoded.get("codec") == "structured_recursive"


def _copy_recursive_metadata_for_leaf_updates(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """metadata with its leaves copied, so that a read may rewrite theirs."""
    copied = dict(metadata)
    copied["leaves"] = [dict(leaf) for leaf in metadata.get("leaves", [])]
    return copied


def _child_path(node: Mapping[str, Any], child: Any) -> str:
    if node["node_type"] == "dict":
        return f"{node['path']}.{_escape_key(str(child))}"
    return f"{node['path']}[{int(child)}]"


def _reconstruct_structured_rows(metadata: Mapping[str, Any], payload: Mapping[str, Any],
                                 leaf_values: Mapping[str, list[Any]], rows: int) -> list[Any]:
    """The rows rebuilt from their leaf columns, deepest nodes first."""
    columns: dict[str, list[Any]] = dict(leaf_values)
    depth = lambda node: node["path"].count(".") + node["path"].count("[")  # noqa: E731
    for node in sorted(metadata.get("nodes", []), key=depth, reverse=True):
        missing, row_mask, lengths = (payload[node[k]] if node.get(k) is not None else None
                                      for k in ("missing_payload", "row_mask_payload",
                                                "lengths_payload"))
        children = [(child, columns[_child_path(node, child)]) for child in node["children"]]
        column = []
        for row in range(rows):
            if missing is not None and bool(missing[row]):
                column.append(MISSING)
            elif row_mask is not None and not bool(row_mask[row]):
                column.append(None)
            elif node["node_type"] == "dict":
                column.append({child: values[row] for child, values in children
                               if not isinstance(values[row], _Missing)})
            else:
                length = int(lengths[row]) if lengths is not None else len(children)
                item = [None] * length
                for child, values in children:
                    if int(child) < length and not isinstance(values[row], _Missing):
                        item[int(child)] = values[row]
                column.append(item)
        columns[node["path"]] = column
    return columns[metadata["root_path"]]


def _decode_structured_recursive_field(encoded: Mapping[str, Any], payload: dict[str, Any],
                                       rows: int) -> list[Any]:
    metadata = encoded.get("metadata") or {}
    leaf_values = {}
    for leaf in metadata.get("leaves", []):
        members = leaf["payload_members"]
        values = _decode_structured_leaf(
            leaf["codec"], {n: payload[m] for n, m in members.items() if n != "missing"},
            rows, leaf.get("metadata"))
        missing = payload[members["missing"]]
        leaf_values[leaf["path"]] = [MISSING if bool(missing[row]) else values[row]
                                     for row in range(rows)]
    return _reconstruct_structured_rows(metadata, payload, leaf_values, rows)


def _decode_structured_non_tensor_encoded(encoded: Mapping[str, Any], payload: dict[str, Any],
                                          rows: int, metadata: Mapping[str, Any] | None = None
                                          ) -> list[Any]:
    """The rows of an encoded field from its payloads (metadata: the read's, when it
    rewrote the stored one for a row selection)."""
    codec = encoded.get("codec")
    if codec == "ragged_tensor_dict":
        return _decode_ragged_tensor_dict_values(payload, rows,
                                                 metadata or encoded.get("metadata", {}))
    if codec == "structured_recursive":
        if metadata is not None:
            encoded = {**encoded, "metadata": metadata}
        return _decode_structured_recursive_field(encoded, payload, rows)
    return _decode_structured_leaf(codec, payload, rows, metadata)


# ---- FieldSchema codecs, and "auto" -------------------------------------------------------


def _schema_ndarray_dtype(schema: FieldSchema, *, required: bool = False) -> np.dtype | None:
    """FieldSchema metadata["dtype"], a numeric or bool dtype (None when not given)."""
    name = schema.metadata.get("dtype")
    if name is None:
        if required:
            raise ValueError("FieldSchema metadata['dtype'] is required")
        return None
    try:
        dtype = np.dtype(name)
    except (TypeError, ValueError) as error:
        raise ValueError(f"invalid FieldSchema metadata['dtype']: {name!r}") from error
    if dtype.kind not in "biufc":
        raise ValueError(f"FieldSchema metadata['dtype'] must be numeric or bool, got {dtype}")
    return dtype


def _validate_schema_nullable(path: str, value: Any, schema: FieldSchema) -> None:
    if not schema.nullable and any(item is None for item in value):
        raise ValueError(f"FieldSchema for {path!r} is not nullable")


def _encode_with_schema(path: str, value: np.ndarray, schema: FieldSchema) -> _EncodedStructuredLeaf:
    """Rows with the codec a FieldSchema names (no inference; "auto": the fallback)."""
    values = list(value)
    _validate_schema_nullable(path, values, schema)
    codec = schema.codec
    if codec == "auto":
        return _encode_with_fallback(path, value)
    if codec == "ragged_tensor_dict":
        return _encode_ragged_tensor_dict_values(values, schema)
    if codec == "ragged_tensor":
        payload, metadata = _encode_ragged_tensor_values(values)
    elif codec == "typed_ragged":
        payload, metadata = _encode_typed_ragged_values(values,
                                                        dtype_hint=_schema_ndarray_dtype(schema))
    elif codec == "ndarray":
        dtype = _schema_ndarray_dtype(schema)
        if dtype is None:
            return _encode_with_fallback(path, value)
        payload, metadata = _encode_numeric_scalar_values(
            values, _CodecDecision(True, "ndarray", "schema", "numeric scalar",
                                   {"dtype": str(dtype)}))
    elif codec in ("bytes_ragged", "media_bytes"):
        payload, metadata = _encode_bytes_like_values(values)
    elif codec == "media_list_ragged":
        payload, metadata = _encode_media_list_values(values)
    elif codec == "utf8_ragged":
        payload, metadata = _encode_bytes_like_values(
            [None if v is None else v.encode("utf-8") for v in values])
    elif codec == "msgpack_ragged":
        payload, metadata = _encode_msgpack_ragged_values(path, values)
    elif codec == "json_ragged":
        payload, metadata = _encode_bytes_like_values([_json_row(v) for v in values])
    else:
        raise ValueError(f"unsupported schema codec: {codec!r}")
    return _EncodedStructuredLeaf(codec=codec, rows=len(values), payload=payload,
                                  metadata=metadata)


def _normalize_structured_scalar(value: Any) -> Any:
    """value with numpy arrays and scalars as Python lists and numbers (for msgpack, json)."""
    if isinstance(value, np.ndarray):
        return _normalize_structured_scalar(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {k: _normalize_structured_scalar(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_normalize_structured_scalar(v) for v in value]
    return value


def _normalize_values_for_fallback_codec(values: list[Any], codec: str) -> list[Any]:
    if codec in ("msgpack_ragged", "json_ragged"):
        return [_normalize_structured_scalar(v) for v in values]
    return values


def _as_object_array(values: list[Any]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def _encode_recursive_if_structured(path: str, values: list[Any]) -> _EncodedStructuredLeaf | None:
    """structured_recursive with schema codecs per leaf, when the rows are structures worth
    taking apart; else None."""
    leaves: list[_InferredLeaf] = []
    nodes: list[_InferredNode] = []
    infer_structure(path, values, leaves, nodes)
    if not nodes or not any(_worth_taking_apart(leaf, True) for leaf in leaves):
        return None

    def encode_leaf(leaf: _InferredLeaf, column: list[Any]) -> _EncodedStructuredLeaf:
        decision = _null_column_decision(leaf.values, leaf.decision)
        return _encode_with_schema(
            leaf.path, _as_object_array(_normalize_values_for_fallback_codec(column,
                                                                             decision.codec)),
            FieldSchema(codec=decision.codec, metadata=decision.metadata))

    return _recursive_payload(path, values, leaves, nodes, encode_leaf)


def _encode_with_fallback(path: str, value: np.ndarray) -> _EncodedStructuredLeaf:
    """Rows with the first codec that takes them: structured_recursive, the inferred codec,
    msgpack_ragged, json_ragged. ValueError listing what each said when none does."""
    values = list(value)
    errors: list[str] = []
    try:
        recursive = _encode_recursive_if_structured(path, values)
        if recursive is not None:
            return recursive
    except _ENCODING_FALLBACK_ERRORS as error:
        errors.append(f"structured_recursive: {error}")
    decision = _choose_leaf_codec(values)
    for codec in dict.fromkeys([decision.codec, "msgpack_ragged", "json_ragged"]):
        metadata = dict(decision.metadata or {}) if codec == decision.codec else {}
        rows = _as_object_array(_normalize_values_for_fallback_codec(values, codec))
        try:
            return _encode_with_schema(path, rows, FieldSchema(codec=codec, metadata=metadata))
        except _ENCODING_FALLBACK_ERRORS as error:
            errors.append(f"{codec}: {error}")
    raise ValueError(f"unable to infer a safe codec for structured non-tensor field {path!r}; "
                     f"tried {errors}")

