// The CUDA driver API, loaded at run time: what the library asks it about a pointer, and
// the copies it has it make. libmc never links against CUDA, so one build serves hosts
// with and without GPUs; see docs/libmc.md, "Device memory".
//
// Loading: on first use, dlopen of $MOONCAKE_CUDA_DRIVER (a library name or path; "none"
// loads nothing) or else "libcuda.so.1" -- in a process that already uses CUDA, the copy
// it has loaded. Never unloaded. The library never calls cuInit: a driver nobody in the
// process initialized answers CUDA_ERROR_NOT_INITIALIZED, which says that no CUDA memory
// can exist here, so an application that does not use CUDA pays nothing for its presence.
//
// Copies run on two streams of the pointer's context (one per direction, created
// CU_STREAM_NON_BLOCKING on first use) and are waited for before the call returns: the
// bytes have arrived when it does, and the copies never wait for the application's
// kernels on other streams -- the application finishes writing device memory before it
// puts it (as vLLM does, synchronizing an event first).
//
// Thread-safe: loading happens once; the stream and primary-context tables take a mutex.
#ifndef MOONCAKE_LIBMC_CUDA_DRIVER_H_
#define MOONCAKE_LIBMC_CUDA_DRIVER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace mooncake {
namespace client {

class CudaDriver {
 public:
  // What the driver says about a pointer.
  enum class Kind {
    kUnknown,         // not memory the driver knows (or it could not be asked)
    kNotInitialized,  // nobody initialized the driver in this process: no CUDA memory exists
    kHost,            // host memory the driver knows (pinned, registered): plain memory
    kDevice,          // device (or managed) memory: moved with the driver's copies
  };
  struct Pointer {
    Kind kind = Kind::kUnknown;
    void* context = nullptr;  // kDevice: the CUcontext its copies run in
  };

  // The process's driver, loaded on first use (see above).
  static CudaDriver& Get();

  bool loaded() const { return loaded_; }
  // Which library: "libcuda.so.1", or what MOONCAKE_CUDA_DRIVER named.
  const std::string& library() const { return library_; }
  // Why no driver is loaded, for messages: "MOONCAKE_CUDA_DRIVER=none", or dlopen's error.
  const std::string& why_not_loaded() const { return why_not_loaded_; }

  // Asks the driver about ptr (one cuPointerGetAttributes call; for memory that names no
  // context, such as cuMemMap's, the primary context of its device is retained once).
  // kUnknown when the driver is not loaded.
  Pointer Query(const void* ptr);

  // Copies n bytes, in context (a Query's), and waits for them: device to host, host to
  // device, device to device. false with *why ("CUDA_ERROR_INVALID_VALUE (invalid
  // argument)") when the driver refuses or fails.
  bool DeviceToHost(void* context, void* dst, const void* src, uint64_t n, std::string* why);
  bool HostToDevice(void* context, void* dst, const void* src, uint64_t n, std::string* why);
  bool DeviceToDevice(void* context, void* dst, const void* src, uint64_t n, std::string* why);

 private:
  using Result = int;  // CUresult
  using Stream = void*;
  enum Direction { kToHost, kToDevice, kOnDevice, kDirections };

  CudaDriver();
  // Resolves every entry point of lib; false (and why_not_loaded_) when one is missing.
  bool Resolve(void* lib);
  // The stream of context for direction, created (in context, which is current) on first
  // use; nullptr with *why when it cannot be.
  Stream StreamFor(void* context, Direction direction, std::string* why);
  // Runs an asynchronous copy (issue) on context's stream for direction and waits for it.
  template <typename Issue>
  bool Copy(void* context, Direction direction, Issue issue, std::string* why);
  // "CUDA_ERROR_X (text)" for a driver result.
  std::string Describe(Result r) const;
  // The retained primary context of device ordinal, or nullptr.
  void* PrimaryContext(int ordinal);

  bool loaded_ = false;
  std::string library_;
  std::string why_not_loaded_;

  // The entry points (CUDA's types, spelled as the ABI passes them).
  Result (*pointer_get_attributes_)(unsigned, int*, void**, unsigned long long) = nullptr;
  Result (*ctx_push_)(void*) = nullptr;
  Result (*ctx_pop_)(void**) = nullptr;
  Result (*device_get_)(int*, int) = nullptr;
  Result (*primary_ctx_retain_)(void**, int) = nullptr;
  Result (*stream_create_)(Stream*, unsigned) = nullptr;
  Result (*stream_synchronize_)(Stream) = nullptr;
  Result (*copy_to_host_)(void*, unsigned long long, size_t, Stream) = nullptr;
  Result (*copy_to_device_)(unsigned long long, const void*, size_t, Stream) = nullptr;
  Result (*copy_on_device_)(unsigned long long, unsigned long long, size_t, Stream) = nullptr;
  Result (*get_error_name_)(Result, const char**) = nullptr;
  Result (*get_error_string_)(Result, const char**) = nullptr;

  absl::Mutex mu_;
  std::map<std::pair<void*, int>, Stream> streams_ ABSL_GUARDED_BY(mu_);  // (context, direction)
  std::map<int, void*> primary_contexts_ ABSL_GUARDED_BY(mu_);  // by device ordinal
};

}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_CUDA_DRIVER_H_
