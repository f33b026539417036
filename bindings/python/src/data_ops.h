// The data methods of MooncakeDistributedStore with one buffer per key: put/upsert (from
// bytes-like values or buffer addresses), get (as bytes, BufferHandle, or into a buffer),
// their batch forms, batch_is_exist() and alloc().
#ifndef MOONCAKE_STORE_PY_DATA_OPS_H_
#define MOONCAKE_STORE_PY_DATA_OPS_H_

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "replicate_config.h"
#include "store.h"
#include "store_handle.h"

namespace mooncake_py {

namespace py = pybind11;

int Put(Store& self, const std::string& key, py::handle value, const ReplicateConfig* config);

int Upsert(Store& self, const std::string& key, py::handle value, const ReplicateConfig* config);

int PutFrom(Store& self, const std::string& key, py::handle buffer_ptr, uint64_t size,
            const ReplicateConfig* config, bool upsert);

// put_parts(key, *parts): the parts are gathered into one pool block (then the put itself
// is zero-copy), or into heap memory when the pool has no room.
// config is keyword-only (it follows *parts). It is taken from **kwargs by hand: pybind11
// 2.10 does not match a keyword argument declared after py::args.
int PutParts(Store& self, const std::string& key, const py::args& parts, const py::kwargs& kwargs);

// The C ABI's batch writes from buffers: mooncake_store_batch_put_from_ex and
// mooncake_store_batch_upsert_from.
using BatchWriteFrom = int (*)(mooncake_store_t, const char**, void**, const size_t*, size_t,
                               const mooncake_put_config_t*, int*);

// put_batch and upsert_batch: the bytes-like values written by write in one call, without
// the GIL; 0 when every entry succeeded, else the first failure.
int WriteBatch(Store& self, const std::vector<std::string>& keys,
               const std::vector<py::object>& values, const ReplicateConfig* config,
               BatchWriteFrom write);

// put_batch(keys, values): one int, 0 when every put succeeded, else the first failure.
int PutBatch(Store& self, const std::vector<std::string>& keys,
             const std::vector<py::object>& values,
             const ReplicateConfig* config);

std::vector<int> BatchPutFrom(Store& self, const std::vector<std::string>& keys,
                              const std::vector<py::object>& buffer_ptrs,
                              const std::vector<uint64_t>& sizes, const ReplicateConfig* config);

py::bytes Get(Store& self, const std::string& key);

py::list GetBatch(Store& self, const std::vector<std::string>& keys);

py::object GetBuffer(Store& self, const std::string& key);

py::list BatchGetBuffer(Store& self, const std::vector<std::string>& keys);

int64_t GetInto(Store& self, const std::string& key, py::handle buffer_ptr, uint64_t size);

std::vector<int64_t> BatchGetInto(Store& self, const std::vector<std::string>& keys,
                                  const std::vector<py::object>& buffer_ptrs,
                                  const std::vector<uint64_t>& sizes);

std::vector<int> BatchIsExist(Store& self, const std::vector<std::string>& keys);

py::memoryview Alloc(Store& self, uint64_t size);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_DATA_OPS_H_
