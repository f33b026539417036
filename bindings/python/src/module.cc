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
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mooncake_store.h"
#include "replicate_config.h"
#include "store_handle.h"

namespace py = pybind11;

namespace mooncake_py {
namespace {

constexpr int kInvalidParams = MOONCAKE_STORE_INVALID_PARAMS;
// Mooncake's documented default for local_buffer_size. The pool is a sparse memfd, so an
// untouched pool costs address space, not memory.
constexpr uint64_t kDefaultLocalBufferSize = 1ull << 30;

// ---- buffers ------------------------------------------------------------------------------

// A Python buffer held for the length of a call (PyBUF_SIMPLE: C-contiguous bytes, any
// shape). Acquire and release with the GIL held; use the memory without it.
class BufferView {
 public:
  BufferView(py::handle obj, bool writable) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) != 0) {
      throw py::error_already_set();
    }
    held_ = true;
  }
  BufferView(BufferView&& other) noexcept : view_(other.view_), held_(other.held_) {
    other.held_ = false;
  }
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;
  BufferView& operator=(BufferView&&) = delete;
  ~BufferView() {
    if (held_) PyBuffer_Release(&view_);
  }

  // Never NULL, even for an empty buffer (whose buf may be NULL): the C ABI answers NULL
  // with -1 but an empty value with -600, and -600 is what Mooncake returns.
  char* data() const {
    static char empty;
    return view_.buf != nullptr ? static_cast<char*>(view_.buf) : &empty;
  }
  size_t size() const { return static_cast<size_t>(view_.len); }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

// A buffer argument. Mooncake passes memory as an int address (numpy's arr.ctypes.data,
// torch's t.data_ptr()); as an extension, any object with the buffer protocol (an alloc()
// memoryview, a numpy array) is accepted too, and then a size beyond its end is refused.
struct Address {
  char* ptr = nullptr;
  size_t capacity = std::numeric_limits<size_t>::max();  // unknown for a bare int
  bool fits(uint64_t size) const { return size <= capacity; }
};

Address ResolveAddress(py::handle obj, bool writable, std::vector<BufferView>* keep) {
  Address a;
  if (PyIndex_Check(obj.ptr())) {
    // int, numpy integer scalars. (ndarrays have __index__ too, but it fails for anything
    // but a 0-d integer array; those fall through to the buffer protocol.)
    PyObject* index = PyNumber_Index(obj.ptr());
    if (index != nullptr) {
      unsigned long long v = PyLong_AsUnsignedLongLong(index);
      Py_DECREF(index);
      if (PyErr_Occurred()) {
        PyErr_Clear();
        throw py::type_error("a buffer address must be an int in [0, 2**64)");
      }
      a.ptr = reinterpret_cast<char*>(static_cast<uintptr_t>(v));
      return a;
    }
    PyErr_Clear();
  }
  if (!PyObject_CheckBuffer(obj.ptr())) {
    throw py::type_error("expected a buffer address (int) or an object with the buffer protocol");
  }
  keep->emplace_back(obj, writable);
  a.ptr = keep->back().data();
  a.capacity = keep->back().size();
  return a;
}

// PyBytes of n bytes copied from data; the copy runs without the GIL (the new object is
// not visible to any other thread yet).
py::bytes BytesFrom(const char* data, size_t n) {
  PyObject* b = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(n));
  if (b == nullptr) throw py::error_already_set();
  {
    py::gil_scoped_release nogil;
    std::memcpy(PyBytes_AS_STRING(b), data, n);
  }
  return py::reinterpret_steal<py::bytes>(b);
}

// ---- objects that own memory ----------------------------------------------------------------

// The result of get_buffer(): a value read into a pool block (or the heap when the pool has
// no room), exposed through the buffer protocol as unsigned bytes, so bytes(h), len(h),
// memoryview(h) and numpy.asarray(h) work without copying.
class BufferHandle {
 public:
  BufferHandle(Scratch memory, size_t size) : memory_(std::move(memory)), size_(size) {}
  uintptr_t ptr() const { return reinterpret_cast<uintptr_t>(memory_.data()); }
  size_t size() const { return size_; }
  char* data() const { return memory_.data(); }

 private:
  Scratch memory_;
  size_t size_;
};

// The exporter behind alloc()'s memoryview. The memoryview keeps it alive, and numpy
// arrays made from the memoryview keep the memoryview alive, so the pool block is
// returned exactly when the last view of it goes away.
class PoolMemory {
 public:
  explicit PoolMemory(std::unique_ptr<PoolBlock> block) : block_(std::move(block)) {}
  char* data() const { return block_->data(); }
  size_t size() const { return block_->size(); }

 private:
  std::unique_ptr<PoolBlock> block_;
};

// ---- the store ------------------------------------------------------------------------------

class Store {
 public:
  Store()
      : handle_(std::make_shared<StoreHandle>()),
        registry_(std::make_shared<RangeRegistry>()) {}

  // The current handle. Read (and replaced) only with the GIL held; a call keeps its copy
  // for its whole length, so a concurrent close()/connect() never frees a handle in use.
  std::shared_ptr<StoreHandle> handle() const { return handle_; }
  const std::shared_ptr<RangeRegistry>& registry() const { return registry_; }

  // The handle a connect/setup with this pool size should use. The C library keeps a closed
  // handle's pool mapped and reuses it when the next connect asks for the same size, so
  // alloc() memory stays valid; with another size it would unmap the old pool under live
  // memoryviews and BufferHandles. So then a fresh handle is made, and the old one lives
  // on until the last object pointing into its pool is gone.
  std::shared_ptr<StoreHandle> HandleForConnect(uint64_t pool_size) {
    if (open_ || !handle_->connected_once || handle_->pool_size == pool_size) return handle_;
    handle_ = std::make_shared<StoreHandle>();
    return handle_;
  }

  // Records a successful connect. A fresh handle knows none of the caller's registered
  // buffers: they are registered again, so register_buffer() survives close()+connect().
  void Connected(const std::shared_ptr<StoreHandle>& handle, uint64_t pool_size) {
    bool fresh = !handle->connected_once;
    handle->connected_once = true;
    handle->pool_size = pool_size;
    open_ = true;
    if (!fresh) return;
    auto ranges = registry_->Registered();
    if (ranges.empty()) return;
    py::gil_scoped_release nogil;
    for (const auto& r : ranges) {
      mooncake_store_register_buffer(handle->get(), reinterpret_cast<void*>(r.first), r.second);
    }
  }
  void Closed() { open_ = false; }

 private:
  std::shared_ptr<StoreHandle> handle_;
  std::shared_ptr<RangeRegistry> registry_;
  bool open_ = false;  // between a successful connect/setup and close()
};

// ---- lifecycle ------------------------------------------------------------------------------

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

// Names the handle's tenant for the connect that follows (mooncake_store_set_tenant).
int SetTenant(const std::shared_ptr<StoreHandle>& handle,
              const std::optional<std::string>& tenant) {
  return mooncake_store_set_tenant(handle->get(), tenant ? tenant->c_str() : nullptr);
}

// setup(local_hostname, metadata_server, global_segment_size, local_buffer_size, protocol,
//       device_name, master_server_addr[, engine][, tenant_id=]) or setup(config_dict).
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
  bool dict_form = args.size() == 1 && kwargs.size() == 0 && PyDict_Check(args[0].ptr());
  if (dict_form) {
    // Mooncake's setup(dict) also takes keys of features this store configures in the
    // daemon (SSD offload, ...): those are ignored. A missing key takes its default.
    for (auto item : py::reinterpret_borrow<py::dict>(args[0])) {
      std::string key = canonical(py::str(item.first));
      if (key == "tenant_id") tenant_id = py::reinterpret_borrow<py::object>(item.second);
      for (size_t i = 0; i < kCount; ++i) {
        if (key == kNames[i]) values[i] = py::reinterpret_borrow<py::object>(item.second);
      }
    }
  } else {
    if (args.size() > kCount + 1) {
      throw py::type_error("setup() takes 7 positional arguments (8 with engine)");
    }
    for (size_t i = 0; i < args.size() && i < kCount; ++i) values[i] = args[i];
    for (auto item : kwargs) {
      std::string key = canonical(py::str(item.first));
      if (key == "engine") continue;  // Mooncake's optional TransferEngine: the daemon has its own
      if (key == "tenant_id") {
        tenant_id = py::reinterpret_borrow<py::object>(item.second);
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
  std::string strings[kCount];
  for (size_t i : std::initializer_list<size_t>{0, 1, 4, 5, 6}) {
    strings[i] = StringArg(kNames[i], values[i]);
  }

  auto handle = self.HandleForConnect(local_buffer_size);
  int rc = SetTenant(handle, tenant);
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

// ---- put ------------------------------------------------------------------------------------

int Put(Store& self, const std::string& key, py::handle value, const ReplicateConfig* config) {
  BufferView v(value, false);
  CConfig c(config);
  if (c.status() != 0) return c.status();
  auto h = self.handle();
  py::gil_scoped_release nogil;
  return mooncake_store_put(h->get(), CKey(key), v.data(), v.size(), c.get());
}

int Upsert(Store& self, const std::string& key, py::handle value, const ReplicateConfig* config) {
  BufferView v(value, false);
  CConfig c(config);
  if (c.status() != 0) return c.status();
  auto h = self.handle();
  py::gil_scoped_release nogil;
  // upsert_from only reads the buffer; its pointer is non-const to match put_from's.
  return mooncake_store_upsert_from(h->get(), CKey(key), v.data(), v.size(), c.get());
}

int PutFrom(Store& self, const std::string& key, py::handle buffer_ptr, uint64_t size,
            const ReplicateConfig* config, bool upsert) {
  std::vector<BufferView> keep;
  Address a = ResolveAddress(buffer_ptr, false, &keep);
  if (!a.fits(size)) return kInvalidParams;
  CConfig c(config);
  if (c.status() != 0) return c.status();
  auto h = self.handle();
  py::gil_scoped_release nogil;
  return upsert ? mooncake_store_upsert_from(h->get(), CKey(key), a.ptr, size, c.get())
                : mooncake_store_put_from(h->get(), CKey(key), a.ptr, size, c.get());
}

// put_parts(key, *parts): the parts are gathered into one pool block (then the put itself
// is zero-copy), or into heap memory when the pool has no room.
// config is keyword-only (it follows *parts). It is taken from **kwargs by hand: pybind11
// 2.10 does not match a keyword argument declared after py::args.
int PutParts(Store& self, const std::string& key, const py::args& parts, const py::kwargs& kwargs) {
  const ReplicateConfig* config = nullptr;
  for (auto item : kwargs) {
    if (py::str(item.first).cast<std::string>() != "config") {
      throw py::type_error("put_parts() got an unexpected keyword argument '" +
                           py::str(item.first).cast<std::string>() + "'");
    }
    if (!item.second.is_none()) config = item.second.cast<const ReplicateConfig*>();
  }
  std::vector<BufferView> views;
  views.reserve(parts.size());
  size_t total = 0;
  for (auto part : parts) {
    views.emplace_back(part, false);
    total += views.back().size();
  }
  CConfig c(config);
  if (c.status() != 0) return c.status();
  if (total == 0) return kInvalidParams;  // an empty value, as put(key, b"") answers
  auto h = self.handle();
  py::gil_scoped_release nogil;
  Scratch gathered(h, total);
  size_t offset = 0;
  for (const auto& v : views) {
    std::memcpy(gathered.data() + offset, v.data(), v.size());
    offset += v.size();
  }
  return mooncake_store_put_from(h->get(), CKey(key), gathered.data(), total, c.get());
}

// put_batch(keys, values): one int, 0 when every put succeeded, else the first failure.
int PutBatch(Store& self, const std::vector<std::string>& keys,
             const std::vector<py::object>& values,
             const ReplicateConfig* config) {
  if (keys.size() != values.size()) return kInvalidParams;
  if (keys.empty()) return 0;
  std::vector<BufferView> views;
  views.reserve(values.size());
  for (auto v : values) views.emplace_back(v, false);
  CConfig c(config);
  if (c.status() != 0) return c.status();
  auto h = self.handle();
  py::gil_scoped_release nogil;
  CBatch b;
  for (size_t i = 0; i < keys.size(); ++i) {
    b.Add(CKey(keys[i]), views[i].data(), views[i].size(), i);
  }
  std::vector<int> results(keys.size());
  int rc = mooncake_store_batch_put_from(h->get(), b.keys.data(), b.buffers.data(),
                                         b.sizes.data(), keys.size(), c.get(), results.data());
  if (rc != 0) return rc;
  for (int r : results) {
    if (r != 0) return r;
  }
  return 0;
}

// The entries of a batch of one buffer per key. An entry whose size runs past its buffer
// gets key "": the ABI answers it with -600.
CBatch ResolveBatch(const std::vector<std::string>& keys,
                    const std::vector<py::object>& buffer_ptrs,
                    const std::vector<uint64_t>& sizes, bool writable,
                    std::vector<BufferView>* keep) {
  CBatch b;
  for (size_t i = 0; i < keys.size(); ++i) {
    Address a = ResolveAddress(buffer_ptrs[i], writable, keep);
    b.Add(a.fits(sizes[i]) ? CKey(keys[i]) : "", a.ptr, sizes[i], i);
  }
  return b;
}

std::vector<int> BatchPutFrom(Store& self, const std::vector<std::string>& keys,
                              const std::vector<py::object>& buffer_ptrs,
                              const std::vector<uint64_t>& sizes, const ReplicateConfig* config) {
  const size_t n = keys.size();
  if (buffer_ptrs.size() != n || sizes.size() != n) return std::vector<int>(n, kInvalidParams);
  std::vector<int> results(n, 0);
  if (n == 0) return results;
  CConfig c(config);
  if (c.status() != 0) return std::vector<int>(n, c.status());
  std::vector<BufferView> keep;
  CBatch b = ResolveBatch(keys, buffer_ptrs, sizes, false, &keep);
  auto h = self.handle();
  py::gil_scoped_release nogil;
  int rc = mooncake_store_batch_put_from(h->get(), b.keys.data(), b.buffers.data(),
                                         b.sizes.data(), n, c.get(), results.data());
  if (rc != 0) results.assign(n, rc);
  return results;
}

// ---- get ------------------------------------------------------------------------------------

// Reads one whole value (get_size, then get_into a block of that size), with the GIL
// released by the caller. A value that grew in between (an upsert) answers -600 and is
// read again into a larger buffer, a bounded number of times.
Value ReadOne(const std::shared_ptr<StoreHandle>& h, const std::string& key) {
  Value v;
  int64_t largest = 0;
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    int64_t size = mooncake_store_get_size(h->get(), CKey(key));
    if (size <= 0) {
      v.result = size == 0 ? int64_t{MOONCAKE_STORE_OBJECT_NOT_FOUND} : size;
      break;
    }
    largest = std::max(largest, size);
    size_t capacity = ReadCapacity(largest, attempt);
    v.memory = Scratch(h, capacity);
    v.result = mooncake_store_get_into(h->get(), CKey(key), v.memory.data(), capacity);
    if (v.result != kInvalidParams) break;
  }
  if (!v.ok()) v.memory = Scratch();
  return v;
}

// ReadOne and ReadWhole for a method: the GIL is released around the read.
Value Read(Store& self, const std::string& key) {
  auto h = self.handle();
  py::gil_scoped_release nogil;
  return ReadOne(h, key);
}

std::vector<Value> Read(Store& self, const std::vector<std::string>& keys) {
  auto h = self.handle();
  py::gil_scoped_release nogil;
  return ReadWhole(h, keys);
}

py::bytes Get(Store& self, const std::string& key) {
  Value v = Read(self, key);
  if (!v.ok()) return py::bytes("", 0);  // Mooncake: b"" on a miss or any error
  return BytesFrom(v.memory.data(), static_cast<size_t>(v.result));
}

py::list GetBatch(Store& self, const std::vector<std::string>& keys) {
  std::vector<Value> values = Read(self, keys);
  py::list out;
  for (auto& v : values) {
    out.append(v.ok() ? BytesFrom(v.memory.data(), static_cast<size_t>(v.result))
                      : py::bytes("", 0));
  }
  return out;
}

py::object GetBuffer(Store& self, const std::string& key) {
  Value v = Read(self, key);
  if (!v.ok()) return py::none();
  return py::cast(
      std::make_shared<BufferHandle>(std::move(v.memory), static_cast<size_t>(v.result)));
}

py::list BatchGetBuffer(Store& self, const std::vector<std::string>& keys) {
  std::vector<Value> values = Read(self, keys);
  py::list out;
  for (auto& v : values) {
    if (v.ok()) {
      out.append(py::cast(
          std::make_shared<BufferHandle>(std::move(v.memory), static_cast<size_t>(v.result))));
    } else {
      out.append(py::none());
    }
  }
  return out;
}

int64_t GetInto(Store& self, const std::string& key, py::handle buffer_ptr, uint64_t size) {
  std::vector<BufferView> keep;
  Address a = ResolveAddress(buffer_ptr, true, &keep);
  if (!a.fits(size)) return kInvalidParams;
  auto h = self.handle();
  py::gil_scoped_release nogil;
  return mooncake_store_get_into(h->get(), CKey(key), a.ptr, size);
}

std::vector<int64_t> BatchGetInto(Store& self, const std::vector<std::string>& keys,
                                  const std::vector<py::object>& buffer_ptrs,
                                  const std::vector<uint64_t>& sizes) {
  const size_t n = keys.size();
  if (buffer_ptrs.size() != n || sizes.size() != n) return std::vector<int64_t>(n, kInvalidParams);
  std::vector<int64_t> results(n, 0);
  if (n == 0) return results;
  std::vector<BufferView> keep;
  CBatch b = ResolveBatch(keys, buffer_ptrs, sizes, true, &keep);
  auto h = self.handle();
  py::gil_scoped_release nogil;
  int rc = mooncake_store_batch_get_into(h->get(), b.keys.data(), b.buffers.data(),
                                         b.sizes.data(), n, results.data());
  if (rc != 0) results.assign(n, rc);
  return results;
}

// ---- scatter/gather -------------------------------------------------------------------------
//
// The C ABI moves one contiguous buffer per key. Mooncake's multi-buffer calls move a
// key's value from or into several buffers, so the binding gathers the parts into one
// pool block before a put (the put is then zero-copy) and scatters a block after a get:
// one memcpy more than Mooncake's transfer engine needs, none when a key has one buffer.

struct Parts {
  std::vector<char*> ptrs;
  std::vector<size_t> sizes;
  size_t total = 0;
  int error = 0;  // -600 when the shapes differ or a size runs past its buffer
};

std::vector<Parts> ResolveParts(const std::vector<std::vector<py::object>>& all_ptrs,
                                const std::vector<std::vector<uint64_t>>& all_sizes,
                                bool writable, std::vector<BufferView>* keep) {
  std::vector<Parts> out(all_ptrs.size());
  for (size_t i = 0; i < all_ptrs.size(); ++i) {
    Parts& p = out[i];
    if (all_ptrs[i].size() != all_sizes[i].size() || all_ptrs[i].empty()) {
      p.error = kInvalidParams;
      continue;
    }
    for (size_t j = 0; j < all_ptrs[i].size(); ++j) {
      Address a = ResolveAddress(all_ptrs[i][j], writable, keep);
      if (!a.fits(all_sizes[i][j])) p.error = kInvalidParams;
      p.ptrs.push_back(a.ptr);
      p.sizes.push_back(all_sizes[i][j]);
      p.total += all_sizes[i][j];
    }
  }
  return out;
}

// The one buffer each entry of a multi-buffer batch moves: its only buffer, or a pool block
// of its total size in blocks[i], filled from its buffers when gather. An entry whose parts
// were refused gets their code in results and stays out of the batch.
template <typename R>
CBatch PlanParts(const std::shared_ptr<StoreHandle>& h, const std::vector<std::string>& keys,
                 const std::vector<Parts>& parts, bool gather, std::vector<Scratch>* blocks,
                 std::vector<R>* results) {
  CBatch b;
  for (size_t i = 0; i < keys.size(); ++i) {
    const Parts& p = parts[i];
    if (p.error != 0) {
      (*results)[i] = p.error;
      continue;
    }
    char* ptr = p.ptrs[0];
    if (p.ptrs.size() > 1 && p.total > 0) {
      (*blocks)[i] = Scratch(h, p.total);
      ptr = (*blocks)[i].data();
      size_t offset = 0;
      for (size_t j = 0; gather && j < p.ptrs.size(); ++j) {
        std::memcpy(ptr + offset, p.ptrs[j], p.sizes[j]);
        offset += p.sizes[j];
      }
    }
    b.Add(CKey(keys[i]), ptr, p.total, i);
  }
  return b;
}

std::vector<int> BatchPutFromMulti(Store& self, const std::vector<std::string>& keys,
                                   const std::vector<std::vector<py::object>>& all_buffer_ptrs,
                                   const std::vector<std::vector<uint64_t>>& all_sizes,
                                   const ReplicateConfig* config) {
  const size_t n = keys.size();
  if (all_buffer_ptrs.size() != n || all_sizes.size() != n) {
    return std::vector<int>(n, kInvalidParams);
  }
  std::vector<int> results(n, 0);
  if (n == 0) return results;
  CConfig c(config);
  if (c.status() != 0) return std::vector<int>(n, c.status());
  std::vector<BufferView> keep;
  std::vector<Parts> parts = ResolveParts(all_buffer_ptrs, all_sizes, false, &keep);
  auto h = self.handle();
  py::gil_scoped_release nogil;
  std::vector<Scratch> gathered(n);
  CBatch b = PlanParts(h, keys, parts, true, &gathered, &results);
  if (b.where.empty()) return results;
  std::vector<int> batch(b.where.size());
  int rc = mooncake_store_batch_put_from(h->get(), b.keys.data(), b.buffers.data(),
                                         b.sizes.data(), b.where.size(), c.get(), batch.data());
  for (size_t j = 0; j < b.where.size(); ++j) results[b.where[j]] = rc != 0 ? rc : batch[j];
  return results;
}

std::vector<int64_t> BatchGetIntoMulti(Store& self, const std::vector<std::string>& keys,
                                       const std::vector<std::vector<py::object>>& all_buffer_ptrs,
                                       const std::vector<std::vector<uint64_t>>& all_sizes,
                                       bool /*prefer_alloc_in_same_node: the daemon places*/) {
  const size_t n = keys.size();
  if (all_buffer_ptrs.size() != n || all_sizes.size() != n) {
    return std::vector<int64_t>(n, kInvalidParams);
  }
  std::vector<int64_t> results(n, 0);
  if (n == 0) return results;
  std::vector<BufferView> keep;
  std::vector<Parts> parts = ResolveParts(all_buffer_ptrs, all_sizes, true, &keep);
  auto h = self.handle();
  py::gil_scoped_release nogil;
  std::vector<Scratch> staging(n);
  CBatch b = PlanParts(h, keys, parts, false, &staging, &results);
  if (b.where.empty()) return results;
  std::vector<int64_t> batch(b.where.size());
  int rc = mooncake_store_batch_get_into(h->get(), b.keys.data(), b.buffers.data(),
                                         b.sizes.data(), b.where.size(), batch.data());
  for (size_t j = 0; j < b.where.size(); ++j) {
    size_t i = b.where[j];
    results[i] = rc != 0 ? rc : batch[j];
    if (results[i] <= 0 || staging[i].data() == nullptr) continue;
    // Scatter the bytes read (the value may be shorter than the buffers together).
    size_t left = static_cast<size_t>(results[i]), offset = 0;
    for (size_t k = 0; k < parts[i].ptrs.size() && left > 0; ++k) {
      size_t chunk = std::min(left, parts[i].sizes[k]);
      std::memcpy(parts[i].ptrs[k], staging[i].data() + offset, chunk);
      offset += chunk;
      left -= chunk;
    }
  }
  return results;
}

// get_into_ranges(buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets, all_sizes):
// results[i][j][k] is the bytes copied for fragment k of key j into buffer i, or a
// negative code. The C ABI has no ranged read, so each distinct key is read whole once
// (into a pool block) and the fragments are copied out of it. Like Mooncake, a fragment is
// refused (-600) when it runs past its source object or past its destination buffer, whose
// size is that of the registered range (or alloc() block, or buffer object) it lies in;
// a destination the binding knows nothing about is refused too.
py::object GetIntoRanges(Store& self, const std::vector<py::object>& buffer_ptrs,
                       const std::vector<std::vector<std::string>>& all_keys,
                       const std::vector<std::vector<std::vector<uint64_t>>>& all_dst_offsets,
                       const std::vector<std::vector<std::vector<uint64_t>>>& all_src_offsets,
                       const std::vector<std::vector<std::vector<uint64_t>>>& all_sizes) {
  const size_t n = all_keys.size();
  const bool top_ok = buffer_ptrs.size() == n && all_dst_offsets.size() == n &&
                      all_src_offsets.size() == n && all_sizes.size() == n;
  // The result has the shape of all_keys x fragments (one entry for a key whose fragment
  // lists are missing); entries start as -600 and successful fragments overwrite them.
  std::vector<std::vector<std::vector<int64_t>>> results(n);
  for (size_t i = 0; i < n; ++i) {
    results[i].resize(all_keys[i].size());
    for (size_t j = 0; j < all_keys[i].size(); ++j) {
      size_t frags = (i < all_sizes.size() && j < all_sizes[i].size()) ? all_sizes[i][j].size() : 1;
      results[i][j].assign(std::max<size_t>(frags, 1), kInvalidParams);
    }
  }

  std::vector<BufferView> keep;
  std::vector<Address> dests(top_ok ? n : 0);
  std::vector<std::string> distinct;
  for (size_t i = 0; top_ok && i < n; ++i) {
    dests[i] = ResolveAddress(buffer_ptrs[i], true, &keep);
    if (dests[i].capacity == std::numeric_limits<size_t>::max()) {
      dests[i].capacity = self.registry()->CapacityAt(reinterpret_cast<uintptr_t>(dests[i].ptr));
    }
    for (const auto& key : all_keys[i]) distinct.push_back(key);
  }
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());

  auto h = self.handle();
  {
    py::gil_scoped_release nogil;
    std::vector<Value> values = ReadWhole(h, distinct);
    for (size_t i = 0; top_ok && i < n; ++i) {
      if (all_dst_offsets[i].size() != all_keys[i].size() ||
          all_src_offsets[i].size() != all_keys[i].size() ||
          all_sizes[i].size() != all_keys[i].size()) {
        continue;  // this buffer's plan is malformed: all its entries stay -600
      }
      for (size_t j = 0; j < all_keys[i].size(); ++j) {
        const auto& dst = all_dst_offsets[i][j];
        const auto& src = all_src_offsets[i][j];
        const auto& len = all_sizes[i][j];
        if (dst.size() != len.size() || src.size() != len.size()) continue;
        size_t at = std::lower_bound(distinct.begin(), distinct.end(), all_keys[i][j]) -
                    distinct.begin();
        const Value& v = values[at];
        for (size_t k = 0; k < len.size(); ++k) {
          int64_t& r = results[i][j][k];
          if (!v.ok()) {
            r = v.result;
          } else if (src[k] > static_cast<uint64_t>(v.result) ||
                     len[k] > static_cast<uint64_t>(v.result) - src[k] ||
                     dst[k] > dests[i].capacity || len[k] > dests[i].capacity - dst[k]) {
            r = kInvalidParams;
          } else {
            std::memcpy(dests[i].ptr + dst[k], v.memory.data() + src[k], len[k]);
            r = static_cast<int64_t>(len[k]);
          }
        }
      }
    }
  }
  return py::cast(results);
}

// ---- queries and removes --------------------------------------------------------------------

std::vector<int> BatchIsExist(Store& self, const std::vector<std::string>& keys) {
  std::vector<int> results(keys.size(), 0);
  if (keys.empty()) return results;
  auto h = self.handle();
  py::gil_scoped_release nogil;
  std::vector<const char*> key_ptrs;
  for (const auto& k : keys) key_ptrs.push_back(CKey(k));
  int rc = mooncake_store_batch_is_exist(h->get(), key_ptrs.data(), keys.size(), results.data());
  if (rc != 0) results.assign(keys.size(), rc);
  return results;
}

// ---- pool memory ----------------------------------------------------------------------------

py::memoryview Alloc(Store& self, uint64_t size) {
  if (size == 0) throw py::value_error("alloc(): size must be > 0");
  auto h = self.handle();
  std::unique_ptr<PoolBlock> block;
  {
    py::gil_scoped_release nogil;
    block = PoolBlock::Alloc(h, size, self.registry());
  }
  if (!block) {
    PyErr_Format(PyExc_MemoryError,
                 "alloc(%llu): no free pool block of that size (is the store connected, and "
                 "is local_buffer_size large enough?)",
                 static_cast<unsigned long long>(size));
    throw py::error_already_set();
  }
  py::object exporter = py::cast(PoolMemory(std::move(block)));
  return py::memoryview(exporter);
}

// ---- module ---------------------------------------------------------------------------------

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
                     "None, or an int in [0, 2**64) (else TypeError). Only valid with "
                     "soft_pin_action ENABLE: with PRESERVE or DISABLE, put/upsert return -600. "
                     "The C ABI cannot carry it: it is validated here and the master's default "
                     "soft-pin TTL applies.")
      .def_property("with_soft_pin", &ReplicateConfig::with_soft_pin,
                    &ReplicateConfig::set_with_soft_pin,
                    "older boolean form: True is soft_pin_action ENABLE, False DISABLE")
      .def_readwrite("preferred_segment", &ReplicateConfig::preferred_segment,
                     "'host:port' of a daemon to place on; wins over preferred_segments")
      .def_readwrite("preferred_segments", &ReplicateConfig::preferred_segments)
      .def_readwrite("prefer_alloc_in_same_node", &ReplicateConfig::prefer_alloc_in_same_node,
                     "accepted for compatibility; placement is the daemon's")
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

  const auto kConfig = py::arg("config") = py::none();

  py::class_<Store>(m, "MooncakeDistributedStore")
      .def(py::init<>())
      // lifecycle
      .def("setup", &Setup,
           "setup(local_hostname, metadata_server, global_segment_size, local_buffer_size, "
           "protocol, device_name, master_server_addr, tenant_id=None) -> int\n"
           "setup(config: dict) -> int\n\n"
           "Mooncake's entry: connects to the local daemon ($MOONCAKE_SOCKET). Sizes are ints "
           "or strings such as '16MB'; an unusable size returns -600. master_server_addr must "
           "match the daemon's master (else -600); hostname, metadata server, protocol and "
           "device are accepted for compatibility (the daemon chooses transports). "
           "tenant_id (also a key of the dict): the tenant whose keys this store names, 1-64 "
           "characters of [A-Za-z0-9_.-] (else -600); None names none (the daemon's default "
           "for this uid, else the default tenant); -1401 when the daemon keeps it for other "
           "uids.")
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
      .def("get_into_ranges", &GetIntoRanges, py::arg("buffer_ptrs"), py::arg("all_keys"),
           py::arg("all_dst_offsets"), py::arg("all_src_offsets"), py::arg("all_sizes"))
      // query and remove
      .def("is_exist", NoGilKey(&mooncake_store_is_exist), py::arg("key"),
           "1 present, 0 missing (or still being written), < 0 error")
      .def("batch_is_exist", &BatchIsExist, py::arg("keys"))
      .def("get_size", NoGilKey(&mooncake_store_get_size), py::arg("key"),
           "The value's size in bytes, -704 on a miss.")
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
}
