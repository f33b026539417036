#include "common/base/error_code.h"

#include <climits>

namespace mooncake {

namespace {
struct Entry {
  int32_t value;
  const char* name;
  const char* text;
};

#define MC_ERROR_ENTRY_(name, value, text) {value, #name, text},
constexpr Entry kTable[] = {MOONCAKE_STORE_ERROR_TABLE(MC_ERROR_ENTRY_)};
#undef MC_ERROR_ENTRY_

const Entry* Find(int32_t value) {
  for (const Entry& e : kTable) {
    if (e.value == value) return &e;
  }
  return nullptr;
}
}  // namespace

const char* ErrorName(int32_t code) {
  const Entry* e = Find(code);
  return e ? e->name : "UNKNOWN";
}

const char* ErrorText(int32_t code) {
  const Entry* e = Find(code);
  return e ? e->text : "unknown error code";
}

bool IsKnownErrorCode(int32_t value) { return Find(value) != nullptr; }

ErrorCode FromWire(int64_t value) {
  if (value > 0 || value < INT32_MIN || !IsKnownErrorCode(static_cast<int32_t>(value))) {
    return ErrorCode::INTERNAL_ERROR;
  }
  return static_cast<ErrorCode>(value);
}

}  // namespace mooncake

// The C ABI's strerror lives here so that libmc, the daemon and the tests share one copy.
extern "C" const char* mooncake_store_strerror(int code) { return mooncake::ErrorText(code); }
