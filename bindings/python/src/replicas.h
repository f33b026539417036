// Replica descriptors as Mooncake's Python API has them (ReplicaDescriptor,
// get_replica_desc / batch_get_replica_desc), over mooncake_store_get_replica_desc and its
// batch form.
//
// Mooncake's ReplicaDescriptor tells its kinds apart by is_memory_replica(),
// is_disk_replica() (Mooncake: a shared-filesystem replica) and is_local_disk_replica()
// (Mooncake: a replica on one client's SSD). This store's disk replicas live on one
// daemon's SSD tier, so both disk predicates are true for them. Mooncake's fields are
// there with its names — status (ReplicaStatus, Mooncake's values),
// get_memory_descriptor().buffer_descriptor (a Descriptor: size, buffer_address,
// transport_endpoint) and get_disk_descriptor() (a DiskDescriptor: file_path, object_size)
// — and each descriptor has plain fields too: kind, location ("host:port" of the daemon
// holding it) and size.
#ifndef MOONCAKE_STORE_PY_REPLICAS_H_
#define MOONCAKE_STORE_PY_REPLICAS_H_

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mooncake_enums.h"
#include "mooncake_store.h"
#include "store.h"

namespace mooncake_py {

namespace py = pybind11;

// Where a replica lives; the values are the C ABI's (MOONCAKE_REPLICA_*).
enum class ReplicaKind : int { MEMORY = MOONCAKE_REPLICA_MEMORY, LOCAL_DISK = MOONCAKE_REPLICA_DISK };

// Mooncake's AllocatedBuffer::Descriptor (Python: Descriptor): where a memory replica's
// bytes are. buffer_address is an address in the holding daemon's memory, which this
// process cannot use: 0.
struct AllocatedBufferDescriptor {
  uint64_t size = 0;
  uint64_t buffer_address = 0;
  std::string transport_endpoint;  // "host:port" of the daemon holding it
};
struct MemoryDescriptor {
  AllocatedBufferDescriptor buffer_descriptor;
};
// Mooncake's DiskDescriptor. The daemon's SSD tier locates an object by its own index, not
// by a file this process could open: file_path is "".
struct DiskDescriptor {
  std::string file_path;
  uint64_t object_size = 0;
};

struct ReplicaDescriptor {
  ReplicaKind kind = ReplicaKind::MEMORY;
  ReplicaStatus status = ReplicaStatus::COMPLETE;
  std::string location;
  uint64_t size = 0;

  bool is_memory_replica() const { return kind == ReplicaKind::MEMORY; }
  bool is_disk_replica() const { return kind == ReplicaKind::LOCAL_DISK; }
  // RuntimeError for a replica of the other kind, as in Mooncake.
  MemoryDescriptor get_memory_descriptor() const;
  DiskDescriptor get_disk_descriptor() const;
  std::string ToString() const;
};

// The replicas of key; an empty list on a miss or any error (as Mooncake's).
std::vector<ReplicaDescriptor> GetReplicaDesc(Store& self, const std::string& key);

// key -> its replicas, for the keys found (as Mooncake's: a miss or an error leaves the key
// out).
py::dict BatchGetReplicaDesc(Store& self, const std::vector<std::string>& keys);

// Registers the classes above in m.
void RegisterReplicaClasses(py::module_& m);

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_REPLICAS_H_
