#include "tests/harness/generated_docs.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace mooncake {
namespace testing {

namespace {

constexpr char kEnd[] = "<!-- end generated -->";

bool ReadText(const std::string& path, std::string* text) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  *text = s.str();
  return true;
}

}  // namespace

bool FillGeneratedSections(const std::vector<GeneratedSection>& sections, std::string* doc,
                           std::string* error) {
  for (const GeneratedSection& section : sections) {
    const std::string begin = "<!-- generated: " + section.name + " ";
    size_t at = doc->find(begin);
    size_t from = at == std::string::npos ? at : doc->find("-->\n", at);
    size_t to = at == std::string::npos ? at : doc->find(kEnd, at);
    if (from == std::string::npos || to == std::string::npos || from > to) {
      *error = "the markers of section '" + section.name + "' are missing";
      return false;
    }
    from += 4;
    doc->replace(from, to - from, section.text);
  }
  return true;
}

std::string CheckGeneratedDocs(const std::string& source_dir, const std::vector<GeneratedDoc>& docs,
                               const std::string& command) {
  for (const GeneratedDoc& doc : docs) {
    std::string text, error;
    if (!ReadText(source_dir + "/" + doc.path, &text)) return doc.path + ": cannot read it";
    for (const GeneratedSection& section : doc.sections) {
      std::string want = text;
      if (!FillGeneratedSections({section}, &want, &error)) return doc.path + ": " + error;
      if (want != text) {
        return doc.path + ": section '" + section.name + "' differs from what the code " +
               "generates; run " + command + " to regenerate it";
      }
    }
  }
  return "";
}

int WriteGeneratedDocs(const std::string& source_dir, const std::vector<GeneratedDoc>& docs) {
  for (const GeneratedDoc& doc : docs) {
    const std::string path = source_dir + "/" + doc.path;
    std::string text, error;
    if (!ReadText(path, &text)) {
      std::fprintf(stderr, "%s: cannot read it\n", path.c_str());
      return 1;
    }
    if (!FillGeneratedSections(doc.sections, &text, &error)) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), error.c_str());
      return 1;
    }
    std::ofstream(path) << text;
    std::printf("wrote %s\n", path.c_str());
  }
  return 0;
}

}  // namespace testing
}  // namespace mooncake
