// The enums of Mooncake's Python module (mooncake-integration/store/store_py.cpp) besides
// SoftPinAction (replicate_config.h), with Mooncake's names and values
// (mooncake-store/include/types.h, replica.h, task_manager.h), so that `from mooncake.store
// import ObjectDataType, ReplicaStatus, ...` and comparisons with their values work as there.
//
// - ObjectDataType: the kind of data an object holds (ReplicateConfig.data_type).
// - ReplicaStatus: a replica's state; get_replica_desc lists COMPLETE replicas only.
// - TaskType, TaskStatus: Mooncake's replica copy/move tasks (create_copy_task, query_task;
//   tasks.h).
//
// RegisterMooncakeEnums registers them in Mooncake's order, with its export_values(): the
// module also holds each value by itself (mooncake.store.COMPLETE, ...), and where two
// enums share a value's name (PROCESSING, FAILED) the later, TaskStatus, holds it, as in
// Mooncake.
#ifndef MOONCAKE_STORE_PY_MOONCAKE_ENUMS_H_
#define MOONCAKE_STORE_PY_MOONCAKE_ENUMS_H_

#include <pybind11/pybind11.h>

#include <cstdint>

#include "mooncake_store.h"

namespace mooncake_py {

namespace py = pybind11;

enum class ObjectDataType : uint8_t {
  UNKNOWN = 0,
  KVCACHE = 1,
  TENSOR = 2,
  WEIGHT = 3,
  SAMPLE = 4,
  ACTIVATION = 5,
  GRADIENT = 6,
  OPTIMIZER_STATE = 7,
  METADATA = 8,
  GENERAL = 9,
};

enum class ReplicaStatus : int {
  UNDEFINED = 0,
  INITIALIZED = 1,
  PROCESSING = 2,
  COMPLETE = 3,
  REMOVED = 4,
  FAILED = 5,
};

enum class TaskType : int { REPLICA_COPY = 0, REPLICA_MOVE = 1 };

enum class TaskStatus : int { PENDING = 0, PROCESSING = 1, FAILED = 2, SUCCESS = 3 };

// The status of a mooncake_replica_desc_t (MOONCAKE_REPLICA_*), in Mooncake's values;
// UNDEFINED for a value the C ABI does not define.
ReplicaStatus ReplicaStatusFromC(int status);

// Registers the four enums in m (see above).
void RegisterMooncakeEnums(py::module_& m);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_MOONCAKE_ENUMS_H_
