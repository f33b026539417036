// The lifecycle methods of MooncakeDistributedStore: setup() (Mooncake's positional and
// dict forms), connect(), close() and get_hostname().
#ifndef MOONCAKE_STORE_PY_LIFECYCLE_H_
#define MOONCAKE_STORE_PY_LIFECYCLE_H_

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "store.h"

namespace mooncake_py {

namespace py = pybind11;

// setup(local_hostname, metadata_server, global_segment_size, local_buffer_size, protocol,
//       device_name, master_server_addr[, engine[, enable_ssd_offload[, ssd_offload_path]]]
//       [, tenant_id=]) or setup(config_dict). enable_ssd_offload=True: every put of the
// store asks for offload to the SSD tier; False: the master's --enable_offload decides.
// ssd_offload_path: "" or an absolute path (else -600), the daemon's --ssd_path; only its
// form is checked, since the daemon owns the SSD tier.
int Setup(Store& self, const py::args& args, const py::kwargs& kwargs);

int Connect(Store& self, const std::optional<std::string>& socket_path,
            py::handle local_buffer_size, py::handle tenant_id);

int Close(Store& self);

std::string GetHostname(Store& self);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_LIFECYCLE_H_
