// The frame of every extern "C" call (libmc/c_api.cc and its companions): the ABI's
// integers from ErrorCode and Result (here and nowhere else), a catch-all so that no
// exception crosses the ABI (-1), and the end of every call (Finish): the message
// mooncake_store_errmsg() returns (libmc/last_error.h), and the call's log line -- one for
// every failed connect, setup or mount, and for refused arguments at most one a second
// per handle.
#ifndef MOONCAKE_LIBMC_C_API_CALL_H_
#define MOONCAKE_LIBMC_C_API_CALL_H_

#include <cstdint>
#include <exception>
#include <new>
#include <string>

#include "common/base/error_code.h"
#include "include/mooncake_store.h"
#include "libmc/api_checks.h"
#include "libmc/last_error.h"
#include "libmc/store_client.h"

// Marks a function the library exports (libmooncake_store.map lists them; everything else
// is hidden).
#define MC_EXPORT extern "C" __attribute__((visibility("default")))

namespace mooncake {
namespace client {
namespace abi {

inline StoreClient* AsClient(mooncake_store_t store) { return static_cast<StoreClient*>(store); }

// The ABI's integers: a code, a count or the code, a flag (1/0) or the code.
inline int ToAbi(ErrorCode code) { return ToInt(code); }
inline int64_t ToAbi(const Result<uint64_t>& r) { return ToWire(r); }
inline int ToAbi(const Result<bool>& r) { return r.ok() ? (r.value() ? 1 : 0) : ToAbi(r.code()); }

// How a call's failures are logged: kSetup (connect, setup, the mounts) always, one line
// with the reason and the fix; kData only when the caller's arguments are to blame, at
// most one line a second per handle, so that a hot loop cannot flood stderr; kQuiet never
// (parse_size: a question whose answer may well be no).
enum class Kind { kData, kSetup, kQuiet };

// The end of every call on a handle: result (a code, or a count or size when >= 0) becomes
// the handle's message on this thread, and the log line if one is due.
void Finish(const char* function, StoreClient* client, Kind kind, int64_t result) noexcept;

// Runs f (the body of C function `function` on store), turning a NULL handle and any
// exception into -1, and finishes the call. R is the function's integer type.
template <typename R, typename F>
R Api(const char* function, mooncake_store_t store, Kind kind, F&& f) noexcept {
  BeginCall();
  R result = kInternal;
  try {
    result = store == nullptr ? NullArgument("the handle (mooncake_store_t)") : f();
  } catch (const std::bad_alloc&) {
    try {
      Explain(ErrorCode::INTERNAL_ERROR, "out of memory");
    } catch (...) {
    }
  } catch (const std::exception& e) {
    try {
      Explain(ErrorCode::INTERNAL_ERROR, std::string("unexpected exception: ") + e.what());
    } catch (...) {
    }
  } catch (...) {
  }
  Finish(function, AsClient(store), kind, static_cast<int64_t>(result));
  return result;
}

}  // namespace abi
}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_C_API_CALL_H_
