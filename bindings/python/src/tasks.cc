// Mooncake's copy and move tasks in Python. See tasks.h.
#include "tasks.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "buffers.h"
#include "mooncake_enums.h"
#include "mooncake_store.h"
#include "store_handle.h"

namespace mooncake_py {
namespace {

// Mooncake's UUID as its binding hands it out: (high, low).
using Uuid = std::pair<uint64_t, uint64_t>;

// Mooncake's QueryTaskResponse.
struct QueryTaskResponse {
  Uuid id{0, 0};
  TaskType type = TaskType::REPLICA_COPY;
  TaskStatus status = TaskStatus::PENDING;
  int64_t created_at_ms_epoch = 0;
  int64_t last_updated_at_ms_epoch = 0;
  Uuid assigned_client{0, 0};
  std::string message;
};

py::tuple Created(int rc, const mooncake_task_id_t& id) {
  if (rc != 0) return py::make_tuple(py::make_tuple(0, 0), rc);  // Mooncake's UUID{0, 0}
  return py::make_tuple(py::make_tuple(id.high, id.low), 0);
}

}  // namespace

void RegisterTasks(py::module_& m, py::class_<Store>& store) {
  py::class_<QueryTaskResponse>(m, "QueryTaskResponse",
                                "Response structure for QueryTask operation.")
      .def(py::init<>())
      .def_readonly("id", &QueryTaskResponse::id)
      .def_readonly("type", &QueryTaskResponse::type)
      .def_readonly("status", &QueryTaskResponse::status)
      .def_readonly("created_at_ms_epoch", &QueryTaskResponse::created_at_ms_epoch)
      .def_readonly("last_updated_at_ms_epoch", &QueryTaskResponse::last_updated_at_ms_epoch)
      .def_readonly("assigned_client", &QueryTaskResponse::assigned_client)
      .def_readonly("message", &QueryTaskResponse::message)
      .def("__repr__", [](const QueryTaskResponse& self) {
        // As Mooncake prints it: a UUID as "high-low".
        auto uuid = [](const Uuid& u) {
          return std::to_string(u.first) + "-" + std::to_string(u.second);
        };
        std::ostringstream oss;
        oss << "QueryTaskResponse(id=" << uuid(self.id) << ", type=" << static_cast<int>(self.type)
            << ", status=" << static_cast<int>(self.status)
            << ", created_at=" << self.created_at_ms_epoch
            << ", last_updated_at=" << self.last_updated_at_ms_epoch
            << ", assigned_client=" << uuid(self.assigned_client) << ", message=\""
            << self.message << "\")";
        return oss.str();
      });

  store
      .def("create_copy_task",
           [](Store& self, const std::string& key, const std::vector<std::string>& targets) {
             std::vector<const char*> names;
             names.reserve(targets.size());
             bool nul = key.find('\0') != std::string::npos;
             for (const std::string& t : targets) {
               nul = nul || t.find('\0') != std::string::npos;
               names.push_back(t.c_str());
             }
             mooncake_task_id_t id{0, 0};
             int rc = MOONCAKE_STORE_INVALID_PARAMS;
             if (!nul) {
               auto h = self.handle();
               py::gil_scoped_release nogil;
               rc = mooncake_store_create_copy_task(h->get(), CKey(key), names.data(),
                                                    names.size(), &id);
             }
             return Created(rc, id);
           },
           py::arg("key"), py::arg("targets"),
           "Copy an object to target segments.\n\n"
           "Args:\n"
           "    key: Object key to copy.\n"
           "    targets: List of target segment names.\n\n"
           "Returns:\n"
           "    tuple[UUID, int]: (UUID of the copy task, error code: 0 if success, "
           "non-zero if failure)")
      .def("create_move_task",
           [](Store& self, const std::string& key, const std::string& source,
              const std::string& target) {
             mooncake_task_id_t id{0, 0};
             int rc = MOONCAKE_STORE_INVALID_PARAMS;
             if (source.find('\0') == std::string::npos &&
                 target.find('\0') == std::string::npos) {
               auto h = self.handle();
               py::gil_scoped_release nogil;
               rc = mooncake_store_create_move_task(h->get(), CKey(key), source.c_str(),
                                                    target.c_str(), &id);
             }
             return Created(rc, id);
           },
           py::arg("key"), py::arg("source"), py::arg("target"),
           "Move an object from source segment to target segment.\n\n"
           "Args:\n"
           "    key: Object key to move.\n"
           "    source: Source segment name.\n"
           "    target: Target segment name.\n\n"
           "Returns:\n"
           "    tuple[UUID, int]: (UUID of the move task, error code: 0 if success, "
           "non-zero if failure)")
      .def("query_task",
           [](Store& self, const Uuid& task_id) -> py::tuple {
             mooncake_task_info_t info;
             int rc;
             {
               auto h = self.handle();
               py::gil_scoped_release nogil;
               rc = mooncake_store_query_task(h->get(), {task_id.first, task_id.second}, &info);
             }
             if (rc != 0) return py::make_tuple(py::none(), rc);
             QueryTaskResponse r;
             r.id = {info.id.high, info.id.low};
             r.type = static_cast<TaskType>(info.type);
             r.status = static_cast<TaskStatus>(info.status);
             r.created_at_ms_epoch = info.created_at_ms_epoch;
             r.last_updated_at_ms_epoch = info.last_updated_at_ms_epoch;
             r.assigned_client = {info.assigned_client.high, info.assigned_client.low};
             r.message = info.message;
             return py::make_tuple(py::cast(std::move(r)), 0);
           },
           py::arg("task_id"),
           "Query the status of a task.\n\n"
           "Args:\n"
           "    task_id: UUID of the task to query.\n\n"
           "Returns:\n"
           "    tuple[QueryTaskResponse | None, int]: (QueryTaskResponse if success, error "
           "code: 0 if success, non-zero if failure)");
}

}  // namespace mooncake_py
