// SnapshotStore (see the header). Runs in the master's own process, never in the snapshot
// child, and logs.
#include "master/snapshot/snapshot_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

#include "common/base/crc32c.h"
#include "common/base/logging.h"

namespace mooncake {

using namespace snapshot_format;  // the pieces the writer and the reader share

namespace {

constexpr const char kInvalidSuffix[] = ".invalid";
constexpr size_t kMaxLatestBytes = 256;

void SetWhy(std::string* why, std::string text) {
  if (why != nullptr) *why = std::move(text);
}

// A piece of a file's text for a message: at most 60 bytes, control bytes escaped.
std::string Quote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  const size_t n = std::min<size_t>(s.size(), 60);
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  if (s.size() > n) out += "...";
  out += '"';
  return out;
}

// Reads the whole regular file at path into *out with one fstat and one read: its size
// must be exactly `size` when exact, else at most `size`. A symbolic link is refused.
ErrorCode ReadWholeFile(const std::string& path, uint64_t size, bool exact, std::string* out,
                        std::string* why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) {
      SetWhy(why, path + " is missing");
      return ErrorCode::FILE_NOT_FOUND;
    }
    SetWhy(why, "cannot open " + path + ": " + ErrnoText(err));
    return ErrorCode::FILE_OPEN_FAIL;
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    SetWhy(why, "cannot stat " + path + ": " + ErrnoText(err));
    return ErrorCode::FILE_READ_FAIL;
  }
  if (!S_ISREG(st.st_mode)) {
    SetWhy(why, path + " is not a regular file");
    return ErrorCode::DESERIALIZE_FAIL;
  }
  const uint64_t actual = static_cast<uint64_t>(st.st_size);
  if (exact && actual != size) {
    SetWhy(why, path + " is " + U64Text(actual) + " bytes, but the manifest says " + U64Text(size) +
                    (actual < size ? " (truncated)" : " (too long)"));
    return ErrorCode::DESERIALIZE_FAIL;
  }
  if (!exact && actual > size) {
    SetWhy(why, path + " is " + U64Text(actual) + " bytes, more than the " + U64Text(size) +
                    " such a file may have");
    return ErrorCode::DESERIALIZE_FAIL;
  }
  try {
    out->resize(static_cast<size_t>(actual));
  } catch (const std::exception&) {
    SetWhy(why, "no memory to read the " + U64Text(actual) + " bytes of " + path);
    return ErrorCode::FILE_READ_FAIL;
  }
  size_t done = 0;
  while (done < out->size()) {
    ssize_t r = ::read(fd, &(*out)[done], out->size() - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      SetWhy(why, "read " + path + ": " + ErrnoText(err));
      return ErrorCode::FILE_READ_FAIL;
    }
    if (r == 0) {
      SetWhy(why, path + " shrank to " + U64Text(done) + " bytes while being read");
      return ErrorCode::FILE_READ_FAIL;
    }
    done += static_cast<size_t>(r);
  }
  char extra;
  ssize_t r;
  do {
    r = ::read(fd, &extra, 1);
  } while (r < 0 && errno == EINTR);
  if (r > 0) {
    SetWhy(why, path + " grew while being read");
    return ErrorCode::FILE_READ_FAIL;
  }
  return ErrorCode::OK;
}

// The lines of a text whose every line ends in '\n' (checked by SplitTrailer).
class Lines {
 public:
  explicit Lines(std::string_view text) : rest_(text) {}
  bool Next(std::string_view* line) {
    if (rest_.empty()) return false;
    size_t nl = rest_.find('\n');
    if (nl == std::string_view::npos) nl = rest_.size();  // not reached: text ends in '\n'
    *line = rest_.substr(0, nl);
    rest_.remove_prefix(std::min(rest_.size(), nl + 1));
    ++number_;
    return true;
  }
  size_t number() const { return number_; }

 private:
  std::string_view rest_;
  size_t number_ = 0;
};

// Checks the last line of text, "crc32c <8 hex>\n", against the CRC of every byte before
// it, and returns those bytes in *body.
ErrorCode SplitTrailer(std::string_view text, const std::string& path, std::string_view* body,
                       std::string* why) {
  if (text.empty()) {
    SetWhy(why, path + " is empty");
    return ErrorCode::DESERIALIZE_FAIL;
  }
  if (text.back() != '\n') {
    SetWhy(why, path + " does not end with a newline (cut short?)");
    return ErrorCode::DESERIALIZE_FAIL;
  }
  size_t start = text.size() >= 2 ? text.rfind('\n', text.size() - 2) : std::string_view::npos;
  start = start == std::string_view::npos ? 0 : start + 1;
  std::string_view last = text.substr(start, text.size() - 1 - start);
  constexpr std::string_view kPrefix = "crc32c ";
  uint32_t stored = 0;
  if (last.substr(0, kPrefix.size()) != kPrefix ||
      !ParseHex8(last.substr(kPrefix.size()), &stored)) {
    SetWhy(why, path + ": its last line " + Quote(last) +
                    " is not \"crc32c <8 hex digits>\" (cut short?)");
    return ErrorCode::DESERIALIZE_FAIL;
  }
  const uint32_t actual = Crc32c(text.data(), start);
  if (actual != stored) {
    SetWhy(why, path + " is corrupted: its bytes have CRC-32C " + Hex8(actual) +
                    ", its last line says " + Hex8(stored));
    return ErrorCode::DESERIALIZE_FAIL;
  }
  *body = text.substr(0, start);
  return ErrorCode::OK;
}

ErrorCode BadLine(const std::string& path, size_t number, std::string_view line,
                  const std::string& expected, std::string* why) {
  SetWhy(why, path + ": line " + U64Text(number) + " is " + Quote(line) + ", expected " + expected);
  return ErrorCode::DESERIALIZE_FAIL;
}

ErrorCode MissingLine(const std::string& path, const std::string& expected, std::string* why) {
  SetWhy(why, path + " ends where " + expected + " was expected");
  return ErrorCode::DESERIALIZE_FAIL;
}

// The header both files share: their title line, then "format 1".
ErrorCode ParseHeader(Lines* lines, const std::string& path, std::string_view title,
                      std::string* why) {
  std::string_view line;
  if (!lines->Next(&line)) return MissingLine(path, Quote(title), why);
  if (line != title) return BadLine(path, lines->number(), line, Quote(title), why);
  if (!lines->Next(&line)) return MissingLine(path, "\"format <n>\"", why);
  uint64_t format = 0;
  if (line.substr(0, 7) != "format " || !ParseCanonicalU64(line.substr(7), UINT64_MAX, &format)) {
    return BadLine(path, lines->number(), line, "\"format <n>\"", why);
  }
  if (format != static_cast<uint64_t>(kSnapshotFormat)) {
    SetWhy(why, path + " has format " + U64Text(format) + "; this build reads format " +
                    U64Text(kSnapshotFormat));
    return ErrorCode::DESERIALIZE_FAIL;
  }
  return ErrorCode::OK;
}

// "<key> <value>" with the key as expected; *value is the rest of the line.
bool KeyValue(std::string_view line, std::string_view key, std::string_view* value) {
  if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ' ') {
    return false;
  }
  *value = line.substr(key.size() + 1);
  return true;
}

struct Descriptor {
  SnapshotInfo info;
  uint32_t manifest_crc = 0;
};

// Parses the descriptor text read from path: trailer, header, fixed lines, extra lines.
ErrorCode ParseDescriptor(std::string_view text, const std::string& path, Descriptor* out,
                          std::string* why) {
  std::string_view body;
  ErrorCode rc = SplitTrailer(text, path, &body, why);
  if (rc != ErrorCode::OK) return rc;
  Lines lines(body);
  rc = ParseHeader(&lines, path, kDescriptorHeader, why);
  if (rc != ErrorCode::OK) return rc;
  std::string_view line, value;
  if (!lines.Next(&line)) return MissingLine(path, "\"sequence <u64>\"", why);
  if (!KeyValue(line, "sequence", &value) ||
      !ParseCanonicalU64(value, UINT64_MAX, &out->info.sequence)) {
    return BadLine(path, lines.number(), line, "\"sequence <u64>\"", why);
  }
  if (!lines.Next(&line)) return MissingLine(path, "\"created_ms <i64>\"", why);
  if (!KeyValue(line, "created_ms", &value) || !ParseCanonicalI64(value, &out->info.created_ms)) {
    return BadLine(path, lines.number(), line, "\"created_ms <i64>\"", why);
  }
  if (!lines.Next(&line)) return MissingLine(path, "\"manifest_crc32c <8 hex digits>\"", why);
  if (!KeyValue(line, "manifest_crc32c", &value) || !ParseHex8(value, &out->manifest_crc)) {
    return BadLine(path, lines.number(), line, "\"manifest_crc32c <8 hex digits>\"", why);
  }
  while (lines.Next(&line)) {
    const size_t space = line.find(' ');
    const std::string_view key = line.substr(0, space);
    value = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    if (space == std::string_view::npos || !ValidToken(key) || ReservedKey(key) ||
        !ValidValue(value)) {
      return BadLine(path, lines.number(), line, "\"<key> <value>\"", why);
    }
    if (out->info.extra.size() >= kMaxSnapshotExtras) {
      SetWhy(why, path + " has more than " + U64Text(kMaxSnapshotExtras) + " extra lines");
      return ErrorCode::DESERIALIZE_FAIL;
    }
    if (!out->info.extra.emplace(std::string(key), std::string(value)).second) {
      SetWhy(why,
             path + ": line " + U64Text(lines.number()) + " repeats the key " + std::string(key));
      return ErrorCode::DESERIALIZE_FAIL;
    }
  }
  return ErrorCode::OK;
}

struct ManifestEntry {
  std::string name;
  uint64_t size = 0;
  uint32_t crc = 0;
};

ErrorCode ParseManifest(std::string_view text, const std::string& path,
                        std::vector<ManifestEntry>* out, std::string* why) {
  std::string_view body;
  ErrorCode rc = SplitTrailer(text, path, &body, why);
  if (rc != ErrorCode::OK) return rc;
  Lines lines(body);
  rc = ParseHeader(&lines, path, kManifestHeader, why);
  if (rc != ErrorCode::OK) return rc;
  std::set<std::string_view> seen;
  std::string_view line;
  static const std::string kExpected = "\"payload <name> <size> <8 hex digits>\"";
  while (lines.Next(&line)) {
    // Exactly four fields separated by single spaces.
    std::string_view fields[4];
    std::string_view rest = line;
    size_t n = 0;
    bool ok = true;
    while (ok && n < 4) {
      const size_t space = rest.find(' ');
      fields[n++] = rest.substr(0, space);
      if (space == std::string_view::npos) {
        rest = std::string_view();
        break;
      }
      rest.remove_prefix(space + 1);
      if (n == 4) ok = false;  // a fifth field
    }
    ManifestEntry entry;
    if (!ok || n != 4 || fields[0] != "payload" || !ValidPayloadName(fields[1]) ||
        !ParseCanonicalU64(fields[2], UINT64_MAX, &entry.size) ||
        !ParseHex8(fields[3], &entry.crc)) {
      return BadLine(path, lines.number(), line, kExpected, why);
    }
    if (out->size() >= kMaxSnapshotPayloads) {
      SetWhy(why, path + " lists more than " + U64Text(kMaxSnapshotPayloads) + " payloads");
      return ErrorCode::DESERIALIZE_FAIL;
    }
    if (!seen.insert(fields[1]).second) {
      SetWhy(why, path + ": line " + U64Text(lines.number()) + " lists payload " +
                      std::string(fields[1]) + " again");
      return ErrorCode::DESERIALIZE_FAIL;
    }
    entry.name = std::string(fields[1]);
    out->push_back(std::move(entry));
  }
  return ErrorCode::OK;
}

// Reads and parses dir's descriptor and checks it against the directory's name.
ErrorCode ReadDescriptor(const std::string& snapshot_path, const std::string& name, Descriptor* out,
                         std::string* why) {
  uint64_t sequence = 0;
  int64_t created_ms = 0;
  if (!ParseSnapshotName(name, &sequence, &created_ms)) {
    SetWhy(why, Quote(name) + " is not a snapshot name");
    return ErrorCode::INVALID_PARAMS;
  }
  const std::string path = snapshot_path + "/" + kDescriptorFile;
  std::string text;
  ErrorCode rc = ReadWholeFile(path, kMaxSnapshotTextBytes, false, &text, why);
  if (rc != ErrorCode::OK) return rc;
  rc = ParseDescriptor(text, path, out, why);
  if (rc != ErrorCode::OK) return rc;
  if (out->info.sequence != sequence || out->info.created_ms != created_ms) {
    SetWhy(why, path + " says sequence " + U64Text(out->info.sequence) + " created_ms " +
                    I64Text(out->info.created_ms) + ", but its directory is named " + name);
    return ErrorCode::DESERIALIZE_FAIL;
  }
  out->info.name = name;
  return ErrorCode::OK;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

SnapshotStore::SnapshotStore(std::string dir) : dir_(std::move(dir)) {
  const char warm = 0;
  (void)Crc32c(&warm, 1);
}

std::string SnapshotStore::SnapshotPath(const std::string& name) const {
  return dir_ + "/" + kSnapshotsDir + "/" + name;
}

std::vector<SnapshotStore::Entry> SnapshotStore::List(bool check_descriptors) const {
  std::vector<Entry> entries;
  const std::string snapshots = dir_ + "/" + kSnapshotsDir;
  DIR* d = ::opendir(snapshots.c_str());
  if (d == nullptr) {
    int err = errno;
    if (err != ENOENT) {
      MC_LOG_WARN("cannot list snapshots in %s: %s", snapshots.c_str(), ErrnoText(err).c_str());
    }
    return entries;
  }
  while (struct dirent* de = ::readdir(d)) {
    Entry e;
    e.name = de->d_name;
    if (!ParseSnapshotName(e.name, &e.sequence, &e.created_ms)) continue;
    const std::string path = snapshots + "/" + e.name;
    if (!IsDirectory(path)) continue;
    if (check_descriptors) {
      Descriptor descriptor;
      e.complete = ReadDescriptor(path, e.name, &descriptor, nullptr) == ErrorCode::OK;
    } else {
      e.complete = IsRegularFile(path + "/" + kDescriptorFile);
    }
    entries.push_back(std::move(e));
  }
  ::closedir(d);
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.sequence != b.sequence) return a.sequence > b.sequence;
    return a.created_ms > b.created_ms;
  });
  return entries;
}

std::string SnapshotStore::ReadLatest(std::string* why) const {
  const std::string path = dir_ + "/" + kLatestFile;
  std::string text;
  if (ReadWholeFile(path, kMaxLatestBytes, false, &text, why) != ErrorCode::OK) return "";
  if (text.empty() || text.back() != '\n' ||
      !ParseSnapshotName(std::string_view(text).substr(0, text.size() - 1), nullptr, nullptr)) {
    SetWhy(why, path + " holds " + Quote(text) + ", not a snapshot name and a newline");
    return "";
  }
  text.pop_back();
  return text;
}

std::vector<std::string> SnapshotStore::Candidates() const {
  const std::vector<Entry> entries = List(false);
  std::vector<std::string> result;
  std::string why;
  std::string latest = ReadLatest(&why);
  if (!latest.empty()) {
    bool found = false;
    for (const Entry& e : entries) found = found || (e.complete && e.name == latest);
    if (found) {
      result.push_back(latest);
    } else {
      MC_LOG_WARN(
          "%s/%s names snapshot %s, which is missing or has no descriptor; trying the "
          "others by sequence",
          dir_.c_str(), kLatestFile, latest.c_str());
      latest.clear();
    }
  } else if (!entries.empty()) {
    MC_LOG_WARN("%s; trying the snapshots by sequence", why.c_str());
  }
  for (const Entry& e : entries) {
    if (e.complete && e.name != latest) result.push_back(e.name);
  }
  return result;
}

Result<LoadedSnapshot> SnapshotStore::Load(const std::string& name, std::string* why) const {
  LoadedSnapshot loaded;
  const std::string snapshot_path = SnapshotPath(name);
  Descriptor descriptor;
  ErrorCode rc = ReadDescriptor(snapshot_path, name, &descriptor, why);
  if (rc != ErrorCode::OK) return rc;

  const std::string manifest_path = snapshot_path + "/" + kManifestFile;
  std::string manifest_text;
  rc = ReadWholeFile(manifest_path, kMaxSnapshotTextBytes, false, &manifest_text, why);
  if (rc != ErrorCode::OK) return rc;
  std::vector<ManifestEntry> manifest;
  rc = ParseManifest(manifest_text, manifest_path, &manifest, why);
  if (rc != ErrorCode::OK) return rc;
  const uint32_t manifest_crc = Crc32c(manifest_text.data(), manifest_text.size());
  if (manifest_crc != descriptor.manifest_crc) {
    SetWhy(why, manifest_path + " is intact but not the one the descriptor names: its CRC-32C is " +
                    Hex8(manifest_crc) + ", the descriptor says " + Hex8(descriptor.manifest_crc));
    return ErrorCode::DESERIALIZE_FAIL;
  }

  for (ManifestEntry& entry : manifest) {
    const std::string path = snapshot_path + "/" + entry.name;
    std::string bytes;
    rc = ReadWholeFile(path, entry.size, true, &bytes, why);
    if (rc != ErrorCode::OK) return rc;
    const uint32_t crc = Crc32c(bytes.data(), bytes.size());
    if (crc != entry.crc) {
      SetWhy(why, path + " is corrupted: its CRC-32C is " + Hex8(crc) + ", the manifest says " +
                      Hex8(entry.crc));
      return ErrorCode::DESERIALIZE_FAIL;
    }
    loaded.payloads.emplace(std::move(entry.name), std::move(bytes));
  }
  loaded.info = std::move(descriptor.info);
  return loaded;
}

ErrorCode SnapshotStore::MarkInvalid(const std::string& name) {
  if (!ParseSnapshotName(name, nullptr, nullptr)) {
    MC_LOG_ERROR("MarkInvalid: %s is not a snapshot name", Quote(name).c_str());
    return ErrorCode::INVALID_PARAMS;
  }
  const std::string from = SnapshotPath(name);
  const std::string to = from + kInvalidSuffix;
  if (::rename(from.c_str(), to.c_str()) != 0) {
    int err = errno;
    MC_LOG_ERROR("cannot mark snapshot %s invalid: rename to %s: %s", from.c_str(), to.c_str(),
                 ErrnoText(err).c_str());
    return ErrorCode::PERSISTENT_FAIL;
  }
  const std::string parent = dir_ + "/" + kSnapshotsDir;
  if (int err = FsyncPath(parent)) {
    MC_LOG_WARN("fsync %s: %s", parent.c_str(), ErrnoText(err).c_str());
  }
  MC_LOG_WARN("snapshot %s marked invalid: kept as %s, never loaded again", name.c_str(),
              to.c_str());
  return ErrorCode::OK;
}

void SnapshotStore::Delete(const Entry& entry) const {
  const std::string path = SnapshotPath(entry.name);
  const std::string descriptor = path + "/" + kDescriptorFile;
  // Descriptor first (durably), so that a deletion cut short leaves an incomplete
  // directory rather than a candidate with missing payloads.
  if (::unlink(descriptor.c_str()) == 0) {
    if (int err = FsyncPath(path)) {
      MC_LOG_WARN("fsync %s: %s", path.c_str(), ErrnoText(err).c_str());
    }
  } else if (errno != ENOENT) {
    int err = errno;
    MC_LOG_WARN("cannot remove snapshot %s: unlink %s: %s", entry.name.c_str(), descriptor.c_str(),
                ErrnoText(err).c_str());
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) {
    MC_LOG_WARN("cannot remove snapshot directory %s: %s", path.c_str(), ec.message().c_str());
    return;
  }
  MC_LOG_INFO("removed %s snapshot %s", entry.complete ? "old" : "incomplete", entry.name.c_str());
}

void SnapshotStore::Retain(size_t count) {
  const std::vector<Entry> entries = List(true);
  const std::string latest = ReadLatest(nullptr);
  const Entry* newest = nullptr;
  size_t published = 0;
  for (const Entry& e : entries) {
    if (!e.complete) continue;
    if (newest == nullptr) newest = &e;
    // The newest `count`, and the one latest names wherever it is.
    if (published++ < count || e.name == latest) continue;
    Delete(e);
  }
  if (newest == nullptr) return;  // nothing published: every incomplete one may be in progress
  for (const Entry& e : entries) {
    if (e.complete || e.name == latest) continue;
    const bool older = e.sequence < newest->sequence ||
                       (e.sequence == newest->sequence && e.created_ms < newest->created_ms);
    if (older) Delete(e);
  }
}

uint64_t SnapshotStore::OldestRetainedSequence() const {
  const std::vector<Entry> entries = List(true);
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->complete) return it->sequence;
  }
  return 0;
}

ErrorCode SnapshotStore::RemoveSnapshotDir(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  std::string base = slash == std::string::npos ? p : p.substr(slash + 1);
  const std::string parent = slash == std::string::npos ? "." : ParentOf(p);
  const size_t parent_slash = parent.rfind('/');
  const std::string parent_base =
      parent_slash == std::string::npos ? parent : parent.substr(parent_slash + 1);
  const size_t suffix = sizeof(kInvalidSuffix) - 1;
  if (base.size() > suffix && base.compare(base.size() - suffix, suffix, kInvalidSuffix) == 0) {
    base.resize(base.size() - suffix);
  }
  if (parent_base != kSnapshotsDir || !ParseSnapshotName(base, nullptr, nullptr)) {
    MC_LOG_ERROR("refusing to remove \"%s\": not a snapshot directory (snapshots/<name>)",
                 path.c_str());
    return ErrorCode::INVALID_PARAMS;
  }
  struct stat st;
  if (::lstat(p.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) return ErrorCode::FILE_NOT_FOUND;
    MC_LOG_WARN("cannot remove %s: %s", p.c_str(), ErrnoText(err).c_str());
    return ErrorCode::PERSISTENT_FAIL;
  }
  std::error_code ec;
  std::filesystem::remove_all(p, ec);
  if (ec) {
    MC_LOG_WARN("cannot remove %s: %s", p.c_str(), ec.message().c_str());
    return ErrorCode::PERSISTENT_FAIL;
  }
  MC_LOG_INFO("removed partial snapshot %s", p.c_str());
  return ErrorCode::OK;
}

bool SnapshotStore::HasAny() const {
  struct stat st;
  if (::lstat((dir_ + "/" + kLatestFile).c_str(), &st) == 0) return true;
  DIR* d = ::opendir((dir_ + "/" + kSnapshotsDir).c_str());
  if (d == nullptr) return errno != ENOENT;  // there but unreadable: assume the worst
  bool any = false;
  while (struct dirent* de = ::readdir(d)) {
    if (std::strcmp(de->d_name, ".") != 0 && std::strcmp(de->d_name, "..") != 0) {
      any = true;
      break;
    }
  }
  ::closedir(d);
  return any;
}

}  // namespace mooncake
