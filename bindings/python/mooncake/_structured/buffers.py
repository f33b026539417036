"""Bytes and their layout in the store: buffer views and addresses, how a payload is cut into
chunks (each a store object) and which chunk bytes a range of the payload covers, the
validation of key parts, and the JSON of manifests and metadata."""
from __future__ import annotations

import ctypes
import json
from typing import Any, Mapping, Sequence

import numpy as np


def _bytes_view(value: Any, name: str) -> memoryview:
    """A flat byte view of value (copied when it is not contiguous)."""
    try:
        view = memoryview(value)
    except TypeError as error:
        raise TypeError(f"{name} must be bytes-like, got {type(value).__name__}") from error
    if not view.contiguous:
        view = memoryview(bytes(view))
    return view.cast("B")


def _buffer_ptr(value: bytearray | np.ndarray) -> int:
    """The address of a writable buffer's first byte."""
    return ctypes.addressof(ctypes.c_char.from_buffer(value))


def _buffer_nbytes(value: bytearray | np.ndarray) -> int:
    return int(value.nbytes) if isinstance(value, np.ndarray) else len(value)


def _buffer_group_nbytes(buffers: Sequence[Any]) -> int:
    return sum(len(buffer) for buffer in buffers)


def _split_view(view: memoryview, chunk_bytes: int) -> list[memoryview]:
    """view in pieces of chunk_bytes (the last may be shorter); [view] when empty."""
    if len(view) == 0:
        return [view]
    return [view[start:start + chunk_bytes] for start in range(0, len(view), chunk_bytes)]


def _split_multi_buffer_payload(buffers: Sequence[memoryview],
                                chunk_bytes: int) -> list[list[memoryview]]:
    """The buffers, back to back, cut into groups of chunk_bytes bytes (the last may be
    shorter): a buffer may span groups. Each group becomes one chunk."""
    if len(buffers) == 1:
        return [[piece] for piece in _split_view(buffers[0], chunk_bytes)]
    groups: list[list[memoryview]] = []
    current: list[memoryview] = []
    room = chunk_bytes
    for buffer in buffers:
        offset = 0
        while offset < len(buffer):
            piece = buffer[offset:offset + room]
            current.append(piece)
            offset += len(piece)
            room -= len(piece)
            if room == 0:
                groups.append(current)
                current, room = [], chunk_bytes
    if current:
        groups.append(current)
    return groups


def _copy_memoryviews(buffers: Sequence[memoryview], destination: memoryview) -> None:
    """The buffers, back to back, into destination."""
    out = destination.cast("B")
    offset = 0
    for buffer in buffers:
        data = buffer.cast("B")
        if len(data):
            out[offset:offset + len(data)] = data
            offset += len(data)


def _copy_memoryviews_to_lease(buffers: Sequence[memoryview], lease: Any) -> None:
    """The buffers into a pool lease (its own copy_from_buffers when it has one)."""
    copy_from_buffers = getattr(lease, "copy_from_buffers", None)
    if callable(copy_from_buffers):
        copy_from_buffers(buffers)
        return
    view = lease.buffer
    try:
        _copy_memoryviews(buffers, view)
    finally:
        view.release()  # a lease with an exported view cannot be released


def _chunk_offsets(chunks: Sequence[Mapping[str, Any]]) -> list[int]:
    """Where each chunk starts in its payload."""
    offsets = [0]
    for chunk in chunks[:-1]:
        offsets.append(offsets[-1] + int(chunk["bytes"]))
    return offsets


def _payload_range_fragments(chunks: Sequence[Mapping[str, Any]], byte_offset: int,
                             byte_length: int, destination_offset: int = 0
                             ) -> list[tuple[str, int, int, int, int]]:
    """The pieces of chunks that bytes [byte_offset, + byte_length) of the payload are, each
    (chunk key, chunk size, where it goes: destination_offset + its place in the range,
    where it starts in the chunk, its length)."""
    fragments = []
    end = byte_offset + byte_length
    chunk_start = 0
    for chunk in chunks:
        size = int(chunk["bytes"])
        lo, hi = max(byte_offset, chunk_start), min(end, chunk_start + size)
        if lo < hi:
            fragments.append((chunk["key"], size, destination_offset + lo - byte_offset,
                              lo - chunk_start, hi - lo))
        chunk_start += size
    return fragments


def _validate_chunk_bytes(chunk_bytes: int) -> int:
    if chunk_bytes <= 0:
        raise ValueError("chunk_bytes must be positive")
    return chunk_bytes


def _normalize_key_prefix(key_prefix: str) -> str:
    prefix = key_prefix.strip("/")
    if not prefix or any(ord(char) < 32 for char in prefix):
        raise ValueError("key_prefix must be a non-empty key prefix")
    return prefix


def _validate_key_segment(value: str, name: str) -> None:
    """value must be one part of a key: non-empty, no "/", no control character."""
    if (not isinstance(value, str) or not value or "/" in value
            or any(ord(char) < 32 for char in value)):
        raise ValueError(f"invalid bundle {name}: {value!r}")


def _encode_json_dict(value: Mapping[str, Any], label: str) -> bytes:
    try:
        return json.dumps(value, separators=(",", ":")).encode("utf-8")
    except TypeError as error:
        raise TypeError(f"{label} must be JSON-serializable") from error


def _decode_json_dict(payload: bytes, label: str) -> dict[str, Any]:
    value = json.loads(bytes(payload).decode("utf-8"))
    if not isinstance(value, dict):
        raise ValueError(f"{label} must decode to a dict")
    return value


def _encode_manifest(manifest: Mapping[str, Any]) -> bytes:
    return _encode_json_dict(manifest, "bundle manifest")


def _decode_manifest(payload: bytes) -> dict[str, Any]:
    return _decode_json_dict(payload, "bundle manifest")


def _encode_structured_metadata(metadata: Mapping[str, Any]) -> bytes:
    return _encode_json_dict(metadata, "structured metadata")


def _decode_structured_metadata(payload: bytes) -> dict[str, Any]:
    return _decode_json_dict(payload, "structured metadata")
