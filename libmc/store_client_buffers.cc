// StoreClient's registry of caller buffers (mooncake_store_register_buffer): ranges the
// application declared, against which a put or get of memory starting inside one is
// checked. Registered memory outside the pool is still staged (store_client.cc).
#include <iterator>

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
  std::lock_guard<std::mutex> lock(registry_mu_);
  auto next = registered_.lower_bound(start);
  bool overlaps = next != registered_.end() && next->first < start + size;
  if (!overlaps && next != registered_.begin()) {
    auto prev = std::prev(next);
    overlaps = prev->first + prev->second > start;
  }
  if (overlaps) {
    return Refused(ErrorCode::INVALID_PARAMS, "buffer overlaps one registered before");
  }
  registered_.emplace(start, size);
  return ErrorCode::OK;
}

ErrorCode StoreClient::UnregisterBuffer(void* buffer) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  std::lock_guard<std::mutex> lock(registry_mu_);
  if (registered_.erase(reinterpret_cast<uintptr_t>(buffer)) == 1) return ErrorCode::OK;
  return Refused(ErrorCode::INVALID_PARAMS, "buffer was not registered (register_buffer)");
}

ErrorCode StoreClient::CheckRegistered(const void* buffer, uint64_t size) {
  uintptr_t start = reinterpret_cast<uintptr_t>(buffer);
  std::lock_guard<std::mutex> lock(registry_mu_);
  auto it = registered_.upper_bound(start);
  if (it == registered_.begin()) return ErrorCode::OK;
  --it;
  uint64_t end = it->first + it->second;
  if (start < end && size > end - start) {
    return Refused(ErrorCode::INVALID_PARAMS,
                   "buffer of " + std::to_string(size) + " bytes runs past the end of the " +
                       std::to_string(it->second) + "-byte range registered at its start");
  }
  return ErrorCode::OK;
}

}  // namespace client
}  // namespace mooncake
