// Put sessions of MooncakeDistributedStore over mooncake_store_put_session_*: Mooncake's
// batch_put_session_start(), batch_put_from_multi_buffer_ranges(), batch_put_session_end()
// and batch_put_session_revoke(). Shapes, codes and the differences from Mooncake:
// docs/mooncake-api.md, "sessions".
#include "sessions.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "buffers.h"
#include "mooncake_store.h"
#include "replicate_config.h"
#include "store_handle.h"

namespace mooncake_py {

namespace {

std::vector<const char*> CKeys(const std::vector<std::string>& keys) {
  std::vector<const char*> out;
  out.reserve(keys.size());
  for (const std::string& k : keys) out.push_back(CKey(k));
  return out;
}

// batch_put_session_start(keys, sizes, config=None): per key 0 (reserved, open) or its code;
// [] for no keys; every key -600 when the lists differ in length.
std::vector<int> Start(Store& self, const std::vector<std::string>& keys,
                       const std::vector<uint64_t>& sizes, const ReplicateConfig* config) {
  const size_t n = keys.size();
  if (sizes.size() != n) return std::vector<int>(n, kInvalidParams);
  std::vector<int> results(n, 0);
  if (n == 0) return results;
  CConfig c(config);
  if (c.status() != 0) return std::vector<int>(n, c.status());
  std::vector<const char*> names = CKeys(keys);
  std::vector<size_t> c_sizes(sizes.begin(), sizes.end());
  auto h = self.handle();
  py::gil_scoped_release nogil;
  int rc = mooncake_store_put_session_start(h->get(), names.data(), c_sizes.data(), n, c.get(),
                                            results.data());
  if (rc != 0) results.assign(n, rc);
  return results;
}

// batch_put_from_multi_buffer_ranges(keys, all_buffer_ptrs, all_sizes, all_dst_offsets):
// per key the bytes written (the sum of its sizes) or a code; -600 for a key whose three
// lists differ in length, or every key when the top-level lists do.
std::vector<int> WriteRanges(Store& self, const std::vector<std::string>& keys,
                             const std::vector<std::vector<py::object>>& all_buffer_ptrs,
                             const std::vector<std::vector<uint64_t>>& all_sizes,
                             const std::vector<std::vector<uint64_t>>& all_dst_offsets) {
  const size_t n = keys.size();
  std::vector<int> results(n, kInvalidParams);
  if (all_buffer_ptrs.size() != n || all_sizes.size() != n || all_dst_offsets.size() != n) {
    return results;
  }
  std::vector<BufferView> keep;
  std::vector<std::vector<mooncake_put_fragment_t>> fragments;
  std::vector<mooncake_session_write_t> writes;
  std::vector<size_t> where;  // the key of each write
  fragments.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const auto& buffers = all_buffer_ptrs[i];
    if (buffers.size() != all_sizes[i].size() || buffers.size() != all_dst_offsets[i].size()) {
      continue;
    }
    std::vector<mooncake_put_fragment_t> f(buffers.size());
    bool fits = true;
    for (size_t k = 0; k < buffers.size(); ++k) {
      Address a = ResolveAddress(buffers[k], false, &keep);
      fits = fits && a.fits(all_sizes[i][k]);
      f[k] = {a.ptr, all_sizes[i][k], all_dst_offsets[i][k]};
    }
    if (!fits) continue;  // a size past a buffer object's end: -600
    fragments.push_back(std::move(f));
    writes.push_back({CKey(keys[i]), fragments.back().data(), fragments.back().size()});
    where.push_back(i);
  }
  if (writes.empty()) return results;
  std::vector<int64_t> written(writes.size());
  auto h = self.handle();
  {
    py::gil_scoped_release nogil;
    int rc = mooncake_store_put_session_write(h->get(), writes.data(), writes.size(),
                                              written.data());
    if (rc != 0) written.assign(writes.size(), rc);
  }
  for (size_t j = 0; j < writes.size(); ++j) {
    results[where[j]] = written[j] > std::numeric_limits<int>::max()
                            ? kInvalidParams
                            : static_cast<int>(written[j]);
  }
  return results;
}

using EndFunction = int (*)(mooncake_store_t, const char**, size_t, int*);

// batch_put_session_end(keys) and batch_put_session_revoke(keys): a code per key.
std::vector<int> End(Store& self, const std::vector<std::string>& keys, EndFunction end) {
  const size_t n = keys.size();
  std::vector<int> results(n, 0);
  if (n == 0) return results;
  std::vector<const char*> names = CKeys(keys);
  auto h = self.handle();
  py::gil_scoped_release nogil;
  int rc = end(h->get(), names.data(), n, results.data());
  if (rc != 0) results.assign(n, rc);
  return results;
}

}  // namespace

void RegisterSessions(py::module_&, py::class_<Store>& store) {
  store
      .def("batch_put_session_start", &Start, py::arg("keys"), py::arg("sizes"),
           py::arg("config") = py::none(),
           "Opens a put session per key: its object of sizes[i] bytes is reserved (placed "
           "as a put with config would be, group ids too) without any bytes. Per key 0, or "
           "its code (-705 the key is stored already, -600 a session for it is open, -200 "
           "no space).")
      .def("batch_put_from_multi_buffer_ranges", &WriteRanges, py::arg("keys"),
           py::arg("all_buffer_ptrs"), py::arg("all_sizes"), py::arg("all_dst_offsets"),
           "Writes ranges into the keys' open put sessions: all_sizes[i][k] bytes from "
           "all_buffer_ptrs[i][k] to offset all_dst_offsets[i][k] of keys[i]'s value. Per "
           "key the bytes written, or a code (-600 without a session, or for a range past "
           "the value; nothing is written for that key then).")
      .def("batch_put_session_end",
           [](Store& self, const std::vector<std::string>& keys) {
             return End(self, keys, mooncake_store_put_session_end);
           },
           py::arg("keys"),
           "Publishes the keys' put sessions: each value becomes readable whole. Per key 0, "
           "or its code (-600 no session; -800 a range write had failed: nothing is "
           "published). The session ends either way.")
      .def("batch_put_session_revoke",
           [](Store& self, const std::vector<std::string>& keys) {
             return End(self, keys, mooncake_store_put_session_revoke);
           },
           py::arg("keys"),
           "Drops the keys' put sessions and what they reserved. Per key 0, or -600 without "
           "a session.");
}

}  // namespace mooncake_py
