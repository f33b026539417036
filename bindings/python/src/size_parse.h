// Human-written sizes for setup(): "16MB", "16 MB", "1GiB", "1.5G", "4096".
//
// Mooncake's setup(dict) takes sizes as strings, so the binding has to parse them. The
// rules are those of the daemon's flags (common/units.h), repeated here because the binding
// wraps include/mooncake_store.h and nothing else: K/M/G/T are binary multiples (1 MB =
// 1 MiB) with an optional "B" or "iB", case and spaces are ignored, and anything else
// ("50%", "-1", "12XB", overflow) is rejected.
#ifndef MOONCAKE_STORE_PY_SIZE_PARSE_H_
#define MOONCAKE_STORE_PY_SIZE_PARSE_H_

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace mooncake_py {

inline bool ParseSize(const std::string& text, uint64_t* bytes) {
  std::string s;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  // The number: digits with at most one dot, nothing else (no sign, no exponent).
  size_t i = 0;
  bool digits = false, dot = false;
  for (; i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.'); ++i) {
    if (s[i] == '.') {
      if (dot) return false;
      dot = true;
    } else {
      digits = true;
    }
  }
  if (!digits) return false;
  double number = std::strtod(s.substr(0, i).c_str(), nullptr);
  const std::string suffix = s.substr(i);

  static const struct {
    const char* suffix;
    double multiplier;
  } kUnits[] = {{"", 1.0},           {"b", 1.0},           {"k", 1024.0},
                {"kb", 1024.0},      {"kib", 1024.0},      {"m", 1048576.0},
                {"mb", 1048576.0},   {"mib", 1048576.0},   {"g", 1073741824.0},
                {"gb", 1073741824.0}, {"gib", 1073741824.0}, {"t", 1099511627776.0},
                {"tb", 1099511627776.0}, {"tib", 1099511627776.0}};
  for (const auto& unit : kUnits) {
    if (suffix == unit.suffix) {
      double value = std::round(number * unit.multiplier);
      if (value >= 18446744073709551615.0) return false;
      *bytes = static_cast<uint64_t>(value);
      return true;
    }
  }
  return false;
}

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_SIZE_PARSE_H_
