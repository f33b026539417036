// setup()/connect()/close()/get_hostname(): the connects themselves (setup()'s arguments
// are read by setup_args.cc). See lifecycle.h.
#include "lifecycle.h"

#include "mooncake_store.h"
#include "setup_args.h"

namespace py = pybind11;

namespace mooncake_py {

namespace {

// Names the handle's tenant for the connect that follows (mooncake_store_set_tenant).
int SetTenant(const std::shared_ptr<StoreHandle>& handle,
              const std::optional<std::string>& tenant) {
  return mooncake_store_set_tenant(handle->get(), tenant ? tenant->c_str() : nullptr);
}

// The handle's puts leave offloading to the master's flags (--enable_offload,
// --offload_on_evict), whatever setup()'s enable_ssd_offload says: in Mooncake that flag
// gives the client an SSD tier of its own, which the master's flags then fill; here the
// tier is the daemon's (--ssd_path), one per host, and no setting of one application turns
// offloading on or off for the objects of all (docs/mooncake-api.md, "setup()").
int SetOffload(const std::shared_ptr<StoreHandle>& handle) {
  return mooncake_store_set_ssd_offload(handle->get(), MOONCAKE_SSD_OFFLOAD_DEFAULT);
}

// After a setup(enable_ssd_offload=True): a UserWarning when this host's daemon has no SSD
// tier, since then nothing is offloaded. unmount_local_disk_segment is the C ABI's question
// for it: 0 when the daemon has none, -1012 (and nothing done) when it has one. False when
// the warning was raised as an error (-W error).
bool WarnWithoutSsdTier(const std::shared_ptr<StoreHandle>& handle) {
  int rc;
  {
    py::gil_scoped_release nogil;
    rc = mooncake_store_unmount_local_disk_segment(handle->get());
    // A call that succeeds leaves the thread's last_error() as the setup left it: "" (the
    // question's -1012, "the tier is the daemon's", is no failure of the setup).
    mooncake_store_health_check(handle->get());
  }
  if (rc != 0) return true;
  return PyErr_WarnEx(PyExc_UserWarning,
                      "setup(): enable_ssd_offload: this host's daemon has no SSD tier, so "
                      "nothing will be offloaded: start mooncaked with --ssd_path and "
                      "--ssd_capacity, and the master with --enable_offload or "
                      "--offload_on_evict",
                      1) == 0;
}

}  // namespace

int Setup(Store& self, const py::args& args, const py::kwargs& kwargs) {
  SetupArgs a;
  if (!ReadSetupArgs(args, kwargs, &a)) return self.Refuse("setup", a.refused);
  // Before connecting: where warnings are errors (-W error), the setup does not happen.
  for (const std::string& why : a.ignored) {
    if (PyErr_WarnEx(PyExc_UserWarning, ("setup(): " + why).c_str(), 1) != 0) {
      throw py::error_already_set();
    }
  }
  auto handle = self.HandleForConnect(a.local_buffer_size);
  int rc = SetTenant(handle, a.tenant);
  if (rc == 0) rc = SetOffload(handle);
  if (rc != 0) return rc;
  {
    py::gil_scoped_release nogil;
    rc = mooncake_store_setup(handle->get(), a.local_hostname.c_str(), a.metadata_server.c_str(),
                              a.global_segment_size, a.local_buffer_size, a.protocol.c_str(),
                              a.device_name.c_str(), a.master_server_addr.c_str());
  }
  if (rc != 0) return rc;
  self.Connected(handle, a.local_buffer_size);
  if (a.enable_ssd_offload && !WarnWithoutSsdTier(handle)) {
    py::error_already_set raised;  // taken first: Close runs with no error pending
    Close(self);                   // -W error: the setup does not stand
    throw raised;
  }
  return 0;
}

int Connect(Store& self, const std::optional<std::string>& socket_path,
            py::handle local_buffer_size, py::handle tenant_id) {
  uint64_t pool_size = 0;
  if (!SizeArg(local_buffer_size, &pool_size)) {
    return self.Refuse("connect", SizeRefused("local_buffer_size", local_buffer_size));
  }
  std::optional<std::string> tenant;
  if (!TenantArg(tenant_id, &tenant)) {
    return self.Refuse("connect", "tenant_id holds a NUL byte");
  }
  auto handle = self.HandleForConnect(pool_size);
  int rc = SetTenant(handle, tenant);
  if (rc == 0) rc = SetOffload(handle);
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
