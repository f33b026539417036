// Mooncake's enums in Python. See mooncake_enums.h.
#include "mooncake_enums.h"

namespace mooncake_py {

ReplicaStatus ReplicaStatusFromC(int status) {
  switch (status) {
    case MOONCAKE_REPLICA_PROCESSING:
      return ReplicaStatus::PROCESSING;
    case MOONCAKE_REPLICA_COMPLETE:
      return ReplicaStatus::COMPLETE;
    case MOONCAKE_REPLICA_FAILED:
      return ReplicaStatus::FAILED;
    case MOONCAKE_REPLICA_REMOVED:
      return ReplicaStatus::REMOVED;
  }
  return ReplicaStatus::UNDEFINED;
}

void RegisterMooncakeEnums(py::module_& m) {
  py::enum_<ObjectDataType>(m, "ObjectDataType",
                            "What an object holds (ReplicateConfig.data_type); Mooncake's "
                            "values.")
      .value("UNKNOWN", ObjectDataType::UNKNOWN)
      .value("KVCACHE", ObjectDataType::KVCACHE)
      .value("TENSOR", ObjectDataType::TENSOR)
      .value("WEIGHT", ObjectDataType::WEIGHT)
      .value("SAMPLE", ObjectDataType::SAMPLE)
      .value("ACTIVATION", ObjectDataType::ACTIVATION)
      .value("GRADIENT", ObjectDataType::GRADIENT)
      .value("OPTIMIZER_STATE", ObjectDataType::OPTIMIZER_STATE)
      .value("METADATA", ObjectDataType::METADATA)
      .value("GENERAL", ObjectDataType::GENERAL)
      .export_values();
  py::enum_<ReplicaStatus>(m, "ReplicaStatus",
                           "A replica's state, Mooncake's values; get_replica_desc lists "
                           "COMPLETE replicas only.")
      .value("UNDEFINED", ReplicaStatus::UNDEFINED)
      .value("INITIALIZED", ReplicaStatus::INITIALIZED)
      .value("PROCESSING", ReplicaStatus::PROCESSING)
      .value("COMPLETE", ReplicaStatus::COMPLETE)
      .value("REMOVED", ReplicaStatus::REMOVED)
      .value("FAILED", ReplicaStatus::FAILED)
      .export_values();
  py::enum_<TaskType>(m, "TaskType",
                      "Mooncake's replica tasks: create_copy_task, create_move_task "
                      "(QueryTaskResponse.type).")
      .value("REPLICA_COPY", TaskType::REPLICA_COPY)
      .value("REPLICA_MOVE", TaskType::REPLICA_MOVE)
      .export_values();
  py::enum_<TaskStatus>(m, "TaskStatus",
                        "Mooncake's task states (QueryTaskResponse.status).")
      .value("PENDING", TaskStatus::PENDING)
      .value("PROCESSING", TaskStatus::PROCESSING)
      .value("SUCCESS", TaskStatus::SUCCESS)
      .value("FAILED", TaskStatus::FAILED)
      .export_values();
}

}  // namespace mooncake_py
