#include "libmc/device_memory.h"

#include <cstdio>
#include <string>

#include "libmc/cuda_driver.h"
#include "libmc/host_mappings.h"
#include "libmc/last_error.h"

namespace mooncake {
namespace client {

namespace {

std::string Address(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

const char* Where(const MemoryPlace& place) {
  return place.device ? "device memory" : "host memory";
}

// The refusal of a buffer that is neither host memory nor device memory, saying which
// driver was asked and what it answered.
ErrorCode NotHostMemory(const void* ptr, const CudaDriver& driver, CudaDriver::Kind answer) {
  std::string why = "buffer at " + Address(ptr) + " is not host memory";
  if (!driver.loaded()) {
    why += " and no CUDA driver is loaded: " + driver.why_not_loaded() +
           "; pass host memory, or install the CUDA driver to use device memory "
           "(MOONCAKE_CUDA_DRIVER names its library)";
  } else if (answer == CudaDriver::Kind::kNotInitialized) {
    why += ", and the CUDA driver (" + driver.library() +
           ") is not initialized in this process, so it is no CUDA device memory either; pass "
           "host memory, or memory from cudaMalloc/cuMemAlloc";
  } else {
    why += ", nor device memory the CUDA driver (" + driver.library() +
           ") knows; pass host memory, or memory from cudaMalloc/cuMemAlloc";
  }
  return Refused(ErrorCode::INVALID_PARAMS, std::move(why));
}

}  // namespace

ErrorCode LocateMemory(const void* ptr, MemoryPlace* place) {
  *place = MemoryPlace();
  CudaDriver& driver = CudaDriver::Get();
  CudaDriver::Pointer answer = driver.Query(ptr);
  if (answer.kind == CudaDriver::Kind::kDevice) {
    place->device = true;
    place->context = answer.context;
    return ErrorCode::OK;
  }
  if (answer.kind == CudaDriver::Kind::kHost) return ErrorCode::OK;  // pinned host memory
  switch (HostMappings::Get().At(reinterpret_cast<uintptr_t>(ptr))) {
    case HostMappings::Access::kReadWrite:
      return ErrorCode::OK;
    case HostMappings::Access::kReadOnly:
      place->read_only = true;
      return ErrorCode::OK;
    case HostMappings::Access::kNone:
      break;
  }
  return NotHostMemory(ptr, driver, answer.kind);
}

ErrorCode CopyMemory(const MemoryPlace& to, void* dst, const MemoryPlace& from, const void* src,
                     uint64_t n) {
  if (n == 0) return ErrorCode::OK;
  if (!to.device && !from.device) {
    std::memcpy(dst, src, n);
    return ErrorCode::OK;
  }
  CudaDriver& driver = CudaDriver::Get();
  std::string why;
  bool copied = from.device && to.device ? driver.DeviceToDevice(from.context, dst, src, n, &why)
                : from.device            ? driver.DeviceToHost(from.context, dst, src, n, &why)
                                         : driver.HostToDevice(to.context, dst, src, n, &why);
  if (copied) return ErrorCode::OK;
  Explain(ErrorCode::TRANSFER_FAIL,
          "the CUDA driver's copy of " + std::to_string(n) + " bytes from " + Where(from) +
              " at " + Address(src) + " to " + Where(to) + " at " + Address(dst) +
              " failed: " + why);
  return ErrorCode::TRANSFER_FAIL;
}

}  // namespace client
}  // namespace mooncake
