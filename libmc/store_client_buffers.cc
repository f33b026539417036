// StoreClient's registry of caller buffers (mooncake_store_register_buffer): ranges the
// application declared, each located once (host or device memory, libmc/device_memory.h),
// against which a put or get of memory starting inside one is checked. Registered memory
// outside the pool is still staged (store_client.cc).
#include <cstdio>
#include <iterator>

#include "absl/synchronization/mutex.h"
#include "libmc/last_error.h"
#include "libmc/store_client.h"

namespace mooncake {
namespace client {

ErrorCode StoreClient::RegisterBuffer(void* buffer, uint64_t size) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  if (size == 0) return Refused(ErrorCode::INVALID_PARAMS, "buffer size 0");
  uintptr_t start = reinterpret_cast<uintptr_t>(buffer);
  if (start + size < start) {
    return Refused(ErrorCode::INVALID_PARAMS, "buffer runs past the end of the address space");
  }
  MemoryPlace place;
  uint64_t offset;
  if (!(c.pool && c.pool->Contains(buffer, size, &offset))) {
    rc = LocateMemory(buffer, &place);
    if (rc != ErrorCode::OK) return rc;
  }
  absl::MutexLock lock(&registry_mu_);
  auto next = registered_.lower_bound(start);
  bool overlaps = next != registered_.end() && next->first < start + size;
  if (!overlaps && next != registered_.begin()) {
    auto prev = std::prev(next);
    overlaps = prev->first + prev->second.size > start;
  }
  if (overlaps) {
    return Refused(ErrorCode::INVALID_PARAMS, "buffer overlaps one registered before");
  }
  registered_.emplace(start, Registered{size, place});
  return ErrorCode::OK;
}

ErrorCode StoreClient::UnregisterBuffer(void* buffer) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  absl::MutexLock lock(&registry_mu_);
  if (registered_.erase(reinterpret_cast<uintptr_t>(buffer)) == 1) return ErrorCode::OK;
  return Refused(ErrorCode::INVALID_PARAMS, "buffer was not registered (register_buffer)");
}

ErrorCode StoreClient::CheckBuffer(const void* buffer, uint64_t size, bool for_write,
                                   MemoryPlace* place) {
  *place = MemoryPlace();
  if (size == 0) return ErrorCode::OK;
  uintptr_t start = reinterpret_cast<uintptr_t>(buffer);
  bool registered = false;
  {
    absl::MutexLock lock(&registry_mu_);
    auto it = registered_.upper_bound(start);
    if (it != registered_.begin()) {
      --it;
      uint64_t end = it->first + it->second.size;
      if (start < end && size > end - start) {
        return Refused(ErrorCode::INVALID_PARAMS,
                       "buffer of " + std::to_string(size) + " bytes runs past the end of the " +
                           std::to_string(it->second.size) + "-byte range registered at its start");
      }
      registered = start < end;
      if (registered) *place = it->second.place;
    }
  }
  if (!registered) {
    std::shared_ptr<Pool> pool;
    {
      absl::ReaderMutexLock lock(&state_mu_);
      pool = pool_;
    }
    uint64_t offset;
    if (!(pool && pool->Contains(buffer, 1, &offset))) {
      ErrorCode rc = LocateMemory(buffer, place);
      if (rc != ErrorCode::OK) return rc;
    }
  }
  if (for_write && place->read_only) {
    char at[32];
    std::snprintf(at, sizeof(at), "%p", buffer);
    return Refused(ErrorCode::INVALID_PARAMS, std::string("buffer at ") + at +
                                                  " is read-only memory: a get writes into it");
  }
  return ErrorCode::OK;
}

}  // namespace client
}  // namespace mooncake
