// The C++ view of the one result-code table in include/mooncake_store.h.
// Every layer passes errors as values of ErrorCode (never exceptions across a boundary);
// the numbers are the C ABI's and Mooncake's, so a code can cross Thrift, the Unix socket
// and the C ABI unchanged.
#ifndef MOONCAKE_COMMON_ERROR_CODE_H_
#define MOONCAKE_COMMON_ERROR_CODE_H_

#include <cstdint>

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

inline int32_t ToInt(ErrorCode code) { return static_cast<int32_t>(code); }

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_ERROR_CODE_H_
