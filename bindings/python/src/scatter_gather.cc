// Gathering parts into one pool block before a put, scattering a block after a get, and
// copying get_into_ranges() fragments out of whole reads. See scatter_gather.h.
#include "scatter_gather.h"

#include <algorithm>
#include <cstring>
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
// one memcpy more than Mooncake's transfer engine needs, none when a key has one buffer.

namespace {

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

}  // namespace

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
  int rc = mooncake_store_batch_put_from_ex(h->get(), b.keys.data(), b.buffers.data(),
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

}  // namespace mooncake_py
