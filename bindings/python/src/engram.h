// Mooncake's EngramStore (mooncake-integration/store/engram_store_py.cpp at 3b5a594): the
// storage side of Engram embedding tables, built over a MooncakeDistributedStore. Each of a
// layer's heads is one object, "engram:l<layer_id>:h<head>", holding its table of
// vocab_size rows of embedding_dim float32 values; a lookup reads only the rows it needs
// (one ranged read per head, mooncake_store_batch_get_ranges) into a [B, L, H, D] array.
// EngramStoreConfig gives the tables' shapes. The classes, their methods, arguments,
// exceptions and key names are Mooncake's (docs/mooncake-api.md, "Engram").
//
// Also here, as far as EngramStore needs them: MooncakeDistributedStore's
// _get_pyclient_capsule() and the module's _get_pyclient_from_wrapper(store), which hand a
// store to EngramStore through a capsule named "mooncake.PyClient.shared_ptr" (holding a
// reference to the store object itself: there is no PyClient here).
#ifndef MOONCAKE_STORE_PY_ENGRAM_H_
#define MOONCAKE_STORE_PY_ENGRAM_H_

#include <pybind11/pybind11.h>

#include "store.h"

namespace mooncake_py {

namespace py = pybind11;

void RegisterEngram(py::module_& m, py::class_<Store>& store);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_ENGRAM_H_
