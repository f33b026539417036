// Caller memory as the data paths see it: host memory, read and written with memcpy, or
// CUDA device memory, moved with the CUDA driver's copies (libmc/cuda_driver.h) and never
// dereferenced here. Every buffer a call names outside the handle's pool is located once
// per call (StoreClient::CheckBuffer; a registered range once, at register_buffer), and
// its bytes then cross the pool's staging blocks through CopyFromCaller / CopyToCaller.
// See docs/libmc.md, "Device memory".
//
// Locating a buffer, from its first byte:
//  1. with a CUDA driver loaded and initialized by the application, the driver says
//     whether it is device memory (one cuPointerGetAttributes call);
//  2. otherwise it must be host memory this process may access (libmc/host_mappings.h:
//     cached by mapping, so a known mapping costs a lookup);
//  3. anything else is refused (-600) with why: "buffer at 0x7f... is not host memory and
//     no CUDA driver is loaded: ...", never dereferenced.
//
// Thread-safe: everything here is process-wide and locks what it shares.
#ifndef MOONCAKE_LIBMC_DEVICE_MEMORY_H_
#define MOONCAKE_LIBMC_DEVICE_MEMORY_H_

#include <cstdint>
#include <cstring>

#include "common/base/error_code.h"

namespace mooncake {
namespace client {

// Where one caller buffer lives.
struct MemoryPlace {
  bool device = false;       // CUDA device memory
  bool read_only = false;    // host memory this process may read but not write
  void* context = nullptr;   // device memory: the CUDA context its copies run in
};

// Locates the buffer starting at ptr: OK with *place, or INVALID_PARAMS (explained as the
// caller's doing) when it is neither host memory this process may read nor CUDA device
// memory.
ErrorCode LocateMemory(const void* ptr, MemoryPlace* place);

// Copies n bytes from src (at from) to dst (at to): memcpy between host memory, else the
// CUDA driver's copy in the device side's context, waited for. TRANSFER_FAIL (explained)
// when the driver's copy fails.
ErrorCode CopyMemory(const MemoryPlace& to, void* dst, const MemoryPlace& from, const void* src,
                     uint64_t n);

// The data paths' copies between caller memory and host memory (the pool's blocks).
inline ErrorCode CopyFromCaller(const MemoryPlace& from, void* host_dst, const void* src,
                                uint64_t n) {
  if (!from.device) {
    std::memcpy(host_dst, src, n);
    return ErrorCode::OK;
  }
  return CopyMemory(MemoryPlace(), host_dst, from, src, n);
}

inline ErrorCode CopyToCaller(const MemoryPlace& to, void* dst, const void* host_src,
                              uint64_t n) {
  if (!to.device) {
    std::memcpy(dst, host_src, n);
    return ErrorCode::OK;
  }
  return CopyMemory(to, dst, MemoryPlace(), host_src, n);
}

}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_DEVICE_MEMORY_H_
