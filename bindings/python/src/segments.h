// Mooncake's segment calls, replica clearing and standalone mode on MooncakeDistributedStore
// (docs/mooncake-api.md, "segments"): batch_remove, batch_replica_clear, mount_segment,
// unmount_segment, allocate_and_mount_segment, unmount_and_free_segment,
// unmount_local_disk_segment, setup_dummy, alloc_from_mem_pool; and the classes
// MooncakeHostMemAllocator, BufferPool (with BufferLease, BufferLeaseView and Mooncake's
// Registered* aliases).
//
// Mooncake's "real client" is our daemon and its "dummy client" is this store over the
// daemon's socket: memory the cluster or the daemon reads and writes must be shared with
// the daemon, so it comes from the store's pool (or the daemon maps it itself).
#ifndef MOONCAKE_STORE_PY_SEGMENTS_H_
#define MOONCAKE_STORE_PY_SEGMENTS_H_

#include <pybind11/pybind11.h>

#include "store.h"

namespace mooncake_py {

namespace py = pybind11;

void RegisterSegments(py::module_& m, py::class_<Store>& store);

// BufferPool and its leases (buffer_pool.cc), registered by RegisterSegments.
void RegisterBufferPool(py::module_& m);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_SEGMENTS_H_
