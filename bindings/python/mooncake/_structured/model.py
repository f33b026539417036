"""The data model of the structured object store: limits, the public dataclasses (policies,
schemas, references, read specs), the wrappers naming how a member's bytes are to be stored,
and the lease owners of arrays backed by a BufferPool.

The names and field layouts are Mooncake's (mooncake-wheel/mooncake/structured_object_store.py):
handles, manifests and metadata written by one are read by the other.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Optional, Protocol, Sequence

import numpy as np

# A payload is cut into store objects of at most this many bytes.
DEFAULT_BUNDLE_CHUNK_BYTES = 64 * 1024**2
# Chunk puts go to several threads (put_mode "auto") only for payloads of at least this
# many bytes and chunks: below, one thread keeps the store busy.
AUTO_PARALLEL_MIN_BYTES = DEFAULT_BUNDLE_CHUNK_BYTES
AUTO_PARALLEL_MIN_CHUNKS = 8
MISSING_OBJECT_ERROR = -704  # what remove answers for a key already gone
STRUCTURED_FIELD_SPECS_KEY = "__mooncake_structured_fields__"
DATAPROTO_REF_HANDLE_TYPE = "mooncake_dataproto_ref"
DATAPROTO_REF_HANDLE_VERSION = 1
STORAGE_GROUP_ID = "storage_group_id"  # an optional field of version-1 handles


class BundleStore(Protocol):
    """What a store must offer at least (MooncakeDistributedStore does, and more: batch and
    zero-copy calls are used when present)."""

    def put(self, key: str, value: Any, config: Any = None) -> int: ...

    def get(self, key: str) -> bytes: ...

    def remove(self, key: str, force: bool = False) -> int: ...


@dataclass(frozen=True)
class BundleTransferPolicy:
    """How payload chunks are put: up to max_inflight_put at once; put_mode "batch" (one
    thread), "parallel" (threads) or "auto" (threads for large payloads); copy_mode "copy"
    (plain puts), "zero_copy" (only from registered tensor-object buffers) or "auto"."""

    max_inflight_put: int = 1
    put_mode: Literal["auto", "batch", "parallel"] = "auto"
    copy_mode: Literal["auto", "zero_copy", "copy"] = "auto"


@dataclass(frozen=True)
class FieldSchema:
    """How to encode a DataProto field: a codec name (or "auto"), whether rows may be None,
    and metadata (``section``: batch, non_tensor_batch or meta_info; ``dtype``; ``keys``)."""

    codec: str
    nullable: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class RemoteBundleRef:
    """A bundle in the store: its manifest's key, and the manifest when known ({} when
    only the key is: it is then read from the store)."""

    manifest_key: str
    manifest: dict[str, Any]


@dataclass(frozen=True, init=False)
class StructuredObjectPayload:
    """An object to store: JSON metadata and named members (arrays, tensors, bytes)."""

    metadata: Mapping[str, Any]
    buffers: Mapping[str, Any]

    def __init__(self, metadata: Optional[Mapping[str, Any]] = None,
                 buffers: Optional[Mapping[str, Any]] = None) -> None:
        if buffers is None:
            raise TypeError("StructuredObjectPayload requires buffers")
        object.__setattr__(self, "metadata", {} if metadata is None else metadata)
        object.__setattr__(self, "buffers", buffers)


@dataclass
class StructuredObjectResult:
    """A materialized object: its metadata and the members read."""

    metadata: dict[str, Any]
    objects: dict[str, Any]


@dataclass(frozen=True)
class StructuredFieldLocation:
    """Where a DataProto field lives: a stage's object, a member of it, and its section."""

    stage: str
    member: str
    section: Literal["batch", "non_tensor_batch"]


@dataclass
class MooncakeDataProtoRef:
    """A DataProto stored as one structured object per stage, read lazily."""

    batch_size: int
    stage_refs: dict[str, RemoteBundleRef]
    field_index: dict[str, StructuredFieldLocation]
    meta_info: dict[str, Any]
    namespace: str = "default"
    partition: str = "default"
    global_indexes: list[int] | None = None
    encoded_non_tensor: dict[str, Any] = field(default_factory=dict)
    _storage_group_id: str | None = field(default=None, repr=False)


# ---- how a member's bytes are stored ----------------------------------------------------


@dataclass(frozen=True)
class _TensorPayload:
    """A torch tensor member."""

    tensor: Any


@dataclass(frozen=True)
class _TensorObjectBufferPayload:
    """A serialized tensor already in registered memory (tensor_object_buffer): put from, or
    read into, [ptr, ptr + size); owner keeps that memory alive."""

    ptr: int
    size: int
    owner: Any
    batch_size: int | None = None

    def __len__(self) -> int:
        if self.batch_size is None:
            raise TypeError("tensor object buffer requires batch_size for DataProto use")
        return self.batch_size


@dataclass(frozen=True)
class _MultiBufferPayload:
    """One payload made of several buffers, stored back to back (dtype and shape, when set,
    say it is an ndarray's data); owners keep the buffers alive."""

    buffers: tuple[memoryview, ...]
    owners: tuple[Any, ...] = ()
    dtype: str | None = None
    shape: tuple[int, ...] | None = None

    @property
    def nbytes(self) -> int:
        return sum(len(buffer) for buffer in self.buffers)


@dataclass(frozen=True)
class _DirectCopyPayload:
    """Flat ndarrays stored back to back, gathered straight into pool leases at put time
    (mooncake._fast_copy) rather than joined first."""

    arrays: list[np.ndarray]
    total_bytes: int
    dtype: str | None = None
    shape: tuple[int, ...] | None = None

    @property
    def nbytes(self) -> int:
        return self.total_bytes

    @staticmethod
    def from_flat_arrays(flat_arrays: list[np.ndarray], dtype: np.dtype,
                         total_elems: int) -> "_DirectCopyPayload":
        return _DirectCopyPayload(arrays=flat_arrays,
                                  total_bytes=sum(a.nbytes for a in flat_arrays),
                                  dtype=np.dtype(dtype).str, shape=(total_elems,))


@dataclass(frozen=True)
class _RawDestinationBuffer:
    """Caller memory to read a member into (raw_destination): [ptr, ptr + size), kept alive
    by owner; pre_registered when the store already knows it (a BufferPool lease)."""

    ptr: int
    size: int
    owner: Any
    pre_registered: bool = False


def tensor_object_buffer(ptr: int, size: int, owner: Any = None,
                         batch_size: int | None = None) -> _TensorObjectBufferPayload:
    """A serialized tensor in registered memory, as a member to put or a destination."""
    return _TensorObjectBufferPayload(ptr=int(ptr), size=int(size), owner=owner,
                                      batch_size=batch_size)


def raw_destination(ptr: int, size: int, owner: Any = None, *,
                    pre_registered: bool = False) -> _RawDestinationBuffer:
    """Caller memory a member is read into."""
    return _RawDestinationBuffer(ptr=int(ptr), size=int(size), owner=owner,
                                 pre_registered=pre_registered)


# ---- results backed by BufferPool leases --------------------------------------------------


class _PoolLeaseOwner:
    """Gives a lease back once: at release(), or when collected."""

    def __init__(self, lease: Any) -> None:
        self.lease = lease
        self.released = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.lease.release()

    def __del__(self) -> None:
        self.release()


class _PoolBackedNdarray(np.ndarray):
    """An ndarray over a lease's memory, holding the lease's owner. Views and slices hold the
    same owner (__array_finalize__): the lease is given back when the last of them goes, or
    at MooncakeBundleTransfer.release_result, after which none may be used."""

    def __new__(cls, owner: _PoolLeaseOwner, dtype: np.dtype, shape: tuple[int, ...]):
        nbytes = (int(np.prod(shape, dtype=np.int64)) if shape else 1) * dtype.itemsize
        raw = np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(owner.lease.ptr))
        array = raw.view(dtype).reshape(shape).view(cls)
        array._mooncake_pool_owner = owner
        return array

    def __array_finalize__(self, obj: Any) -> None:
        if obj is not None:
            self._mooncake_pool_owner = getattr(obj, "_mooncake_pool_owner", None)


class _OwnerBackedList(list):
    """Rows that are views of pool memory, holding its owner."""

    def __init__(self, values: Sequence[Any], owner: Any) -> None:
        super().__init__(values)
        self._mooncake_pool_owner = owner


class _OwnerBackedObjectArray(np.ndarray):
    """An object array of rows viewing pool memory, holding its owner (also through
    tolist())."""

    def __array_finalize__(self, obj: Any) -> None:
        if obj is not None:
            self._mooncake_pool_owner = getattr(obj, "_mooncake_pool_owner", None)

    def tolist(self) -> list[Any]:
        values = super().tolist()
        owner = getattr(self, "_mooncake_pool_owner", None)
        return values if owner is None else _OwnerBackedList(values, owner)


def _object_array_from_decoded_values(values: list[Any]) -> np.ndarray:
    """Decoded rows as a DataProto's object array, keeping a pool owner of theirs."""
    array = np.empty(len(values), dtype=object)
    array[:] = values
    owner = getattr(values, "_mooncake_pool_owner", None) or next(
        (getattr(v, "_mooncake_pool_owner", None) for v in values if v is not None), None)
    if owner is None:
        return array
    result = array.view(_OwnerBackedObjectArray)
    result._mooncake_pool_owner = owner
    return result


# ---- reads ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StructuredMemberSlice:
    """Rows [start, end) by step of one member, along axis (only 0 is supported)."""

    axis: int
    start: int
    end: int
    step: int = 1


@dataclass(frozen=True)
class StructuredObjectReadSpec:
    """A lazy read: which members of an object, and which rows of each."""

    ref: RemoteBundleRef | Mapping[str, Any]
    member_names: tuple[str, ...] | None = None
    member_slices: tuple[tuple[str, StructuredMemberSlice], ...] = ()

    def select_members(self, names: Optional[Sequence[str]]) -> "StructuredObjectReadSpec":
        """This spec reading only names (None: every member)."""
        return StructuredObjectReadSpec(ref=self.ref,
                                        member_names=None if names is None else tuple(names),
                                        member_slices=self.member_slices)

    def slice_member(self, name: str, axis: int, start: int, end: int,
                     step: int = 1) -> "StructuredObjectReadSpec":
        """This spec reading only rows [start:end:step] of member name."""
        slices = dict(self.member_slices)
        slices[name] = StructuredMemberSlice(axis=axis, start=start, end=end, step=step)
        return StructuredObjectReadSpec(ref=self.ref, member_names=self.member_names,
                                        member_slices=tuple(slices.items()))

    def member_slice(self, name: str) -> StructuredMemberSlice | None:
        return dict(self.member_slices).get(name)


@dataclass(frozen=True)
class _NdarrayReadPlan:
    """The bytes a (sliced) ndarray read covers: byte_length bytes at byte_offset, holding
    cover_row_count rows of which every step-th is kept."""

    dtype: np.dtype
    full_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    byte_offset: int
    byte_length: int
    step: int
    cover_row_count: int


@dataclass(frozen=True)
class _DataProtoRowSelection:
    """The rows of a DataProto read: a slice, or indices (repeats allowed)."""

    count: int
    member_slice: StructuredMemberSlice | None = None
    indices: tuple[int, ...] | None = None
