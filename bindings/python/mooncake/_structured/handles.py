"""DataProto handles: a MooncakeDataProtoRef as a JSON-safe dict, to pass to another
process (or keep in a catalog) and import there. The handle names the stages' manifest keys
and the fields' locations; manifests are read again on first use.

    {"type": "mooncake_dataproto_ref", "version": 1, "kind": "bundle_stages",
     "batch_size", "namespace", "partition", "global_indexes",
     "stage_refs": {stage: {"manifest_key"}},
     "field_index": {field: {"stage", "member", "section"}},
     "meta_info", "encoded_non_tensor", ["storage_group_id"]}

Version 2 (a transitional form of Mooncake's) is read as version 1 with a required
storage_group_id.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

import numpy as np

from mooncake._structured.model import (
    DATAPROTO_REF_HANDLE_TYPE, DATAPROTO_REF_HANDLE_VERSION, STORAGE_GROUP_ID,
    MooncakeDataProtoRef, RemoteBundleRef, StructuredFieldLocation)

DataProtoRefLike = MooncakeDataProtoRef | Mapping[str, Any]


def is_dataproto_ref_handle(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("type") == DATAPROTO_REF_HANDLE_TYPE


def _json_safe_value(value: Any) -> Any:
    """value with numpy values as Python ones; TypeError for what JSON cannot hold."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return _json_safe_value(value.tolist())
    if isinstance(value, Mapping):
        return {str(k): _json_safe_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe_value(v) for v in value]
    raise TypeError("DataProto ref handles support only JSON-safe values, got "
                    f"{type(value).__name__}")


def export_dataproto_ref(ref: MooncakeDataProtoRef) -> dict[str, Any]:
    """ref as a JSON-safe handle."""
    if not isinstance(ref, MooncakeDataProtoRef):
        raise TypeError(f"expected MooncakeDataProtoRef, got {type(ref).__name__}")
    handle = {
        "type": DATAPROTO_REF_HANDLE_TYPE, "version": DATAPROTO_REF_HANDLE_VERSION,
        "kind": "bundle_stages", "batch_size": int(ref.batch_size),
        "namespace": ref.namespace, "partition": ref.partition,
        "global_indexes": _json_safe_value(ref.global_indexes),
        "stage_refs": {stage: {"manifest_key": r.manifest_key}
                       for stage, r in ref.stage_refs.items()},
        "field_index": {name: {"stage": loc.stage, "member": loc.member,
                               "section": loc.section}
                        for name, loc in ref.field_index.items()},
        "meta_info": _json_safe_value(ref.meta_info),
        "encoded_non_tensor": _json_safe_value(ref.encoded_non_tensor),
    }
    if ref._storage_group_id is not None:
        handle[STORAGE_GROUP_ID] = ref._storage_group_id
    json.dumps(handle, ensure_ascii=False)  # what cannot travel fails here, not at the reader
    return handle


def _require_mapping(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"DataProto ref handle {name} must be a mapping")
    return value


def _nonempty(*values: Any) -> bool:
    return all(isinstance(v, str) and v for v in values)


def _import_global_indexes(value: Any) -> list[int] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValueError("DataProto ref handle global_indexes must be a list or null")
    if any(isinstance(i, bool) or not isinstance(i, int) for i in value):
        raise ValueError("DataProto ref handle global_indexes must contain integers")
    return list(value)


def import_dataproto_ref(handle: Mapping[str, Any]) -> MooncakeDataProtoRef:
    """A lazy ref from a handle, checked (ValueError naming what is wrong)."""
    if not is_dataproto_ref_handle(handle):
        raise ValueError("not a Mooncake DataProto ref handle")
    version = int(handle.get("version", -1))
    if version not in (DATAPROTO_REF_HANDLE_VERSION, 2):
        raise ValueError(f"unsupported DataProto ref handle version: {handle.get('version')!r}")
    if handle.get("kind") != "bundle_stages":
        raise ValueError(f"unsupported DataProto ref handle kind: {handle.get('kind')!r}")
    stage_refs = {}
    for stage, raw in _require_mapping(handle.get("stage_refs"), "stage_refs").items():
        key = _require_mapping(raw, f"stage_refs[{stage!r}]").get("manifest_key")
        if not _nonempty(stage, key):
            raise ValueError("DataProto ref handle stage refs must contain non-empty string "
                             "names and manifest_key values")
        stage_refs[stage] = RemoteBundleRef(manifest_key=key, manifest={})
    field_index = {}
    for name, raw in _require_mapping(handle.get("field_index"), "field_index").items():
        location = _require_mapping(raw, f"field_index[{name!r}]")
        section = location.get("section")
        if section not in ("batch", "non_tensor_batch"):
            raise ValueError(f"invalid DataProto field section: {section!r}")
        stage, member = location.get("stage"), location.get("member")
        if not _nonempty(name, stage, member):
            raise ValueError("DataProto ref handle field locations must be non-empty strings")
        if stage not in stage_refs:
            raise ValueError(f"DataProto ref handle field {name!r} references unknown stage "
                             f"{stage!r}")
        field_index[name] = StructuredFieldLocation(stage=stage, member=member, section=section)
    group = handle.get(STORAGE_GROUP_ID)
    if (version == 2 and group is None) or (group is not None and not _nonempty(group)):
        raise ValueError("DataProto ref handle has invalid storage_group_id")
    return MooncakeDataProtoRef(
        batch_size=int(handle["batch_size"]), stage_refs=stage_refs, field_index=field_index,
        meta_info=dict(_require_mapping(handle.get("meta_info", {}), "meta_info")),
        namespace=str(handle.get("namespace", "default")),
        partition=str(handle.get("partition", "default")),
        global_indexes=_import_global_indexes(handle.get("global_indexes")),
        encoded_non_tensor=dict(_require_mapping(handle.get("encoded_non_tensor", {}),
                                                 "encoded_non_tensor")),
        _storage_group_id=group)


def _resolve_dataproto_ref(ref: DataProtoRefLike) -> MooncakeDataProtoRef:
    if isinstance(ref, MooncakeDataProtoRef):
        return ref
    if is_dataproto_ref_handle(ref):
        return import_dataproto_ref(ref)
    raise TypeError(f"expected MooncakeDataProtoRef or DataProto handle, got "
                    f"{type(ref).__name__}")


export_ref = export_dataproto_ref
import_ref = import_dataproto_ref
