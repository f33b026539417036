// What every harness of fuzz/ shares (docs/fuzzing.md): the check that turns a broken
// invariant into a crash libFuzzer keeps, the container format of the harnesses whose
// input is several pieces (also written by fuzz/seed_generator.cc), and a scratch
// directory for the ones that fuzz on-disk formats.
#ifndef MOONCAKE_FUZZ_FUZZ_UTIL_H_
#define MOONCAKE_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

// A broken invariant: prints what and where, then aborts, which libFuzzer reports as a
// crash and saves the input of. Unlike assert() it holds whatever NDEBUG says.
#define FUZZ_CHECK(condition, ...)                                             \
  do {                                                                         \
    if (!(condition)) ::mooncake::fuzz::Violated(__FILE__, __LINE__, #condition, __VA_ARGS__); \
  } while (0)

namespace mooncake {
namespace fuzz {

[[noreturn]] void Violated(const char* file, int line, const char* condition, const char* format,
                           ...) __attribute__((format(printf, 4, 5)));

// Log lines below error would cost more than most inputs: call from LLVMFuzzerInitialize.
// MC_FUZZ_LOG=debug|info|warning|error overrides (to read what a crashing input did).
void QuietLogs();

// ---- sections: [tag u8 | length u16 little-endian | bytes] repeated ----
// A harness reads what it can: a length running past the end takes what is left, and a
// lone tag at the end an empty section. Tags mean what each harness says.
struct Section {
  uint8_t tag = 0;
  std::string_view bytes;
};
std::vector<Section> SplitSections(const uint8_t* data, size_t size);
// For the seed generator. bytes longer than 65535 is a bug of the caller (aborts).
void AppendSection(std::string* out, uint8_t tag, std::string_view bytes);

// ---- files ----
// An empty directory of its own for one input, under /dev/shm when there is one (the
// formats' fsyncs then cost nothing) or $TMPDIR: every call empties and returns the same
// path. The whole tree goes at exit.
const std::string& FreshDir();
void WriteFile(const std::string& path, std::string_view bytes);
// Every regular file under dir (recursively), path relative to dir -> contents.
std::vector<std::pair<std::string, std::string>> ReadTree(const std::string& dir);

// 32-bit FNV-1a: a deterministic seed for choices a harness makes per input.
uint32_t Fingerprint(const uint8_t* data, size_t size);

}  // namespace fuzz
}  // namespace mooncake

#endif  // MOONCAKE_FUZZ_FUZZ_UTIL_H_
