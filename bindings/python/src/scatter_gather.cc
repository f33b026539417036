// Gathering parts into one pool block before a put, and scattering a block after a get.
// See scatter_gather.h.
#include "scatter_gather.h"

#include <algorithm>
#include <limits>
#include <memory>

#include "buffers.h"
#include "mooncake_store.h"
#include "store_handle.h"

namespace py = pybind11;

namespace mooncake_py {

// ---- scatter/gather -------------------------------------------------------------------------
//
// The C ABI moves one contiguous buffer per key. Mooncake's multi-buffer calls move a
// key's value from or into several buffers, so the binding gathers the parts into one
// pool block before a put (the put is then zero-copy) and scatters a block after a get:
// one copy more than Mooncake's transfer engine needs, none when a key has one buffer.
// The parts may be CUDA device memory (vLLM passes its KV cache's layers): the copies are
// mooncake_store_copy_memory's, which moves device bytes with the CUDA driver, and a part
// that is neither host nor device memory makes its entry's result -600.

namespace {

struct Parts {
  std::vector<char*> ptrs;
  std::vector<size_t> sizes;
  size_t total = 0;
  int error = 0;  // -600 when the shapes differ or a size runs past its buffer
};

// The items of a list or tuple argument (any sequence but str and bytes, as pybind11's list
// conversion takes), borrowed from the object; a TypeError otherwise.
class Items {
 public:
  Items(py::handle seq, const char* what) {
    if (PyUnicode_Check(seq.ptr()) || PyBytes_Check(seq.ptr())) {
      throw py::type_error(std::string(what) + " must be a list");
    }
    fast_ = py::reinterpret_steal<py::object>(PySequence_Fast(seq.ptr(), what));
    if (!fast_) throw py::error_already_set();
  }
  size_t size() const { return static_cast<size_t>(PySequence_Fast_GET_SIZE(fast_.ptr())); }
  py::handle operator[](size_t i) const { return PySequence_Fast_GET_ITEM(fast_.ptr(), i); }

 private:
  py::object fast_;
};

uint64_t SizeArg(py::handle v) {
  unsigned long long n = PyLong_Check(v.ptr()) ? PyLong_AsUnsignedLongLong(v.ptr()) : 0;
  if (!PyLong_Check(v.ptr()) || PyErr_Occurred()) {
    PyErr_Clear();
    throw py::type_error("a size must be an int in [0, 2**64)");
  }
  return n;
}

// The parts of every entry, read straight from the Python lists: the nested std::vectors
// of py::object pybind11 would build cost about a third of a 128-key batch of 4 KiB.
std::vector<Parts> ResolveParts(py::handle all_ptrs, py::handle all_sizes, bool writable,
                                std::vector<BufferView>* keep) {
  Items ptr_lists(all_ptrs, "all_buffer_ptrs"), size_lists(all_sizes, "all_sizes");
  std::vector<Parts> out(ptr_lists.size());
  for (size_t i = 0; i < out.size(); ++i) {
    Parts& p = out[i];
    Items ptrs(ptr_lists[i], "all_buffer_ptrs[i]"), sizes(size_lists[i], "all_sizes[i]");
    if (ptrs.size() != sizes.size() || ptrs.size() == 0) {
      p.error = kInvalidParams;
      continue;
    }
    for (size_t j = 0; j < ptrs.size(); ++j) {
      Address a = ResolveAddress(ptrs[j], writable, keep);
      uint64_t size = SizeArg(sizes[j]);
      if (!a.fits(size)) p.error = kInvalidParams;
      p.ptrs.push_back(a.ptr);
      p.sizes.push_back(size);
      p.total += size;
    }
  }
  return out;
}

bool SameLength(py::handle seq, size_t n) {
  Py_ssize_t len = PyObject_Length(seq.ptr());
  if (len < 0) throw py::error_already_set();
  return static_cast<size_t>(len) == n;
}

// The one buffer each entry of a multi-buffer batch moves: its only buffer, or a pool block
// of its total size in blocks[i], filled from its buffers when gather. An entry whose parts
// were refused (or could not be gathered) gets their code in results and stays out of the
// batch.
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
    int rc = 0;
    if (p.ptrs.size() > 1 && p.total > 0) {
      (*blocks)[i] = Scratch(h, p.total);
      ptr = (*blocks)[i].data();
      size_t offset = 0;
      for (size_t j = 0; gather && rc == 0 && j < p.ptrs.size(); ++j) {
        if (p.sizes[j] == 0) continue;  // its address may be 0
        rc = mooncake_store_copy_memory(h->get(), ptr + offset, p.ptrs[j], p.sizes[j]);
        offset += p.sizes[j];
      }
    }
    if (rc != 0) {
      (*results)[i] = rc;
      continue;
    }
    b.Add(CKey(keys[i]), ptr, p.total, i);
  }
  return b;
}

}  // namespace

std::vector<int> BatchPutFromMulti(Store& self, const std::vector<std::string>& keys,
                                   py::handle all_buffer_ptrs, py::handle all_sizes,
                                   const ReplicateConfig* config) {
  const size_t n = keys.size();
  if (!SameLength(all_buffer_ptrs, n) || !SameLength(all_sizes, n)) {
    return std::vector<int>(n, kInvalidParams);
  }
  std::vector<int> results(n, 0);
  if (n == 0) return results;
  const int status = CConfig(config).status();
  if (status != 0) return std::vector<int>(n, status);
  // A copy, read with the GIL held: the entries refused below leave the batch, and so must
  // their group ids (one per key of the call).
  ReplicateConfig local = config != nullptr ? *config : ReplicateConfig();
  std::vector<BufferView> keep;
  std::vector<Parts> parts = ResolveParts(all_buffer_ptrs, all_sizes, false, &keep);
  auto h = self.handle();
  py::gil_scoped_release nogil;
  std::vector<Scratch> gathered(n);
  CBatch b = PlanParts(h, keys, parts, true, &gathered, &results);
  if (b.where.empty()) return results;
  if (local.group_ids && local.group_ids->size() == n && b.where.size() != n) {
    std::vector<std::string> picked;
    for (size_t i : b.where) picked.push_back((*local.group_ids)[i]);
    local.group_ids = std::move(picked);
  }
  CConfig c(config != nullptr ? &local : nullptr);
  std::vector<int> batch(b.where.size());
  int rc = mooncake_store_batch_put_from_ex(h->get(), b.keys.data(), b.buffers.data(),
                                            b.sizes.data(), b.where.size(), c.get(), batch.data());
  for (size_t j = 0; j < b.where.size(); ++j) results[b.where[j]] = rc != 0 ? rc : batch[j];
  return results;
}

std::vector<int64_t> BatchGetIntoMulti(Store& self, const std::vector<std::string>& keys,
                                       py::handle all_buffer_ptrs, py::handle all_sizes,
                                       bool /*prefer_alloc_in_same_node: the daemon places*/) {
  const size_t n = keys.size();
  if (!SameLength(all_buffer_ptrs, n) || !SameLength(all_sizes, n)) {
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
      if (chunk == 0) continue;  // its address may be 0
      int rc = mooncake_store_copy_memory(h->get(), parts[i].ptrs[k], staging[i].data() + offset,
                                          chunk);
      if (rc != 0) {
        results[i] = rc;
        break;
      }
      offset += chunk;
      left -= chunk;
    }
  }
  return results;
}

}  // namespace mooncake_py
