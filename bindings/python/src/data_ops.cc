// Put, get, query and alloc with one buffer per key. See data_ops.h.
#include "data_ops.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "buffers.h"
#include "mooncake_store.h"

namespace py = pybind11;

namespace mooncake_py {

// ---- put ------------------------------------------------------------------------------------

int Put(Store& self, const std::string& key, py::handle value, const ReplicateConfig* config) {
  BufferView v(value, false);
  CConfig c(config);
  if (c.status() != 0) return c.status();
  auto h = self.handle();
  py::gil_scoped_release nogil;
  return mooncake_store_put_ex(h->get(), CKey(key), v.data(), v.size(), c.get());
}

int Upsert(Store& self, const std::string& key, py::handle value, const ReplicateConfig* config) {
  BufferView v(value, false);
  CConfig c(config);
  if (c.status() != 0) return c.status();
  auto h = self.handle();
  py::gil_scoped_release nogil;
  // upsert_from only reads the buffer; its pointer is non-const to match put_from's.
  return mooncake_store_upsert_from_ex(h->get(), CKey(key), v.data(), v.size(), c.get());
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
  return upsert ? mooncake_store_upsert_from_ex(h->get(), CKey(key), a.ptr, size, c.get())
                : mooncake_store_put_from_ex(h->get(), CKey(key), a.ptr, size, c.get());
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
  return mooncake_store_put_from_ex(h->get(), CKey(key), gathered.data(), total, c.get());
}

int WriteBatch(Store& self, const std::vector<std::string>& keys,
               const std::vector<py::object>& values, const ReplicateConfig* config,
               BatchWriteFrom write) {
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
  int rc = write(h->get(), b.keys.data(), b.buffers.data(), b.sizes.data(), keys.size(),
                 c.get(), results.data());
  if (rc != 0) return rc;
  for (int r : results) {
    if (r != 0) return r;
  }
  return 0;
}

// put_batch(keys, values): one int, 0 when every put succeeded, else the first failure.
int PutBatch(Store& self, const std::vector<std::string>& keys,
             const std::vector<py::object>& values,
             const ReplicateConfig* config) {
  return WriteBatch(self, keys, values, config, mooncake_store_batch_put_from_ex);
}

namespace {

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

}  // namespace

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
  int rc = mooncake_store_batch_put_from_ex(h->get(), b.keys.data(), b.buffers.data(),
                                            b.sizes.data(), n, c.get(), results.data());
  if (rc != 0) results.assign(n, rc);
  return results;
}

// ---- get ------------------------------------------------------------------------------------

namespace {

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

}  // namespace

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

}  // namespace mooncake_py
