"""_MooncakePayloadTransport: moves payload chunks between memory and the store, through the
fastest calls the store has, falling back to plain put/get.

Puts: chunks are copied into BufferPool leases and put with batch_put_from (one lease at a
time, so the pool never holds more than the chunks in flight), on one thread or several
(put_mode), or put with put() when there is no pool or batch_put_from ("copy").
Reads: whole payloads with batch_get_into into registered memory; ranges with get_into
(one whole chunk) or get_into_ranges; into pool leases when there is a pool (zero-copy for
this store: the pool is memory the daemon shares); else get() and a copy.

The store's calls are looked up once, at construction; a store lacking one (or having it set
to None) takes the next path. A BufferPool is made for the store when none is given and the
store is this store's MooncakeDistributedStore (Mooncake makes one for its native client);
it does not block when full: a read then falls back, a put fails saying so.

Threads: a transport may be used by several threads at once; parallel puts run on a pool
of threads of their own, joined before the call returns.
"""
from __future__ import annotations

import ctypes
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any, Iterator, Literal, Mapping, Sequence

import numpy as np

from mooncake._structured import hooks
from mooncake._structured.buffers import (
    _buffer_group_nbytes, _buffer_nbytes, _buffer_ptr, _chunk_offsets,
    _copy_memoryviews_to_lease, _payload_range_fragments)
from mooncake._structured.model import (
    AUTO_PARALLEL_MIN_BYTES, AUTO_PARALLEL_MIN_CHUNKS, BundleStore, BundleTransferPolicy,
    _PoolBackedNdarray, _PoolLeaseOwner, _TensorObjectBufferPayload, _TensorPayload)
from mooncake._structured.tensors import (
    _tensor_metadata_size, _tensor_payload_parts)
from mooncake._structured.writes import (
    _batch_put_from_with_optional_config, _call_write_with_optional_config,
    _check_batch_results, _check_status, _cleanup_keys, _config_for_grouped_keys,
    _is_duplicate_buffer_registration, _put_from_with_optional_config,
    _put_with_optional_config)

Ranges = Sequence[tuple[int, int, int]]  # (source offset, destination offset, length)


class _MooncakePayloadTransport:
    def __init__(self, store: BundleStore, buffer_pool: Any = None) -> None:
        self._store = store
        self._buffer_pool = buffer_pool
        self._pool_lock = threading.Lock()  # one pool made, however many threads ask
        self._batch_put_from = getattr(store, "batch_put_from", None)
        self._put_tensor_from = getattr(store, "put_tensor_from", None)
        self._batch_get_into = getattr(store, "batch_get_into", None)
        self._get_into = getattr(store, "get_into", None)
        self._get_into_ranges = getattr(store, "get_into_ranges", None)
        self._register_buffer = getattr(store, "register_buffer", None)
        self._unregister_buffer = getattr(store, "unregister_buffer", None)

    # ---- the pool ---------------------------------------------------------------------

    def _store_can_auto_create_buffer_pool(self) -> bool:
        """Whether BufferPool can wrap the store: this store's client, or Mooncake's
        (which hands out its native client as a capsule)."""
        store_module = hooks.store_module()
        native = getattr(store_module, "MooncakeDistributedStore", None)
        if isinstance(native, type) and isinstance(self._store, native):
            return True
        get_capsule = getattr(self._store, "_get_pyclient_capsule", None)
        try:
            return callable(get_capsule) and get_capsule() is not None
        except Exception:
            return False

    def _ensure_buffer_pool(self) -> Any:
        """The pool given, or one made for the store (None when it cannot have one)."""
        if self._buffer_pool is not None or not self._store_can_auto_create_buffer_pool():
            return self._buffer_pool
        with self._pool_lock:
            if self._buffer_pool is None:
                try:
                    from mooncake.buffer_pool import BufferPool

                    self._buffer_pool = BufferPool(self._store, block_on_exhaustion=False)
                except (ImportError, AttributeError, RuntimeError, TypeError):
                    return None  # not connected (no pool yet): asked again next time
        return self._buffer_pool

    # ---- puts -------------------------------------------------------------------------

    def put_multi_buffer_payload_chunks(self, chunk_keys: Sequence[str],
                                        chunk_groups: Sequence[Sequence[memoryview]],
                                        transfer_policy: BundleTransferPolicy,
                                        config: Any = None) -> list[str]:
        """Puts chunk i, the buffers of chunk_groups[i] back to back, under chunk_keys[i]."""
        if transfer_policy.copy_mode == "zero_copy":
            raise RuntimeError("zero-copy put requires tensor-object buffers")
        if (transfer_policy.copy_mode == "copy" or self._ensure_buffer_pool() is None
                or not callable(self._batch_put_from)):
            chunks = [memoryview(b"".join(group)) for group in chunk_groups]
            return self._put_chunks_direct(chunk_keys, chunks, config)
        if (all(len(group) == 1 for group in chunk_groups)
                or self._resolve_buffer_group_put_mode(chunk_groups, transfer_policy)
                == "batch"):
            self.batch_put_buffer_groups_from(chunk_keys, chunk_groups, config)
            return list(chunk_keys)
        return self._put_buffer_groups_parallel(list(chunk_keys), list(chunk_groups),
                                                transfer_policy.max_inflight_put, config)

    def _resolve_buffer_group_put_mode(self, chunk_groups: Sequence[Sequence[Any]],
                                       transfer_policy: BundleTransferPolicy
                                       ) -> Literal["batch", "parallel"]:
        if transfer_policy.put_mode in ("batch", "parallel"):
            return transfer_policy.put_mode
        threads = min(transfer_policy.max_inflight_put, len(chunk_groups))
        if (threads < 2 or len(chunk_groups) < AUTO_PARALLEL_MIN_CHUNKS
                or sum(_buffer_group_nbytes(g) for g in chunk_groups) < AUTO_PARALLEL_MIN_BYTES):
            return "batch"
        return "parallel"

    def batch_put_buffer_groups_from(self, chunk_keys: Sequence[str],
                                     chunk_groups: Sequence[Sequence[memoryview]],
                                     config: Any = None) -> None:
        """Each chunk in turn: a lease, the copy, batch_put_from, the lease back. On failure
        every chunk key of the call is removed."""
        batch_put_from = self._batch_put_from
        if not callable(batch_put_from):
            raise RuntimeError("batch_put_from is unavailable")
        pool = self._buffer_pool
        for key, group in zip(chunk_keys, chunk_groups):
            size = _buffer_group_nbytes(group)
            lease = pool.acquire(size)
            try:
                _copy_memoryviews_to_lease(group, lease)
                results = _batch_put_from_with_optional_config(batch_put_from, [key],
                                                               [lease.ptr], [size], config)
                _check_batch_results(results, [key], "batch_put_from")
            except Exception:
                _cleanup_keys(self._store, chunk_keys, strict=False)
                raise
            finally:
                lease.release()

    def _group_buffer_group_ranges(self, chunk_keys: Sequence[str],
                                   chunk_groups: Sequence[Sequence[memoryview]],
                                   max_inflight_put: int) -> list[tuple[list, list]]:
        """The chunks in max_inflight_put runs (at most), one per thread."""
        if not chunk_keys:
            return []
        runs = max(1, min(max_inflight_put, len(chunk_groups)))
        per_run = (len(chunk_groups) + runs - 1) // runs
        return [(list(chunk_keys[i:i + per_run]), list(chunk_groups[i:i + per_run]))
                for i in range(0, len(chunk_groups), per_run)]

    def _put_buffer_groups_parallel(self, chunk_keys: list[str],
                                    chunk_groups: list[Sequence[memoryview]],
                                    max_inflight_put: int, config: Any = None) -> list[str]:
        runs = self._group_buffer_group_ranges(chunk_keys, chunk_groups, max_inflight_put)
        futures = []
        try:
            with ThreadPoolExecutor(max_workers=min(max_inflight_put, len(runs))) as threads:
                futures = [threads.submit(self.batch_put_buffer_groups_from, keys, groups,
                                          config) for keys, groups in runs]
                for future in as_completed(futures):
                    future.result()
        except Exception:
            for future in futures:
                future.cancel()
            _cleanup_keys(self._store, chunk_keys, strict=False)
            raise
        return chunk_keys

    def _put_chunks_direct(self, chunk_keys: Sequence[str], chunks: Sequence[memoryview],
                           config: Any = None) -> list[str]:
        """put() per chunk; on failure the chunks written are removed."""
        written: list[str] = []
        try:
            for key, chunk in zip(chunk_keys, chunks):
                _check_status(_put_with_optional_config(self._store, key, chunk, config),
                              "put", key)
                written.append(key)
        except Exception:
            _cleanup_keys(self._store, written, strict=False)
            raise
        return list(chunk_keys)

    def put_tensor_object_buffer(self, key: str, value: _TensorObjectBufferPayload,
                                 config: Any = None) -> int:
        """A tensor already serialized in registered memory, put from there."""
        if not callable(self._put_tensor_from) and not callable(
                getattr(self._store, "put_from", None)):
            raise RuntimeError("put_from is unavailable")
        _check_status(_put_from_with_optional_config(self._store, key, value.ptr, value.size,
                                                     config), "put_from", key)
        return value.size

    def put_tensor_payload_direct(self, key: str, value: _TensorPayload,
                                  config: Any = None) -> dict[str, Any] | None:
        """The store's own tensor put (put_tensor, or pub_tensor with a config); None when
        it has none."""
        put_tensor = getattr(self._store, "put_tensor" if config is None else "pub_tensor",
                             None)
        if not callable(put_tensor):
            return None
        tensor = value.tensor
        metadata_bytes = _tensor_metadata_size()
        # Tensor.nbytes is newer than Debian's torch 1.13; numel() * element_size() is not.
        total_bytes = metadata_bytes + int(tensor.numel()) * int(tensor.element_size())
        _check_status(_call_write_with_optional_config(
            put_tensor, key, tensor, config=_config_for_grouped_keys(config, 1)),
            "put_tensor", key)
        return {"key": key, "kind": "tensor", "bytes": total_bytes,
                "dtype": str(getattr(tensor, "dtype", "")),
                "shape": list(getattr(tensor, "shape", ())),
                "chunks": [{"key": key, "bytes": total_bytes}],
                "metadata_bytes": metadata_bytes}

    def put_tensor_payload_from_pool(self, key: str, value: _TensorPayload,
                                     config: Any = None) -> int:
        """The tensor serialized into a lease of the pool given, and put from there.
        RuntimeError when there is no pool or no put_from."""
        if self._buffer_pool is None:
            raise RuntimeError("structured tensor zero-copy requires a BufferPool")
        if not callable(self._put_tensor_from) and not callable(
                getattr(self._store, "put_from", None)):
            raise RuntimeError("put_from is unavailable")
        # _owner keeps the tensor's memory alive until the copy is done (the function's end).
        metadata, data_ptr, data_bytes, _owner = _tensor_payload_parts(value)
        total = len(metadata) + data_bytes
        lease = self._buffer_pool.acquire(total)
        try:
            view = lease.buffer
            try:
                view[:len(metadata)] = metadata
            finally:
                view.release()
            if data_bytes:
                ctypes.memmove(lease.ptr + len(metadata), data_ptr, data_bytes)
            _check_status(_put_from_with_optional_config(self._store, key, lease.ptr, total,
                                                         config), "put_from", key)
            return total
        finally:
            lease.release()

    # ---- whole payloads -----------------------------------------------------------------

    def read_payload(self, payload_spec: Mapping[str, Any]) -> bytes:
        size = int(payload_spec["bytes"])
        if size == 0:
            return b""
        data = bytearray(size)
        self.read_payload_into(payload_spec, data)
        return bytes(data)

    def read_payload_into(self, payload_spec: Mapping[str, Any],
                          destination: bytearray | np.ndarray) -> None:
        chunks = payload_spec["chunks"]
        offsets = _chunk_offsets(chunks)
        if self._read_chunks_with_batch_get_into(chunks, offsets, destination):
            return
        for offset, chunk in zip(offsets, chunks):
            self._read_chunk_with_get(chunk, destination, offset)

    def _read_chunks_with_batch_get_into(self, chunks: Sequence[Mapping[str, Any]],
                                         offsets: Sequence[int],
                                         destination: bytearray | np.ndarray) -> bool:
        if not callable(self._batch_get_into) or not self._has_buffer_registration_support():
            return False
        with self._registered_buffer(destination, "bundle payload") as base:
            keys = [chunk["key"] for chunk in chunks]
            sizes = [int(chunk["bytes"]) for chunk in chunks]
            got = self._batch_get_into(keys, [base + offset for offset in offsets], sizes)
            if len(got) != len(keys):
                raise RuntimeError(f"batch_get_into returned {len(got)} results for "
                                   f"{len(keys)} chunks")
            for key, want, have in zip(keys, sizes, got):
                if have != want:
                    raise RuntimeError(f"batch_get_into failed for {key}: expected {want}, "
                                       f"got {have}")
        return True

    def _get_chunk(self, key: str, size: int) -> bytes:
        data = self._store.get(key)
        if len(data) != size:
            raise RuntimeError(f"get failed for {key}: expected {size} bytes, got {len(data)}")
        return data

    def _read_chunk_with_get(self, chunk: Mapping[str, Any],
                             destination: bytearray | np.ndarray, offset: int) -> None:
        size = int(chunk["bytes"])
        if size:
            destination[offset:offset + size] = self._get_chunk(chunk["key"], size)

    def read_tensor_payload(self, payload_spec: Mapping[str, Any]) -> Any:
        get_tensor = getattr(self._store, "get_tensor", None)
        if not callable(get_tensor):
            raise RuntimeError("structured tensor payload does not support get_tensor")
        return get_tensor(payload_spec["key"])

    def read_tensor_payload_into(self, payload_spec: Mapping[str, Any],
                                 destination: Any) -> Any:
        """A tensor member into a tensor-object buffer or raw destination: the store's
        get_tensor_into for a tensor put by the store (returning what it returns), else
        the serialized bytes (returning None)."""
        if payload_spec.get("kind") == "tensor":
            get_tensor_into = getattr(self._store, "get_tensor_into", None)
            if not callable(get_tensor_into):
                raise RuntimeError("structured tensor payload does not support get_tensor_into")
            return get_tensor_into(payload_spec["key"], destination.ptr, destination.size)
        size = int(payload_spec["bytes"])
        if destination.size < size:
            raise ValueError(f"tensor destination has {destination.size} bytes, expected at "
                             f"least {size}")
        chunks = payload_spec["chunks"]
        if not self._read_payload_range_into_raw_destination(chunks, destination.ptr, 0, size,
                                                             allow_get_into=False):
            offset = 0
            for chunk in chunks:
                chunk_size = int(chunk["bytes"])
                ctypes.memmove(destination.ptr + offset,
                               self._get_chunk(chunk["key"], chunk_size), chunk_size)
                offset += chunk_size
        return None

    # ---- ranges -------------------------------------------------------------------------

    def read_payload_range(self, payload_spec: Mapping[str, Any], byte_offset: int,
                           byte_length: int) -> bytes:
        if byte_length == 0:
            return b""
        data = bytearray(byte_length)
        chunks = payload_spec["chunks"]
        if not self._read_payload_range_into_registered_destination(chunks, data, byte_offset,
                                                                    byte_length, False):
            self._copy_payload_ranges_into_destination(chunks, data,
                                                       [(byte_offset, 0, byte_length)])
        return bytes(data)

    def read_payload_range_into_destination(self, payload_spec: Mapping[str, Any],
                                            destination: np.ndarray, byte_offset: int,
                                            destination_pre_registered: bool) -> None:
        chunks = payload_spec["chunks"]
        length = _buffer_nbytes(destination)
        if not self._read_payload_range_into_registered_destination(
                chunks, destination, byte_offset, length, destination_pre_registered):
            self._copy_payload_ranges_into_destination(chunks, destination,
                                                       [(byte_offset, 0, length)])

    def read_payload_range_into_raw_destination(self, payload_spec: Mapping[str, Any],
                                                destination_ptr: int, destination_offset: int,
                                                byte_offset: int, byte_length: int) -> bool:
        if byte_length == 0:
            return True
        return self._read_payload_range_into_raw_destination(
            payload_spec["chunks"], destination_ptr, byte_offset, byte_length,
            allow_get_into=False, destination_offset=destination_offset)

    def read_payload_ranges_into_array(self, payload_spec: Mapping[str, Any],
                                       destination: np.ndarray, ranges: Ranges) -> None:
        chunks = payload_spec["chunks"]
        if not self._read_payload_ranges_into_registered_destination(chunks, destination,
                                                                     ranges):
            self._copy_payload_ranges_into_destination(
                chunks, destination.view(np.uint8).reshape(-1), ranges)

    def read_payload_ranges_into_bytearray(self, payload_spec: Mapping[str, Any],
                                           destination: bytearray, ranges: Ranges) -> None:
        chunks = payload_spec["chunks"]
        if not self._read_payload_ranges_into_registered_destination(chunks, destination,
                                                                     ranges):
            self._copy_payload_ranges_into_destination(chunks, destination, ranges)

    def read_payload_ranges_into_raw_destination(self, payload_spec: Mapping[str, Any],
                                                 destination_ptr: int, ranges: Ranges) -> bool:
        return self._read_fragments_with_get_into_ranges(
            destination_ptr, _fragments_of(payload_spec["chunks"], ranges))

    def read_payload_range_into_pool_array(self, payload_spec: Mapping[str, Any],
                                           dtype: np.dtype, shape: tuple[int, ...],
                                           byte_offset: int) -> np.ndarray | None:
        """The bytes as an ndarray over a pool lease (held by the array: see
        _PoolBackedNdarray); None when there is no pool, it is full, or the store cannot
        read ranges."""
        nbytes = (int(np.prod(shape, dtype=np.int64)) if shape else 1) * dtype.itemsize
        if nbytes == 0:
            return np.empty(shape, dtype=dtype)
        pool = self._ensure_buffer_pool()
        if pool is None:
            return None
        try:
            lease = pool.acquire(nbytes)
        except RuntimeError:  # full
            return None
        owner = _PoolLeaseOwner(lease)
        try:
            if not self._read_payload_range_into_raw_destination(
                    payload_spec["chunks"], lease.ptr, byte_offset, nbytes,
                    allow_get_into=False):
                owner.release()
                return None
            return _PoolBackedNdarray(owner, dtype, shape)
        except Exception:
            owner.release()
            raise

    def _read_payload_range_into_registered_destination(self, chunks, destination,
                                                        byte_offset: int, byte_length: int,
                                                        destination_pre_registered: bool
                                                        ) -> bool:
        if not self._has_buffer_registration_support():
            return False
        with self._registered_buffer(destination, "structured ndarray payload",
                                     pre_registered=destination_pre_registered) as base:
            return self._read_payload_range_into_raw_destination(chunks, base, byte_offset,
                                                                 byte_length)

    def _read_payload_ranges_into_registered_destination(self, chunks, destination,
                                                         ranges: Ranges) -> bool:
        if not self._has_buffer_registration_support():
            return False
        with self._registered_buffer(destination, "structured ranged payload") as base:
            return self._read_fragments_with_get_into_ranges(base, _fragments_of(chunks,
                                                                                 ranges))

    def _read_payload_range_into_raw_destination(self, chunks, base_ptr: int,
                                                 byte_offset: int, byte_length: int,
                                                 allow_get_into: bool = True,
                                                 destination_offset: int = 0) -> bool:
        """Bytes [byte_offset, + byte_length) of the payload to base_ptr +
        destination_offset: get_into for exactly one whole chunk (allow_get_into), else
        get_into_ranges. False when the store has neither."""
        if (allow_get_into and len(chunks) == 1 and byte_offset == 0
                and callable(self._get_into) and int(chunks[0]["bytes"]) == byte_length):
            key = chunks[0]["key"]
            got = self._get_into(key, base_ptr + destination_offset, byte_length)
            if got != byte_length:
                raise RuntimeError(f"get_into failed for {key}: expected {byte_length}, "
                                   f"got {got}")
            return True
        return self._read_fragments_with_get_into_ranges(
            base_ptr, _payload_range_fragments(chunks, byte_offset, byte_length,
                                               destination_offset))

    def _read_fragments_with_get_into_ranges(self, base_ptr: int, fragments) -> bool:
        """One get_into_ranges call for the fragments (each its own entry); False when the
        store has no get_into_ranges."""
        if not callable(self._get_into_ranges):
            return False
        if not fragments:
            return True
        keys = [key for key, _size, _dst, _src, _len in fragments]
        sizes = [[length] for _key, _size, _dst, _src, length in fragments]
        results = self._get_into_ranges(
            [base_ptr], [keys], [[[dst] for _k, _s, dst, _src, _l in fragments]],
            [[[src] for _k, _s, _dst, src, _l in fragments]], [sizes])
        if len(results) != 1 or len(results[0]) != len(keys):
            raise RuntimeError("get_into_ranges returned invalid ranged result shape for "
                               f"{len(keys)} chunks")
        for key, want, got in zip(keys, sizes, results[0]):
            if len(got) != len(want):
                raise RuntimeError(f"get_into_ranges returned invalid ranged fragment count "
                                   f"for {key}")
            for expected, actual in zip(want, got):
                if actual != expected:
                    raise RuntimeError(f"get_into_ranges failed for {key}: expected "
                                       f"{expected}, got {actual}")
        return True

    def _copy_payload_ranges_into_destination(self, chunks, destination,
                                              ranges: Ranges) -> None:
        """The ranges with plain get()s, one per chunk fragment."""
        for key, size, dst, src, length in _fragments_of(chunks, ranges):
            data = self._get_chunk(key, size)
            destination[dst:dst + length] = np.frombuffer(
                data, dtype=np.uint8, count=length, offset=src) if isinstance(
                    destination, np.ndarray) else data[src:src + length]

    # ---- registration -----------------------------------------------------------------

    def _has_buffer_registration_support(self) -> bool:
        return callable(self._register_buffer) and callable(self._unregister_buffer)

    def _register_buffers(self, buffer_ptrs: Sequence[int], sizes: Sequence[int],
                          pre_registered: bool, label: str) -> list[int]:
        """Registers the buffers not registered yet; returns those it registered (memory the
        caller registered already is left to the caller)."""
        if pre_registered:
            return []
        if not self._has_buffer_registration_support():
            raise RuntimeError(f"register_buffer APIs are unavailable for {label}")
        registered: list[int] = []
        try:
            for ptr, size in zip(buffer_ptrs, sizes):
                if size == 0:
                    continue
                status = self._register_buffer(ptr, size)
                if status == 0:
                    registered.append(ptr)
                elif not _is_duplicate_buffer_registration(status):
                    _check_status(status, "register_buffer", label)
        except Exception:
            self._unregister_buffers(registered, label)
            raise
        return registered

    def _unregister_buffers(self, registered_ptrs: Sequence[int], label: str) -> None:
        if not callable(self._unregister_buffer):
            raise RuntimeError(f"unregister_buffer APIs are unavailable for {label}")
        for ptr in reversed(registered_ptrs):
            _check_status(self._unregister_buffer(ptr), "unregister_buffer", label)

    @contextmanager
    def _registered_buffer(self, destination: bytearray | np.ndarray, label: str,
                           pre_registered: bool = False) -> Iterator[int]:
        """destination's address, registered for the block (and unregistered after it; an
        unregistration error raises only when the block succeeded)."""
        base = _buffer_ptr(destination)
        registered = self._register_buffers([base], [_buffer_nbytes(destination)],
                                            pre_registered, label)
        succeeded = False
        try:
            yield base
            succeeded = True
        finally:
            if registered:
                try:
                    self._unregister_buffers(registered, label)
                except Exception:
                    if succeeded:
                        raise


def _fragments_of(chunks, ranges: Ranges) -> list[tuple[str, int, int, int, int]]:
    """The chunk fragments of several ranges, in order."""
    fragments = []
    for src, dst, length in ranges:
        fragments.extend(_payload_range_fragments(chunks, src, length, dst))
    return fragments
