#include "common/base/text.h"

namespace mooncake {

std::string Trim(std::string_view s, std::string_view blanks) {
  size_t begin = s.find_first_not_of(blanks);
  if (begin == std::string_view::npos) return "";
  size_t end = s.find_last_not_of(blanks);
  return std::string(s.substr(begin, end - begin + 1));
}

std::vector<std::string> SplitList(std::string_view s, char sep) {
  std::vector<std::string> items;
  size_t start = 0;
  for (;;) {
    size_t at = s.find(sep, start);
    size_t end = at == std::string_view::npos ? s.size() : at;
    items.push_back(Trim(s.substr(start, end - start)));
    if (at == std::string_view::npos) return items;
    start = at + 1;
  }
}

bool ValidName(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameLen) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace mooncake
