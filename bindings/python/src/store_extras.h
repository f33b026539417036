// Mooncake's remaining client members (store_extras.cc): MooncakeDistributedStore's
// init_all() and get_offload_rpc_read_count(), the module functions bind_to_numa_node(),
// get_alloc_func_addr() and get_free_func_addr(), and the class
// MooncakeDistributedNoFRegister (NVMe-oF: not supported here). What each does and why:
// docs/mooncake-api.md, "The remaining members".
#ifndef MOONCAKE_STORE_PY_STORE_EXTRAS_H_
#define MOONCAKE_STORE_PY_STORE_EXTRAS_H_

#include <pybind11/pybind11.h>

#include "store.h"

namespace mooncake_py {

namespace py = pybind11;

void RegisterStoreExtras(py::module_& m, py::class_<Store>& store);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_STORE_EXTRAS_H_
