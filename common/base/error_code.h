// The C++ view of the one result-code table in include/mooncake_store.h.
// Every layer passes errors as values of ErrorCode (never exceptions across a boundary);
// the numbers are the C ABI's and Mooncake's, so a code can cross Thrift, the Unix socket
// and the C ABI unchanged.
#ifndef MOONCAKE_COMMON_ERROR_CODE_H_
#define MOONCAKE_COMMON_ERROR_CODE_H_

#include <cstdint>
#include <utility>

#include "include/mooncake_store.h"

namespace mooncake {

#define MC_ERROR_CODE_ENUM_(name, value, text) name = (value),
enum class ErrorCode : int32_t { MOONCAKE_STORE_ERROR_TABLE(MC_ERROR_CODE_ENUM_) };
#undef MC_ERROR_CODE_ENUM_

// "OBJECT_NOT_FOUND" for -704; "UNKNOWN" for a value outside the table.
const char* ErrorName(int32_t code);
inline const char* ErrorName(ErrorCode code) { return ErrorName(static_cast<int32_t>(code)); }

// The description column: "object not found" for -704.
const char* ErrorText(int32_t code);

// True when value is a code of the table.
bool IsKnownErrorCode(int32_t value);

// At the wire (the C ABI, the Unix socket, Thrift, the transfer port) and nowhere else:
// a code as the integer it travels as, and back. FromWire maps a value outside the table
// (or a positive one) to INTERNAL_ERROR, so a peer cannot invent a code.
inline int32_t ToInt(ErrorCode code) { return static_cast<int32_t>(code); }
ErrorCode FromWire(int64_t value);

// A value, or the code that says why there is none. Result<uint64_t> is what the C ABI
// spells "a byte count, or a negative code".
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}            // NOLINT: implicit on purpose
  Result(ErrorCode code) : code_(code), value_() {}        // NOLINT: code is not OK
  bool ok() const { return code_ == ErrorCode::OK; }
  ErrorCode code() const { return code_; }
  const T& value() const { return value_; }
  T& value() { return value_; }

 private:
  ErrorCode code_ = ErrorCode::OK;
  T value_;
};

// The C ABI's int64 for a count: the count itself, or the negative code.
inline int64_t ToWire(const Result<uint64_t>& r) {
  return r.ok() ? static_cast<int64_t>(r.value()) : static_cast<int64_t>(r.code());
}

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_ERROR_CODE_H_
