// What mooncake-cli prints: sizes in human units, aligned tables for people, JSON for
// scripts (--json), and error lines on stderr that name the store's code.
//
// Input policy: keys and values are arbitrary bytes; JSON output replaces bytes that are
// not UTF-8 with U+FFFD instead of failing (a listing never stops at an odd key).
#ifndef MOONCAKE_CLI_OUTPUT_H_
#define MOONCAKE_CLI_OUTPUT_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace mooncake {
namespace cli {

// 12582912 -> "12.0 MiB".
std::string HumanSize(uint64_t bytes);
// 1500 -> "1.5 s", 250 -> "250 ms".
std::string HumanMillis(int64_t ms);

// Rows of cells printed with every column but the last padded to its widest cell, two
// spaces apart (the last is not padded, so a long key or endpoint does not widen others).
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// "name: value" lines with the names padded to the widest.
void PrintFields(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields);

// j, indented, on stdout.
void PrintJson(const nlohmann::json& j);
// j as one line (for error messages and table cells).
std::string JsonText(const nlohmann::json& j);

// "mooncake-cli: <message>" on stderr.
void PrintError(const std::string& message);
// "-704 OBJECT_NOT_FOUND (object not found)": the store's code by name and text.
std::string CodeText(int code);

}  // namespace cli
}  // namespace mooncake

#endif  // MOONCAKE_CLI_OUTPUT_H_
