// The tensor layouts of the C ABI (include/mooncake_store.h, "tensors") as private module
// functions, for the tensor calls written in Python (mooncake/_tensor_*.py): Mooncake's
// tensor header and manifest encoded and decoded, the uniform split and the shard keys.
// The layouts live in libmooncake_store alone; nothing here knows an offset.
//
//   _tensor_metadata_size() -> 304 (also Mooncake's public helper of that name)
//   _tensor_dtype_size(dtype) -> bytes of one element, 0 for an unknown code
//   _tensor_header_encode(dtype, global_shape, local_shape, layout, axes, data_bytes) -> bytes
//   _tensor_header_decode(buffer, object_size=0) -> dict of the fields
//   _tensor_manifest_encode(dtype, split_dim, shard_count, global_shape) -> bytes
//   _tensor_manifest_decode(buffer) -> dict of the fields
//   _tensor_shard_range(dim_size, rank, count) -> (start, extent)
//   _tensor_key(kind, base, axes=[]) -> str; kind one of _TENSOR_KEY_*
//
// An axis is a tuple (kind, rank, size, split_dim, expert_id, stage_id), None for an unset
// optional. A refusal of the library raises ValueError with its reason
// (mooncake_store_errmsg). The functions hold the GIL: they are short and touch no handle.
#ifndef MOONCAKE_STORE_PY_TENSOR_CODEC_H_
#define MOONCAKE_STORE_PY_TENSOR_CODEC_H_

#include <pybind11/pybind11.h>

namespace mooncake_py {

namespace py = pybind11;

void RegisterTensorCodec(py::module_& m);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_TENSOR_CODEC_H_
