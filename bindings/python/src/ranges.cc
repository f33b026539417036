// get_into_ranges() and the get session calls over mooncake_store_batch_get_ranges. See
// ranges.h.
#include "ranges.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "buffers.h"
#include "mooncake_store.h"
#include "store_handle.h"

namespace mooncake_py {

namespace {

using Nested = std::vector<std::vector<std::vector<uint64_t>>>;

// The ranged gets of one call as the C ABI takes them. Each get's fragments and results
// live in vectors owned by the caller, which must not move while the call runs.
struct RangedGets {
  std::vector<std::vector<mooncake_range_t>> ranges;  // one list per get
  std::vector<mooncake_ranged_get_t> gets;
  std::vector<int64_t> totals;  // what get_ranges returns, per get

  void Add(const char* key, char* buffer, size_t buffer_size, std::vector<mooncake_range_t> r,
           int64_t* results_out) {
    ranges.push_back(std::move(r));
    gets.push_back({key, buffer, buffer_size, nullptr, 0, results_out});
  }

  // Runs them all (without the GIL); totals[i] for gets[i].
  void Run(const std::shared_ptr<StoreHandle>& h) {
    totals.assign(gets.size(), kInvalidParams);
    if (gets.empty()) return;
    for (size_t i = 0; i < gets.size(); ++i) {
      gets[i].ranges = ranges[i].data();
      gets[i].range_count = ranges[i].size();
    }
    int rc = mooncake_store_batch_get_ranges(h->get(), gets.data(), gets.size(), totals.data());
    if (rc != 0) totals.assign(gets.size(), rc);
  }
};

// The bytes a destination may take from ptr on: the buffer object's size, else those of
// the registered range (or alloc() block) it lies in; 0 when the binding knows none.
size_t Capacity(Store& self, const Address& a) {
  if (a.capacity != std::numeric_limits<size_t>::max()) return a.capacity;
  return self.registry()->CapacityAt(reinterpret_cast<uintptr_t>(a.ptr));
}

// get_into_ranges(buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets, all_sizes):
// results[i][j][k] is what fragment k of key j into buffer i read (its length), or a code.
// The shape is Mooncake's: one row per buffer, one list per key of all_keys[i] (one entry
// when the buffer has no key list), one entry per fragment of all_dst_offsets[i][j] (one
// when that list is missing; none for an empty list). Everything starts as -600 and the
// fragments read overwrite it; a malformed plan (lists of different lengths) or a
// destination the binding knows no size of leaves its entries at -600.
py::object GetIntoRanges(Store& self, const std::vector<py::object>& buffer_ptrs,
                         const std::vector<std::vector<std::string>>& all_keys,
                         const Nested& all_dst_offsets, const Nested& all_src_offsets,
                         const Nested& all_sizes) {
  const size_t n = buffer_ptrs.size();
  std::vector<std::vector<std::vector<int64_t>>> results(n);
  for (size_t i = 0; i < n; ++i) {
    size_t key_count = i < all_keys.size() ? all_keys[i].size() : 1;
    results[i].resize(key_count);
    for (size_t j = 0; j < key_count; ++j) {
      bool listed = i < all_dst_offsets.size() && j < all_dst_offsets[i].size();
      results[i][j].assign(listed ? all_dst_offsets[i][j].size() : 1, kInvalidParams);
    }
  }
  if (all_keys.size() != n || all_dst_offsets.size() != n || all_src_offsets.size() != n ||
      all_sizes.size() != n) {
    return py::cast(results);
  }
  std::vector<BufferView> keep;
  RangedGets plan;
  for (size_t i = 0; i < n; ++i) {
    Address dest = ResolveAddress(buffer_ptrs[i], true, &keep);
    size_t capacity = Capacity(self, dest);
    const size_t keys = all_keys[i].size();
    if (dest.ptr == nullptr || capacity == 0 || all_dst_offsets[i].size() != keys ||
        all_src_offsets[i].size() != keys || all_sizes[i].size() != keys) {
      continue;
    }
    for (size_t j = 0; j < keys; ++j) {
      const auto& dst = all_dst_offsets[i][j];
      const auto& src = all_src_offsets[i][j];
      const auto& len = all_sizes[i][j];
      if (src.size() != dst.size() || len.size() != dst.size() || dst.empty()) continue;
      std::vector<mooncake_range_t> r(dst.size());
      for (size_t k = 0; k < dst.size(); ++k) r[k] = {src[k], len[k], dst[k]};
      plan.Add(CKey(all_keys[i][j]), dest.ptr, capacity, std::move(r), results[i][j].data());
    }
  }
  auto h = self.handle();
  {
    py::gil_scoped_release nogil;
    plan.Run(h);
  }
  return py::cast(results);
}

// batch_get_session_start(keys): per key 0 (the session is open: the key has a complete
// replica, and the master granted a read lease) or its code (-704 on a miss); [] for no keys.
std::vector<int> BatchGetSessionStart(Store& self, const std::vector<std::string>& keys) {
  const size_t n = keys.size();
  std::vector<int> results(n, kInvalidParams);
  if (n == 0) return results;
  std::vector<const char*> names;
  for (const std::string& k : keys) names.push_back(CKey(k));
  // A few descriptors per key are enough to see that one exists; -600 with a count above
  // the capacity says the same of an object with more replicas.
  constexpr size_t kDescs = 4;
  std::vector<mooncake_replica_desc_t> descs(n * kDescs);
  std::vector<size_t> counts(n, 0);
  auto h = self.handle();
  {
    py::gil_scoped_release nogil;
    int rc = mooncake_store_batch_get_replica_desc(h->get(), names.data(), n, descs.data(),
                                                   kDescs, counts.data(), results.data());
    if (rc != 0) results.assign(n, rc);
  }
  for (size_t i = 0; i < n; ++i) {
    if (results[i] == kInvalidParams && counts[i] > kDescs) results[i] = 0;
    if (results[i] == 0 && counts[i] == 0) results[i] = MOONCAKE_STORE_OBJECT_NOT_FOUND;
    if (results[i] == 0) {
      self.get_sessions().insert(keys[i]);
    } else {
      self.get_sessions().erase(keys[i]);
    }
  }
  return results;
}

// batch_get_into_multi_buffer_ranges(keys, all_buffer_ptrs, all_sizes, all_src_offsets):
// per key the bytes read (the sum of its sizes) or the first fragment's code; -600 for a
// key without an open session or whose three lists differ in length.
std::vector<int> BatchGetIntoMultiBufferRanges(
    Store& self, const std::vector<std::string>& keys,
    const std::vector<std::vector<py::object>>& all_buffer_ptrs,
    const std::vector<std::vector<uint64_t>>& all_sizes,
    const std::vector<std::vector<uint64_t>>& all_src_offsets) {
  const size_t n = keys.size();
  std::vector<int> results(n, kInvalidParams);
  if (all_buffer_ptrs.size() != n || all_sizes.size() != n || all_src_offsets.size() != n) {
    return results;
  }
  std::vector<BufferView> keep;
  RangedGets plan;
  std::vector<std::vector<int64_t>> fragment_results(n);
  for (size_t i = 0; i < n; ++i) {
    const auto& buffers = all_buffer_ptrs[i];
    if (buffers.size() != all_sizes[i].size() || buffers.size() != all_src_offsets[i].size() ||
        self.get_sessions().count(keys[i]) == 0) {
      continue;
    }
    results[i] = 0;
    fragment_results[i].assign(buffers.size(), kInvalidParams);
    for (size_t k = 0; k < buffers.size(); ++k) {
      Address a = ResolveAddress(buffers[k], true, &keep);
      if (!a.fits(all_sizes[i][k])) continue;  // stays -600
      plan.Add(CKey(keys[i]), a.ptr, all_sizes[i][k],
               {{all_src_offsets[i][k], all_sizes[i][k], 0}}, &fragment_results[i][k]);
    }
  }
  auto h = self.handle();
  {
    py::gil_scoped_release nogil;
    plan.Run(h);
  }
  for (size_t i = 0; i < n; ++i) {
    if (results[i] != 0) continue;
    int64_t total = 0;
    for (int64_t v : fragment_results[i]) {
      if (v < 0) {
        total = v;
        break;
      }
      total += v;
    }
    results[i] = total > std::numeric_limits<int>::max() ? kInvalidParams
                                                         : static_cast<int>(total);
  }
  return results;
}

}  // namespace

void RegisterRanges(py::module_&, py::class_<Store>& store) {
  store
      .def("get_into_ranges", &GetIntoRanges, py::arg("buffer_ptrs"), py::arg("all_keys"),
           py::arg("all_dst_offsets"), py::arg("all_src_offsets"), py::arg("all_sizes"),
           "Reads only the given byte ranges of objects into buffers: results[i][j][k] is "
           "the length read for fragment k of key all_keys[i][j] into buffer_ptrs[i] (at "
           "all_dst_offsets[i][j][k], from all_src_offsets[i][j][k] in the object), or a code "
           "(-600 past the object or the buffer, -704 on a miss).")
      .def("batch_get_session_start", &BatchGetSessionStart, py::arg("keys"),
           "Opens a get session for each key: 0, or the key's code (-704 on a miss).")
      .def("batch_get_into_multi_buffer_ranges", &BatchGetIntoMultiBufferRanges,
           py::arg("keys"), py::arg("all_buffer_ptrs"), py::arg("all_sizes"),
           py::arg("all_src_offsets"),
           "Ranged reads of keys with an open get session: buffer all_buffer_ptrs[i][k] gets "
           "all_sizes[i][k] bytes from all_src_offsets[i][k] of keys[i]. Per key the bytes "
           "read, or a code (-600 without a session).")
      .def("batch_get_session_end",
           [](Store& self, const std::vector<std::string>& keys) {
             for (const std::string& k : keys) self.get_sessions().erase(k);
             return 0;
           },
           py::arg("keys"), "Ends the keys' get sessions; 0.");
}

}  // namespace mooncake_py
