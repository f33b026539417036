"""MooncakeBundleTransfer: the structured object store's entry point (Mooncake's API).

    transfer = MooncakeBundleTransfer(store, key_prefix="bundle")
    ref = transfer.put_object({"weights": array, "tokens": b"..."})   # or one value
    transfer.get_object(ref)
    ref = transfer.put(dataproto)                 # or put(flat_dict, type="dict")
    transfer.get(ref, fields=[...], rows=slice(0, 8))
    transfer.append_dataproto_fields(ref, more, stage="critic")
    transfer.cleanup_dataproto(ref)

store is a MooncakeDistributedStore (or any object with put/get/remove, faster paths used
when it has them); buffer_pool a BufferPool to stage puts and reads through (one is made for
this store's client when none is given). Writes take the store's write config (config=:
ReplicateConfig, or an object with its fields). Everything written for an object is removed
again when a write fails; remove_bundle and cleanup_dataproto remove it on purpose.

Threads: one transfer may be shared; calls on distinct objects run concurrently (appends to
one DataProto ref from two threads make two branches, each a valid ref).
"""
from __future__ import annotations

from typing import Any, Literal, Mapping, Optional, Sequence

import numpy as np

from mooncake._structured import dataproto_read, dataproto_write
from mooncake._structured.buffers import _normalize_key_prefix, _validate_chunk_bytes
from mooncake._structured.bundle import _BundleManifestStore
from mooncake._structured.handles import DataProtoRefLike, _resolve_dataproto_ref
from mooncake._structured.model import (
    DEFAULT_BUNDLE_CHUNK_BYTES, BundleStore, BundleTransferPolicy, FieldSchema,
    MooncakeDataProtoRef, RemoteBundleRef, StructuredMemberSlice, StructuredObjectPayload,
    StructuredObjectReadSpec, StructuredObjectResult)
from mooncake._structured.shapes import _envelope_to_flat_dict, _flat_dict_to_envelope
from mooncake._structured.structured import _StructuredObjectLayer
from mooncake._structured.transport import _MooncakePayloadTransport

BundleRef = RemoteBundleRef | Mapping[str, Any]
Rows = slice | StructuredMemberSlice | Sequence[int] | None
_WRAPPED = "__mooncake_wrapped_object__"  # metadata mark of put_object(non-mapping)


class MooncakeBundleTransfer:
    """Structured objects and DataProto batches in a store (see the module's docstring)."""

    def __init__(self, store: BundleStore, key_prefix: str = "bundle",
                 default_chunk_bytes: int = DEFAULT_BUNDLE_CHUNK_BYTES,
                 buffer_pool: Any = None) -> None:
        self.store = store
        self.key_prefix = _normalize_key_prefix(key_prefix)
        self.default_chunk_bytes = _validate_chunk_bytes(default_chunk_bytes)
        self._transport = _MooncakePayloadTransport(store, buffer_pool=buffer_pool)
        self._bundle_store = _BundleManifestStore(store=store, transport=self._transport,
                                                  key_prefix=self.key_prefix,
                                                  default_chunk_bytes=self.default_chunk_bytes)
        self._structured_store = _StructuredObjectLayer(self._bundle_store)

    # ---- bundles and structured objects -----------------------------------------------

    def put_bundle(self, meta: bytes | bytearray | memoryview, buffers: Mapping[str, Any],
                   partition: str = "default", chunk_bytes: Optional[int] = None,
                   policy: Optional[BundleTransferPolicy] = None,
                   max_inflight_put: Optional[int] = None, config: Any = None) -> RemoteBundleRef:
        """Raw metadata bytes and named buffers, as a bundle."""
        return self._bundle_store.put_bundle(meta=meta, buffers=buffers, partition=partition,
                                             chunk_bytes=chunk_bytes, policy=policy,
                                             max_inflight_put=max_inflight_put, config=config)

    def remove_bundle(self, ref: BundleRef) -> None:
        """Every store object of a bundle."""
        self._bundle_store.remove_bundle(ref)

    def put_structured_object(self, payload: StructuredObjectPayload, partition: str = "default",
                              chunk_bytes: Optional[int] = None,
                              policy: Optional[BundleTransferPolicy] = None,
                              max_inflight_put: Optional[int] = None,
                              config: Any = None) -> RemoteBundleRef:
        """JSON metadata and named members (arrays, tensors, bytes)."""
        return self._structured_store.put_structured_object(
            payload=payload, partition=partition, chunk_bytes=chunk_bytes, policy=policy,
            max_inflight_put=max_inflight_put, config=config)

    def put_object(self, obj: Any, partition: str = "default",
                   chunk_bytes: Optional[int] = None,
                   policy: Optional[BundleTransferPolicy] = None,
                   max_inflight_put: Optional[int] = None, config: Any = None) -> RemoteBundleRef:
        """A mapping of members, or one value (an array, a tensor, bytes)."""
        if isinstance(obj, Mapping):
            payload = StructuredObjectPayload(metadata={}, buffers=obj)
        else:
            payload = StructuredObjectPayload(metadata={_WRAPPED: True}, buffers={"value": obj})
        return self.put_structured_object(payload, partition=partition, chunk_bytes=chunk_bytes,
                                          policy=policy, max_inflight_put=max_inflight_put,
                                          config=config)

    def get_object(self, ref: BundleRef) -> Any:
        """What put_object stored."""
        result = self.materialize(self.read_spec(ref))
        return result.objects["value"] if result.metadata.get(_WRAPPED) else result.objects

    def read_spec(self, ref: BundleRef) -> StructuredObjectReadSpec:
        return self._structured_store.read_spec(ref)

    def materialize(self, spec: StructuredObjectReadSpec) -> StructuredObjectResult:
        return self._structured_store.materialize(spec)

    def materialize_into(self, spec: StructuredObjectReadSpec,
                         destinations: Optional[Mapping[str, Any]]) -> StructuredObjectResult:
        """materialize, into the caller's destinations where given (ndarray members: arrays
        or raw_destination; tensor members: tensor_object_buffer or raw_destination)."""
        return self._structured_store.materialize_into(spec, destinations)

    @staticmethod
    def release_result(result: Any) -> None:
        """Gives back now the BufferPool leases under a result's arrays (also inside dicts,
        lists, tuples and object arrays), instead of when they are collected. The arrays
        must not be used afterwards."""
        released: set[int] = set()
        visited: set[int] = set()

        def visit(value: Any) -> None:
            owner = getattr(value, "_mooncake_pool_owner", None)
            if owner is not None:
                if id(owner) not in released:
                    released.add(id(owner))
                    owner.release()
                return
            if isinstance(value, Mapping):
                items = value.values()
            elif isinstance(value, (list, tuple)):
                items = value
            elif isinstance(value, np.ndarray) and value.dtype == object:
                items = value.flat
            else:
                return
            if id(value) not in visited:
                visited.add(id(value))
                for item in items:
                    visit(item)

        visit(result)

    # ---- DataProto ----------------------------------------------------------------------

    def put(self, data: Any, *, type: Literal["dataproto", "dict"] = "dataproto",
            namespace: str = "default", partition: str = "default", stage: str = "default",
            chunk_bytes: Optional[int] = None, policy: Optional[BundleTransferPolicy] = None,
            config: Any = None,
            field_schemas: Optional[Mapping[str, FieldSchema]] = None) -> MooncakeDataProtoRef:
        """A DataProto-like object, or (type="dict") a flat dict, as a new DataProto."""
        if type == "dataproto":
            stage_data = data
        elif type == "dict":
            stage_data = _flat_dict_to_envelope(data, field_schemas)
        else:
            raise ValueError(f"unsupported Mooncake payload type: {type!r}")
        return dataproto_write._put_dataproto_stage(
            self, None, stage_data, namespace=namespace, partition=partition, stage=stage,
            chunk_bytes=chunk_bytes, policy=policy, overwrite=False, config=config,
            field_schemas=field_schemas)

    def get(self, ref: DataProtoRefLike, *, type: Literal["dataproto", "dict"] = "dataproto",
            fields: Optional[Sequence[str]] = None, batch_fields: Optional[Sequence[str]] = None,
            non_tensor_fields: Optional[Sequence[str]] = None,
            meta_info_keys: Optional[Sequence[str]] = None, data_cls: Optional[Any] = None,
            destinations: Optional[Mapping[str, Any]] = None, rows: Rows = None) -> Any:
        """The fields asked for (default all), of the rows asked for (default all): as
        data_cls (default the envelope dict), or (type="dict") as one flat dict."""
        if type not in ("dataproto", "dict"):
            raise ValueError(f"unsupported Mooncake payload type: {type!r}")
        flat = type == "dict"
        result = dataproto_read._get_dataproto(
            self, ref, fields=fields, batch_fields=batch_fields,
            non_tensor_fields=non_tensor_fields, meta_info_keys=meta_info_keys,
            data_cls=dict if flat else data_cls, destinations=destinations, rows=rows,
            _flat_dict_output=flat)
        return _envelope_to_flat_dict(result) if flat else result

    def put_dataproto(self, data: Any, *, namespace: str = "default", partition: str = "default",
                      stage: str = "default", chunk_bytes: Optional[int] = None,
                      policy: Optional[BundleTransferPolicy] = None,
                      field_schemas: Optional[Mapping[str, FieldSchema]] = None,
                      config: Any = None) -> MooncakeDataProtoRef:
        return self.put(data, type="dataproto", namespace=namespace, partition=partition,
                        stage=stage, chunk_bytes=chunk_bytes, policy=policy,
                        field_schemas=field_schemas, config=config)

    def get_dataproto(self, ref: DataProtoRefLike, *, fields: Optional[Sequence[str]] = None,
                      batch_fields: Optional[Sequence[str]] = None,
                      non_tensor_fields: Optional[Sequence[str]] = None,
                      meta_info_keys: Optional[Sequence[str]] = None,
                      data_cls: Optional[Any] = None,
                      destinations: Optional[Mapping[str, Any]] = None, rows: Rows = None) -> Any:
        return dataproto_read._get_dataproto(
            self, ref, fields=fields, batch_fields=batch_fields,
            non_tensor_fields=non_tensor_fields, meta_info_keys=meta_info_keys,
            data_cls=data_cls, destinations=destinations, rows=rows)

    def append_dataproto_fields(self, ref: DataProtoRefLike, data: Any, *, stage: str,
                                overwrite: bool = False, chunk_bytes: Optional[int] = None,
                                policy: Optional[BundleTransferPolicy] = None,
                                field_schemas: Optional[Mapping[str, FieldSchema]] = None,
                                config: Any = None) -> MooncakeDataProtoRef:
        """New fields (a new stage, or more of an existing one), or with overwrite a stage's
        fields replaced (all of them); returns the new ref."""
        ref = _resolve_dataproto_ref(ref)
        return dataproto_write._put_dataproto_stage(
            self, ref, data, namespace=ref.namespace, partition=ref.partition, stage=stage,
            chunk_bytes=chunk_bytes, policy=policy, overwrite=overwrite,
            field_schemas=field_schemas, config=config)

    def dataproto_manifest_view(self, ref: DataProtoRefLike) -> dict[str, Any]:
        return dataproto_write._dataproto_manifest_view(self, _resolve_dataproto_ref(ref))

    def cleanup_dataproto(self, ref: DataProtoRefLike) -> None:
        """Every store object of a DataProto's stages."""
        removed: set[str] = set()
        for stage_ref in _resolve_dataproto_ref(ref).stage_refs.values():
            if stage_ref.manifest_key not in removed:
                removed.add(stage_ref.manifest_key)
                self.remove_bundle(stage_ref)
