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

// setup(...): Mooncake's positional/keyword and dict forms, read by ReadSetupArgs
// (setup_args.h, which says what each setting becomes). Each setting accepted but not applied
// warns (UserWarning, naming the key and why) before the connect; TypeError for arguments
// Mooncake's signature refuses; -600 for unusable values; else mooncake_store_setup's code.
int Setup(Store& self, const py::args& args, const py::kwargs& kwargs);

int Connect(Store& self, const std::optional<std::string>& socket_path,
            py::handle local_buffer_size, py::handle tenant_id);

int Close(Store& self);

std::string GetHostname(Store& self);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_LIFECYCLE_H_
