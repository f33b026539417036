#include "libmc/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>

#include "common/base/logging.h"

namespace mooncake {
namespace client {

namespace {

// The values of CUDA's enums the library uses (cuda.h; stable across driver versions).
constexpr int kSuccess = 0;                 // CUDA_SUCCESS
constexpr int kNotInitialized = 3;          // CUDA_ERROR_NOT_INITIALIZED
constexpr int kDeinitialized = 4;           // CUDA_ERROR_DEINITIALIZED (process exit)
constexpr int kAttributeContext = 1;        // CU_POINTER_ATTRIBUTE_CONTEXT
constexpr int kAttributeMemoryType = 2;     // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttributeDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kMemoryHost = 1;         // CU_MEMORYTYPE_HOST
constexpr unsigned kMemoryDevice = 2;       // CU_MEMORYTYPE_DEVICE
constexpr unsigned kMemoryUnified = 4;      // CU_MEMORYTYPE_UNIFIED
constexpr unsigned kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING

unsigned long long DevicePointer(const void* p) {
  return static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p));
}

}  // namespace

CudaDriver& CudaDriver::Get() {
  // Never destroyed: a call may still copy while the process exits.
  static CudaDriver* const driver = new CudaDriver();
  return *driver;
}

CudaDriver::CudaDriver() {
  const char* env = std::getenv("MOONCAKE_CUDA_DRIVER");
  library_ = env != nullptr && env[0] != '\0' ? env : "libcuda.so.1";
  if (library_ == "none") {
    why_not_loaded_ = "MOONCAKE_CUDA_DRIVER=none";
    return;
  }
  void* lib = dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* error = dlerror();
    why_not_loaded_ = error != nullptr ? error : library_ + " could not be loaded";
    return;
  }
  if (!Resolve(lib)) {
    // A driver is installed but unusable: worth one line, as device memory will be refused.
    MC_LOG_WARN("the CUDA driver %s cannot be used (%s): device memory is refused",
                library_.c_str(), why_not_loaded_.c_str());
    dlclose(lib);
    return;
  }
  loaded_ = true;
}

bool CudaDriver::Resolve(void* lib) {
  bool ok = true;
  auto resolve = [&](const char* name, auto** fn) {
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(lib, name));
    if (*fn == nullptr && ok) {
      ok = false;
      why_not_loaded_ = library_ + " has no " + name;
    }
  };
  resolve("cuPointerGetAttributes", &pointer_get_attributes_);
  resolve("cuCtxPushCurrent_v2", &ctx_push_);
  resolve("cuCtxPopCurrent_v2", &ctx_pop_);
  resolve("cuDeviceGet", &device_get_);
  resolve("cuDevicePrimaryCtxRetain", &primary_ctx_retain_);
  resolve("cuStreamCreate", &stream_create_);
  resolve("cuStreamSynchronize", &stream_synchronize_);
  resolve("cuMemcpyDtoHAsync_v2", &copy_to_host_);
  resolve("cuMemcpyHtoDAsync_v2", &copy_to_device_);
  resolve("cuMemcpyDtoDAsync_v2", &copy_on_device_);
  resolve("cuGetErrorName", &get_error_name_);
  resolve("cuGetErrorString", &get_error_string_);
  return ok;
}

CudaDriver::Pointer CudaDriver::Query(const void* ptr) {
  Pointer p;
  if (!loaded_) return p;
  unsigned memory_type = 0;
  void* context = nullptr;
  int attributes[] = {kAttributeMemoryType, kAttributeContext};
  void* values[] = {&memory_type, &context};
  // Unlike cuPointerGetAttribute, this answers CUDA_SUCCESS with memory type 0 for a
  // pointer the driver does not know, so host memory costs no error path in the driver.
  Result r = pointer_get_attributes_(2, attributes, values, DevicePointer(ptr));
  if (r == kNotInitialized || r == kDeinitialized) {
    p.kind = Kind::kNotInitialized;
    return p;
  }
  if (r != kSuccess) return p;
  if (memory_type == kMemoryHost) {
    p.kind = Kind::kHost;
    return p;
  }
  if (memory_type != kMemoryDevice && memory_type != kMemoryUnified) return p;
  p.kind = Kind::kDevice;
  p.context = context;
  if (context == nullptr) {  // cuMemCreate/cuMemMap memory belongs to a device, not a context
    int ordinal = -1;
    int attribute = kAttributeDeviceOrdinal;
    void* value = &ordinal;
    if (pointer_get_attributes_(1, &attribute, &value, DevicePointer(ptr)) == kSuccess &&
        ordinal >= 0) {
      p.context = PrimaryContext(ordinal);  // nullptr: the copy explains the failure
    }
  }
  return p;
}

void* CudaDriver::PrimaryContext(int ordinal) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = primary_contexts_.find(ordinal);
  if (it != primary_contexts_.end()) return it->second;
  int device = 0;
  void* context = nullptr;
  if (device_get_(&device, ordinal) != kSuccess ||
      primary_ctx_retain_(&context, device) != kSuccess) {
    return nullptr;
  }
  primary_contexts_[ordinal] = context;  // retained for the process's life
  return context;
}

CudaDriver::Stream CudaDriver::StreamFor(void* context, Direction direction, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  Stream& stream = streams_[{context, direction}];
  if (stream == nullptr) {
    Result r = stream_create_(&stream, kStreamNonBlocking);
    if (r != kSuccess) {
      stream = nullptr;
      *why = "cuStreamCreate: " + Describe(r);
    }
  }
  return stream;
}

template <typename Issue>
bool CudaDriver::Copy(void* context, Direction direction, Issue issue, std::string* why) {
  if (!loaded_) {
    *why = "no CUDA driver is loaded: " + why_not_loaded_;
    return false;
  }
  if (context == nullptr) {
    *why = "the CUDA driver names no context for the memory";
    return false;
  }
  Result r = ctx_push_(context);
  if (r != kSuccess) {
    *why = "cuCtxPushCurrent: " + Describe(r);
    return false;
  }
  Stream stream = StreamFor(context, direction, why);
  bool ok = stream != nullptr;
  if (ok) {
    r = issue(stream);
    if (r == kSuccess) r = stream_synchronize_(stream);
    if (r != kSuccess) {
      *why = Describe(r);
      ok = false;
    }
  }
  void* popped = nullptr;
  ctx_pop_(&popped);
  return ok;
}

bool CudaDriver::DeviceToHost(void* context, void* dst, const void* src, uint64_t n,
                              std::string* why) {
  return Copy(context, kToHost, [&](Stream s) {
    return copy_to_host_(dst, DevicePointer(src), n, s);
  }, why);
}

bool CudaDriver::HostToDevice(void* context, void* dst, const void* src, uint64_t n,
                              std::string* why) {
  return Copy(context, kToDevice, [&](Stream s) {
    return copy_to_device_(DevicePointer(dst), src, n, s);
  }, why);
}

bool CudaDriver::DeviceToDevice(void* context, void* dst, const void* src, uint64_t n,
                                std::string* why) {
  return Copy(context, kOnDevice, [&](Stream s) {
    return copy_on_device_(DevicePointer(dst), DevicePointer(src), n, s);
  }, why);
}

std::string CudaDriver::Describe(Result r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (get_error_name_ == nullptr || get_error_name_(r, &name) != kSuccess || name == nullptr) {
    return "CUDA error " + std::to_string(r);
  }
  std::string out = name;
  if (get_error_string_(r, &text) == kSuccess && text != nullptr) {
    out += std::string(" (") + text + ")";
  }
  return out;
}

}  // namespace client
}  // namespace mooncake
