// mooncake_store: the Python binding of include/mooncake_store.h.
//
// MooncakeDistributedStore, ReplicateConfig and SoftPinAction follow Mooncake's documented
// Python API (mooncake.store) — method names, positional argument order, defaults, return
// conventions — so that an inference engine's Mooncake connector works by importing this
// module instead. Everything goes through the C ABI; nothing here speaks the daemon's
// socket protocol.
//
// Threading: one store object is meant to be shared by many threads. Every call into the
// C library runs with the GIL released; Python objects are only touched with it held
// (arguments are copied into C++ values first, results built afterwards).
//
// This file registers the module and its classes; the methods live in lifecycle.cc,
// data_ops.cc (one buffer per key) and scatter_gather.cc (several), the buffer objects in
// buffers.cc.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "buffers.h"
#include "data_ops.h"
#include "lifecycle.h"
#include "mooncake_enums.h"
#include "mooncake_store.h"
#include "ranges.h"
#include "replicas.h"
#include "replicate_config.h"
#include "scatter_gather.h"
#include "segments.h"
#include "sessions.h"
#include "engram.h"
#include "store_extras.h"
#include "store.h"
#include "store_handle.h"
#include "tensor_methods.h"
#include "tasks.h"
#include "write_family.h"

namespace py = pybind11;

namespace mooncake_py {
namespace {

// Wraps a method whose body only calls into the C library: the GIL is released around it.
template <typename R, typename... A>
auto NoGil(R (*f)(mooncake_store_t, A...)) {
  return [f](Store& self, A... args) {
    auto h = self.handle();
    py::gil_scoped_release nogil;
    return f(h->get(), args...);
  };
}

// NoGil for a method of one key (passed through CKey).
template <typename R>
auto NoGilKey(R (*f)(mooncake_store_t, const char*)) {
  return [f](Store& self, const std::string& key) {
    auto h = self.handle();
    py::gil_scoped_release nogil;
    return f(h->get(), CKey(key));
  };
}

}  // namespace
}  // namespace mooncake_py

PYBIND11_MODULE(mooncake_store, m) {
  using namespace mooncake_py;
  m.doc() =
      "Mooncake Store client: MooncakeDistributedStore with the API of Mooncake's "
      "mooncake.store, over libmooncake_store (include/mooncake_store.h).";
  m.attr("ABI_VERSION") = MOONCAKE_STORE_ABI_VERSION;
  m.attr("DEFAULT_LOCAL_BUFFER_SIZE") = kDefaultLocalBufferSize;
  m.def("strerror", &mooncake_store_strerror, py::arg("code"),
        "The name of a result code, e.g. strerror(-704) == 'object not found'.");

  RegisterMooncakeEnums(m);
  py::enum_<SoftPinAction>(m, "SoftPinAction",
                           "What a put/upsert does to an object's soft pin.")
      .value("PRESERVE", SoftPinAction::PRESERVE, "keep the soft pin the object has (default)")
      .value("ENABLE", SoftPinAction::ENABLE, "soft-pin the object")
      .value("DISABLE", SoftPinAction::DISABLE, "remove the object's soft pin");

  py::class_<ReplicateConfig>(m, "ReplicateConfig", "How a put places and pins an object.")
      .def(py::init<>())
      .def_readwrite("replica_num", &ReplicateConfig::replica_num,
                     "memory replicas on distinct segments (default 1)")
      .def_readwrite("with_hard_pin", &ReplicateConfig::with_hard_pin,
                     "never evicted; removed only with force")
      .def_readwrite("soft_pin_action", &ReplicateConfig::soft_pin_action)
      .def_readwrite("soft_pin_ttl_ms", &ReplicateConfig::soft_pin_ttl_ms,
                     "None (the master's --default_kv_soft_pin_ttl), or an int in [0, 2**64) "
                     "(else TypeError). Only valid with soft_pin_action ENABLE: with PRESERVE "
                     "or DISABLE, put/upsert return -600; above the master's "
                     "--max_kv_soft_pin_ttl -600; 0 pins nothing. The deadline is fixed at the "
                     "put's publication: reads do not extend it.")
      .def_readwrite("nof_replica_num", &ReplicateConfig::nof_replica_num,
                     "NVMe-oF replicas: not supported, a put with it > 0 returns -1012")
      .def_readwrite("dfs_replica_num", &ReplicateConfig::dfs_replica_num,
                     "DFS (3FS) replicas: not supported, a put with it > 0 returns -1012")
      .def_readwrite("preferred_nof_segments", &ReplicateConfig::preferred_nof_segments,
                     "NVMe-oF segments: not supported, a put naming any returns -1012")
      .def_property(
          "data_type",
          [](const ReplicateConfig& c) -> py::object {
            // An ObjectDataType, as Mooncake's field is; a value outside the enum (assigned
            // as an int, which puts answer -600 for) reads back as that int.
            if (c.data_type >= 0 && c.data_type <= static_cast<int>(ObjectDataType::GENERAL)) {
              return py::cast(static_cast<ObjectDataType>(c.data_type));
            }
            return py::int_(c.data_type);
          },
          [](ReplicateConfig& c, py::object v) { c.data_type = py::int_(v).cast<int>(); },
          "Mooncake's ObjectDataType (default UNKNOWN); assigned as the enum or an int, "
          "0..9 (else puts return -600); accepted, no per-type accounting")
      .def_readwrite("group_ids", &ReplicateConfig::group_ids,
                     "None, or one group id per key of the call (1 for put/upsert, len(keys) "
                     "for a batch; else -600), '' for a key in no group. Objects of one group "
                     "(per tenant) are leased, aged and evicted together; an object stays in "
                     "the group it was put in (an upsert naming another returns -600).")
      .def_property("with_soft_pin", &ReplicateConfig::with_soft_pin,
                    &ReplicateConfig::set_with_soft_pin,
                    "older boolean form: True is soft_pin_action ENABLE, False DISABLE")
      .def_readwrite("preferred_segment", &ReplicateConfig::preferred_segment,
                     "'host:port' of a daemon to place on; wins over preferred_segments")
      .def_readwrite("preferred_segments", &ReplicateConfig::preferred_segments)
      .def_readwrite("prefer_alloc_in_same_node", &ReplicateConfig::prefer_alloc_in_same_node,
                     "the first replica on this store's daemon (then others elsewhere)")
      .def("__str__", &ReplicateConfig::ToString)
      .def("__repr__", &ReplicateConfig::ToString)
      .def("__copy__", [](const ReplicateConfig& c) { return c; })
      .def("__deepcopy__", [](const ReplicateConfig& c, py::dict) { return c; }, py::arg("memo"));

  py::class_<BufferHandle, std::shared_ptr<BufferHandle>>(m, "BufferHandle", py::buffer_protocol(),
                                                          "A value read by get_buffer().")
      .def("ptr", &BufferHandle::ptr, "address of the bytes")
      .def("size", &BufferHandle::size)
      .def("__len__", &BufferHandle::size)
      .def_buffer([](BufferHandle& h) {
        return py::buffer_info(h.data(), 1, "B", static_cast<py::ssize_t>(h.size()));
      });

  py::class_<PoolMemory>(m, "_PoolMemory", py::buffer_protocol())
      .def_buffer([](PoolMemory& p) {
        return py::buffer_info(p.data(), 1, "B", static_cast<py::ssize_t>(p.size()));
      });

  RegisterReplicaClasses(m);

  const auto kConfig = py::arg("config") = py::none();

  py::class_<Store> store(m, "MooncakeDistributedStore");
  store.def(py::init<>())
      // lifecycle
      .def("setup", &Setup,
           "setup(local_hostname, metadata_server, global_segment_size, local_buffer_size, "
           "protocol, rdma_devices, master_server_addr, engine=None, enable_ssd_offload=False, "
           "ssd_offload_path='', tenant_id='default', enable_client_http_server=False, "
           "client_http_port=9300) -> int\n"
           "setup(config: dict) -> int  (the same keys, and ipc_socket_path)\n\n"
           "Mooncake's entry: connects to the local daemon ($MOONCAKE_SOCKET). Sizes are ints "
           "or strings such as '16MB' (else -600). master_server_addr must name the daemon's "
           "master, compared as an endpoint: names are resolved, so 'localhost:P' and "
           "'127.0.0.1:P' are one master (else -600, also for a name that does not resolve). "
           "local_hostname, metadata_server, protocol and rdma_devices (device_name) are "
           "accepted: what they configure in Mooncake is the daemon's here (its endpoint, its "
           "metadata, its transports). tenant_id: the tenant whose keys this store names, 1-64 "
           "characters of [A-Za-z0-9_.-] (else -600); 'default' or None names none (the "
           "daemon's default for this uid, else the default tenant); -1401 when the daemon "
           "keeps it for other uids. enable_ssd_offload (a bool, or 'true'/'false'): Mooncake's "
           "switch of the client's SSD tier; here the tier is the daemon's (--ssd_path), filled "
           "as the master's --enable_offload / --offload_on_evict say, so True only warns when "
           "the daemon has none, and False turns nothing off. Settings "
           "accepted but not applied warn (UserWarning, naming the key and why): engine, "
           "ssd_offload_path (only '' or an absolute path is accepted, else -600), "
           "enable_client_http_server with client_http_port, ipc_socket_path, and unknown "
           "dict keys.")
      .def("connect", &Connect, py::arg("socket_path") = py::none(),
           py::arg("local_buffer_size") = kDefaultLocalBufferSize,
           py::arg("tenant_id") = py::none(),
           "The native entry: connects to the daemon's socket (None: $MOONCAKE_SOCKET, else "
           "/run/mooncake/mooncaked.sock) with a pool of local_buffer_size bytes, in tenant "
           "tenant_id (as for setup).")
      .def("close", &Close, "Disconnects; returns 0, also when called twice.")
      .def("health_check", NoGil(&mooncake_store_health_check),
           "0 connected and the master reachable, 1 not connected, 2 master unreachable")
      .def("get_hostname", &GetHostname, "The daemon's 'host:port' ('' when not connected).")
      .def("last_error", &Store::LastError,
           "Why this thread's last failed call on this store failed, with the fix where there "
           "is one ('' after a success): mooncake_store_errmsg(), or the binding's own reason "
           "for a setup()/connect() argument or a key it could not pass on (a NUL byte). Kept "
           "per thread: ask on the thread that made the call. Calls keep returning Mooncake's "
           "int codes; a failed setup()/connect() also writes this line to stderr.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Store& self, py::args) { Close(self); })
      // put
      .def("put", &Put, py::arg("key"), py::arg("value"), kConfig,
           "Stores any contiguous buffer; never overwrites (an existing key returns 0).")
      .def("put_parts", &PutParts, py::arg("key"),
           "put_parts(key, *parts, config=None): stores the parts concatenated.")
      .def("put_batch", &PutBatch, py::arg("keys"), py::arg("values"), kConfig,
           "One int: 0, or the first failure.")
      .def("upsert", &Upsert, py::arg("key"), py::arg("value"), kConfig,
           "Like put, but replaces an existing value.")
      .def("put_from",
           [](Store& self, const std::string& key, py::handle ptr, uint64_t size,
              const ReplicateConfig* config) {
             return PutFrom(self, key, ptr, size, config, false);
           },
           py::arg("key"), py::arg("buffer_ptr"), py::arg("size"), kConfig)
      .def("upsert_from",
           [](Store& self, const std::string& key, py::handle ptr, uint64_t size,
              const ReplicateConfig* config) {
             return PutFrom(self, key, ptr, size, config, true);
           },
           py::arg("key"), py::arg("buffer_ptr"), py::arg("size"), kConfig)
      .def("batch_put_from", &BatchPutFrom, py::arg("keys"), py::arg("buffer_ptrs"),
           py::arg("sizes"), kConfig)
      .def("batch_put_from_multi_buffers", &BatchPutFromMulti, py::arg("keys"),
           py::arg("all_buffer_ptrs"), py::arg("all_sizes"), kConfig)
      // get
      .def("get", &Get, py::arg("key"), "The value as bytes; b'' on a miss or an error.")
      .def("get_batch", &GetBatch, py::arg("keys"))
      .def("get_buffer", &GetBuffer, py::arg("key"), "A BufferHandle, or None on a miss.")
      .def("batch_get_buffer", &BatchGetBuffer, py::arg("keys"))
      .def("get_into", &GetInto, py::arg("key"), py::arg("buffer_ptr"), py::arg("size"),
           "Bytes read, -704 on a miss, -600 when size is smaller than the value.")
      .def("batch_get_into", &BatchGetInto, py::arg("keys"), py::arg("buffer_ptrs"),
           py::arg("sizes"))
      .def("batch_get_into_multi_buffers", &BatchGetIntoMulti, py::arg("keys"),
           py::arg("all_buffer_ptrs"), py::arg("all_sizes"),
           py::arg("prefer_alloc_in_same_node") = false)
      // query and remove
      .def("is_exist", NoGilKey(&mooncake_store_is_exist), py::arg("key"),
           "1 present, 0 missing (or still being written), < 0 error")
      .def("batch_is_exist", &BatchIsExist, py::arg("keys"))
      .def("get_size", NoGilKey(&mooncake_store_get_size), py::arg("key"),
           "The value's size in bytes, -704 on a miss.")
      .def("get_replica_desc", &GetReplicaDesc, py::arg("key"),
           "The object's replicas as a list of ReplicaDescriptor (memory and SSD ones); [] on "
           "a miss or an error. Reads no bytes, but takes the read lease a get takes.")
      .def("batch_get_replica_desc", &BatchGetReplicaDesc, py::arg("keys"),
           "dict key -> list of ReplicaDescriptor, for the keys found (a miss or an error "
           "leaves the key out).")
      .def("remove",
           [](Store& self, const std::string& key, bool force) {
             auto h = self.handle();
             py::gil_scoped_release nogil;
             return mooncake_store_remove(h->get(), CKey(key), force ? 1 : 0);
           },
           py::arg("key"), py::arg("force") = false)
      .def("remove_by_regex",
           [](Store& self, const std::string& pattern, bool force) {
             auto h = self.handle();
             py::gil_scoped_release nogil;
             // A pattern with a NUL cannot be passed: -600, as for a malformed pattern.
             if (pattern.find('\0') != std::string::npos) return int64_t{kInvalidParams};
             return mooncake_store_remove_by_regex(h->get(), pattern.c_str(), force ? 1 : 0);
           },
           py::arg("regex_pattern"), py::arg("force") = false,
           "Removes the keys matching an ECMAScript regex; returns how many, or < 0.")
      .def("remove_all",
           [](Store& self, bool force) {
             auto h = self.handle();
             py::gil_scoped_release nogil;
             return mooncake_store_remove_all(h->get(), force ? 1 : 0);
           },
           py::arg("force") = false)
      // memory
      .def("register_buffer",
           [](Store& self, py::handle ptr, uint64_t size) {
             std::vector<BufferView> keep;
             Address a = ResolveAddress(ptr, false, &keep);
             if (!a.fits(size)) return kInvalidParams;
             auto h = self.handle();
             int rc;
             {
               py::gil_scoped_release nogil;
               rc = mooncake_store_register_buffer(h->get(), a.ptr, size);
             }
             if (rc == 0) {
               self.registry()->Add(RangeRegistry::kRegistered,
                                    reinterpret_cast<uintptr_t>(a.ptr), size);
             }
             return rc;
           },
           py::arg("buffer_ptr"), py::arg("size"))
      .def("unregister_buffer",
           [](Store& self, py::handle ptr) {
             std::vector<BufferView> keep;
             Address a = ResolveAddress(ptr, false, &keep);
             auto h = self.handle();
             int rc;
             {
               py::gil_scoped_release nogil;
               rc = mooncake_store_unregister_buffer(h->get(), a.ptr);
             }
             if (rc == 0) {
               self.registry()->Remove(RangeRegistry::kRegistered,
                                       reinterpret_cast<uintptr_t>(a.ptr));
             }
             return rc;
           },
           py::arg("buffer_ptr"))
      .def("alloc", &Alloc, py::arg("size"),
           "A writable memoryview of size bytes of the pool: puts from and gets into it are "
           "zero-copy, and numpy.frombuffer() wraps it without copying. The memory returns "
           "to the pool when the last view of it is gone. MemoryError when the pool is full.");
  RegisterRanges(m, store);
  RegisterWriteFamily(m, store);
  RegisterSegments(m, store);
  RegisterTensors(m, store);
  RegisterSessions(m, store);
  RegisterEngram(m, store);
  RegisterStoreExtras(m, store);
  RegisterTasks(m, store);
}
