"""``mooncake.structured_object_store``: Mooncake's structured object store, over this store:
objects made of JSON metadata and named members (numpy arrays, torch tensors, bytes), and
DataProto batches (batch, non_tensor_batch, meta_info; verl's and ROLL's), stored as
chunked store objects behind a manifest, read back whole or by member, row slice or row
index, with only the bytes asked for moved.

Entry point: ``MooncakeBundleTransfer(store)``; see its module (mooncake/_structured/
transfer.py) for an example and docs/mooncake-api.md, "The package", for what differs from
Mooncake. Manifests, metadata, codecs and DataProto handles are Mooncake's formats: objects
and handles written by one are read by the other.

Where the implementation is (mooncake/_structured/):

=================  ===========================================================================
model.py           policies, schemas, references, read specs, payload wrappers
transfer.py        MooncakeBundleTransfer
structured.py      structured objects: member encodings, reads into arrays and destinations
bundle.py          bundles: key layout, manifests and their validation, chunked puts
transport.py       moving chunks: pool leases, batch puts, ranged reads, fallbacks
writes.py          write configs (storage groups), puts, cleanup
tensors.py         tensor members (mooncake.store's tensor format, or torch.save)
codecs.py          non-tensor field codecs (typed_ragged, msgpack_ragged, ...)
decisions.py       which codec rows take
inference.py       structured_recursive, FieldSchema codecs, the "auto" fallback
handles.py         DataProto handles (export/import)
shapes.py          DataProto inputs, flat dicts, row and field selections
dataproto_write.py DataProto puts and appends
dataproto_read.py  DataProto reads
=================  ===========================================================================

``_concat_arrays_into`` (the native gather copy, mooncake._fast_copy) and
``_has_tensor_codec_helpers`` are the versions the implementation uses, looked up here at
each use: replacing them here (as Mooncake's tests do) replaces them everywhere.
"""
# The private names imported here are Mooncake's module's, which its tests and tools use.
# ruff: noqa: F401
from mooncake._structured import hooks as _hooks
from mooncake._structured.buffers import _decode_manifest, _encode_manifest
from mooncake._structured.codecs import (
    _decode_msgpack_ragged_values, _decode_typed_ragged_values, _encode_msgpack_ragged_values,
    _encode_typed_ragged_regular_ndarray_rows, _encode_typed_ragged_values)
from mooncake._structured.decisions import MISSING, _choose_leaf_codec
from mooncake._structured.handles import (
    DataProtoRefLike, export_dataproto_ref, export_ref, import_dataproto_ref, import_ref,
    is_dataproto_ref_handle)
from mooncake._structured.inference import _encode_with_schema, _escape_key, infer_structure
from mooncake._structured.model import (
    AUTO_PARALLEL_MIN_BYTES, AUTO_PARALLEL_MIN_CHUNKS, DATAPROTO_REF_HANDLE_TYPE,
    DATAPROTO_REF_HANDLE_VERSION, DEFAULT_BUNDLE_CHUNK_BYTES, MISSING_OBJECT_ERROR,
    STORAGE_GROUP_ID, STRUCTURED_FIELD_SPECS_KEY, BundleStore, BundleTransferPolicy,
    FieldSchema, MooncakeDataProtoRef, RemoteBundleRef, StructuredFieldLocation,
    StructuredMemberSlice, StructuredObjectPayload, StructuredObjectReadSpec,
    StructuredObjectResult, _DirectCopyPayload, _MultiBufferPayload, raw_destination,
    tensor_object_buffer)
from mooncake._structured.transfer import MooncakeBundleTransfer
from mooncake._structured.writes import _config_for_grouped_keys

_concat_arrays_into = _hooks.native_concat_arrays_into
_has_tensor_codec_helpers = _hooks.tensor_codec_available

__all__ = [
    "AUTO_PARALLEL_MIN_BYTES", "AUTO_PARALLEL_MIN_CHUNKS", "DATAPROTO_REF_HANDLE_TYPE",
    "DATAPROTO_REF_HANDLE_VERSION", "DEFAULT_BUNDLE_CHUNK_BYTES", "MISSING",
    "MISSING_OBJECT_ERROR", "STORAGE_GROUP_ID", "STRUCTURED_FIELD_SPECS_KEY", "BundleStore",
    "BundleTransferPolicy", "DataProtoRefLike", "FieldSchema", "MooncakeBundleTransfer",
    "MooncakeDataProtoRef", "RemoteBundleRef", "StructuredFieldLocation",
    "StructuredMemberSlice", "StructuredObjectPayload", "StructuredObjectReadSpec",
    "StructuredObjectResult", "export_dataproto_ref", "export_ref", "import_dataproto_ref",
    "import_ref", "infer_structure", "is_dataproto_ref_handle", "raw_destination",
    "tensor_object_buffer",
]
