#include "common/base/units.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace mooncake {

namespace {

std::string Lower(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  return out;
}

// Splits "1.5gb" into the number 1.5 and the suffix "gb". The number must be
// non-negative digits with at most one dot.
bool SplitNumber(const std::string& s, double* number, std::string* suffix) {
  size_t i = 0;
  bool digits = false, dot = false;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) {
    if (s[i] == '.') {
      if (dot) return false;
      dot = true;
    } else {
      digits = true;
    }
    ++i;
  }
  if (!digits) return false;
  *number = std::strtod(s.substr(0, i).c_str(), nullptr);
  *suffix = s.substr(i);
  return true;
}

}  // namespace

const char kSizeSyntax[] =
    "whole bytes such as 4096, or a number with a unit such as 16MB, 1.5GiB or 512k";

bool ParseSize(const std::string& text, uint64_t* bytes) {
  double number;
  std::string suffix;
  const std::string lower = Lower(text);
  if (!SplitNumber(lower, &number, &suffix)) return false;
  if (suffix.empty() || suffix == "b") {
    // Bytes are whole: a fraction only makes sense of a bigger unit ("1.5" was once read
    // as 2 bytes, when whoever wrote it surely meant gigabytes). Read exactly, not through
    // a double, so that every count up to 2^64 - 1 is the one written.
    if (lower.find('.') != std::string::npos) return false;
    errno = 0;
    const unsigned long long whole = std::strtoull(lower.c_str(), nullptr, 10);
    if (errno == ERANGE) return false;
    *bytes = whole;
    return true;
  }
  static const struct {
    const char* suffix;
    double multiplier;
  } kUnits[] = {{"k", 1024.0},          {"kb", 1024.0},          {"kib", 1024.0},
                {"m", 1048576.0},       {"mb", 1048576.0},       {"mib", 1048576.0},
                {"g", 1073741824.0},    {"gb", 1073741824.0},    {"gib", 1073741824.0},
                {"t", 1099511627776.0}, {"tb", 1099511627776.0}, {"tib", 1099511627776.0}};
  for (const auto& u : kUnits) {
    if (suffix == u.suffix) {
      double value = std::round(number * u.multiplier);
      if (value >= 18446744073709551615.0) return false;
      *bytes = static_cast<uint64_t>(value);
      return true;
    }
  }
  return false;
}

bool ParseDuration(const std::string& text, int64_t default_unit_ms, int64_t* ms) {
  double number;
  std::string suffix;
  if (!SplitNumber(Lower(text), &number, &suffix)) return false;
  double unit;
  if (suffix.empty()) {
    unit = static_cast<double>(default_unit_ms);
  } else if (suffix == "ms") {
    unit = 1.0;
  } else if (suffix == "s") {
    unit = 1000.0;
  } else if (suffix == "m" || suffix == "min") {
    unit = 60000.0;
  } else if (suffix == "h") {
    unit = 3600000.0;
  } else {
    return false;
  }
  double value = std::round(number * unit);
  if (value >= 9.2e18) return false;
  *ms = static_cast<int64_t>(value);
  return true;
}

std::string FormatSize(uint64_t bytes) {
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), unit == 0 ? "%.0f %s" : "%.1f %s", value, kNames[unit]);
  return buf;
}

}  // namespace mooncake
