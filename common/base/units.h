// Parsing of human-written sizes and durations, shared by every flag and config file.
#ifndef MOONCAKE_COMMON_UNITS_H_
#define MOONCAKE_COMMON_UNITS_H_

#include <cstdint>
#include <string>

namespace mooncake {

// "4096", "16MB", "16 MB", "4 GB", "1GiB", "1.5G", "512k" -> bytes. K/M/G/T (with or without
// a trailing B, or iB) are binary multiples (1 MB = 1 MiB), as in Mooncake's own setup().
// Case-insensitive. A bare number is a whole number of bytes: a fraction needs a unit of
// K or more ("1.5" and "1.5B" are refused, "1.5GB" is fine). false for anything else
// ("50%", "-1", "12XB", overflow); kSizeSyntax says what is accepted, for error messages.
bool ParseSize(const std::string& text, uint64_t* bytes);
extern const char kSizeSyntax[];

// "10000" (in default_unit_ms), "250ms", "10s", "5m", "1h", "1.5s" -> milliseconds.
// false for negative, malformed or overflowing input.
bool ParseDuration(const std::string& text, int64_t default_unit_ms, int64_t* ms);

// 17179869184 -> "16.0 GiB"; for log lines and benchmark reports.
std::string FormatSize(uint64_t bytes);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_UNITS_H_
