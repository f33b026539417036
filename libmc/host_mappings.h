// Which addresses are host memory this process may read (and write): the mappings of
// /proc/self/maps, learned one at a time as buffers are located (libmc/device_memory.h)
// and cached by range, so that a buffer in a mapping seen before costs one lookup, and
// only a buffer in a mapping not seen yet costs a read of /proc/self/maps.
//
// What it is for: a pointer that is not host memory (device memory of a GPU or NPU, with
// no driver here to move it) is refused with an explanation instead of being dereferenced
// into a SIGSEGV. Only the mapping of a buffer's first byte is looked at: a buffer is one
// allocation, and a device pointer is not host memory at its start either.
//
// Input policy: only readable mappings are cached, so a range made readable later is seen
// at its next lookup. A cached mapping that is unmapped is not forgotten (nothing tells
// the library): a pointer into what was once readable memory is taken for host memory,
// as with no check at all -- the CUDA driver, asked first, still sees device memory
// there. When /proc/self/maps cannot be read, every address counts as
// readable and writable (the check is then off, and says so once on stderr).
//
// Thread-safe: lookups share a lock; a miss reads /proc/self/maps without it.
#ifndef MOONCAKE_LIBMC_HOST_MAPPINGS_H_
#define MOONCAKE_LIBMC_HOST_MAPPINGS_H_

#include <cstdint>
#include <map>

#include "absl/synchronization/mutex.h"

namespace mooncake {
namespace client {

class HostMappings {
 public:
  enum class Access { kNone, kReadOnly, kReadWrite };

  // The process's cache.
  static HostMappings& Get();

  // How this process may access the byte at addr.
  Access At(uintptr_t addr);

 private:
  struct Mapping {
    uintptr_t end;
    Access access;
  };
  // Beyond this many mappings the cache starts over (a process that maps and unmaps
  // buffer after buffer would otherwise grow it without bound).
  static constexpr size_t kMaxMappings = 4096;

  // The cached mapping holding addr, or nullptr.
  const Mapping* Find(uintptr_t addr) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::map<uintptr_t, Mapping> mappings_ ABSL_GUARDED_BY(mu_);  // by start; readable ones only
};

}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_HOST_MAPPINGS_H_
