// The tensor members of Mooncake's MooncakeDistributedStore (store_py.cpp at 3b5a594:
// put_tensor, get_tensor, their batch, _from, _into, pub, upsert, _with_tp and
// _with_parallelism forms, get_tensor_into_cuda, the safetensors calls) and its module
// functions _serialize_tensor, _tensor_metadata_size, _deserialize_tensor. What each does,
// and where it differs from Mooncake: docs/mooncake-api.md, "Tensors".
//
// Where the work happens:
//  - The byte layouts are the C ABI's (tensor_codec.h); the request classes are
//    tensor_types.h.
//  - The calls themselves are Python, in the mooncake package (mooncake/_tensor_*.py): they
//    take torch tensors apart and put them together through torch's Python API, so the
//    module never links libtorch and imports without torch (a tensor call then raises
//    ImportError naming python3-torch). Each method here forwards to its function there,
//    imported on the first call (when `import mooncake_store` is long done), so the
//    methods exist however the module was imported.
//  - Their data movement is the store's existing calls (put_from, get_into, get_into_ranges,
//    ...) and one private method here, _write_tensor_objects, which gathers each object's
//    pieces (the header, the tensor's bytes, a shard's rows) into one pool block and stores
//    them all in one batch, without the GIL: one copy, as a put of one buffer costs.
#ifndef MOONCAKE_STORE_PY_TENSOR_METHODS_H_
#define MOONCAKE_STORE_PY_TENSOR_METHODS_H_

#include <pybind11/pybind11.h>

#include "store.h"

namespace mooncake_py {

namespace py = pybind11;

// Adds the tensor classes, module functions and methods.
void RegisterTensors(py::module_& m, py::class_<Store>& store);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_TENSOR_METHODS_H_
