// upsert_parts, upsert_batch, batch_upsert_from, put_from_with_metadata. See write_family.h.
//
// Like every method, each copies its arguments with the GIL held and calls the C library
// without it. Gathered values (parts, metadata + data) go into one pool block when there is
// room, so the store call itself is zero-copy; else the library stages them.
#include "write_family.h"

#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "buffers.h"
#include "data_ops.h"
#include "mooncake_store.h"
#include "replicate_config.h"
#include "store_handle.h"

namespace mooncake_py {
namespace {

// config from **kwargs (it follows *parts, which pybind11 2.10 cannot declare).
const ReplicateConfig* ConfigFromKwargs(const char* method, const py::kwargs& kwargs) {
  const ReplicateConfig* config = nullptr;
  for (auto item : kwargs) {
    std::string name = py::str(item.first).cast<std::string>();
    if (name != "config") {
      throw py::type_error(std::string(method) + "() got an unexpected keyword argument '" +
                           name + "'");
    }
    if (!item.second.is_none()) config = item.second.cast<const ReplicateConfig*>();
  }
  return config;
}

// Stores the concatenation of the (pointer, size) pieces under key: put or upsert. A piece
// may be CUDA device memory (mooncake_store_copy_memory moves it); one that is neither host
// nor device memory is -600.
int StoreGathered(const std::shared_ptr<StoreHandle>& h, const std::string& key,
                  const std::vector<std::pair<const void*, size_t>>& pieces, size_t total,
                  const CConfig& c, bool upsert) {
  Scratch gathered(h, total);
  size_t offset = 0;
  for (const auto& [data, size] : pieces) {
    if (size == 0) continue;  // its pointer may be NULL
    int rc = mooncake_store_copy_memory(h->get(), gathered.data() + offset, data, size);
    if (rc != 0) return rc;
    offset += size;
  }
  return upsert ? mooncake_store_upsert_from_ex(h->get(), CKey(key), gathered.data(), total,
                                                c.get())
                : mooncake_store_put_from_ex(h->get(), CKey(key), gathered.data(), total,
                                             c.get());
}

// upsert_parts(key, *parts, config=None): Mooncake's: all parts empty returns 0 and stores
// nothing.
int UpsertParts(Store& self, const std::string& key, const py::args& parts,
                const py::kwargs& kwargs) {
  const ReplicateConfig* config = ConfigFromKwargs("upsert_parts", kwargs);
  std::vector<BufferView> views;
  views.reserve(parts.size());
  std::vector<std::pair<const void*, size_t>> pieces;
  size_t total = 0;
  for (auto part : parts) {
    views.emplace_back(part, false);
    pieces.emplace_back(views.back().data(), views.back().size());
    total += views.back().size();
  }
  CConfig c(config);
  auto h = self.handle();
  if (total == 0) return 0;
  py::gil_scoped_release nogil;
  return StoreGathered(h, key, pieces, total, c, true);
}

// The entries of keys[i] / buffers: -600 for an entry whose size runs past its buffer.
CBatch ResolveEntries(const std::vector<std::string>& keys,
                      const std::vector<py::object>& buffer_ptrs,
                      const std::vector<uint64_t>& sizes, std::vector<BufferView>* keep) {
  CBatch b;
  for (size_t i = 0; i < keys.size(); ++i) {
    Address a = ResolveAddress(buffer_ptrs[i], false, keep);
    b.Add(a.fits(sizes[i]) ? CKey(keys[i]) : "", a.ptr, sizes[i], i);
  }
  return b;
}

// batch_upsert_from(keys, buffer_ptrs, sizes, config=None) -> list of int, one per key.
std::vector<int> BatchUpsertFrom(Store& self, const std::vector<std::string>& keys,
                                 const std::vector<py::object>& buffer_ptrs,
                                 const std::vector<uint64_t>& sizes,
                                 const ReplicateConfig* config) {
  const size_t n = keys.size();
  if (buffer_ptrs.size() != n || sizes.size() != n) return std::vector<int>(n, kInvalidParams);
  std::vector<int> results(n, 0);
  if (n == 0) return results;
  CConfig c(config);
  std::vector<BufferView> keep;
  CBatch b = ResolveEntries(keys, buffer_ptrs, sizes, &keep);
  auto h = self.handle();
  py::gil_scoped_release nogil;
  int rc = mooncake_store_batch_upsert_from(h->get(), b.keys.data(), b.buffers.data(),
                                            b.sizes.data(), n, c.get(), results.data());
  if (rc != 0) results.assign(n, rc);
  return results;
}

// upsert_batch(keys, values, config=None) -> one int: 0, or the first failure.
int UpsertBatch(Store& self, const std::vector<std::string>& keys,
                const std::vector<py::object>& values, const ReplicateConfig* config) {
  return WriteBatch(self, keys, values, config, mooncake_store_batch_upsert_from);
}

// put_from_with_metadata: one value, the metadata bytes first, then the data (Mooncake's
// order); size 0 returns 0 and stores nothing, as Mooncake's does.
int PutFromWithMetadata(Store& self, const std::string& key, py::handle buffer_ptr,
                        py::handle metadata_buffer_ptr, uint64_t size, uint64_t metadata_size,
                        const ReplicateConfig* config) {
  std::vector<BufferView> keep;
  Address data = ResolveAddress(buffer_ptr, false, &keep);
  Address metadata = ResolveAddress(metadata_buffer_ptr, false, &keep);
  if (!data.fits(size) || !metadata.fits(metadata_size)) return kInvalidParams;
  if (size == 0) return 0;
  if (metadata_size > 0 && metadata.ptr == nullptr) return kInvalidParams;
  if (size + metadata_size < size) return kInvalidParams;
  CConfig c(config);
  auto h = self.handle();
  py::gil_scoped_release nogil;
  return StoreGathered(h, key, {{metadata.ptr, metadata_size}, {data.ptr, size}},
                       size + metadata_size, c, false);
}

}  // namespace

void RegisterWriteFamily(py::module_&, py::class_<Store>& store) {
  const auto kConfig = py::arg("config") = py::none();
  store
      .def("upsert_parts", &UpsertParts, py::arg("key"),
           "upsert_parts(key, *parts, config=None) -> int: the parts concatenated, inserted "
           "or replacing the value. All parts empty: 0, nothing stored.")
      .def("upsert_batch", &UpsertBatch, py::arg("keys"), py::arg("values"), kConfig,
           "One int: 0, or the first failure; -600 when the lists differ in length.")
      .def("batch_upsert_from", &BatchUpsertFrom, py::arg("keys"), py::arg("buffer_ptrs"),
           py::arg("sizes"), kConfig,
           "One code per key (each upsert on its own); lists of different lengths: -600 "
           "for every key.")
      .def("put_from_with_metadata", &PutFromWithMetadata, py::arg("key"),
           py::arg("buffer_ptr"), py::arg("metadata_buffer_ptr"), py::arg("size"),
           py::arg("metadata_size"), kConfig,
           "Stores metadata_size bytes at metadata_buffer_ptr followed by size bytes at "
           "buffer_ptr as one value (never overwrites, as put). size 0: 0, nothing stored. "
           "Codes are negative (Mooncake's are negated).");
}

}  // namespace mooncake_py
