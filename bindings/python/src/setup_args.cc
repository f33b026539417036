// setup()'s argument reading: Mooncake's positional/keyword and dict forms, and what each
// setting becomes. See setup_args.h.
#include "setup_args.h"

#include <cctype>
#include <cstdlib>
#include <utility>

#include "mooncake_store.h"

namespace mooncake_py {

namespace {

// Mooncake's setup() parameters, in its positional order.
enum Param : size_t {
  kLocalHostname,
  kMetadataServer,
  kGlobalSegmentSize,
  kLocalBufferSize,
  kProtocol,
  kDeviceName,
  kMasterServerAddr,
  kEngine,
  kEnableSsdOffload,
  kSsdOffloadPath,
  kTenantId,
  kEnableClientHttpServer,
  kClientHttpPort,
  kIpcSocketPath,  // a key of the dict form only
  kParamCount,
};
constexpr size_t kPositional = kIpcSocketPath;  // setup() takes up to 13 positional arguments
constexpr size_t kRequired = kEngine;           // of which the first 7 are required

const char* const kNames[kParamCount] = {
    "local_hostname", "metadata_server", "global_segment_size", "local_buffer_size",
    "protocol", "device_name", "master_server_addr", "engine", "enable_ssd_offload",
    "ssd_offload_path", "tenant_id", "enable_client_http_server", "client_http_port",
    "ipc_socket_path"};

// Mooncake's default tenant is named "default"; here the handle that names none is in it.
constexpr char kMooncakeDefaultTenant[] = "default";

// The parameter a keyword (or dict key) names, kParamCount for none. Mooncake's positional
// name rdma_devices, and the config files' master_server_address, are spellings of ours.
size_t ParamOf(const std::string& key) {
  if (key == "rdma_devices") return kDeviceName;
  if (key == "master_server_address") return kMasterServerAddr;
  for (size_t i = 0; i < kParamCount; ++i) {
    if (key == kNames[i]) return i;
  }
  return kParamCount;
}

std::string StringArg(size_t param, py::handle value) {
  if (!value || value.is_none()) return "";  // missing from a dict, or None
  if (!PyUnicode_Check(value.ptr())) {
    throw py::type_error(std::string("setup(): ") + kNames[param] + " must be a str");
  }
  return value.cast<std::string>();
}

// A bool of setup(): a bool (or 0/1), or, as Mooncake's config dicts spell it, a str
// ("true"/"false", "1"/"0", "yes"/"no", "on"/"off", "" for false; any case). False for
// another str; TypeError for another type. Missing or None is false.
bool BoolArg(size_t param, py::handle value, bool* out) {
  *out = false;
  if (!value || value.is_none()) return true;
  if (PyBool_Check(value.ptr())) {
    *out = value.ptr() == Py_True;
    return true;
  }
  if (PyLong_Check(value.ptr())) {
    long v = PyLong_AsLong(value.ptr());
    if (PyErr_Occurred()) PyErr_Clear();
    *out = v == 1;
    return v == 0 || v == 1;
  }
  if (!PyUnicode_Check(value.ptr())) {
    throw py::type_error(std::string("setup(): ") + kNames[param] + " must be a bool or a str");
  }
  std::string text = value.cast<std::string>();
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* yes : {"true", "1", "yes", "on"}) {
    if (text == yes) *out = true;
  }
  if (*out) return true;
  for (const char* no : {"false", "0", "no", "off", ""}) {
    if (text == no) return true;
  }
  return false;
}

// client_http_port: an int, or a str of one (the dict form's spelling), in 0..65535. False
// for another str; TypeError for another type. Missing or None is Mooncake's default.
bool PortArg(py::handle value) {
  if (!value || value.is_none()) return true;
  long port = -1;
  if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) {
    port = PyLong_AsLong(value.ptr());
    if (PyErr_Occurred()) PyErr_Clear();
  } else if (PyUnicode_Check(value.ptr())) {
    std::string text = value.cast<std::string>();
    char* end = nullptr;
    port = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || text.find('\0') != std::string::npos) return false;
  } else {
    throw py::type_error("setup(): client_http_port must be an int");
  }
  return port >= 0 && port <= 65535;
}

// ssd_offload_path: "" (none), or the daemon's --ssd_path. The daemon owns the SSD tier and
// this process may not even see the directory, so only its form is checked: an absolute
// path (else false).
bool OffloadPathArg(const std::string& path) {
  return path.empty() || (path[0] == '/' && path.find('\0') == std::string::npos);
}

// value as Python shows it, cut short: it is the caller's and may be anything.
std::string Shown(py::handle value) {
  std::string text = py::repr(value).cast<std::string>();
  return text.size() <= 64 ? text : text.substr(0, 61) + "...";
}

// Sets out->refused to "<setting> <value> <rule>" and returns false.
bool Refused(SetupArgs* out, size_t param, py::handle value, const std::string& rule) {
  out->refused = std::string(kNames[param]) + " " + Shown(value) + " " + rule;
  return false;
}

// The settings in values, read into *out (see setup_args.h for what each becomes).
bool Interpret(const py::object (&values)[kParamCount], SetupArgs* out) {
  out->local_hostname = StringArg(kLocalHostname, values[kLocalHostname]);
  out->metadata_server = StringArg(kMetadataServer, values[kMetadataServer]);
  out->protocol = StringArg(kProtocol, values[kProtocol]);
  out->device_name = StringArg(kDeviceName, values[kDeviceName]);
  out->master_server_addr = StringArg(kMasterServerAddr, values[kMasterServerAddr]);
  const py::object& global = values[kGlobalSegmentSize];
  const py::object& local = values[kLocalBufferSize];
  if (global && !SizeArg(global, &out->global_segment_size)) {
    out->refused = SizeRefused(kNames[kGlobalSegmentSize], global);
    return false;
  }
  if (local && !SizeArg(local, &out->local_buffer_size)) {
    out->refused = SizeRefused(kNames[kLocalBufferSize], local);
    return false;
  }
  if (!BoolArg(kEnableSsdOffload, values[kEnableSsdOffload], &out->enable_ssd_offload)) {
    return Refused(out, kEnableSsdOffload, values[kEnableSsdOffload],
                   "is not a bool (True/False, or 'true'/'false', 'yes'/'no', 'on'/'off')");
  }
  if (!TenantArg(values[kTenantId], &out->tenant)) {
    return Refused(out, kTenantId, values[kTenantId], "holds a NUL byte");
  }
  if (out->tenant && *out->tenant == kMooncakeDefaultTenant) out->tenant.reset();

  if (values[kEngine] && !values[kEngine].is_none()) {
    out->ignored.push_back(
        "engine: the daemon is this host's transfer engine; the TransferEngine passed is not "
        "used");
  }
  std::string ssd_path = StringArg(kSsdOffloadPath, values[kSsdOffloadPath]);
  if (!OffloadPathArg(ssd_path)) {
    return Refused(out, kSsdOffloadPath, values[kSsdOffloadPath],
                   "is not '' or an absolute path (the daemon's --ssd_path)");
  }
  if (!ssd_path.empty()) {
    out->ignored.push_back(
        "ssd_offload_path: the SSD tier is the daemon's (its --ssd_path); this path is not "
        "used");
  }
  bool http_server = false;
  if (!BoolArg(kEnableClientHttpServer, values[kEnableClientHttpServer], &http_server)) {
    return Refused(out, kEnableClientHttpServer, values[kEnableClientHttpServer],
                   "is not a bool");
  }
  if (!PortArg(values[kClientHttpPort])) {
    return Refused(out, kClientHttpPort, values[kClientHttpPort], "is not a port (0..65535)");
  }
  if (http_server) {
    out->ignored.push_back(
        "enable_client_http_server, client_http_port: a client runs no HTTP server here; "
        "the daemon serves this host's metrics on its admin port (--metrics_port, default "
        "9300: /metrics, /health)");
  }
  std::string ipc_socket = StringArg(kIpcSocketPath, values[kIpcSocketPath]);
  if (!ipc_socket.empty()) {
    out->ignored.push_back(
        "ipc_socket_path: setup() reaches the daemon at $MOONCAKE_SOCKET (connect(socket_path) "
        "names another); this path is not used");
  }
  return true;
}

}  // namespace

bool SizeArg(py::handle value, uint64_t* out) {
  if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) {
    unsigned long long v = PyLong_AsUnsignedLongLong(value.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    *out = v;
    return true;
  }
  if (!PyUnicode_Check(value.ptr())) return false;
  std::string text = value.cast<std::string>();
  if (text.find('\0') != std::string::npos) return false;  // "16\0MB" must not read as 16
  return mooncake_store_parse_size(text.c_str(), out) == MOONCAKE_STORE_OK;
}

std::string SizeRefused(const char* name, py::handle value) {
  return std::string(name) + " " + Shown(value) +
         " is not a size: an int of bytes, or a str such as '4096', '16MB', '1.5G'";
}

bool TenantArg(py::handle value, std::optional<std::string>* out) {
  if (!value || value.is_none()) {
    out->reset();
    return true;
  }
  if (!PyUnicode_Check(value.ptr())) throw py::type_error("tenant_id must be a str or None");
  std::string text = value.cast<std::string>();
  if (text.find('\0') != std::string::npos) return false;  // "a\0b" must not read as "a"
  *out = std::move(text);
  return true;
}

bool ReadSetupArgs(const py::args& args, const py::kwargs& kwargs, SetupArgs* out) {
  py::object values[kParamCount];
  bool dict_form = args.size() == 1 && kwargs.size() == 0 && PyDict_Check(args[0].ptr());
  if (dict_form) {
    // Mooncake reads the keys it knows and drops the rest without a word; here a key that
    // is no setting warns. A missing key takes its default.
    for (auto item : py::reinterpret_borrow<py::dict>(args[0])) {
      std::string key = py::str(item.first);
      size_t param = ParamOf(key);
      if (param == kParamCount) {
        out->ignored.push_back(key + ": not a setting of Mooncake's setup(); ignored");
        continue;
      }
      values[param] = py::reinterpret_borrow<py::object>(item.second);
    }
    return Interpret(values, out);
  }
  if (args.size() > kPositional) {
    throw py::type_error("setup() takes at most 13 positional arguments (" +
                         std::to_string(args.size()) + " given)");
  }
  for (size_t i = 0; i < args.size(); ++i) values[i] = args[i];
  for (auto item : kwargs) {
    std::string key = py::str(item.first);
    size_t param = ParamOf(key);
    if (param >= kPositional) {  // ipc_socket_path is a dict key only, as in Mooncake
      throw py::type_error("setup() got an unexpected keyword argument '" + key + "'");
    }
    if (values[param]) {
      throw py::type_error(std::string("setup() got multiple values for argument '") +
                           kNames[param] + "'");
    }
    values[param] = py::reinterpret_borrow<py::object>(item.second);
  }
  for (size_t i = 0; i < kRequired; ++i) {
    if (!values[i]) {
      throw py::type_error(std::string("setup() missing required argument '") + kNames[i] + "'");
    }
  }
  return Interpret(values, out);
}

}  // namespace mooncake_py
