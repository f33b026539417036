// setup()/connect()/close()/get_hostname(): argument parsing (sizes, tenant ids, the
// setup dict) and the connects themselves. See lifecycle.h.
#include "lifecycle.h"

#include <cctype>
#include <initializer_list>
#include <utility>

#include "mooncake_store.h"

namespace py = pybind11;

namespace mooncake_py {

namespace {

// A size argument of setup()/connect(): an int, or a string such as "16MB", read by the
// library (mooncake_store_parse_size) exactly as the daemon's flags are. False for anything
// else (a negative int, "50%", a float, a string with a NUL in it).
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

std::string StringArg(const char* name, py::handle value) {
  if (!value || value.is_none()) return "";  // missing from a dict, or None
  if (!PyUnicode_Check(value.ptr())) {
    throw py::type_error(std::string("setup(): ") + name + " must be a str");
  }
  return value.cast<std::string>();
}

// A tenant_id of setup()/connect(): None (names none) or a str. False for a str the C ABI
// could not carry whole (one with a NUL in it); the library judges the rest (-600).
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

// enable_ssd_offload of setup(): a bool (or 0/1), or, as Mooncake's config dicts spell it,
// a str ("true"/"false", "1"/"0", "yes"/"no", "on"/"off", "" for false; any case). False
// for another str; TypeError for another type. Missing or None is false.
bool OffloadArg(py::handle value, bool* out) {
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
    throw py::type_error("setup(): enable_ssd_offload must be a bool or a str");
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

// ssd_offload_path of setup(): "" (none), or the daemon's --ssd_path. The daemon owns the
// SSD tier and this process may not even see the directory, so only its form is checked:
// an absolute path (else false).
bool OffloadPathArg(py::handle value) {
  std::string path = StringArg("ssd_offload_path", value);
  if (path.empty()) return true;
  return path[0] == '/' && path.find('\0') == std::string::npos;
}

// Names the handle's tenant for the connect that follows (mooncake_store_set_tenant).
int SetTenant(const std::shared_ptr<StoreHandle>& handle,
              const std::optional<std::string>& tenant) {
  return mooncake_store_set_tenant(handle->get(), tenant ? tenant->c_str() : nullptr);
}

// enable_ssd_offload=True asks for every put of the handle to be offloaded; False leaves it
// to the master's --enable_offload (mooncake_store_set_ssd_offload).
int SetOffload(const std::shared_ptr<StoreHandle>& handle, bool offload) {
  return mooncake_store_set_ssd_offload(handle->get(), offload ? MOONCAKE_SSD_OFFLOAD_ON
                                                               : MOONCAKE_SSD_OFFLOAD_DEFAULT);
}

}  // namespace

// setup(local_hostname, metadata_server, global_segment_size, local_buffer_size, protocol,
//       device_name, master_server_addr[, engine[, enable_ssd_offload[, ssd_offload_path]]]
//       [, tenant_id=]) or setup(config_dict).
int Setup(Store& self, const py::args& args, const py::kwargs& kwargs) {
  static const char* const kNames[] = {"local_hostname", "metadata_server",
                                       "global_segment_size", "local_buffer_size",
                                       "protocol", "device_name", "master_server_addr"};
  constexpr size_t kCount = 7;
  // Alternative spellings: Mooncake's own positional name, and its config-dict key.
  auto canonical = [](const std::string& key) -> std::string {
    if (key == "rdma_devices") return "device_name";
    if (key == "master_server_address") return "master_server_addr";
    return key;
  };

  py::object values[kCount];
  py::object tenant_id;  // this store's own keyword (and dict key): the handle's tenant
  // Mooncake's SSD keywords (and dict keys), after engine when positional.
  py::object enable_ssd_offload, ssd_offload_path;
  auto ssd_arg = [&](const std::string& key) -> py::object* {
    if (key == "enable_ssd_offload") return &enable_ssd_offload;
    if (key == "ssd_offload_path") return &ssd_offload_path;
    return nullptr;
  };
  bool dict_form = args.size() == 1 && kwargs.size() == 0 && PyDict_Check(args[0].ptr());
  if (dict_form) {
    // Mooncake's setup(dict) also takes keys of features this store configures in the
    // daemon (SSD prefetch, ...): those are ignored. A missing key takes its default.
    for (auto item : py::reinterpret_borrow<py::dict>(args[0])) {
      std::string key = canonical(py::str(item.first));
      if (key == "tenant_id") tenant_id = py::reinterpret_borrow<py::object>(item.second);
      if (py::object* ssd = ssd_arg(key)) *ssd = py::reinterpret_borrow<py::object>(item.second);
      for (size_t i = 0; i < kCount; ++i) {
        if (key == kNames[i]) values[i] = py::reinterpret_borrow<py::object>(item.second);
      }
    }
  } else {
    // Mooncake's positional order goes on: engine, enable_ssd_offload, ssd_offload_path.
    if (args.size() > kCount + 3) {
      throw py::type_error("setup() takes 7 positional arguments (up to 10 with engine, "
                           "enable_ssd_offload and ssd_offload_path)");
    }
    for (size_t i = 0; i < args.size() && i < kCount; ++i) values[i] = args[i];
    if (args.size() > kCount + 1) enable_ssd_offload = args[kCount + 1];
    if (args.size() > kCount + 2) ssd_offload_path = args[kCount + 2];
    for (auto item : kwargs) {
      std::string key = canonical(py::str(item.first));
      if (key == "engine") continue;  // Mooncake's optional TransferEngine: the daemon has its own
      if (key == "tenant_id") {
        tenant_id = py::reinterpret_borrow<py::object>(item.second);
        continue;
      }
      if (py::object* ssd = ssd_arg(key)) {
        if (*ssd) throw py::type_error("setup() got multiple values for argument '" + key + "'");
        *ssd = py::reinterpret_borrow<py::object>(item.second);
        continue;
      }
      size_t i = 0;
      while (i < kCount && key != kNames[i]) ++i;
      if (i == kCount) {
        throw py::type_error("setup() got an unexpected keyword argument '" + key + "'");
      }
      if (values[i]) throw py::type_error("setup() got multiple values for argument '" + key + "'");
      values[i] = py::reinterpret_borrow<py::object>(item.second);
    }
    for (size_t i = 0; i < kCount; ++i) {
      if (!values[i]) {
        throw py::type_error(std::string("setup() missing required argument '") + kNames[i] + "'");
      }
    }
  }

  uint64_t global_segment_size = 0, local_buffer_size = kDefaultLocalBufferSize;
  if (values[2] && !SizeArg(values[2], &global_segment_size)) return kInvalidParams;
  if (values[3] && !SizeArg(values[3], &local_buffer_size)) return kInvalidParams;
  std::optional<std::string> tenant;
  if (!TenantArg(tenant_id, &tenant)) return kInvalidParams;
  bool offload = false;
  if (!OffloadArg(enable_ssd_offload, &offload) || !OffloadPathArg(ssd_offload_path)) {
    return kInvalidParams;
  }
  std::string strings[kCount];
  for (size_t i : std::initializer_list<size_t>{0, 1, 4, 5, 6}) {
    strings[i] = StringArg(kNames[i], values[i]);
  }

  auto handle = self.HandleForConnect(local_buffer_size);
  int rc = SetTenant(handle, tenant);
  if (rc == 0) rc = SetOffload(handle, offload);
  if (rc != 0) return rc;
  {
    py::gil_scoped_release nogil;
    rc = mooncake_store_setup(handle->get(), strings[0].c_str(), strings[1].c_str(),
                              global_segment_size, local_buffer_size, strings[4].c_str(),
                              strings[5].c_str(), strings[6].c_str());
  }
  if (rc == 0) self.Connected(handle, local_buffer_size);
  return rc;
}

int Connect(Store& self, const std::optional<std::string>& socket_path,
            py::handle local_buffer_size, py::handle tenant_id) {
  uint64_t pool_size = 0;
  if (!SizeArg(local_buffer_size, &pool_size)) return kInvalidParams;
  std::optional<std::string> tenant;
  if (!TenantArg(tenant_id, &tenant)) return kInvalidParams;
  auto handle = self.HandleForConnect(pool_size);
  int rc = SetTenant(handle, tenant);
  if (rc == 0) rc = SetOffload(handle, false);  // connect() has no such choice: the default
  if (rc != 0) return rc;
  {
    py::gil_scoped_release nogil;
    rc = mooncake_store_connect(handle->get(), socket_path ? socket_path->c_str() : nullptr,
                                pool_size);
  }
  if (rc == 0) self.Connected(handle, pool_size);
  return rc;
}

int Close(Store& self) {
  auto h = self.handle();
  int rc;
  {
    py::gil_scoped_release nogil;
    rc = mooncake_store_close(h->get());
  }
  self.Closed();
  return rc;
}

std::string GetHostname(Store& self) {
  auto h = self.handle();
  py::gil_scoped_release nogil;
  char buf[1024];  // "host:port"; a longer name would answer -600, and then "" is returned
  if (mooncake_store_get_hostname(h->get(), buf, sizeof(buf)) != 0) return "";
  return buf;
}

}  // namespace mooncake_py
