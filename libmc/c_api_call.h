// The frame every extern "C" entry point that takes a handle runs in (Api): the NULL
// handle, the catch-all that keeps exceptions from crossing the ABI (-1), and the end of the
// call -- the message mooncake_store_errmsg() returns (libmc/last_error.h) and the call's log
// line (one for every failed connect, setup or mount; for refused arguments at most one a
// second per handle). Shared by c_api.cc and the files that hold the rest of the ABI
// (c_api_sessions.cc), which include it in their own translation units only.
#ifndef MOONCAKE_LIBMC_C_API_CALL_H_
#define MOONCAKE_LIBMC_C_API_CALL_H_

#include <cstdint>
#include <exception>
#include <new>
#include <string>

#include "common/error_code.h"
#include "common/log_throttle.h"
#include "common/logging.h"
#include "include/mooncake_store.h"
#include "libmc/api_checks.h"
#include "libmc/last_error.h"
#include "libmc/store_client.h"

#define MC_EXPORT extern "C" __attribute__((visibility("default")))

namespace mooncake {
namespace client {

// Refused arguments of calls without a handle (or with a NULL one): one line a second.
inline mooncake::LogThrottle g_no_handle_log;

inline StoreClient* AsClient(mooncake_store_t store) { return static_cast<StoreClient*>(store); }

// The ABI's integers: a code, a count or the code, a flag (1/0) or the code.
inline int ToAbi(ErrorCode code) { return mooncake::ToInt(code); }
inline int64_t ToAbi(const Result<uint64_t>& r) { return mooncake::ToWire(r); }
inline int ToAbi(const Result<bool>& r) { return r.ok() ? (r.value() ? 1 : 0) : ToAbi(r.code()); }

// How a call's failures are logged: kSetup (connect, setup, the mounts) always, one line
// with the reason and the fix; kData only when the caller's arguments are to blame, at
// most one line a second per handle, so that a hot loop cannot flood stderr; kQuiet never
// (parse_size: a question whose answer may well be no).
enum class Kind { kData, kSetup, kQuiet };

inline void LogRefusal(const char* function, StoreClient* client, const std::string& message) {
  mooncake::LogThrottle& throttle = client != nullptr ? client->argument_log() : g_no_handle_log;
  uint64_t skipped = 0;
  if (!throttle.Due(&skipped)) return;
  if (skipped > 0) {
    MC_LOG_WARN("%s: %s (%llu more refused calls on this handle since the last such line)",
                function, message.c_str(), static_cast<unsigned long long>(skipped));
  } else {
    MC_LOG_WARN("%s: %s", function, message.c_str());
  }
}

// The end of every call on a handle: result (a code, or a count or size when >= 0) becomes
// the handle's message on this thread, and the log line if one is due.
inline void Finish(const char* function, StoreClient* client, Kind kind, int64_t result) noexcept {
  try {
    const uint64_t serial = client != nullptr ? client->serial() : 0;
    if (result >= 0) {
      const std::string* entry = NotedEntry();  // a batch's first refused entry, if any
      RecordMessage(serial, entry != nullptr ? *entry : std::string());
      if (entry != nullptr && kind == Kind::kData && NotedEntryBlamesArguments()) {
        LogRefusal(function, client, *entry);
      }
      return;
    }
    const ErrorCode code = mooncake::FromWire(result);
    const std::string message = MessageFor(code);
    RecordMessage(serial, message);
    if (kind == Kind::kSetup) {
      MC_LOG_ERROR("%s: %s", function, message.c_str());
    } else if (kind == Kind::kData && BlamesArguments(code)) {
      LogRefusal(function, client, message);
    }
  } catch (...) {  // out of memory: the message is lost, the result is not
  }
}

// Runs f (the body of C function `function` on store), turning a NULL handle and any
// exception into -1, and finishes the call. R is the function's integer type.
template <typename R, typename F>
R Api(const char* function, mooncake_store_t store, Kind kind, F&& f) noexcept {
  mooncake::client::BeginCall();
  R result = kInternal;
  try {
    result = store == nullptr ? NullArgument("the handle (mooncake_store_t)") : f();
  } catch (const std::bad_alloc&) {
    try {
      mooncake::client::Explain(ErrorCode::INTERNAL_ERROR, "out of memory");
    } catch (...) {
    }
  } catch (const std::exception& e) {
    try {
      mooncake::client::Explain(ErrorCode::INTERNAL_ERROR,
                                std::string("unexpected exception: ") + e.what());
    } catch (...) {
    }
  } catch (...) {
  }
  Finish(function, AsClient(store), kind, static_cast<int64_t>(result));
  return result;
}

}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_C_API_CALL_H_
