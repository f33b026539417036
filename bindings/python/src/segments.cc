// The segment calls, replica clearing and standalone mode of MooncakeDistributedStore, with
// Mooncake's argument names, defaults and return shapes (store_py.cpp). See segments.h and
// docs/mooncake-api.md, "segments", for how each maps onto the daemon.
#include "segments.h"

#include <fcntl.h>
#include <pybind11/stl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "buffers.h"
#include "lifecycle.h"
#include "mooncake_store.h"
#include "store_handle.h"

namespace mooncake_py {
namespace {

constexpr int kFileOpenFail = MOONCAKE_STORE_FILE_OPEN_FAIL;

void Warn(const std::string& text) {
  PyErr_WarnEx(PyExc_RuntimeWarning, text.c_str(), 1);
}

// The C ABI's keys of a list (CKey: a key with a NUL becomes "", refused with -600).
std::vector<const char*> KeyPointers(const std::vector<std::string>& keys) {
  std::vector<const char*> out;
  out.reserve(keys.size());
  for (const std::string& k : keys) out.push_back(CKey(k));
  return out;
}

// Mooncake's transports; anything else is a mistake, refused rather than ignored.
bool KnownProtocol(const std::string& protocol) {
  return protocol == "tcp" || protocol == "rdma";
}

// A segment id as Mooncake's calls carry them: a string (ours: the decimal id).
bool ParseSegmentId(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || text[0] == '-' || text[0] == '+' || v == 0) return false;
  *out = v;
  return true;
}

py::dict MountResult(int ret, const std::vector<uint64_t>& ids) {
  py::dict result;
  result["ret"] = ret;
  py::list list;
  for (uint64_t id : ids) list.append(py::str(std::to_string(id)));
  result["segment_ids"] = list;
  return result;
}

// unmount_segment and unmount_and_free_segment: Mooncake's first error, or 0.
int UnmountAll(Store& self, const std::vector<std::string>& segment_ids) {
  std::vector<uint64_t> ids(segment_ids.size(), 0);
  int first_error = 0;
  for (size_t i = 0; i < segment_ids.size(); ++i) {
    if (!ParseSegmentId(segment_ids[i], &ids[i]) && first_error == 0) first_error = kInvalidParams;
  }
  auto h = self.handle();
  py::gil_scoped_release nogil;
  for (uint64_t id : ids) {
    if (id == 0) continue;
    int rc = mooncake_store_unmount_segment(h->get(), id, nullptr, nullptr);
    if (rc != 0 && first_error == 0) first_error = rc;
  }
  return first_error;
}

// mount_segment of a file (Mooncake's form): opened and checked as Mooncake's real client
// opens and checks it (read-write, the range inside the file, a page-aligned offset), then
// its descriptor goes to the daemon, which maps the range (mooncake_store_mount_file_segment).
int MountFile(Store& self, const std::string& path, uint64_t size, uint64_t offset,
              uint64_t* id) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return kFileOpenFail;
  struct stat st;
  int rc = fstat(fd, &st) == 0 ? 0 : kFileOpenFail;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (rc == 0 && S_ISREG(st.st_mode)) {
    const uint64_t file_size = static_cast<uint64_t>(st.st_size);
    if (size == 0 || offset > file_size || size > file_size - offset) rc = kInvalidParams;
  }
  if (rc == 0 && (size == 0 || offset % page != 0)) rc = kInvalidParams;
  if (rc == 0) {
    auto h = self.handle();
    py::gil_scoped_release nogil;
    rc = mooncake_store_mount_file_segment(h->get(), fd, offset, size, id);
  }
  close(fd);  // the daemon holds its own reference to the file
  return rc;
}

// alloc_from_mem_pool: a block of the store's pool, never given back (as Mooncake's shared
// memory is not): it goes with the pool, when the store object does.
uint64_t AllocFromMemPool(Store& self, uint64_t size) {
  if (size == 0) return 0;
  auto h = self.handle();
  void* p;
  {
    py::gil_scoped_release nogil;
    p = mooncake_store_alloc(h->get(), size);
  }
  if (p == nullptr) return 0;
  self.registry()->Add(RangeRegistry::kPoolBlock, reinterpret_cast<uintptr_t>(p), size);
  return reinterpret_cast<uintptr_t>(p);
}

// setup_dummy(mem_pool_size, local_buffer_size, server_address): connects to the daemon
// of $MOONCAKE_SOCKET (our real client) with a pool of local_buffer_size bytes. The real
// client is named by server_address "host:port"; its port must be the daemon's.
int SetupDummy(Store& self, py::handle mem_pool_size, py::handle local_buffer_size,
               const std::string& server_address) {
  (void)mem_pool_size;  // Mooncake's dummy client takes it and uses it for nothing either
  int rc = Connect(self, std::nullopt, local_buffer_size, py::none());
  if (rc != 0 || server_address.empty()) return rc;
  std::string daemon = GetHostname(self);
  auto port_of = [](const std::string& a) {
    size_t colon = a.rfind(':');
    return colon == std::string::npos ? std::string() : a.substr(colon + 1);
  };
  if (port_of(server_address) != port_of(daemon)) {
    Warn("setup_dummy: server_address " + server_address + " is not this host's daemon (" +
         daemon + ")");
    Close(self);
    return kInvalidParams;
  }
  return 0;
}

// MooncakeHostMemAllocator: Mooncake's process-wide shared-memory allocator. Memory the
// daemon shares is the pool of a store, so with a store its blocks come from that pool
// (puts from and gets into them are zero-copy); without one they are page-aligned private
// memory, which put_from/get_into stage through the pool (one copy more).
class HostMemAllocator {
 public:
  explicit HostMemAllocator(Store* store) : store_(store) {}

  // Called with the GIL held (the store's handle is read under it); allocates without it.
  uintptr_t Alloc(uint64_t size) {
    if (size == 0) return 0;
    std::unique_ptr<PoolBlock> block;
    std::shared_ptr<StoreHandle> h = store_ != nullptr ? store_->handle() : nullptr;
    py::gil_scoped_release nogil;
    if (h) block = PoolBlock::Alloc(h, size, store_->registry());
    std::lock_guard<std::mutex> lock(mu_);
    if (block) {
      uintptr_t p = reinterpret_cast<uintptr_t>(block->data());
      pool_blocks_[p] = std::move(block);
      return p;
    }
    if (store_ != nullptr) return 0;  // the pool is full: Mooncake answers 0 as well
    void* p = nullptr;
    if (posix_memalign(&p, static_cast<size_t>(sysconf(_SC_PAGESIZE)), size) != 0) return 0;
    private_.emplace(reinterpret_cast<uintptr_t>(p), p);
    return reinterpret_cast<uintptr_t>(p);
  }

  int Free(uintptr_t ptr) {
    std::unique_ptr<PoolBlock> block;  // given back outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pool_blocks_.find(ptr);
    if (it != pool_blocks_.end()) {
      block = std::move(it->second);
      pool_blocks_.erase(it);
      return 0;
    }
    auto p = private_.find(ptr);
    if (p == private_.end()) return kInvalidParams;
    std::free(p->second);
    private_.erase(p);
    return 0;
  }

  ~HostMemAllocator() {
    for (auto& p : private_) std::free(p.second);
  }

 private:
  Store* const store_;  // kept alive by the Python reference (keep_alive below)
  std::mutex mu_;
  std::unordered_map<uintptr_t, std::unique_ptr<PoolBlock>> pool_blocks_;
  std::unordered_map<uintptr_t, void*> private_;
};

}  // namespace

void RegisterSegments(py::module_& m, py::class_<Store>& store) {
  store
      .def("batch_remove",
           [](Store& self, const std::vector<std::string>& keys, bool force) {
             std::vector<int> results(keys.size(), 0);
             std::vector<const char*> ptrs = KeyPointers(keys);
             auto h = self.handle();
             py::gil_scoped_release nogil;
             int rc = mooncake_store_batch_remove(h->get(), ptrs.data(), keys.size(),
                                                  force ? 1 : 0, results.data());
             if (rc != 0) results.assign(keys.size(), rc);
             return results;
           },
           py::arg("keys"), py::arg("force") = false,
           "Batch remove objects by keys. Returns a list of status codes (0=success, "
           "negative=error code) for each key.")
      .def("batch_replica_clear",
           [](Store& self, const std::vector<std::string>& keys, const std::string& segment_name) {
             std::vector<int> codes(keys.size(), 0);
             std::vector<const char*> ptrs = KeyPointers(keys);
             int rc;
             {
               auto h = self.handle();
               py::gil_scoped_release nogil;
               rc = segment_name.find('\0') != std::string::npos
                        ? kInvalidParams
                        : mooncake_store_batch_replica_clear(h->get(), ptrs.data(), keys.size(),
                                                             segment_name.c_str(), codes.data());
             }
             std::vector<std::string> cleared;
             if (rc != 0) return cleared;  // Mooncake's shape for a failed call: []
             for (size_t i = 0; i < keys.size(); ++i) {
               if (codes[i] == 0) cleared.push_back(keys[i]);
             }
             return cleared;
           },
           py::arg("keys"), py::arg("segment_name") = "",
           "Clear replicas for the given keys. Requires lease to be expired. Returns the keys "
           "cleared: every replica when segment_name is '', else those on the daemon named "
           "segment_name ('host:port', as ReplicaDescriptor and get_hostname() name it); "
           "keys with an active lease, missing, being written or hard-pinned are left out.")
      .def("mount_segment",
           [](Store& self, py::handle path, uint64_t size, uint64_t offset,
              const std::string& protocol, const std::string& location) {
             (void)location;
             if (!KnownProtocol(protocol)) return MountResult(kInvalidParams, {});
             if (py::isinstance<py::str>(path)) {
               uint64_t id = 0;
               int rc = MountFile(self, path.cast<std::string>(), size, offset, &id);
               return MountResult(rc, rc == 0 ? std::vector<uint64_t>{id}
                                              : std::vector<uint64_t>{});
             }
             std::vector<BufferView> keep;
             Address a = ResolveAddress(path, true, &keep);
             if (a.ptr == nullptr || offset > a.capacity || size > a.capacity - offset) {
               return MountResult(kInvalidParams, {});
             }
             uint64_t id = 0;
             int rc;
             {
               auto h = self.handle();
               py::gil_scoped_release nogil;
               rc = mooncake_store_mount_segment(h->get(), a.ptr + offset, size, &id);
             }
             return MountResult(rc, rc == 0 ? std::vector<uint64_t>{id} : std::vector<uint64_t>{});
           },
           py::arg("path"), py::arg("size"), py::arg("offset") = 0, py::arg("protocol") = "tcp",
           py::arg("location") = "",
           "Lends memory to the cluster: {'ret': code, 'segment_ids': [id]}. path is a file "
           "(Mooncake's form: [offset, offset + size) of it, mapped by the daemon; a device, "
           "or a file sealed against shrinking such as a memfd, else -1012), or an address (an "
           "int, or a buffer) of this store's pool (alloc_from_mem_pool, alloc, "
           "MooncakeHostMemAllocator(store)): [path + offset, + size) is lent (-600 when it is "
           "not inside the pool).")
      .def("unmount_segment",
           [](Store& self, const std::vector<std::string>& segment_ids,
              uint64_t grace_period_seconds) {
             (void)grace_period_seconds;  // nothing to wait for: the objects are moved first
             return UnmountAll(self, segment_ids);
           },
           py::arg("segment_ids"), py::arg("grace_period_seconds") = 0,
           "Drains (moves every object living only there) and unmounts the segments; 0, or "
           "the first error (-600 a malformed id, -101 not this store's).")
      .def("allocate_and_mount_segment",
           [](Store& self, uint64_t size, const std::string& protocol,
              const std::string& location) {
             (void)location;
             int rc = kInvalidParams;
             uint64_t id = 0, allocated = 0;
             if (KnownProtocol(protocol)) {
               auto h = self.handle();
               py::gil_scoped_release nogil;
               rc = mooncake_store_allocate_and_mount_segment(h->get(), size, &id, &allocated);
             }
             py::dict result = MountResult(rc, rc == 0 ? std::vector<uint64_t>{id}
                                                       : std::vector<uint64_t>{});
             result["allocated_size"] = allocated;
             return result;
           },
           py::arg("size"), py::arg("protocol") = "tcp", py::arg("location") = "",
           "Has the daemon map size bytes and lend them: {'ret', 'segment_ids', "
           "'allocated_size'}.")
      .def("unmount_and_free_segment",
           [](Store& self, const std::vector<std::string>& segment_ids,
              uint64_t grace_period_seconds) {
             (void)grace_period_seconds;
             return UnmountAll(self, segment_ids);
           },
           py::arg("segment_ids"), py::arg("grace_period_seconds") = 0,
           "As unmount_segment; the daemon frees memory it mapped once nothing reads it.")
      .def("unmount_local_disk_segment",
           [](Store& self, uint64_t grace_period_seconds) {
             (void)grace_period_seconds;
             auto h = self.handle();
             py::gil_scoped_release nogil;
             return mooncake_store_unmount_local_disk_segment(h->get());
           },
           py::arg("grace_period_seconds") = 0,
           "0 when the daemon has no SSD tier; -1012 when it has one (the tier is the "
           "daemon's, shared by every application on the host).")
      .def("setup_dummy", &SetupDummy, py::arg("mem_pool_size"), py::arg("local_buffer_size"),
           py::arg("server_address"),
           "Standalone mode: connects to this host's daemon (Mooncake's real client) with a "
           "pool of local_buffer_size bytes; server_address 'host:port' must name that daemon "
           "(its port), or be ''. mem_pool_size is not used (nor is it by Mooncake's dummy "
           "client): the daemon's memory is its --global_segment_size.")
      .def("alloc_from_mem_pool", &AllocFromMemPool, py::arg("size"),
           "An address of size bytes of the store's pool (shared with the daemon: puts from "
           "and gets into it are zero-copy), 0 when the pool has no room. Never given back; "
           "valid while the store object lives (and no connect with another pool size "
           "replaces its pool).");

  py::class_<HostMemAllocator>(m, "MooncakeHostMemAllocator",
                               "Mooncake's host memory allocator, over a store's pool.")
      .def(py::init([](Store* store) { return new HostMemAllocator(store); }),
           py::arg("store") = nullptr, py::keep_alive<1, 2>())
      .def("alloc", &HostMemAllocator::Alloc, py::arg("size"),
           "An address of size bytes: from the store's pool when the allocator has a store (0 "
           "when it is full), else page-aligned private memory.")
      .def("free", &HostMemAllocator::Free, py::arg("ptr"),
           py::call_guard<py::gil_scoped_release>(),
           "0, or -600 for an address this allocator did not hand out.");

  RegisterBufferPool(m);
}

}  // namespace mooncake_py
