// Sections of committed docs that code generates (tables of flags, of protocol ops), kept
// between markers in the Markdown:
//   <!-- generated: NAME (COMMAND) -->
//   ...the generated text...
//   <!-- end generated -->
// where COMMAND regenerates them (a test binary run with --write). The test fails when a
// doc reads otherwise than the code would write it, so the docs cannot drift from the code.
#ifndef MOONCAKE_TESTS_GENERATED_DOCS_H_
#define MOONCAKE_TESTS_GENERATED_DOCS_H_

#include <string>
#include <vector>

namespace mooncake {
namespace testing {

struct GeneratedSection {
  std::string name;
  std::string text;  // what goes between the markers, ending with a newline
};

// The sections one file holds; path is relative to the source tree.
struct GeneratedDoc {
  std::string path;
  std::vector<GeneratedSection> sections;
};

// Puts each section's text between its markers in *doc; false with *error naming the
// section when its markers are missing.
bool FillGeneratedSections(const std::vector<GeneratedSection>& sections, std::string* doc,
                           std::string* error);

// "" when every doc under source_dir reads as generated; else what differs (file and
// section) and how to regenerate it (command).
std::string CheckGeneratedDocs(const std::string& source_dir, const std::vector<GeneratedDoc>& docs,
                               const std::string& command);

// Rewrites the generated sections of every doc under source_dir, saying which it wrote on
// stdout; 0, or 1 with the reason on stderr. What a test's main() runs on --write.
int WriteGeneratedDocs(const std::string& source_dir, const std::vector<GeneratedDoc>& docs);

}  // namespace testing
}  // namespace mooncake

#endif  // MOONCAKE_TESTS_GENERATED_DOCS_H_
