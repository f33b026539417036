// Partial reads of MooncakeDistributedStore, over mooncake_store_batch_get_ranges (only the
// requested bytes move, from any replica): Mooncake's get_into_ranges(), and the get
// session calls of vLLM's layer-wise path, batch_get_session_start(),
// batch_get_into_multi_buffer_ranges() and batch_get_session_end(). Shapes, codes and the
// differences from Mooncake: docs/mooncake-api.md, "ranges".
#ifndef MOONCAKE_STORE_PY_RANGES_H_
#define MOONCAKE_STORE_PY_RANGES_H_

#include <pybind11/pybind11.h>

#include "store.h"

namespace mooncake_py {

namespace py = pybind11;

void RegisterRanges(py::module_& m, py::class_<Store>& store);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_RANGES_H_
