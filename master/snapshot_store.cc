// SnapshotWriter and SnapshotStore (see the header for the layout and the rules).
//
// The first half of this file runs in a forked child of a multithreaded process: no
// logging, no locks, no snprintf or strerror (locale), only system calls and malloc. The
// reading half runs in the master and logs.
#include "master/snapshot_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <new>
#include <set>
#include <system_error>

#include "common/crc32c.h"
#include "common/logging.h"

namespace mooncake {

namespace {

constexpr const char kManifestFile[] = "manifest";
constexpr const char kDescriptorFile[] = "descriptor";
constexpr const char kLatestFile[] = "latest";
constexpr const char kLatestTmpFile[] = "latest.tmp";
constexpr const char kSnapshotsDir[] = "snapshots";
constexpr const char kInvalidSuffix[] = ".invalid";
constexpr const char kManifestHeader[] = "mooncake-master snapshot manifest";
constexpr const char kDescriptorHeader[] = "mooncake-master snapshot descriptor";
constexpr size_t kSequenceDigits = 20;
constexpr size_t kMaxLatestBytes = 256;
// The keys the descriptor has itself, which an extra line cannot use.
constexpr const char* kReservedKeys[] = {"sequence", "created_ms", "manifest_crc32c", "format",
                                         "crc32c"};

// ---- pieces the forked writer uses: no locale, no locks ----------------------------------

// "No such file or directory (ENOENT)", from glibc's static tables (no translation, so
// no locale lock).
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
  static constexpr char kHex[] = "0123456789abcdef";
  for (int shift = 28; shift >= 0; shift -= 4) *out += kHex[(v >> shift) & 0xf];
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

// write() until all of data is out; 0 or the errno.
int WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

// fsync of a file or directory by path; 0 or the errno.
int FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int rc = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return rc;
}

// close() that reports EIO and friends (but not EINTR, after which the fd is gone anyway).
int CloseFd(int fd) {
  if (::close(fd) != 0 && errno != EINTR) return errno;
  return 0;
}

std::string ParentOf(const std::string& path) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/') --end;
  size_t slash = path.rfind('/', end - 1);
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool IsTokenChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
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

// ---- strict number parsing (also used on names, in both halves) --------------------------

// A canonical unsigned decimal: 1..20 digits, no leading zero unless it is "0", at most
// max.
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

// A canonical signed decimal: optional '-' (not on "0"), then a canonical unsigned.
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

}  // namespace

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

// ---- SnapshotWriter -----------------------------------------------------------------------

SnapshotWriter::SnapshotWriter(std::string dir, uint64_t sequence, int64_t created_ms)
    : dir_(std::move(dir)),
      sequence_(sequence),
      created_ms_(created_ms),
      name_(SnapshotName(sequence, created_ms)),
      path_(dir_ + "/" + kSnapshotsDir + "/" + name_) {}

SnapshotWriter::~SnapshotWriter() {
  if (fd_ >= 0) ::close(fd_);
}

ErrorCode SnapshotWriter::Fail(ErrorCode code, std::string message, std::string* error) {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  state_ = State::kFailed;
  failure_code_ = code;
  failure_ = std::move(message);
  if (error != nullptr) *error = failure_;
  return code;
}

ErrorCode SnapshotWriter::Failed(std::string* error) const {
  if (error != nullptr) *error = "snapshot " + name_ + " failed earlier: " + failure_;
  return failure_code_;
}

ErrorCode SnapshotWriter::Misuse(std::string message, std::string* error) {
  if (error != nullptr) *error = std::move(message);
  return ErrorCode::INVALID_PARAMS;
}

ErrorCode SnapshotWriter::Begin(std::string* error) {
  if (state_ == State::kFailed) return Failed(error);
  if (state_ != State::kNew) return Misuse("snapshot " + name_ + ": Begin called twice", error);
  if (dir_.empty()) return Misuse("snapshot directory is empty", error);
  if (created_ms_ < 0) {
    return Misuse("snapshot created_ms " + I64Text(created_ms_) + " is negative", error);
  }
  // mkdir -p dir/snapshots, then the snapshot's own directory, which must be new. Each
  // directory created gets its entry made durable by an fsync of its parent.
  const std::string snapshots = dir_ + "/" + kSnapshotsDir;
  std::vector<std::string> levels;
  for (size_t i = 1; i <= snapshots.size(); ++i) {
    if (i == snapshots.size() || snapshots[i] == '/') {
      if (snapshots[i - 1] != '/') levels.push_back(snapshots.substr(0, i));
    }
  }
  levels.push_back(path_);
  for (size_t i = 0; i < levels.size(); ++i) {
    const std::string& level = levels[i];
    const bool last = i + 1 == levels.size();
    if (::mkdir(level.c_str(), 0755) != 0) {
      int err = errno;
      if (err == EEXIST && !last) continue;
      if (err == EEXIST) {
        return Fail(ErrorCode::FILE_OPEN_FAIL, "snapshot directory " + level + " already exists",
                    error);
      }
      return Fail(ErrorCode::FILE_OPEN_FAIL, "mkdir " + level + ": " + ErrnoText(err), error);
    }
    if (last) created_path_ = path_;  // ours from now on, even if the fsync below fails
    const std::string parent = ParentOf(level);
    if (int err = FsyncPath(parent)) {
      return Fail(ErrorCode::PERSISTENT_FAIL, "fsync " + parent + ": " + ErrnoText(err), error);
    }
  }
  buffer_.reset(new (std::nothrow) char[kWriteBufferBytes]);
  if (buffer_ == nullptr) {
    return Fail(ErrorCode::FILE_WRITE_FAIL, "snapshot " + name_ + ": no memory for the buffer",
                error);
  }
  state_ = State::kReady;
  return ErrorCode::OK;
}

ErrorCode SnapshotWriter::OpenPayload(const std::string& name, std::string* error) {
  if (state_ == State::kFailed) return Failed(error);
  if (state_ != State::kReady) {
    return Misuse("snapshot " + name_ + ": OpenPayload(" + name + ") " +
                      (state_ == State::kPayloadOpen ? "while payload " + current_.name + " is open"
                                                     : "outside Begin..Publish"),
                  error);
  }
  if (!ValidPayloadName(name)) {
    return Misuse("snapshot " + name_ + ": bad payload name \"" + name + "\" (1.." +
                      U64Text(kMaxTokenBytes) +
                      " of [A-Za-z0-9._-], no leading '.', not manifest or descriptor)",
                  error);
  }
  for (const PayloadEntry& p : payloads_) {
    if (p.name == name) {
      return Misuse("snapshot " + name_ + ": payload " + name + " written twice", error);
    }
  }
  if (payloads_.size() >= kMaxSnapshotPayloads) {
    return Misuse(
        "snapshot " + name_ + ": more than " + U64Text(kMaxSnapshotPayloads) + " payloads", error);
  }
  current_path_ = path_ + "/" + name;
  fd_ = ::open(current_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    int err = errno;
    return Fail(ErrorCode::FILE_OPEN_FAIL, "open " + current_path_ + ": " + ErrnoText(err), error);
  }
  current_ = PayloadEntry{name, 0, 0};
  buffered_ = 0;
  state_ = State::kPayloadOpen;
  return ErrorCode::OK;
}

ErrorCode SnapshotWriter::Flush(std::string* error) {
  if (buffered_ == 0) return ErrorCode::OK;
  if (int err = WriteAll(fd_, buffer_.get(), buffered_)) {
    return Fail(ErrorCode::FILE_WRITE_FAIL, "write " + current_path_ + ": " + ErrnoText(err),
                error);
  }
  bytes_written_ += buffered_;
  buffered_ = 0;
  return ErrorCode::OK;
}

ErrorCode SnapshotWriter::Append(std::string_view bytes, std::string* error) {
  if (state_ == State::kFailed) return Failed(error);
  if (state_ != State::kPayloadOpen) {
    return Misuse("snapshot " + name_ + ": Append with no payload open", error);
  }
  if (bytes.empty()) return ErrorCode::OK;
  current_.crc = Crc32cExtend(current_.crc, bytes.data(), bytes.size());
  current_.size += bytes.size();
  if (buffered_ + bytes.size() <= kWriteBufferBytes) {
    std::memcpy(buffer_.get() + buffered_, bytes.data(), bytes.size());
    buffered_ += bytes.size();
    return ErrorCode::OK;
  }
  ErrorCode rc = Flush(error);
  if (rc != ErrorCode::OK) return rc;
  if (bytes.size() < kWriteBufferBytes) {
    std::memcpy(buffer_.get(), bytes.data(), bytes.size());
    buffered_ = bytes.size();
    return ErrorCode::OK;
  }
  if (int err = WriteAll(fd_, bytes.data(), bytes.size())) {
    return Fail(ErrorCode::FILE_WRITE_FAIL, "write " + current_path_ + ": " + ErrnoText(err),
                error);
  }
  bytes_written_ += bytes.size();
  return ErrorCode::OK;
}

ErrorCode SnapshotWriter::ClosePayload(std::string* error) {
  if (state_ == State::kFailed) return Failed(error);
  if (state_ != State::kPayloadOpen) {
    return Misuse("snapshot " + name_ + ": ClosePayload with no payload open", error);
  }
  ErrorCode rc = Flush(error);
  if (rc != ErrorCode::OK) return rc;
  if (::fsync(fd_) != 0) {
    int err = errno;
    return Fail(ErrorCode::PERSISTENT_FAIL, "fsync " + current_path_ + ": " + ErrnoText(err),
                error);
  }
  int err = CloseFd(fd_);
  fd_ = -1;
  if (err != 0) {
    return Fail(ErrorCode::PERSISTENT_FAIL, "close " + current_path_ + ": " + ErrnoText(err),
                error);
  }
  payloads_.push_back(std::move(current_));
  current_ = PayloadEntry{};
  state_ = State::kReady;
  return ErrorCode::OK;
}

namespace {

// Creates path (flags add O_EXCL or O_TRUNC) holding text, fsyncs and closes it.
ErrorCode WriteDurableFile(const std::string& path, int flags, const std::string& text,
                           std::string* message) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
  if (fd < 0) {
    int err = errno;
    *message = "open " + path + ": " + ErrnoText(err);
    return ErrorCode::FILE_OPEN_FAIL;
  }
  if (int err = WriteAll(fd, text.data(), text.size())) {
    ::close(fd);
    *message = "write " + path + ": " + ErrnoText(err);
    return ErrorCode::FILE_WRITE_FAIL;
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    *message = "fsync " + path + ": " + ErrnoText(err);
    return ErrorCode::PERSISTENT_FAIL;
  }
  if (int err = CloseFd(fd)) {
    *message = "close " + path + ": " + ErrnoText(err);
    return ErrorCode::PERSISTENT_FAIL;
  }
  return ErrorCode::OK;
}

}  // namespace

ErrorCode SnapshotWriter::WriteSmallFile(const std::string& file, const std::string& text,
                                         std::string* error) {
  std::string message;
  ErrorCode rc = WriteDurableFile(path_ + "/" + file, O_EXCL, text, &message);
  if (rc != ErrorCode::OK) return Fail(rc, std::move(message), error);
  bytes_written_ += text.size();
  return ErrorCode::OK;
}

ErrorCode SnapshotWriter::Publish(const std::vector<std::pair<std::string, std::string>>& extra,
                                  std::string* error) {
  if (state_ == State::kFailed) return Failed(error);
  if (state_ != State::kReady) {
    return Misuse("snapshot " + name_ + ": Publish " +
                      (state_ == State::kPayloadOpen ? "while payload " + current_.name + " is open"
                                                     : "outside Begin..Publish"),
                  error);
  }
  if (extra.size() > kMaxSnapshotExtras) {
    return Misuse("snapshot " + name_ + ": more than " + U64Text(kMaxSnapshotExtras) +
                      " extra descriptor lines",
                  error);
  }
  for (size_t i = 0; i < extra.size(); ++i) {
    const std::string& key = extra[i].first;
    if (!ValidToken(key) || ReservedKey(key)) {
      return Misuse("snapshot " + name_ + ": bad descriptor key \"" + key + "\"", error);
    }
    if (!ValidValue(extra[i].second)) {
      return Misuse("snapshot " + name_ + ": descriptor value of " + key + " is not up to " +
                        U64Text(kMaxValueBytes) + " bytes of printable ASCII",
                    error);
    }
    for (size_t j = 0; j < i; ++j) {
      if (extra[j].first == key) {
        return Misuse("snapshot " + name_ + ": descriptor key " + key + " given twice", error);
      }
    }
  }

  std::string manifest = kManifestHeader;
  manifest += "\nformat ";
  AppendU64(&manifest, kSnapshotFormat);
  manifest += '\n';
  for (const PayloadEntry& p : payloads_) {
    manifest += "payload ";
    manifest += p.name;
    manifest += ' ';
    AppendU64(&manifest, p.size);
    manifest += ' ';
    AppendHex8(&manifest, p.crc);
    manifest += '\n';
  }
  const uint32_t manifest_crc = Crc32c(manifest.data(), manifest.size());
  manifest += "crc32c ";
  AppendHex8(&manifest, manifest_crc);
  manifest += '\n';

  std::string descriptor = kDescriptorHeader;
  descriptor += "\nformat ";
  AppendU64(&descriptor, kSnapshotFormat);
  descriptor += "\nsequence ";
  AppendU64(&descriptor, sequence_);
  descriptor += "\ncreated_ms ";
  AppendI64(&descriptor, created_ms_);
  descriptor += "\nmanifest_crc32c ";
  AppendHex8(&descriptor, Crc32c(manifest.data(), manifest.size()));  // the whole file
  descriptor += '\n';
  for (const auto& kv : extra) {
    descriptor += kv.first;
    descriptor += ' ';
    descriptor += kv.second;
    descriptor += '\n';
  }
  const uint32_t descriptor_crc = Crc32c(descriptor.data(), descriptor.size());
  descriptor += "crc32c ";
  AppendHex8(&descriptor, descriptor_crc);
  descriptor += '\n';
  // Unreachable with the limits above, but the reader refuses bigger files.
  if (manifest.size() > kMaxSnapshotTextBytes || descriptor.size() > kMaxSnapshotTextBytes) {
    return Misuse("snapshot " + name_ + ": manifest or descriptor above " +
                      U64Text(kMaxSnapshotTextBytes) + " bytes",
                  error);
  }

  ErrorCode rc = WriteSmallFile(kManifestFile, manifest, error);
  if (rc != ErrorCode::OK) return rc;
  rc = WriteSmallFile(kDescriptorFile, descriptor, error);
  if (rc != ErrorCode::OK) return rc;
  if (int err = FsyncPath(path_)) {
    return Fail(ErrorCode::PERSISTENT_FAIL, "fsync " + path_ + ": " + ErrnoText(err), error);
  }

  // The snapshot is complete; now make latest name it.
  const std::string tmp = dir_ + "/" + kLatestTmpFile;
  const std::string latest = dir_ + "/" + kLatestFile;
  std::string message;
  rc = WriteDurableFile(tmp, O_TRUNC, name_ + "\n", &message);
  if (rc != ErrorCode::OK) return Fail(rc, std::move(message), error);
  if (::rename(tmp.c_str(), latest.c_str()) != 0) {
    int err = errno;
    return Fail(ErrorCode::PERSISTENT_FAIL,
                "rename " + tmp + " to " + latest + ": " + ErrnoText(err), error);
  }
  if (int err = FsyncPath(dir_)) {
    return Fail(ErrorCode::PERSISTENT_FAIL, "fsync " + dir_ + ": " + ErrnoText(err), error);
  }
  state_ = State::kPublished;
  return ErrorCode::OK;
}

// ---- the reading side ---------------------------------------------------------------------

namespace {

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
