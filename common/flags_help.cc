// FlagSet's descriptions of itself: --help, and the Markdown tables the docs' generated
// sections hold (tests/flags_docs_test checks them).
#include <sstream>

#include "common/base/flags.h"

namespace mooncake {

namespace {

// GNU's layout, which help2man reads: a flag's help starts at kHelpColumn, on the flag's
// line when the flag leaves room, else on the next; continuation lines start there too (an
// option line is one indented by at most 10 spaces).
constexpr size_t kWidth = 79;
constexpr size_t kHelpColumn = 30;

// text after prefix, broken at spaces so that no line passes kWidth where it can be
// helped; continuation lines start with indent.
std::string Wrap(const std::string& prefix, const std::string& text, const std::string& indent) {
  std::string out = prefix, line = prefix;
  std::istringstream words(text);
  std::string word;
  bool first = true;
  while (words >> word) {
    if (!first && line.size() + 1 + word.size() > kWidth) {
      out += "\n" + indent;
      line = indent;
    } else if (!first) {
      out += " ";
      line += " ";
    }
    out += word;
    line += word;
    first = false;
  }
  return out + "\n";
}

// For a Markdown table cell: "|" would end the cell, "<name>" would be taken for HTML.
std::string Escaped(const std::string& cell) {
  std::string out;
  for (char c : cell) {
    if (c == '|') out += '\\';
    out += c == '<' ? std::string("&lt;") : std::string(1, c);
  }
  return out;
}

std::string Shown(const std::string& value) { return value.empty() ? "\"\"" : value; }

std::string AlsoText(const std::vector<std::string>& aliases) {
  std::string text;
  for (const std::string& a : aliases) text += (text.empty() ? "also --" : ", --") + a;
  return text;
}

}  // namespace

std::vector<FlagSet::Doc> FlagSet::Docs() const {
  const auto aliases = AliasesByFlag();
  std::vector<Doc> docs;
  for (const Flag& f : flags_) {
    if (f.builtin) continue;
    Doc d{f.name, f.value_name, f.default_text, f.help, {}};
    if (aliases.count(f.name)) d.aliases = aliases.at(f.name);
    docs.push_back(std::move(d));
  }
  return docs;
}

std::string FlagSet::Usage() const {
  std::string out = "Usage: " + program_ + " [FLAG]...\n" + summary_ + "\n\n";
  out += Wrap("",
              "Flags are written --name=VALUE or --name VALUE, with one dash or two; a "
              "boolean is --name, --noname or --name=true|false. A size is whole bytes or a "
              "number with a unit (16MB, 1.5GiB); a duration takes ms, s, m or h, a bare "
              "number being in the unit its VALUE names (MS, SECONDS).",
              "");
  const auto aliases = AliasesByFlag();
  auto block = [&](const Flag& f) {
    std::string tag;
    if (f.name == "v") {
      tag = "-v=N, --v=N";
    } else if (f.builtin && f.value_name.empty()) {
      tag = "--" + f.name;
    } else if (f.value_name.empty()) {
      tag = "--[no]" + f.name;
    } else {
      tag = "--" + f.name + "=" + f.value_name;
    }
    std::string text = f.help;
    if (aliases.count(f.name)) text += " (" + AlsoText(aliases.at(f.name)) + ")";
    if (!f.builtin || !f.default_text.empty()) text += " (default: " + Shown(f.default_text) + ")";
    const std::string column(kHelpColumn, ' ');
    std::string first = "  " + tag;
    if (first.size() + 2 > kHelpColumn) return first + "\n" + Wrap(column, text, column);
    first.resize(kHelpColumn, ' ');
    return Wrap(first, text, column);
  };
  out += "\nFlags:\n";
  for (const Flag& f : flags_) {
    if (!f.builtin) out += block(f);
  }
  out += "\nFlags of every program:\n";
  for (const Flag& f : flags_) {
    if (f.builtin) out += block(f);
  }
  if (!ignored_.empty()) {
    out += "\n";
    out += Wrap("",
                "Accepted and ignored, each with a warning (Mooncake's settings not "
                "implemented here; docs/operations.md, \"Compatibility with Mooncake\"):",
                "");
    std::string names;
    for (const auto& [name, reason] : ignored_) names += (names.empty() ? "" : " ") + name;
    out += Wrap("  ", names, "  ");
  }
  return out;
}

std::string FlagSet::MarkdownTable(const std::vector<std::string>& names) const {
  std::vector<Doc> docs = Docs();
  if (!names.empty()) {
    std::vector<Doc> chosen;
    for (const std::string& name : names) {
      for (const Doc& d : docs) {
        if (d.name == name) chosen.push_back(d);
      }
    }
    docs = std::move(chosen);
  }
  std::string out = "| flag | default | meaning |\n|---|---|---|\n";
  for (const Doc& d : docs) {
    std::string flag = "--" + d.name + (d.value_name.empty() ? "" : "=" + d.value_name);
    std::string meaning = d.help;
    if (!d.aliases.empty()) {
      meaning += " (also";
      for (size_t i = 0; i < d.aliases.size(); ++i) {
        meaning += std::string(i == 0 ? " " : ", ") + "`--" + d.aliases[i] + "`";
      }
      meaning += ")";
    }
    out += "| `" + Escaped(flag) + "` | `" + Escaped(Shown(d.default_value)) + "` | " +
           Escaped(meaning) + " |\n";
  }
  return out;
}

}  // namespace mooncake
