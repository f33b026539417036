// The snapshot format's shared pieces (see the header). Also runs in the forked snapshot
// child: no logging, no locks, no snprintf or strerror (locale), only system calls and
// malloc.
#include "master/snapshot/snapshot_format.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace mooncake {

namespace {

constexpr size_t kSequenceDigits = 20;
// The keys the descriptor has itself, which an extra line cannot use.
constexpr const char* kReservedKeys[] = {"sequence", "created_ms", "manifest_crc32c", "format",
                                         "crc32c"};

bool IsTokenChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

namespace snapshot_format {

std::string ErrnoText(int err) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  const char* desc = strerrordesc_np(err);
  const char* name = strerrorname_np(err);
  if (desc != nullptr && name != nullptr) return std::string(desc) + " (" + name + ")";
#endif
  std::string s = "errno ";
  if (err < 0) {
    s += '-';
    err = -err;
  }
  char digits[16];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + err % 10);
    err /= 10;
  } while (err > 0 && n < 16);
  while (n > 0) s += digits[--n];
  return s;
}

void AppendU64(std::string* out, uint64_t v) {
  char digits[20];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0);
  while (n > 0) *out += digits[--n];
}

void AppendI64(std::string* out, int64_t v) {
  if (v < 0) {
    *out += '-';
    // -(v + 1) + 1 avoids overflowing on INT64_MIN.
    AppendU64(out, static_cast<uint64_t>(-(v + 1)) + 1);
  } else {
    AppendU64(out, static_cast<uint64_t>(v));
  }
}

void AppendHex8(std::string* out, uint32_t v) {
  absl::StrAppend(out, absl::Hex(v, absl::kZeroPad8));
}

std::string Hex8(uint32_t v) {
  std::string s;
  AppendHex8(&s, v);
  return s;
}

std::string U64Text(uint64_t v) {
  std::string s;
  AppendU64(&s, v);
  return s;
}

std::string I64Text(int64_t v) {
  std::string s;
  AppendI64(&s, v);
  return s;
}

bool ParseCanonicalU64(std::string_view s, uint64_t max, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  if (s.size() > 1 && s[0] == '0') return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

bool ParseCanonicalI64(std::string_view s, int64_t* out) {
  constexpr uint64_t kMax = static_cast<uint64_t>(INT64_MAX);
  uint64_t magnitude = 0;
  if (!s.empty() && s[0] == '-') {
    if (!ParseCanonicalU64(s.substr(1), kMax + 1, &magnitude) || magnitude == 0) return false;
    *out = magnitude == kMax + 1 ? INT64_MIN : -static_cast<int64_t>(magnitude);
    return true;
  }
  if (!ParseCanonicalU64(s, kMax, &magnitude)) return false;
  *out = static_cast<int64_t>(magnitude);
  return true;
}

bool ParseHex8(std::string_view s, uint32_t* out) {
  if (s.size() != 8) return false;
  uint32_t v = 0;
  for (char c : s) {
    uint32_t d;
    if (c >= '0' && c <= '9') {
      d = static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<uint32_t>(c - 'a' + 10);
    } else {
      return false;
    }
    v = v << 4 | d;
  }
  *out = v;
  return true;
}

bool ValidToken(std::string_view s) {
  if (s.empty() || s.size() > kMaxTokenBytes || s[0] == '.') return false;
  for (char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

bool ValidPayloadName(std::string_view s) {
  return ValidToken(s) && s != kManifestFile && s != kDescriptorFile;
}

bool ReservedKey(std::string_view s) {
  for (const char* k : kReservedKeys) {
    if (s == k) return true;
  }
  return false;
}

bool ValidValue(std::string_view s) {
  if (s.size() > kMaxValueBytes) return false;
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

int FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int rc = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return rc;
}

std::string ParentOf(const std::string& path) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/') --end;
  size_t slash = path.rfind('/', end - 1);
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace snapshot_format

using snapshot_format::AppendI64;
using snapshot_format::ParseCanonicalU64;
using snapshot_format::U64Text;

std::string SnapshotName(uint64_t sequence, int64_t created_ms) {
  std::string digits = U64Text(sequence);
  std::string name(kSequenceDigits - digits.size(), '0');
  name += digits;
  name += '-';
  AppendI64(&name, created_ms);
  return name;
}

bool ParseSnapshotName(std::string_view name, uint64_t* sequence, int64_t* created_ms) {
  if (name.size() < kSequenceDigits + 2 || name[kSequenceDigits] != '-') return false;
  uint64_t seq = 0;
  for (size_t i = 0; i < kSequenceDigits; ++i) {
    char c = name[i];
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (seq > (UINT64_MAX - d) / 10) return false;
    seq = seq * 10 + d;
  }
  uint64_t ms = 0;
  if (!ParseCanonicalU64(name.substr(kSequenceDigits + 1), static_cast<uint64_t>(INT64_MAX), &ms)) {
    return false;
  }
  if (sequence != nullptr) *sequence = seq;
  if (created_ms != nullptr) *created_ms = static_cast<int64_t>(ms);
  return true;
}

}  // namespace mooncake
