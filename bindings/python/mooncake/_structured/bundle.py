"""_BundleManifestStore: a bundle is raw metadata bytes plus named buffers, stored as chunk
objects and found through a JSON manifest object.

Keys, under the transfer's key prefix P (Mooncake's layout, so each reads the other's):

    P/<partition>/<32 hex>/manifest                 the manifest
    P/<partition>/<32 hex>/meta[/chunk/<i>]         the metadata
    P/<partition>/<32 hex>/buffer/<name>[/chunk/<i>] a buffer (or a tensor: one object)

The manifest: {"version": 1, "layout": "bundle", "object_id": "<partition>/<hex>", "meta":
spec, "buffers": {name: spec}} with spec {"key", "bytes", "chunks": [{"key", "bytes"}]}
(a tensor's also "kind", "format", "metadata_bytes"). A manifest merging stages (DataProto
appends) also lists "buffer_object_ids" (the objects whose buffers it reuses) and
"cleanup_keys" (superseded manifests and metadata, removed with it).

Every manifest read is validated before a key of it is used: keys must lie in the bundle's
own namespace (its object and, for a merge, the objects it lists), chunk sizes must add up,
so that a tampered manifest can neither read nor remove foreign objects. A put that fails
removes what it wrote; removing a bundle removes every key it names, with force.
"""
from __future__ import annotations

import ctypes
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from mooncake._structured import hooks
from mooncake._structured.buffers import (
    _bytes_view, _decode_manifest, _encode_manifest, _split_multi_buffer_payload, _split_view,
    _validate_chunk_bytes, _validate_key_segment)
from mooncake._structured.model import (
    AUTO_PARALLEL_MIN_BYTES, AUTO_PARALLEL_MIN_CHUNKS, BundleStore, BundleTransferPolicy,
    RemoteBundleRef, _DirectCopyPayload, _MultiBufferPayload, _TensorObjectBufferPayload,
    _TensorPayload)
from mooncake._structured.tensors import (
    _tensor_payload_bytes, _torch_save_payload_bytes)
from mooncake._structured.transport import Ranges, _MooncakePayloadTransport
from mooncake._structured.writes import (
    _batch_put_from_with_optional_config, _check_batch_results, _check_status,
    _cleanup_keys, _put_with_optional_config)

Spec = dict[str, Any]


def _empty_spec(key: str) -> tuple[Spec, list[str]]:
    return {"key": key, "bytes": 0, "chunks": []}, []


def _chunk_keys(key: str, count: int) -> list[str]:
    return [key] if count == 1 else [f"{key}/chunk/{i}" for i in range(count)]


def _copy_policy(policy: BundleTransferPolicy) -> BundleTransferPolicy:
    """policy with plain puts (for metadata: small, and read back at once)."""
    if policy.copy_mode == "copy":
        return policy
    return BundleTransferPolicy(max_inflight_put=policy.max_inflight_put,
                                put_mode=policy.put_mode, copy_mode="copy")


class _BundleManifestStore:
    def __init__(self, store: BundleStore, transport: _MooncakePayloadTransport,
                 key_prefix: str, default_chunk_bytes: int) -> None:
        self._store = store
        self._transport = transport
        self._key_prefix = key_prefix
        self._default_chunk_bytes = default_chunk_bytes

    # ---- writing ---------------------------------------------------------------------

    def _new_object(self, partition: str) -> tuple[str, str]:
        object_id = f"{partition}/{uuid.uuid4().hex}"
        return object_id, f"{self._key_prefix}/{object_id}"

    def put_bundle(self, meta: bytes | bytearray | memoryview, buffers: Mapping[str, Any],
                   partition: str, chunk_bytes: Optional[int],
                   policy: Optional[BundleTransferPolicy], max_inflight_put: Optional[int],
                   config: Any = None) -> RemoteBundleRef:
        _validate_key_segment(partition, "partition")
        meta_view = _bytes_view(meta, "meta")
        chunk = _validate_chunk_bytes(self._default_chunk_bytes if chunk_bytes is None
                                      else chunk_bytes)
        policy = self._policy(policy, max_inflight_put=max_inflight_put)
        object_id, base = self._new_object(partition)
        manifest_key = f"{base}/manifest"
        written: list[str] = []
        try:
            meta_spec, keys = self._put_payload(f"{base}/meta", meta_view, chunk,
                                                _copy_policy(policy), config=config)
            written += keys
            specs = {}
            for name, value in buffers.items():
                _validate_key_segment(name, "buffer name")
                specs[name], keys = self._put_member(f"{base}/buffer/{name}", name, value,
                                                     chunk, policy, config)
                written += keys
            manifest = {"version": 1, "layout": "bundle", "object_id": object_id,
                        "meta": meta_spec, "buffers": specs}
            self._put_manifest(manifest_key, manifest, config)
            written.append(manifest_key)
        except Exception:
            _cleanup_keys(self._store, written, strict=False)
            raise
        return RemoteBundleRef(manifest_key=manifest_key, manifest=manifest)

    def _put_member(self, key: str, name: str, value: Any, chunk: int,
                    policy: BundleTransferPolicy, config: Any) -> tuple[Spec, list[str]]:
        if isinstance(value, (_TensorPayload, _TensorObjectBufferPayload)):
            return self._put_tensor_payload(key, value, policy, config=config)
        if isinstance(value, _MultiBufferPayload):
            return self._put_multi_buffer_payload(key, value, chunk, policy, config=config)
        if isinstance(value, _DirectCopyPayload):
            return self._put_direct_copy_payload(key, value, chunk, policy, config=config)
        return self._put_payload(key, _bytes_view(value, name), chunk, policy, config=config)

    def _put_manifest(self, key: str, manifest: Mapping[str, Any], config: Any) -> None:
        _check_status(_put_with_optional_config(self._store, key, _encode_manifest(manifest),
                                                config), "put", key)

    def put_bundle_manifest(self, meta: bytes | bytearray | memoryview,
                            buffers: Mapping[str, Any], *, partition: str,
                            chunk_bytes: Optional[int], policy: Optional[BundleTransferPolicy],
                            cleanup_keys: Optional[Sequence[str]] = None,
                            config: Any = None) -> RemoteBundleRef:
        """A new bundle of new metadata and buffers already stored (their specs, from other
        bundles): the merge of a DataProto append. cleanup_keys go with it at removal."""
        _validate_key_segment(partition, "partition")
        meta_view = _bytes_view(meta, "meta")
        chunk = _validate_chunk_bytes(self._default_chunk_bytes if chunk_bytes is None
                                      else chunk_bytes)
        policy = self._policy(policy)
        object_id, base = self._new_object(partition)
        manifest_key = f"{base}/manifest"
        written: list[str] = []
        try:
            meta_spec, keys = self._put_payload(f"{base}/meta", meta_view, chunk,
                                                _copy_policy(policy), config=config)
            written += keys
            cleanup = list(dict.fromkeys(cleanup_keys or []))
            owners = {self._object_id_from_bundle_key(str(spec["key"]))
                      for spec in buffers.values()}
            owners.update(self._object_id_from_bundle_key(key) for key in cleanup)
            manifest = {"version": 1, "layout": "bundle", "object_id": object_id,
                        "meta": meta_spec, "buffers": dict(buffers),
                        "buffer_object_ids": sorted(o for o in owners if o)}
            if cleanup:
                manifest["cleanup_keys"] = cleanup
            self._validate_manifest(manifest)
            self._put_manifest(manifest_key, manifest, config)
            written.append(manifest_key)
        except Exception:
            _cleanup_keys(self._store, written, strict=False)
            raise
        return RemoteBundleRef(manifest_key=manifest_key, manifest=manifest)

    def _put_payload(self, key: str, value: memoryview, chunk_bytes: int,
                     transfer_policy: BundleTransferPolicy,
                     config: Any = None) -> tuple[Spec, list[str]]:
        """value in chunks of chunk_bytes."""
        if len(value) == 0:
            return _empty_spec(key)
        chunks = _split_view(value, chunk_bytes)
        keys = _chunk_keys(key, len(chunks))
        self._transport.put_multi_buffer_payload_chunks(keys, [[c] for c in chunks],
                                                        transfer_policy, config)
        return ({"key": key, "bytes": len(value),
                 "chunks": [{"key": k, "bytes": len(c)} for k, c in zip(keys, chunks)]}, keys)

    def _put_multi_buffer_payload(self, key: str, value: _MultiBufferPayload, chunk_bytes: int,
                                  transfer_policy: BundleTransferPolicy,
                                  config: Any = None) -> tuple[Spec, list[str]]:
        """The buffers back to back, in chunks of chunk_bytes, gathered chunk by chunk."""
        total = value.nbytes
        if total == 0:
            return _empty_spec(key)
        if len(value.buffers) == 1:
            return self._put_payload(key, value.buffers[0], chunk_bytes, transfer_policy,
                                     config=config)
        groups = _split_multi_buffer_payload(value.buffers, chunk_bytes)
        keys = _chunk_keys(key, len(groups))
        self._transport.put_multi_buffer_payload_chunks(keys, groups, transfer_policy, config)
        return ({"key": key, "bytes": total,
                 "chunks": [{"key": k, "bytes": sum(len(p) for p in g)}
                            for k, g in zip(keys, groups)]}, keys)

    def _put_direct_copy_payload(self, key: str, value: _DirectCopyPayload, chunk_bytes: int,
                                 transfer_policy: BundleTransferPolicy,
                                 config: Any = None) -> tuple[Spec, list[str]]:
        """Whole arrays per chunk (at most chunk_bytes), gathered by the native copy straight
        into a pool lease and put from there; joined first when there is no pool, no
        batch_put_from or no native copy, or an array is larger than a chunk."""
        if transfer_policy.copy_mode == "zero_copy":
            raise RuntimeError("zero-copy put requires tensor-object buffers")
        total = value.total_bytes
        if total == 0:
            return _empty_spec(key)
        arrays = value.arrays
        if len(arrays) == 1:
            return self._put_payload(key, memoryview(arrays[0].data).cast("B"), chunk_bytes,
                                     transfer_policy, config=config)
        pool = self._transport._ensure_buffer_pool()
        batch_put_from = self._transport._batch_put_from
        concat = hooks.concat_arrays_into()
        batches = _array_batches(arrays, chunk_bytes)
        if pool is None or not callable(batch_put_from) or concat is None or batches is None:
            joined = np.concatenate([a.ravel().view(np.uint8) for a in arrays])
            return self._put_payload(key, memoryview(joined.data).cast("B"), chunk_bytes,
                                     transfer_policy, config=config)
        keys = _chunk_keys(key, len(batches))

        def put_batches(run_keys: list[str], run: list[tuple[int, int, int]]) -> None:
            for chunk_key, (start, count, size) in zip(run_keys, run):
                lease = pool.acquire(size)
                try:
                    copied = concat(arrays, lease.ptr, size, start, count)
                    if copied != size:
                        raise RuntimeError(f"native fast-copy wrote {copied} bytes, expected "
                                           f"{size}")
                    _check_batch_results(_batch_put_from_with_optional_config(
                        batch_put_from, [chunk_key], [lease.ptr], [size], config),
                        [chunk_key], "batch_put_from")
                finally:
                    lease.release()

        threads = transfer_policy.max_inflight_put
        parallel = (transfer_policy.put_mode != "batch" and threads > 1
                    and len(batches) >= AUTO_PARALLEL_MIN_CHUNKS
                    and total >= AUTO_PARALLEL_MIN_BYTES)
        futures = []
        try:
            if not parallel:
                put_batches(keys, batches)
            else:
                per_run = -(-len(batches) // min(threads, len(batches)))
                runs = [(keys[i:i + per_run], batches[i:i + per_run])
                        for i in range(0, len(batches), per_run)]
                with ThreadPoolExecutor(max_workers=len(runs)) as executor:
                    futures = [executor.submit(put_batches, k, b) for k, b in runs]
                    for future in as_completed(futures):
                        future.result()
        except Exception:
            for future in futures:
                future.cancel()
            _cleanup_keys(self._store, keys, strict=False)
            raise
        return ({"key": key, "bytes": total,
                 "chunks": [{"key": k, "bytes": b[2]} for k, b in zip(keys, batches)]}, keys)

    def _put_tensor_payload(self, key: str, value: _TensorPayload | _TensorObjectBufferPayload,
                            transfer_policy: BundleTransferPolicy,
                            config: Any = None) -> tuple[Spec, list[str]]:
        """A tensor member, by the first way available: from a tensor-object buffer; the
        store's put_tensor; serialized into a pool lease; serialized in Python (the tensor
        format, or torch.save without the codec and for 0-d tensors)."""
        if isinstance(value, _TensorObjectBufferPayload):
            size = self._transport.put_tensor_object_buffer(key, value, config)
            return {"key": key, "bytes": size, "chunks": [{"key": key, "bytes": size}]}, [key]
        if transfer_policy.copy_mode != "copy":
            if transfer_policy.copy_mode == "zero_copy":
                raise ValueError("zero-copy structured tensor fields require a BufferPool "
                                 "tensor-object buffer")
            spec = self._transport.put_tensor_payload_direct(key, value, config)
            if spec is not None:
                return spec, [key]
            try:
                size = self._transport.put_tensor_payload_from_pool(key, value, config)
                return {"key": key, "bytes": size,
                        "chunks": [{"key": key, "bytes": size}]}, [key]
            except RuntimeError:  # no pool, or no put_from: serialize here
                pass
        if not hooks.has_tensor_codec_helpers() or value.tensor.dim() == 0:
            payload = _torch_save_payload_bytes(value.tensor)
            spec, keys = self._put_payload(key, memoryview(payload), len(payload) or 1,
                                           transfer_policy, config=config)
            spec["format"] = "torch_save"
            return spec, keys
        payload, metadata_bytes = _tensor_payload_bytes(value)
        spec, keys = self._put_payload(key, memoryview(payload), len(payload) or 1,
                                       transfer_policy, config=config)
        spec["metadata_bytes"] = metadata_bytes
        return spec, keys

    def _policy(self, policy: Optional[BundleTransferPolicy],
                max_inflight_put: Optional[int] = None) -> BundleTransferPolicy:
        result = policy or BundleTransferPolicy()
        if max_inflight_put is not None:
            result = BundleTransferPolicy(max_inflight_put=max_inflight_put,
                                          put_mode=result.put_mode, copy_mode=result.copy_mode)
        if result.max_inflight_put < 1:
            raise ValueError("max_inflight_put must be positive")
        if result.put_mode not in ("auto", "batch", "parallel"):
            raise ValueError(f"unsupported put_mode: {result.put_mode}")
        if result.copy_mode not in ("auto", "zero_copy", "copy"):
            raise ValueError(f"unsupported copy_mode: {result.copy_mode}")
        return result

    # ---- manifests -------------------------------------------------------------------

    def resolve_manifest(self, ref: RemoteBundleRef | Mapping[str, Any]) -> dict[str, Any]:
        """ref's manifest (read from the store when ref carries none), validated."""
        if isinstance(ref, RemoteBundleRef):
            manifest = ref.manifest or _decode_manifest(self._store.get(ref.manifest_key))
        else:
            manifest = ref.get("manifest")
            if manifest is None:
                key = ref.get("manifest_key")
                if not isinstance(key, str):
                    raise ValueError("bundle ref must include manifest_key")
                manifest = _decode_manifest(self._store.get(key))
        self._validate_manifest(manifest)
        return manifest

    def _manifest_key(self, ref: RemoteBundleRef | Mapping[str, Any],
                      manifest: Mapping[str, Any]) -> str:
        expected = f"{self._key_prefix}/{manifest['object_id']}/manifest"
        key = ref.manifest_key if isinstance(ref, RemoteBundleRef) else ref.get("manifest_key")
        if key is not None and key != expected:
            raise ValueError("bundle manifest_key does not match manifest object_id")
        return expected

    def manifest_key(self, ref: RemoteBundleRef | Mapping[str, Any]) -> str:
        return self._manifest_key(ref, self.resolve_manifest(ref))

    def payload_keys(self, payload_spec: Mapping[str, Any]) -> list[str]:
        return [chunk["key"] for chunk in payload_spec["chunks"]]

    def _payload_keys(self, manifest: Mapping[str, Any]) -> list[str]:
        return [key for spec in [manifest["meta"], *manifest["buffers"].values()]
                for key in self.payload_keys(spec)]

    def remove_bundle(self, ref: RemoteBundleRef | Mapping[str, Any]) -> None:
        manifest = self.resolve_manifest(ref)
        keys = self._payload_keys(manifest) + list(manifest.get("cleanup_keys", []))
        keys.append(self._manifest_key(ref, manifest))
        _cleanup_keys(self._store, keys, strict=True)

    def remove_keys(self, keys: Sequence[str], *, strict: bool) -> None:
        _cleanup_keys(self._store, keys, strict=strict)

    def _object_id_from_bundle_key(self, key: str) -> str | None:
        """The object a key of this prefix belongs to (None for another key)."""
        prefix = f"{self._key_prefix}/"
        if not key.startswith(prefix):
            return None
        rest = key[len(prefix):]
        for end in ("/manifest", "/meta"):
            if rest.endswith(end):
                return rest[:-len(end)]
        for marker in ("/meta/", "/buffer/"):
            at = rest.find(marker)
            if at > 0:
                return rest[:at]
        return None

    def _validate_manifest(self, manifest: Mapping[str, Any]) -> None:
        if manifest.get("version") != 1 or manifest.get("layout") != "bundle":
            raise ValueError("invalid bundle manifest")
        object_id = manifest.get("object_id")
        if not isinstance(object_id, str):
            raise ValueError("bundle manifest object_id must be a string")
        owners = manifest.get("buffer_object_ids", [object_id])
        if not isinstance(owners, list) or not all(isinstance(o, str) for o in owners):
            raise ValueError("bundle manifest buffer_object_ids must be a list of strings")
        owner_bases = [f"{self._key_prefix}/{owner}" for owner in owners]
        self._validate_payload_spec(manifest.get("meta"),
                                    base_keys=[f"{self._key_prefix}/{object_id}"])
        cleanup = manifest.get("cleanup_keys", [])
        if not isinstance(cleanup, list) or not all(
                isinstance(key, str) and any(key == f"{base}/manifest"
                                             or key.startswith(f"{base}/")
                                             for base in owner_bases) for key in cleanup):
            raise ValueError("bundle manifest cleanup_keys are outside the bundle namespace")
        buffers = manifest.get("buffers")
        if not isinstance(buffers, dict):
            raise ValueError("bundle manifest buffers must be a dict")
        for name, spec in buffers.items():
            _validate_key_segment(name, "buffer name")
            self._validate_payload_spec(spec, base_keys=owner_bases)

    def _validate_payload_spec(self, payload_spec: Any,
                               base_keys: Sequence[str] | None = None) -> None:
        if not isinstance(payload_spec, dict):
            raise ValueError("bundle payload spec must be a dict")
        key = payload_spec.get("key")
        if not isinstance(key, str) or (base_keys is not None and not any(
                key.startswith(f"{base}/") for base in base_keys)):
            raise ValueError("bundle payload key is outside the bundle namespace")
        size = int(payload_spec.get("bytes", -1))
        if size < 0:
            raise ValueError("bundle payload bytes must be non-negative")
        chunks = payload_spec.get("chunks")
        if not isinstance(chunks, list) or (size and not chunks):
            raise ValueError("bundle payload chunks are invalid")
        seen, total = set(), 0
        for chunk in chunks:
            if not isinstance(chunk, dict):
                raise ValueError("bundle chunk must be a dict")
            chunk_key, chunk_size = chunk.get("key"), int(chunk.get("bytes", -1))
            if not isinstance(chunk_key, str) or (chunk_key != key
                                                  and not chunk_key.startswith(f"{key}/")):
                raise ValueError("bundle chunk key is outside the payload namespace")
            if chunk_key in seen:
                raise ValueError("bundle chunk keys must be unique")
            if chunk_size < 0:
                raise ValueError("bundle chunk bytes must be non-negative")
            seen.add(chunk_key)
            total += chunk_size
        if total != size:
            raise ValueError(f"bundle payload chunks total {total} bytes, expected {size}")

    # ---- reading (the transport's, with fallbacks for what it could not do) -------------

    def read_payload(self, payload_spec: Mapping[str, Any]) -> bytes:
        return self._transport.read_payload(payload_spec)

    def read_payload_range(self, payload_spec: Mapping[str, Any], byte_offset: int,
                           byte_length: int) -> bytes:
        return self._transport.read_payload_range(payload_spec, byte_offset, byte_length)

    def read_payload_range_into_pool_array(self, payload_spec: Mapping[str, Any],
                                           dtype: np.dtype, shape: tuple[int, ...],
                                           byte_offset: int) -> np.ndarray | None:
        return self._transport.read_payload_range_into_pool_array(payload_spec, dtype, shape,
                                                                  byte_offset)

    def read_tensor_payload(self, payload_spec: Mapping[str, Any]) -> Any:
        return self._transport.read_tensor_payload(payload_spec)

    def read_tensor_payload_into(self, payload_spec: Mapping[str, Any], destination: Any) -> Any:
        return self._transport.read_tensor_payload_into(payload_spec, destination)

    def read_payload_range_into_destination(self, payload_spec: Mapping[str, Any],
                                            destination: np.ndarray, byte_offset: int,
                                            destination_pre_registered: bool = False) -> None:
        self._transport.read_payload_range_into_destination(
            payload_spec, destination, byte_offset,
            destination_pre_registered=destination_pre_registered)

    def read_payload_range_into_raw_destination(self, payload_spec: Mapping[str, Any],
                                                destination_ptr: int, destination_offset: int,
                                                byte_offset: int, byte_length: int) -> None:
        if not self._transport.read_payload_range_into_raw_destination(
                payload_spec, destination_ptr, destination_offset, byte_offset, byte_length):
            data = self.read_payload_range(payload_spec, byte_offset, byte_length)
            ctypes.memmove(destination_ptr + destination_offset, data, byte_length)

    def read_payload_ranges_into_array(self, payload_spec: Mapping[str, Any],
                                       destination: np.ndarray, ranges: Ranges) -> None:
        if ranges:
            self._transport.read_payload_ranges_into_array(payload_spec, destination, ranges)

    def read_payload_ranges_into_bytearray(self, payload_spec: Mapping[str, Any],
                                           destination: bytearray, ranges: Ranges) -> None:
        if ranges:
            self._transport.read_payload_ranges_into_bytearray(payload_spec, destination,
                                                               ranges)

    def read_payload_ranges_into_raw_destination(self, payload_spec: Mapping[str, Any],
                                                 destination_ptr: int, ranges: Ranges) -> None:
        if not ranges or self._transport.read_payload_ranges_into_raw_destination(
                payload_spec, destination_ptr, ranges):
            return
        for byte_offset, destination_offset, byte_length in ranges:
            data = self.read_payload_range(payload_spec, byte_offset, byte_length)
            ctypes.memmove(destination_ptr + destination_offset, data, byte_length)


def _array_batches(arrays: Sequence[np.ndarray],
                   chunk_bytes: int) -> list[tuple[int, int, int]] | None:
    """Runs of whole arrays of at most chunk_bytes each: (first, count, bytes); None when an
    array alone is larger than a chunk."""
    batches: list[tuple[int, int, int]] = []
    start, size = 0, 0
    for index, array in enumerate(arrays):
        if array.nbytes > chunk_bytes:
            return None
        if size and size + array.nbytes > chunk_bytes:
            batches.append((start, index - start, size))
            start, size = index, 0
        size += array.nbytes
    if size:
        batches.append((start, len(arrays) - start, size))
    return batches
