// get_replica_desc / batch_get_replica_desc and the descriptor classes. See replicas.h.
#include "replicas.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "store_handle.h"

namespace py = pybind11;

namespace mooncake_py {

namespace {

// Room for this many replicas per key on the first try: a put has replica_num memory
// replicas (1 unless asked otherwise) and at most a disk one. A key with more is asked
// again with room for all.
constexpr size_t kFirstCapacity = 8;
// Keys per call of the batch form (the library splits its requests the same way).
constexpr size_t kChunkKeys = 1024;

ReplicaDescriptor FromC(const mooncake_replica_desc_t& d) {
  ReplicaDescriptor r;
  r.kind = static_cast<ReplicaKind>(d.kind);
  r.status = ReplicaStatusFromC(d.status);
  r.location = d.location;
  r.size = d.size;
  return r;
}

// One key's replicas through the single call, growing the room as the library says; the
// C code on failure. Runs without the GIL.
int Lookup(mooncake_store_t h, const char* key, std::vector<ReplicaDescriptor>* out) {
  std::vector<mooncake_replica_desc_t> room(kFirstCapacity);
  for (int attempt = 0; attempt < 4; ++attempt) {  // a few: replicas may come and go
    size_t n = 0;
    int rc = mooncake_store_get_replica_desc(h, key, room.data(), room.size(), &n);
    if (rc == MOONCAKE_STORE_INVALID_PARAMS && n > room.size()) {
      room.resize(n);
      continue;
    }
    if (rc != 0) return rc;
    for (size_t i = 0; i < n; ++i) out->push_back(FromC(room[i]));
    return 0;
  }
  return MOONCAKE_STORE_INVALID_PARAMS;
}

// The name of a ReplicaStatus value, as Python shows it.
std::string StatusName(ReplicaStatus status) {
  return py::str(py::cast(status).attr("name"));
}

}  // namespace

MemoryDescriptor ReplicaDescriptor::get_memory_descriptor() const {
  if (!is_memory_replica()) throw std::runtime_error("Expected MemoryDescriptor");
  return MemoryDescriptor{AllocatedBufferDescriptor{size, 0, location}};
}

DiskDescriptor ReplicaDescriptor::get_disk_descriptor() const {
  if (!is_disk_replica()) throw std::runtime_error("Expected DiskDescriptor");
  return DiskDescriptor{"", size};
}

std::string ReplicaDescriptor::ToString() const {
  std::ostringstream out;
  out << "ReplicaDescriptor(kind=ReplicaKind." << (is_memory_replica() ? "MEMORY" : "LOCAL_DISK")
      << ", status=ReplicaStatus." << StatusName(status) << ", location='" << location
      << "', size=" << size << ")";
  return out.str();
}

std::vector<ReplicaDescriptor> GetReplicaDesc(Store& self, const std::string& key) {
  auto h = self.handle();
  std::vector<ReplicaDescriptor> replicas;
  py::gil_scoped_release nogil;
  if (Lookup(h->get(), CKey(key), &replicas) != 0) replicas.clear();
  return replicas;
}

py::dict BatchGetReplicaDesc(Store& self, const std::vector<std::string>& keys) {
  auto h = self.handle();
  std::vector<std::vector<ReplicaDescriptor>> found(keys.size());
  std::vector<int> results(keys.size(), MOONCAKE_STORE_OBJECT_NOT_FOUND);
  {
    py::gil_scoped_release nogil;
    std::vector<const char*> c_keys;
    c_keys.reserve(keys.size());
    for (const std::string& k : keys) c_keys.push_back(CKey(k));
    // Chunks of kChunkKeys keys, so the descriptors' room stays small for any batch.
    std::vector<mooncake_replica_desc_t> room(kChunkKeys * kFirstCapacity);
    std::vector<size_t> counts(kChunkKeys);
    for (size_t first = 0; first < keys.size(); first += kChunkKeys) {
      size_t n = std::min(kChunkKeys, keys.size() - first);
      int rc = mooncake_store_batch_get_replica_desc(h->get(), &c_keys[first], n, room.data(),
                                                     kFirstCapacity, counts.data(),
                                                     &results[first]);
      for (size_t j = 0; j < n; ++j) {
        size_t i = first + j;
        if (rc != 0) {
          results[i] = rc;
        } else if (results[i] == MOONCAKE_STORE_INVALID_PARAMS && counts[j] > kFirstCapacity) {
          results[i] = Lookup(h->get(), c_keys[i], &found[i]);  // more replicas than room
        } else if (results[i] == 0) {
          for (size_t r = 0; r < counts[j]; ++r) {
            found[i].push_back(FromC(room[j * kFirstCapacity + r]));
          }
        }
      }
    }
  }
  py::dict out;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (results[i] == 0) out[py::str(keys[i])] = py::cast(found[i]);
  }
  return out;
}

void RegisterReplicaClasses(py::module_& m) {
  py::enum_<ReplicaKind>(m, "ReplicaKind", "Where a replica lives.")
      .value("MEMORY", ReplicaKind::MEMORY, "a daemon's memory")
      .value("LOCAL_DISK", ReplicaKind::LOCAL_DISK, "a daemon's SSD tier (its --ssd_path)");
  py::class_<AllocatedBufferDescriptor>(m, "Descriptor",
                                        "Where a memory replica's bytes are (Mooncake's "
                                        "AllocatedBuffer descriptor).")
      .def(py::init<>())
      .def_readwrite("size", &AllocatedBufferDescriptor::size, "bytes of the value")
      .def_readwrite("buffer_address", &AllocatedBufferDescriptor::buffer_address,
                     "0: the bytes are in the holding daemon's memory, not this process's")
      .def_readwrite("transport_endpoint", &AllocatedBufferDescriptor::transport_endpoint,
                     "'host:port' of the daemon holding the replica")
      .def("__repr__", [](const AllocatedBufferDescriptor& d) {
        return "<Descriptor size=" + std::to_string(d.size) +
               " buffer_address=" + std::to_string(d.buffer_address) +
               " transport_endpoint=" + d.transport_endpoint + ">";
      });
  py::class_<MemoryDescriptor>(m, "MemoryDescriptor")
      .def_readwrite("buffer_descriptor", &MemoryDescriptor::buffer_descriptor);
  py::class_<DiskDescriptor>(m, "DiskDescriptor", "A disk replica (Mooncake's DiskDescriptor).")
      .def_readwrite("file_path", &DiskDescriptor::file_path,
                     "'': the daemon's SSD tier locates the object by its own index")
      .def_readwrite("object_size", &DiskDescriptor::object_size, "bytes of the value");
  py::class_<ReplicaDescriptor>(m, "ReplicaDescriptor", "One replica of an object.")
      .def_readonly("status", &ReplicaDescriptor::status, "a ReplicaStatus (COMPLETE)")
      .def_readonly("kind", &ReplicaDescriptor::kind)
      .def_readonly("location", &ReplicaDescriptor::location,
                    "'host:port' of the daemon holding the replica (memory or SSD)")
      .def_readonly("size", &ReplicaDescriptor::size, "bytes of the value")
      .def("is_memory_replica", &ReplicaDescriptor::is_memory_replica)
      .def("is_disk_replica", &ReplicaDescriptor::is_disk_replica,
           "True for a replica on a daemon's SSD tier")
      .def("is_local_disk_replica", &ReplicaDescriptor::is_disk_replica,
           "the same as is_disk_replica(): every disk replica is on one daemon's SSD")
      .def("get_memory_descriptor", &ReplicaDescriptor::get_memory_descriptor,
           "Mooncake's view of a memory replica; RuntimeError for a disk replica")
      .def("get_disk_descriptor", &ReplicaDescriptor::get_disk_descriptor,
           "Mooncake's view of a disk replica; RuntimeError for a memory replica")
      .def("__repr__", &ReplicaDescriptor::ToString);
}

}  // namespace mooncake_py
