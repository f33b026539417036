// The multi-buffer data methods of MooncakeDistributedStore: batch_put_from_multi_buffers()
// and batch_get_into_multi_buffers(), which move a key's value from or into several
// buffers over the C ABI's one buffer per key. (get_into_ranges(): ranges.h.)
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

// all_buffer_ptrs and all_sizes: lists (per key) of lists of addresses and sizes, read
// without converting them to std::vectors first (see scatter_gather.cc).
std::vector<int> BatchPutFromMulti(Store& self, const std::vector<std::string>& keys,
                                   py::handle all_buffer_ptrs, py::handle all_sizes,
                                   const ReplicateConfig* config);

std::vector<int64_t> BatchGetIntoMulti(Store& self, const std::vector<std::string>& keys,
                                       py::handle all_buffer_ptrs, py::handle all_sizes,
                                       bool /*prefer_alloc_in_same_node: the daemon places*/);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_SCATTER_GATHER_H_
