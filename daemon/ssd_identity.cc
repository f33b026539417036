#include "daemon/ssd_store/ssd_identity.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cinttypes>
#include <cstdlib>
#include <cstdio>
#include <cstring>

namespace mooncake {

namespace {

constexpr char kMagic[] = "mooncake-ssd-identity";
constexpr int kVersion = 1;
constexpr size_t kMaxFile = 256;  // far more than the line ever takes

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

bool WriteAll(int fd, const std::string& bytes) {
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// A decimal number in 1..INT64_MAX at *p followed by end; *p moves past end.
bool ParsePositive(const char** p, char end, int64_t* out) {
  if (!std::isdigit(static_cast<unsigned char>(**p))) return false;
  errno = 0;
  char* after = nullptr;
  long long value = std::strtoll(*p, &after, 10);
  if (errno != 0 || value <= 0 || *after != end) return false;
  *out = value;
  *p = after + 1;
  return true;
}

}  // namespace

std::string SsdIdentityPath(const std::string& directory) { return directory + "/IDENTITY"; }

ErrorCode ReadSsdIdentity(const std::string& directory, SsdIdentity* out, std::string* error) {
  const std::string path = SsdIdentityPath(directory);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return ErrorCode::FILE_NOT_FOUND;
    *error = Errno(path);
    return ErrorCode::FILE_READ_FAIL;
  }
  char text[kMaxFile + 1];
  ssize_t n = read(fd, text, kMaxFile);
  int saved = errno;
  close(fd);
  if (n < 0) {
    errno = saved;
    *error = Errno(path);
    return ErrorCode::FILE_READ_FAIL;
  }
  text[n] = '\0';
  // "<magic> <version> <id> <incarnation>\n", exactly: every number in range, nothing after.
  const std::string line(text, static_cast<size_t>(n));
  const std::string head = std::string(kMagic) + " " + std::to_string(kVersion) + " ";
  int64_t id = 0, incarnation = 0;
  const bool headed = line.compare(0, head.size(), head) == 0;
  const char* p = headed ? line.c_str() + head.size() : nullptr;
  if (!headed || !ParsePositive(&p, ' ', &id) || !ParsePositive(&p, '\n', &incarnation) ||
      *p != '\0') {
    *error = path + ": not an identity this daemon wrote";
    return ErrorCode::DESERIALIZE_FAIL;
  }
  out->segment_id = id;
  out->incarnation = incarnation;
  return ErrorCode::OK;
}

ErrorCode WriteSsdIdentity(const std::string& directory, const SsdIdentity& identity,
                           std::string* error) {
  const std::string path = SsdIdentityPath(directory);
  const std::string temp = path + ".tmp";
  char line[kMaxFile];
  std::snprintf(line, sizeof(line), "%s %d %" PRId64 " %" PRId64 "\n", kMagic, kVersion,
                identity.segment_id, identity.incarnation);
  unlink(temp.c_str());  // a crash may have left one
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = Errno(temp);
    return ErrorCode::FILE_WRITE_FAIL;
  }
  bool ok = WriteAll(fd, line) && fsync(fd) == 0;
  if (!ok) *error = Errno(temp);
  close(fd);
  if (ok && rename(temp.c_str(), path.c_str()) != 0) {
    ok = false;
    *error = Errno("rename to " + path);
  }
  if (!ok) {
    unlink(temp.c_str());
    return ErrorCode::FILE_WRITE_FAIL;
  }
  // The rename is durable once the directory is.
  int dir = open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0 || fsync(dir) != 0) {
    *error = Errno(directory);
    if (dir >= 0) close(dir);
    return ErrorCode::FILE_WRITE_FAIL;
  }
  close(dir);
  return ErrorCode::OK;
}

}  // namespace mooncake
