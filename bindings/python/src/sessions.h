// Put sessions of MooncakeDistributedStore (sessions.cc): Mooncake's
// batch_put_session_start(), batch_put_from_multi_buffer_ranges(), batch_put_session_end()
// and batch_put_session_revoke(), over mooncake_store_put_session_*. The get sessions are
// ranges.h's.
#ifndef MOONCAKE_STORE_PY_SESSIONS_H_
#define MOONCAKE_STORE_PY_SESSIONS_H_

#include <pybind11/pybind11.h>

#include "store.h"

namespace mooncake_py {

namespace py = pybind11;

void RegisterSessions(py::module_& m, py::class_<Store>& store);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_SESSIONS_H_
