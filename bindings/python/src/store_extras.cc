// The rest of Mooncake's module and MooncakeDistributedStore members: init_all(),
// get_offload_rpc_read_count(), the module functions bind_to_numa_node(),
// get_alloc_func_addr() and get_free_func_addr(), and MooncakeDistributedNoFRegister. See
// store_extras.h.
#include "store_extras.h"

#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "mooncake_store.h"

namespace mooncake_py {

namespace {

// init_all()'s pool, Mooncake's (its buffer allocator of 1 GiB; sparse here).
constexpr uint64_t kInitAllPoolSize = 1ull << 30;
constexpr uint64_t kInitAllSegmentSize = 16ull << 20;
// What Mooncake's NVMe-oF registration answers when it fails (OPERATION_FAILED).
constexpr int kOperationFailed = -1;

// A line on sys.stderr, as the binding's refusals are written (Mooncake logs these).
void Say(const std::string& line) {
  py::module_::import("sys").attr("stderr").attr("write")("mooncake_store: " + line + "\n");
}

// Mooncake's hugepage_memory_alloc/free, as Mooncake builds them without NVMe-oF (USE_NOF):
// the allocator hands out nothing, and the free has nothing to give back.
extern "C" void* MooncakeHugepageAlloc(size_t) { return nullptr; }
extern "C" void MooncakeHugepageFree(void*) {}

// The CPUs of NUMA node `node` from sysfs (a "0-3,8-11" list); empty when it has none or
// there is no such node.
std::vector<int> NodeCpus(int node) {
  std::ifstream in("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
  std::string list;
  std::vector<int> cpus;
  if (!std::getline(in, list)) return cpus;
  size_t at = 0;
  while (at < list.size()) {
    size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(at, end - at);
    size_t dash = item.find('-');
    try {
      int first = std::stoi(item.substr(0, dash));
      int last = dash == std::string::npos ? first : std::stoi(item.substr(dash + 1));
      for (int c = first; c <= last && c < CPU_SETSIZE; ++c) cpus.push_back(c);
    } catch (const std::exception&) {
      return {};
    }
    at = end + 1;
  }
  return cpus;
}

// bind_to_numa_node(node): as Mooncake's (libnuma's numa_run_on_node and a preferred, not
// strict, memory policy), through the system calls themselves. Never raises: what cannot
// be done is said on stderr and skipped.
void BindToNumaNode(int node) {
  std::ifstream online("/sys/devices/system/node/online");
  if (!online) {
    Say("bind_to_numa_node: NUMA is not available on this system; binding skipped");
    return;
  }
  std::vector<int> cpus = node >= 0 ? NodeCpus(node) : std::vector<int>();
  if (cpus.empty()) {
    Say("bind_to_numa_node: invalid NUMA node " + std::to_string(node) +
        " (see /sys/devices/system/node/online); binding skipped");
    return;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    Say("bind_to_numa_node: running on node " + std::to_string(node) + " failed");
  }
  // Prefer the node's memory for this thread's later allocations, falling back elsewhere.
  unsigned long mask[16] = {};
  if (node < static_cast<int>(sizeof(mask) * 8)) {
    mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
    if (syscall(SYS_set_mempolicy, MPOL_PREFERRED, mask, sizeof(mask) * 8) != 0) {
      Say("bind_to_numa_node: preferring node " + std::to_string(node) + "'s memory failed");
    }
  }
}

// MooncakeDistributedNoFRegister: registers NVMe-oF SSDs with the master in Mooncake. This
// store has no NVMe-oF tier (its SSD tier is each daemon's own --ssd_path), so both calls
// answer Mooncake's failure, saying why.
struct NoFRegister {};

int NoNof(const char* call) {
  Say(std::string(call) +
      ": NVMe-oF segments are not supported by this store (no NVMe-oF tier: each daemon's "
      "SSD tier is its own --ssd_path, docs/ssd.md); nothing registered");
  return kOperationFailed;
}

}  // namespace

void RegisterStoreExtras(py::module_& m, py::class_<Store>& store) {
  store
      .def(
          "init_all",
          [](Store& self, const std::string& protocol, const std::string& device_name,
             uint64_t mount_segment_size) {
            // Mooncake's: a setup with its fixed hostname and metadata server, a 1 GiB
            // buffer and mount_segment_size lent; -600 once set up. The master is the
            // daemon's (none is named to check).
            auto h = self.HandleForConnect(kInitAllPoolSize);
            int rc;
            {
              py::gil_scoped_release nogil;
              rc = mooncake_store_setup(h->get(), "localhost:12345", "127.0.0.1:2379",
                                        mount_segment_size, kInitAllPoolSize, protocol.c_str(),
                                        device_name.c_str(), "");
            }
            if (rc == 0) self.Connected(h, kInitAllPoolSize);
            return rc;
          },
          py::arg("protocol"), py::arg("device_name"),
          py::arg("mount_segment_size") = kInitAllSegmentSize,
          "Mooncake's init_all: connects to the local daemon ($MOONCAKE_SOCKET) with a 1 GiB "
          "pool, lending mount_segment_size bytes; -600 when already set up.")
      .def(
          "get_offload_rpc_read_count",
          [](Store& self) -> int64_t {
            auto h = self.handle();
            int64_t n;
            {
              py::gil_scoped_release nogil;
              n = mooncake_store_disk_read_count(h->get());
            }
            return n < 0 ? 0 : n;  // Mooncake's answers 0 when there is nothing to count
          },
          "Reads of this store served from an SSD replica since it connected (Mooncake's "
          "reads over its offload RPC); 0 when not connected.");

  m.def("bind_to_numa_node", &BindToNumaNode, py::arg("node"),
        "Bind the current thread and memory allocation preference to the specified NUMA node");
  m.def("get_alloc_func_addr",
        [] { return reinterpret_cast<uintptr_t>(&MooncakeHugepageAlloc); },
        "The address of Mooncake's hugepage allocator, void* (*)(size_t): without NVMe-oF it "
        "hands out nothing (NULL), as Mooncake built without it does.");
  m.def("get_free_func_addr",
        [] { return reinterpret_cast<uintptr_t>(&MooncakeHugepageFree); },
        "The address of its free, void (*)(void*): nothing to give back.");

  py::class_<NoFRegister>(m, "MooncakeDistributedNoFRegister",
                          "NVMe-oF SSD registration: not supported here (every call "
                          "answers -1, Mooncake's failure, and says why on stderr).")
      .def(py::init<>())
      .def("real_register",
           [](NoFRegister&, const std::string&, size_t, const std::string&, size_t, uintptr_t,
              size_t, const std::string&) { return NoNof("real_register"); })
      .def("real_unregister_by_endpoint",
           [](NoFRegister&, const std::string&, size_t, const std::string&, size_t,
              const std::string&) { return NoNof("real_unregister_by_endpoint"); });
}

}  // namespace mooncake_py
