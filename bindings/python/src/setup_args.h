// The arguments of MooncakeDistributedStore.setup(), read as Mooncake's setup() reads them
// (mooncake-integration/store/store_py.cpp): the positional/keyword form
//
//   setup(local_hostname, metadata_server, global_segment_size, local_buffer_size, protocol,
//         rdma_devices, master_server_addr, engine=None, enable_ssd_offload=False,
//         ssd_offload_path="", tenant_id="default", enable_client_http_server=False,
//         client_http_port=9300)
//
// and the dict form setup(config) with the same keys (and Mooncake's ipc_socket_path).
// Also accepted: device_name for rdma_devices, master_server_address for
// master_server_addr (the names the engines' config files use).
//
// What each setting becomes here (docs/mooncake-api.md, "package-and-setup"):
// - honoured: global_segment_size, local_buffer_size, master_server_addr (compared with the
//   daemon's master as an endpoint), tenant_id;
// - enable_ssd_offload: Mooncake's switch of the client's own SSD tier; the tier is the
//   daemon's here, so True warns when the daemon has none (lifecycle.cc);
// - accepted, their role being the daemon's: local_hostname (the daemon advertises its own
//   endpoint, get_hostname()), metadata_server (the daemon keeps the cluster's metadata
//   with the master), protocol and rdma_devices (the daemon's --protocol and
//   --rdma_devices choose the transports). They are required positional arguments of every
//   engine's call, so they cannot be left out and do not warn;
// - accepted and ignored, each with a warning naming the key and why: engine (not None),
//   ssd_offload_path (not ""), enable_client_http_server (true; with client_http_port),
//   ipc_socket_path (not ""), and any dict key Mooncake's setup() does not know.
//
// Input policy: anything. Types Mooncake's setup() would refuse (a non-str host, an unknown
// keyword, a missing positional argument, an argument given twice) raise TypeError; values
// it answers -600 for (an unusable size, a malformed tenant id, a port that is not an int)
// make ReadSetupArgs return false.
#ifndef MOONCAKE_STORE_PY_SETUP_ARGS_H_
#define MOONCAKE_STORE_PY_SETUP_ARGS_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store.h"

namespace mooncake_py {

namespace py = pybind11;

struct SetupArgs {
  // Passed to mooncake_store_setup (which resolves master_server_addr; "" checks nothing).
  std::string local_hostname, metadata_server, protocol, device_name, master_server_addr;
  uint64_t global_segment_size = 0;
  uint64_t local_buffer_size = kDefaultLocalBufferSize;
  bool enable_ssd_offload = false;     // warn when the daemon has no SSD tier (lifecycle.cc)
  std::optional<std::string> tenant;   // mooncake_store_set_tenant; none: the default tenant
  // One line per setting accepted but not applied: "key: why". setup() warns with each.
  std::vector<std::string> ignored;
  // Why ReadSetupArgs returned false: the setting, its value and the rule it broke.
  std::string refused;
};

// Reads setup()'s arguments (either form) into *out. False (with out->refused) when a value
// is one setup() answers -600 for; TypeError as Mooncake's signature would raise it.
bool ReadSetupArgs(const py::args& args, const py::kwargs& kwargs, SetupArgs* out);

// A size argument of setup()/connect(): an int, or a string such as "16MB", read by the
// library (mooncake_store_parse_size) exactly as the daemon's flags are. False for anything
// else (a negative int, "50%", a float, a string with a NUL in it).
bool SizeArg(py::handle value, uint64_t* out);
// What SizeArg refused, for the message: "local_buffer_size '12XB' is not a size ...".
std::string SizeRefused(const char* name, py::handle value);

// A tenant_id of setup()/connect(): None (names none) or a str; TypeError for another type.
// False for a str the C ABI could not carry whole (one with a NUL in it); the library
// judges the rest (-600).
bool TenantArg(py::handle value, std::optional<std::string>* out);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_SETUP_ARGS_H_
