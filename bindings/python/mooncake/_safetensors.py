"""The safetensors file format, for save_tensor_to_safetensor / load_tensor_from_safetensor
(Mooncake calls the ``safetensors`` package, which Debian does not ship; the format is small
enough to write here, and files written here load with that package and back).

A file is:

- 8 bytes: N, the header's length, an unsigned little-endian 64-bit integer;
- N bytes: the header, UTF-8 JSON starting with ``{``, padded with spaces to a multiple of
  8: ``{"__metadata__": {str: str}, NAME: {"dtype": "F32", "shape": [2, 3],
  "data_offsets": [BEGIN, END]}, ...}`` (``__metadata__`` optional), offsets relative to
  the data that follows;
- the data: each tensor's elements, row-major, little-endian, with no gap and nothing
  else (every byte belongs to exactly one tensor).

Written as the package writes them: compact JSON (no blanks), ``__metadata__`` first when
given, then the tensors in the order of their data, which is by element size, largest
first, then by name. Read with the package's checks: a header of at most 100,000,000
bytes, known dtypes, offsets matching the shapes and covering the data exactly.
"""
import json
import struct

from mooncake import _tensor_codec as codec

# safetensors' names of the element types, and torch's.
_TORCH_NAMES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "F8_E5M2": "float8_e5m2",
    "F8_E4M3": "float8_e4m3fn", "I16": "int16", "U16": "uint16", "F16": "float16",
    "BF16": "bfloat16", "I32": "int32", "U32": "uint32", "F32": "float32", "F64": "float64",
    "I64": "int64", "U64": "uint64",
}
_SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2,
          "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}
MAX_HEADER_SIZE = 100_000_000


def _dtype_name(dtype):
    t = codec.torch()
    for name, torch_name in _TORCH_NAMES.items():
        if getattr(t, torch_name, None) == dtype:
            return name
    raise ValueError(f"safetensors has no dtype for {dtype}")


def _tensor_bytes(tensor):
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    return flat.view(codec.torch().uint8).numpy().tobytes()


def encode(tensors, metadata=None):
    """The bytes of a safetensors file holding tensors (a dict name -> torch tensor) and
    metadata (a dict str -> str, or None)."""
    entries = []
    for name, tensor in tensors.items():
        if not isinstance(name, str):
            raise ValueError(f"tensor name {name!r} is not a str")
        dtype = _dtype_name(tensor.dtype)
        entries.append((name, dtype, [int(d) for d in tensor.shape], _tensor_bytes(tensor)))
    entries.sort(key=lambda e: (-_SIZES[e[1]], e[0]))
    header = {}
    if metadata is not None:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError("safetensors metadata maps str to str")
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return b"".join([struct.pack("<Q", len(text)), text] + [e[3] for e in entries])


def decode(data):
    """The tensors of a safetensors file's bytes, a dict name -> torch tensor in name order
    (as the package's load_file returns them); ValueError naming what is wrong."""
    t = codec.torch()
    if len(data) < 8:
        raise ValueError("shorter than the 8-byte header length")
    (n,) = struct.unpack_from("<Q", data, 0)
    if n > MAX_HEADER_SIZE or 8 + n > len(data):
        raise ValueError(f"header length {n} is past the file's end or the 100 MB limit")
    text = bytes(data[8:8 + n])
    if not text.startswith(b"{"):
        raise ValueError("the header is not a JSON object")
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"the header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(v, str) for v in metadata.values())):
        raise ValueError("__metadata__ is not a map of strings")
    body = memoryview(data)[8 + n:]
    spans = []
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise ValueError(f"tensor {name!r}: needs dtype, shape and data_offsets") from None
        if dtype not in _SIZES:
            raise ValueError(f"tensor {name!r}: unknown dtype {dtype!r}")
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ValueError(f"tensor {name!r}: shape {shape!r} is not a list of sizes")
        numel = 1
        for d in shape:
            numel *= d
        if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end) or \
                end - begin != numel * _SIZES[dtype]:
            raise ValueError(f"tensor {name!r}: data_offsets {[begin, end]} do not hold "
                             f"{numel} {dtype} elements")
        spans.append((begin, end, name, dtype, shape))
    spans.sort()
    position = 0
    for begin, end, name, _, _ in spans:
        if begin != position:
            raise ValueError(f"tensor {name!r} does not start where the one before ends")
        position = end
    if position != len(body):
        raise ValueError(f"the tensors cover {position} of the {len(body)} data bytes")
    tensors = {}
    for begin, end, name, dtype, shape in sorted(spans, key=lambda s: s[2]):
        torch_dtype = getattr(t, _TORCH_NAMES[dtype], None)
        if torch_dtype is None:
            raise ValueError(f"tensor {name!r}: PyTorch {t.__version__} has no "
                             f"{_TORCH_NAMES[dtype]}")
        if end == begin:
            tensors[name] = t.empty(shape, dtype=torch_dtype)
        else:
            raw = t.frombuffer(bytearray(body[begin:end]), dtype=t.uint8)
            tensors[name] = raw.view(torch_dtype).reshape(shape)
    return tensors


def save_file(tensors, filename, metadata=None):
    """Writes tensors to filename as safetensors (the package's save_file)."""
    data = encode(tensors, metadata)
    with open(filename, "wb") as f:
        f.write(data)


def load_file(filename):
    """The tensors of a safetensors file (the package's load_file)."""
    with open(filename, "rb") as f:
        return decode(f.read())
