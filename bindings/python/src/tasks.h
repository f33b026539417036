// Mooncake's copy and move tasks on MooncakeDistributedStore (docs/mooncake-api.md,
// "tasks"): create_copy_task, create_move_task, query_task, and the class
// QueryTaskResponse, with Mooncake's argument names and return shapes (store_py.cpp): a
// task id is Mooncake's UUID as pybind11 gives it, a tuple of two ints (high, low); a
// creation answers (task_id, code), ((0, 0), code) when refused; query_task answers
// (QueryTaskResponse, 0) or (None, code).
#ifndef MOONCAKE_STORE_PY_TASKS_H_
#define MOONCAKE_STORE_PY_TASKS_H_

#include <pybind11/pybind11.h>

#include "store.h"

namespace mooncake_py {

namespace py = pybind11;

void RegisterTasks(py::module_& m, py::class_<Store>& store);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_TASKS_H_
