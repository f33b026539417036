#include "fuzz/fuzz_util.h"

#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/base/logging.h"

namespace mooncake {
namespace fuzz {

void Violated(const char* file, int line, const char* condition, const char* format, ...) {
  std::fprintf(stderr, "\n==== invariant violated at %s:%d: %s\n==== ", file, line, condition);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::abort();
}

void QuietLogs() {
  LogLevel level = LogLevel::kError;
  const char* wanted = std::getenv("MC_FUZZ_LOG");
  if (wanted != nullptr) ParseLogLevel(wanted, &level);
  SetLogLevel(level);
}

std::vector<Section> SplitSections(const uint8_t* data, size_t size) {
  std::vector<Section> out;
  size_t pos = 0;
  while (pos < size) {
    Section s;
    s.tag = data[pos++];
    size_t length = 0;
    for (int i = 0; i < 2 && pos < size; ++i) length |= static_cast<size_t>(data[pos++]) << (8 * i);
    length = std::min(length, size - pos);
    s.bytes = std::string_view(reinterpret_cast<const char*>(data + pos), length);
    pos += length;
    out.push_back(s);
  }
  return out;
}

void AppendSection(std::string* out, uint8_t tag, std::string_view bytes) {
  if (bytes.size() > 0xffff) {
    std::fprintf(stderr, "AppendSection: %zu bytes do not fit a section\n", bytes.size());
    std::abort();
  }
  out->push_back(static_cast<char>(tag));
  out->push_back(static_cast<char>(bytes.size() & 0xff));
  out->push_back(static_cast<char>(bytes.size() >> 8));
  out->append(bytes);
}

namespace {

std::string g_root;

void RemoveRoot() {
  std::error_code ec;
  if (!g_root.empty()) std::filesystem::remove_all(g_root, ec);
}

}  // namespace

const std::string& FreshDir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm"
                       : tmp != nullptr                           ? tmp
                                                                  : "/tmp";
    g_root = base + "/mc-fuzz-" + std::to_string(getpid());
    std::atexit(RemoveRoot);
    return g_root + "/input";
  }();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  FUZZ_CHECK(!ec, "cannot create %s: %s", dir.c_str(), ec.message().c_str());
  return dir;
}

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  FUZZ_CHECK(out.good(), "cannot write %s", path.c_str());
}

std::vector<std::pair<std::string, std::string>> ReadTree(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    out.emplace_back(std::filesystem::relative(it->path(), dir).string(), std::move(bytes));
  }
  std::sort(out.begin(), out.end());
  return out;
}

uint32_t Fingerprint(const uint8_t* data, size_t size) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 16777619u;
  return h;
}

}  // namespace fuzz
}  // namespace mooncake
