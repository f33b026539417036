// SnapshotWriter (see the header). All of this runs in a forked child of a multithreaded
// process: no logging, no locks, no snprintf or strerror (locale), only system calls and
// malloc. Keep common/base/logging.h out of this file.
#include "master/snapshot/snapshot_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "common/base/crc32c.h"
#include "common/base/private_dir.h"

namespace mooncake {

using namespace snapshot_format;  // the pieces the writer and the reader share

namespace {

constexpr const char kLatestTmpFile[] = "latest.tmp";

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

// close() that reports EIO and friends (but not EINTR, after which the fd is gone anyway).
int CloseFd(int fd) {
  if (::close(fd) != 0 && errno != EINTR) return errno;
  return 0;
}

// Creates path (flags add O_EXCL or O_TRUNC) holding text, fsyncs and closes it.
ErrorCode WriteDurableFile(const std::string& path, int flags, const std::string& text,
                           std::string* message) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, kPrivateFileMode);
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
  // directory created gets its entry made durable by an fsync of its parent. Modes are
  // private (common/base/private_dir.h); tightening existing ones (which logs) is the parent
  // process's, at start (master/snapshot/durability.h).
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
    if (::mkdir(level.c_str(), kPrivateDirMode) != 0) {
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
  fd_ = ::open(current_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
               kPrivateFileMode);
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

}  // namespace mooncake
