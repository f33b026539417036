"""Writing DataProto batches: a stage (put, or append_dataproto_fields) is one structured
object whose members are "batch.<field>" (tensors, arrays) and "non_tensor_batch.<field>"
(object arrays encoded by a codec, as "non_tensor_batch.<field>.<payload>" members; numeric
arrays as they are). Appending to an existing stage writes the new members and then a new
manifest merging both (the old objects stay shared; the superseded manifest and metadata are
listed for cleanup); overwriting a stage writes it anew and removes the old one.

Storage groups: every object of one DataProto shares one group id (config.group_ids), named
by the caller or made up ("structured-<hex>") at the first put; "" or [] keep it ungrouped.
The id travels in the ref (and its handle), so appends by other processes stay in the group.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Mapping, Optional

from mooncake._structured.buffers import _decode_structured_metadata, _encode_structured_metadata
from mooncake._structured.inference import (
    _encode_structured_non_tensor_field, _encode_with_schema, _validate_schema_nullable)
from mooncake._structured.model import (
    STRUCTURED_FIELD_SPECS_KEY, BundleTransferPolicy, FieldSchema, MooncakeDataProtoRef,
    RemoteBundleRef, StructuredFieldLocation, StructuredObjectPayload)
from mooncake._structured.shapes import (
    _coerce_schema_non_tensor_value, _dataproto_batch_size, _schema_for_section,
    _should_encode_non_tensor_field, _split_dataproto_like, _validate_dataproto_schema_sections)
from mooncake._structured.structured import _structured_field_specs
from mooncake._structured.writes import _config_with_group_id

if TYPE_CHECKING:
    from mooncake._structured.transfer import MooncakeBundleTransfer

_GROUP_STRINGS = "structured object store config.group_ids must contain strings"


def _new_storage_group_id(config: Any) -> str | None:
    """The group of a new DataProto: config's one group id, a new one when it names none,
    None (ungrouped) for ""."""
    raw = getattr(config, "group_ids", None)
    if raw is None or isinstance(raw, str):
        group = raw
    else:
        try:
            ids = list(raw)
        except TypeError as error:
            raise ValueError(_GROUP_STRINGS) from error
        if len(ids) > 1:
            raise ValueError("structured object store config.group_ids must contain exactly one "
                             "logical group id; it is expanded across internal Mooncake keys")
        group = ids[0] if ids else None
    if group is None:
        return f"structured-{uuid.uuid4().hex}"
    if not isinstance(group, str):
        raise ValueError(_GROUP_STRINGS)
    return group or None


def _merge_structured_stage_metadata(old: Mapping[str, Any],
                                     new: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata of a stage and of fields appended to it, as one."""
    if old.get("dataproto") != new.get("dataproto"):
        raise ValueError("DataProto stage metadata mismatch during manifest merge")
    specs = dict(_structured_field_specs(old))
    added = _structured_field_specs(new)
    collisions = sorted(set(specs) & set(added))
    if collisions:
        raise ValueError(f"structured members already exist: {collisions}")
    specs.update(added)
    merged = dict(old)
    if specs:
        merged[STRUCTURED_FIELD_SPECS_KEY] = specs
    return merged


def _encode_non_tensor(name: str, value: Any, schema: FieldSchema | None):
    """The encoding of a non_tensor_batch field (None: stored as it is)."""
    if schema is not None:
        path = f"non_tensor_batch.{name}"
        try:
            rows = _coerce_schema_non_tensor_value(name, value)
            if schema.codec == "auto":
                _validate_schema_nullable(path, rows, schema)
            else:
                return _encode_with_schema(path, rows, schema)
        except (TypeError, ValueError, RuntimeError, AttributeError) as error:
            raise type(error)(f"failed to encode non_tensor_batch field {name!r} with "
                              f"FieldSchema codec {schema.codec!r}: {error}") from error
    if _should_encode_non_tensor_field(value):
        return _encode_structured_non_tensor_field(f"non_tensor_batch.{name}", value)
    return None


def _append_dataproto_stage_manifest(transfer: "MooncakeBundleTransfer",
                                     old_stage_ref: RemoteBundleRef,
                                     payload: StructuredObjectPayload, *, partition: str,
                                     chunk_bytes: Optional[int],
                                     policy: Optional[BundleTransferPolicy],
                                     config: Any = None) -> RemoteBundleRef:
    """The new fields as an object of their own, then one manifest over the old stage's
    members and theirs; the new object's own manifest and metadata go once merged."""
    bundles = transfer._bundle_store
    new_ref = transfer.put_structured_object(payload, partition=partition,
                                             chunk_bytes=chunk_bytes, policy=policy,
                                             config=config)
    try:
        old_manifest = bundles.resolve_manifest(old_stage_ref)
        new_manifest = bundles.resolve_manifest(new_ref)
        metadata = _merge_structured_stage_metadata(
            _decode_structured_metadata(bundles.read_payload(old_manifest["meta"])),
            _decode_structured_metadata(bundles.read_payload(new_manifest["meta"])))
        buffers = dict(old_manifest["buffers"])
        collisions = sorted(set(buffers) & set(new_manifest["buffers"]))
        if collisions:
            raise ValueError(f"structured members already exist: {collisions}")
        buffers.update(new_manifest["buffers"])
        cleanup = [*old_manifest.get("cleanup_keys", []), bundles.manifest_key(old_stage_ref),
                   *bundles.payload_keys(old_manifest["meta"]), bundles.manifest_key(new_ref),
                   *bundles.payload_keys(new_manifest["meta"])]
        merged = bundles.put_bundle_manifest(_encode_structured_metadata(metadata), buffers,
                                             partition=partition, chunk_bytes=chunk_bytes,
                                             policy=policy, cleanup_keys=cleanup, config=config)
    except Exception:
        transfer.remove_bundle(new_ref)
        raise
    bundles.remove_keys([bundles.manifest_key(new_ref),
                         *bundles.payload_keys(new_manifest["meta"])], strict=False)
    return merged


def _put_dataproto_stage(transfer: "MooncakeBundleTransfer", ref: MooncakeDataProtoRef | None,
                         data: Any, *, namespace: str, partition: str, stage: str,
                         chunk_bytes: Optional[int], policy: Optional[BundleTransferPolicy],
                         overwrite: bool,
                         field_schemas: Optional[Mapping[str, FieldSchema]] = None,
                         config: Any = None) -> MooncakeDataProtoRef:
    """data as stage of ref (a new DataProto when ref is None); returns the new ref (ref is
    left as it was: another append from it makes a branch)."""
    batch, non_tensor_batch, meta_info = _split_dataproto_like(data)
    _validate_dataproto_schema_sections(batch, non_tensor_batch, meta_info, field_schemas)
    batch_size = _dataproto_batch_size(batch, non_tensor_batch)
    if ref is not None and batch_size != ref.batch_size:
        raise ValueError(f"DataProto append batch size {batch_size} does not match ref batch "
                         f"size {ref.batch_size}")
    overlap = sorted(set(batch) & set(non_tensor_batch))
    if overlap:
        raise ValueError(f"DataProto batch and non_tensor_batch fields overlap: {overlap}")
    buffers: dict[str, Any] = {}
    locations: dict[str, StructuredFieldLocation] = {}
    encoded_fields: dict[str, Any] = {}
    for name, value in batch.items():
        buffers[f"batch.{name}"] = value
        locations[name] = StructuredFieldLocation(stage, f"batch.{name}", "batch")
    for name, value in non_tensor_batch.items():
        member = f"non_tensor_batch.{name}"
        locations[name] = StructuredFieldLocation(stage, member, "non_tensor_batch")
        encoded = _encode_non_tensor(name, value,
                                     _schema_for_section(field_schemas, name, "non_tensor_batch"))
        if encoded is None:
            buffers[member] = value
            continue
        members = {}
        for payload_name, payload_value in encoded.payload.items():
            members[payload_name] = f"{member}.{payload_name}"
            buffers[members[payload_name]] = payload_value
        encoded_fields[name] = {"codec": encoded.codec, "rows": encoded.rows,
                                "metadata": encoded.metadata, "payload_members": members}

    if not buffers:  # meta_info only: nothing to write
        if ref is not None:
            return MooncakeDataProtoRef(
                batch_size=ref.batch_size, stage_refs=dict(ref.stage_refs),
                field_index=dict(ref.field_index), meta_info={**ref.meta_info, **meta_info},
                namespace=ref.namespace, partition=ref.partition,
                global_indexes=ref.global_indexes,
                encoded_non_tensor=dict(ref.encoded_non_tensor),
                _storage_group_id=ref._storage_group_id)
        return MooncakeDataProtoRef(batch_size=batch_size, stage_refs={}, field_index={},
                                    meta_info=dict(meta_info), namespace=namespace,
                                    partition=partition, encoded_non_tensor={},
                                    _storage_group_id=_new_storage_group_id(config))
    if ref is not None:
        duplicates = sorted(set(ref.field_index) & set(locations))
        if duplicates and not overwrite:
            raise ValueError(f"DataProto fields already exist: {duplicates}")
        if overwrite:
            dropped = sorted(n for n, loc in ref.field_index.items()
                             if loc.stage == stage and n not in locations)
            if dropped:
                raise ValueError(f"DataProto overwrite for stage {stage!r} must include "
                                 f"existing fields: {dropped}")
    group = _new_storage_group_id(config) if ref is None else ref._storage_group_id
    write_config = config if group is None else _config_with_group_id(config, group)
    payload = StructuredObjectPayload(
        metadata={"layout": "dataproto_stage",
                  "dataproto": {"version": 1, "namespace": namespace, "partition": partition,
                                "stage": stage, "batch_size": batch_size}},
        buffers=buffers)
    existing = ref.stage_refs.get(stage) if ref is not None else None
    if existing is not None and not overwrite:
        stage_ref = _append_dataproto_stage_manifest(transfer, existing, payload,
                                                     partition=partition,
                                                     chunk_bytes=chunk_bytes, policy=policy,
                                                     config=write_config)
    else:
        stage_ref = transfer.put_structured_object(payload, partition=partition,
                                                   chunk_bytes=chunk_bytes, policy=policy,
                                                   config=write_config)
        if existing is not None and existing.manifest_key != stage_ref.manifest_key:
            transfer.remove_bundle(existing)
    if ref is None:
        return MooncakeDataProtoRef(batch_size=batch_size, stage_refs={stage: stage_ref},
                                    field_index=locations, meta_info=dict(meta_info),
                                    namespace=namespace, partition=partition,
                                    encoded_non_tensor=encoded_fields,
                                    _storage_group_id=group)
    encoded_non_tensor = {n: e for n, e in ref.encoded_non_tensor.items() if n not in locations}
    encoded_non_tensor.update(encoded_fields)
    return MooncakeDataProtoRef(
        batch_size=batch_size, stage_refs={**ref.stage_refs, stage: stage_ref},
        field_index={**ref.field_index, **locations}, meta_info={**ref.meta_info, **meta_info},
        namespace=namespace, partition=partition, global_indexes=ref.global_indexes,
        encoded_non_tensor=encoded_non_tensor, _storage_group_id=group)


def _dataproto_manifest_view(transfer: "MooncakeBundleTransfer",
                             ref: MooncakeDataProtoRef) -> dict[str, Any]:
    """What a DataProto holds, from its stages' manifests: per field its section, stage,
    member and encoding spec (an encoded field's codec and its payloads' specs)."""
    bundles = transfer._bundle_store
    metadata = {stage: _decode_structured_metadata(bundles.read_payload(
        bundles.resolve_manifest(stage_ref)["meta"])) for stage, stage_ref in ref.stage_refs.items()}
    fields = {}
    for name, location in ref.field_index.items():
        specs = _structured_field_specs(metadata[location.stage])
        spec = dict(specs.get(location.member, {"encoding": "bytes"}))
        encoded = ref.encoded_non_tensor.get(name)
        if encoded is not None:
            spec = {"encoding": "structured_non_tensor", "codec": encoded["codec"],
                    "metadata": encoded.get("metadata"),
                    "payload_members": dict(encoded["payload_members"]),
                    "payload_specs": {p: dict(specs.get(m, {"encoding": "bytes"}))
                                      for p, m in encoded["payload_members"].items()}}
        fields[name] = {"section": location.section, "stage": location.stage,
                        "member": location.member, "spec": spec}
    return {
        "namespace": ref.namespace, "partition": ref.partition, "batch_size": ref.batch_size,
        "batch_fields": {n: f for n, f in fields.items() if f["section"] == "batch"},
        "non_tensor_fields": {n: f for n, f in fields.items()
                              if f["section"] == "non_tensor_batch"},
        "meta_info_keys": list(ref.meta_info),
        "stages": {stage: {"manifest_key": stage_ref.manifest_key,
                           "dataproto": metadata[stage].get("dataproto", {})}
                   for stage, stage_ref in ref.stage_refs.items()},
    }
