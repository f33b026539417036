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

std::vector<int> BatchPutFromMulti(Store& self, const std::vector<std::string>& keys,
                                   const std::vector<std::vector<py::object>>& all_buffer_ptrs,
                                   const std::vector<std::vector<uint64_t>>& all_sizes,
                                   const ReplicateConfig* config);

std::vector<int64_t> BatchGetIntoMulti(Store& self, const std::vector<std::string>& keys,
                                       const std::vector<std::vector<py::object>>& all_buffer_ptrs,
                                       const std::vector<std::vector<uint64_t>>& all_sizes,
                                       bool /*prefer_alloc_in_same_node: the daemon places*/);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_SCATTER_GATHER_H_
