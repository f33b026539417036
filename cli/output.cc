#include "cli/output.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "common/base/error_code.h"
#include "common/base/units.h"
#include "mooncake_store.h"

namespace mooncake {
namespace cli {

std::string HumanSize(uint64_t bytes) { return FormatSize(bytes); }

std::string HumanMillis(int64_t ms) {
  char buf[32];
  if (ms < 1000) {
    std::snprintf(buf, sizeof(buf), "%lld ms", static_cast<long long>(ms));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(ms) / 1000.0);
  }
  return buf;
}

void Table::Print(std::ostream& out) const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

void PrintFields(std::ostream& out,
                 const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& f : fields) width = std::max(width, f.first.size());
  for (const auto& f : fields) {
    out << f.first << ":" << std::string(width - f.first.size() + 1, ' ') << f.second << "\n";
  }
}

void PrintJson(const nlohmann::json& j) {
  std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

std::string JsonText(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void PrintError(const std::string& message) {
  std::cout.flush();
  std::cerr << "mooncake-cli: " << message << "\n";
}

std::string CodeText(int code) {
  return std::to_string(code) + " " + ErrorName(code) + " (" + mooncake_store_strerror(code) + ")";
}

}  // namespace cli
}  // namespace mooncake
