// The multi-buffer data methods of MooncakeDistributedStore: batch_put_from_multi_buffers(),
// batch_get_into_multi_buffers() and get_into_ranges(), which move a key's value from or
// into several buffers (or fragments) over the C ABI's one buffer per key.
#ifndef MOONCAKE_STORE_PY_SCATTER_GATHER_H_
#define MOONCAKE_STORE_PY_SCATTER_GATHER_H_

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "replicate_config.h"
#include "store.h"

namespace mooncake_py {

namespace py = pybind11;

std::vector<int> BatchPutFromMulti(Store& self, const std::vector<std::string>& keys,
                                   const std::vector<std::vector<py::object>>& all_buffer_ptrs,
                                   const std::vector<std::vector<uint64_t>>& all_sizes,
                                   const ReplicateConfig* config);

std::vector<int64_t> BatchGetIntoMulti(Store& self, const std::vector<std::string>& keys,
                                       const std::vector<std::vector<py::object>>& all_buffer_ptrs,
                                       const std::vector<std::vector<uint64_t>>& all_sizes,
                                       bool /*prefer_alloc_in_same_node: the daemon places*/);

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
                       const std::vector<std::vector<std::vector<uint64_t>>>& all_sizes);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_SCATTER_GATHER_H_
