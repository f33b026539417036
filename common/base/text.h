// Small text helpers for parsing flags and files: trimming blanks, splitting lists.
// Input policy: any bytes; nothing here fails, callers judge what the pieces mean.
#ifndef MOONCAKE_COMMON_TEXT_H_
#define MOONCAKE_COMMON_TEXT_H_

#include <string>
#include <string_view>
#include <vector>

namespace mooncake {

// Spaces and tabs: what flag lists may carry around their items.
inline constexpr std::string_view kBlanks = " \t";

// s without the characters of blanks at either end.
std::string Trim(std::string_view s, std::string_view blanks = kBlanks);

// The items of s between each sep, trimmed (Trim), empty ones kept so that a caller can
// refuse them: "a, b,,c" -> {"a", "b", "", "c"}, "" -> {""}.
std::vector<std::string> SplitList(std::string_view s, char sep);

// 1..64 characters of [A-Za-z0-9_.-]: what names of tenants and clusters are made of, safe
// in keys, paths and log lines alike.
inline constexpr size_t kMaxNameLen = 64;
bool ValidName(std::string_view s);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_TEXT_H_
