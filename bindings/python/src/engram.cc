// EngramStore and EngramStoreConfig over MooncakeDistributedStore. See engram.h.
#include "engram.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "mooncake_store.h"
#include "store_handle.h"

namespace mooncake_py {

namespace {

constexpr char kCapsuleName[] = "mooncake.PyClient.shared_ptr";
constexpr char kCapsuleMethod[] = "_get_pyclient_capsule";

struct EngramStoreConfig {
  std::vector<int64_t> table_vocab_sizes = {1024};
  int embedding_dim = 64;
};

// A capsule holding a strong reference to a MooncakeDistributedStore object.
py::object StoreCapsule(py::handle store) {
  store.inc_ref();
  return py::capsule(store.ptr(), kCapsuleName, [](PyObject* capsule) {
    // Called by Python when the capsule goes, the GIL held.
    Py_XDECREF(static_cast<PyObject*>(PyCapsule_GetPointer(capsule, kCapsuleName)));
  });
}

// The store behind EngramStore's store argument: None, a MooncakeDistributedStore, or a
// wrapper whose _get_pyclient_capsule() returns a store capsule.
py::object UnwrapStore(py::object store) {
  if (store.is_none() || py::isinstance<Store>(store)) return store;
  if (!py::hasattr(store, kCapsuleMethod)) {
    throw std::runtime_error(
        "EngramStore store parameter must be a MooncakeDistributedStore or a store wrapper "
        "that implements _get_pyclient_capsule()");
  }
  py::object capsule = store.attr(kCapsuleMethod)();
  if (capsule.is_none()) return capsule;
  if (!PyCapsule_CheckExact(capsule.ptr())) {
    throw std::runtime_error("store wrapper returned a non-capsule PyClient handle");
  }
  const char* name = PyCapsule_GetName(capsule.ptr());
  if (name == nullptr || std::strcmp(name, kCapsuleName) != 0) {
    throw std::runtime_error("store wrapper returned an unexpected PyClient capsule type");
  }
  auto* inner = static_cast<PyObject*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  if (inner == nullptr) {
    throw std::runtime_error("store wrapper returned an empty PyClient capsule");
  }
  return py::reinterpret_borrow<py::object>(inner);
}

class EngramStore {
 public:
  EngramStore(int layer_id, const EngramStoreConfig& config, py::object store)
      : store_(UnwrapStore(std::move(store))),
        vocab_(config.table_vocab_sizes),
        dim_(config.embedding_dim) {
    if (vocab_.empty()) {
      throw std::invalid_argument("EngramStoreConfig.table_vocab_sizes must not be empty");
    }
    if (dim_ <= 0) throw std::invalid_argument("EngramStoreConfig.embedding_dim must be positive");
    for (int64_t v : vocab_) {
      if (v <= 0) {
        throw std::invalid_argument(
            "EngramStoreConfig.table_vocab_sizes must contain only positive values");
      }
    }
    for (size_t h = 0; h < vocab_.size(); ++h) {
      keys_.push_back("engram:l" + std::to_string(layer_id) + ":h" + std::to_string(h));
    }
  }

  const std::vector<int64_t>& vocab_sizes() const { return vocab_; }
  const std::vector<std::string>& keys() const { return keys_; }
  int heads() const { return static_cast<int>(vocab_.size()); }
  int dim() const { return dim_; }

  // Removes the layer's head tables (missing ones are skipped): how many went, or the
  // first other code as RuntimeError (Mooncake's).
  int RemoveFromStore(bool force) {
    Store* store = Bound();
    if (store == nullptr) throw std::runtime_error("remove_from_store failed, rc=-600");
    auto h = store->handle();
    int removed = 0, first_error = 0;
    {
      py::gil_scoped_release nogil;
      for (const std::string& key : keys_) {
        int rc = mooncake_store_remove(h->get(), key.c_str(), force ? 1 : 0);
        if (rc == 0) {
          ++removed;
        } else if (rc != MOONCAKE_STORE_OBJECT_NOT_FOUND && first_error == 0) {
          first_error = rc;
        }
      }
    }
    if (first_error != 0) {
      throw std::runtime_error("remove_from_store failed, rc=" + std::to_string(first_error));
    }
    return removed;
  }

  // Stores every head's table, [vocab_sizes[h], D] float32 each, into keys that must not
  // exist yet; on any failure removes what it stored and raises.
  void Populate(const py::list& tables) {
    if (static_cast<size_t>(py::len(tables)) != vocab_.size()) {
      throw std::runtime_error("embedding_buffers size must match num_heads");
    }
    using Array = py::array_t<float, py::array::c_style | py::array::forcecast>;
    std::vector<Array> arrays;
    for (size_t h = 0; h < vocab_.size(); ++h) {
      py::handle buf = tables[h];
      if (!py::isinstance<py::array>(buf)) {
        throw std::runtime_error("embedding_buffers must be NumPy arrays");
      }
      Array a = Array::ensure(buf);
      if (!a) throw std::runtime_error("embedding_buffers must be float32 arrays");
      if (a.ndim() != 2) throw std::runtime_error("each embedding buffer must be 2D [N_h, D]");
      if (a.shape(0) != vocab_[h] || a.shape(1) != dim_) {
        throw std::runtime_error(
            "embedding buffer shape does not match get_table_vocab_sizes()/get_embedding_dim()");
      }
      arrays.push_back(std::move(a));
    }
    Store* store = Bound();
    if (store == nullptr) throw std::runtime_error("populate failed");
    std::vector<const char*> names;
    std::vector<void*> buffers;
    std::vector<size_t> sizes;
    for (size_t h = 0; h < keys_.size(); ++h) {
      names.push_back(keys_[h].c_str());
      buffers.push_back(arrays[h].mutable_data());
      sizes.push_back(static_cast<size_t>(arrays[h].nbytes()));
    }
    auto handle = store->handle();
    bool ok = true;
    {
      py::gil_scoped_release nogil;
      const size_t n = names.size();
      // Mooncake's preflight: the layer's keys must all be free (put never overwrites, so a
      // stale table would otherwise stay behind a success).
      std::vector<int> exists(n);
      ok = mooncake_store_batch_is_exist(handle->get(), names.data(), n, exists.data()) == 0;
      for (size_t i = 0; i < n && ok; ++i) ok = exists[i] == 0;
      if (ok) {
        std::vector<int> results(n, 0);
        int rc = mooncake_store_batch_put_from(handle->get(), names.data(), buffers.data(),
                                               sizes.data(), n, nullptr, results.data());
        ok = rc == 0;
        for (size_t i = 0; i < n && ok; ++i) ok = results[i] == 0;
        // A table stored without the others is taken back: the layer is whole or absent.
        for (size_t i = 0; i < n && !ok && rc == 0; ++i) {
          if (results[i] == 0) mooncake_store_remove(handle->get(), names[i], 1);
        }
      }
    }
    if (!ok) throw std::runtime_error("populate failed");
  }

  // out: [B, L, H, D] float32, rows[((b * L + l) * H + h)] the row of head h at (b, l).
  py::array_t<float> Lookup(const int64_t* rows, int64_t b, int64_t l) {
    const int64_t h_count = heads();
    py::array_t<float> out({b, l, h_count, static_cast<int64_t>(dim_)});
    const uint64_t row_bytes = static_cast<uint64_t>(dim_) * sizeof(float);
    const uint64_t tokens = static_cast<uint64_t>(b) * static_cast<uint64_t>(l);
    char* dest = reinterpret_cast<char*>(out.mutable_data());
    const size_t total = static_cast<size_t>(out.nbytes());
    Store* store = Bound();
    bool ok = store != nullptr;
    std::vector<std::vector<mooncake_range_t>> ranges(static_cast<size_t>(h_count));
    for (uint64_t t = 0; t < tokens && ok; ++t) {
      for (int64_t h = 0; h < h_count && ok; ++h) {
        int64_t row = rows[t * h_count + h];
        ok = row >= 0 && row < vocab_[h];
        const uint64_t slot = t * static_cast<uint64_t>(h_count) + static_cast<uint64_t>(h);
        if (ok) ranges[h].push_back({static_cast<uint64_t>(row) * row_bytes, row_bytes,
                                     slot * row_bytes});
      }
    }
    if (ok) {
      auto handle = store->handle();
      py::gil_scoped_release nogil;
      std::vector<std::vector<int64_t>> fragment_results(ranges.size());
      std::vector<mooncake_ranged_get_t> gets;
      for (size_t h = 0; h < ranges.size(); ++h) {
        fragment_results[h].assign(ranges[h].size(), MOONCAKE_STORE_INVALID_PARAMS);
        gets.push_back({keys_[h].c_str(), dest, total, ranges[h].data(), ranges[h].size(),
                        fragment_results[h].data()});
      }
      std::vector<int64_t> totals(gets.size());
      ok = mooncake_store_batch_get_ranges(handle->get(), gets.data(), gets.size(),
                                           totals.data()) == 0;
      for (const auto& results : fragment_results) {
        for (int64_t r : results) ok = ok && r == static_cast<int64_t>(row_bytes);
      }
    }
    if (!ok) {
      std::memset(dest, 0, total);
      throw std::runtime_error("EngramStore lookup failed");
    }
    return out;
  }

 private:
  Store* Bound() const { return store_.is_none() ? nullptr : store_.cast<Store*>(); }

  py::object store_;  // the MooncakeDistributedStore, or None
  std::vector<int64_t> vocab_;
  int dim_;
  std::vector<std::string> keys_;
};

// row_ids as Mooncake's binding reads them: a NumPy array of shape [B, L, H] (H the number
// of heads), or nested sequences [B][L][H] whose rows all have the first row's lengths.
py::array_t<float> LookupAny(EngramStore& self, py::object row_ids) {
  using Ids = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
  if (py::isinstance<py::array>(row_ids)) {
    Ids ids = Ids::ensure(row_ids);
    if (!ids) throw std::runtime_error("row_ids array must be convertible to int64");
    if (ids.ndim() != 3) throw std::runtime_error("row_ids array must have shape [B, L, H]");
    if (ids.shape(2) != self.heads()) {
      throw std::runtime_error("row_ids last dimension must match num_heads");
    }
    if (ids.shape(0) <= 0 || ids.shape(1) <= 0) {
      throw std::runtime_error("EngramStore lookup failed");
    }
    return self.Lookup(ids.data(), ids.shape(0), ids.shape(1));
  }
  std::vector<int64_t> flat;
  int64_t b = 0, l = -1;
  bool ok = true;
  for (py::handle batch : row_ids) {
    int64_t tokens = 0;
    for (py::handle token : batch) {
      int64_t heads = 0;
      for (py::handle head : token) {
        flat.push_back(head.cast<int64_t>());
        ++heads;
      }
      ok = ok && heads == self.heads();
      ++tokens;
    }
    if (l < 0) l = tokens;
    ok = ok && tokens == l;
    ++b;
  }
  if (b == 0 || l <= 0) throw std::runtime_error("row_ids must not be empty");
  if (!ok) throw std::runtime_error("EngramStore lookup failed");
  return self.Lookup(flat.data(), b, l);
}

}  // namespace

void RegisterEngram(py::module_& m, py::class_<Store>& store) {
  store.def(
      kCapsuleMethod,
      [](py::object self) -> py::object {
        return self.cast<Store&>().open() ? StoreCapsule(self) : py::none();
      },
      "Internal use (EngramStore): the store as a capsule named "
      "'mooncake.PyClient.shared_ptr', or None before setup()/connect() (and after close()).");
  m.def(
      "_get_pyclient_from_wrapper",
      [](py::object wrapper) -> py::object {
        if (!py::isinstance<Store>(wrapper)) {
          throw py::type_error("_get_pyclient_from_wrapper() takes a MooncakeDistributedStore");
        }
        return wrapper.cast<Store&>().open() ? StoreCapsule(wrapper) : py::none();
      },
      py::arg("wrapper"),
      "Get PyClient from MooncakeDistributedStore (internal use, returns capsule)");

  py::class_<EngramStoreConfig>(m, "EngramStoreConfig")
      .def(py::init<>())
      .def_readwrite("table_vocab_sizes", &EngramStoreConfig::table_vocab_sizes)
      .def_readwrite("embedding_dim", &EngramStoreConfig::embedding_dim);

  py::class_<EngramStore>(m, "EngramStore")
      .def(py::init<int, const EngramStoreConfig&, py::object>(), py::arg("layer_id"),
           py::arg("config"), py::arg("store") = py::none())
      .def("get_table_vocab_sizes", &EngramStore::vocab_sizes)
      .def("get_store_keys", &EngramStore::keys)
      .def("get_num_heads", &EngramStore::heads)
      .def("get_embedding_dim", &EngramStore::dim)
      .def("remove_from_store", &EngramStore::RemoveFromStore, py::arg("force") = false,
           "Remove all Mooncake Store tables owned by this EngramStore layer. Returns the "
           "number of removed head tables; missing keys are ignored.")
      .def("lookup", &LookupAny, py::arg("row_ids"),
           "Lookup embeddings by precomputed row IDs. Returns [B, L, H, D].")
      .def("populate", &EngramStore::Populate, py::arg("embedding_buffers"));
}

}  // namespace mooncake_py
