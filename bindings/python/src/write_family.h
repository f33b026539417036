// The write calls of Mooncake's API that the older bindings lacked (docs/mooncake-api.md,
// "put-config"): upsert_parts, upsert_batch, batch_upsert_from and put_from_with_metadata,
// with Mooncake's argument names, defaults and return shapes, over the sized put config of
// the C ABI (mooncake_put_config_t). The other write calls live in data_ops.cc.
#ifndef MOONCAKE_STORE_PY_WRITE_FAMILY_H_
#define MOONCAKE_STORE_PY_WRITE_FAMILY_H_

#include <pybind11/pybind11.h>

#include "store.h"

namespace mooncake_py {

namespace py = pybind11;

// Adds the methods above to MooncakeDistributedStore.
void RegisterWriteFamily(py::module_& m, py::class_<Store>& store);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_WRITE_FAMILY_H_
