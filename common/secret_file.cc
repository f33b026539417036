#include "common/base/secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "common/base/path_trust.h"

namespace mooncake {

namespace {

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Shannon entropy of the values' frequencies, times their number: in bits.
double EntropyBits(const std::vector<uint8_t>& values) {
  if (values.empty()) return 0;
  std::array<size_t, 256> counts{};
  for (uint8_t v : values) ++counts[v];
  const double n = static_cast<double>(values.size());
  double bits = 0;
  for (size_t c : counts) {
    if (c != 0) bits -= static_cast<double>(c) * std::log2(static_cast<double>(c) / n);
  }
  return bits;
}

// The shortest p such that s[i] == s[i + p] for every i (s.size() when none is shorter),
// by the prefix function: s.size() less its longest proper border.
size_t ShortestPeriod(std::string_view s) {
  std::vector<size_t> border(s.size(), 0);
  for (size_t i = 1; i < s.size(); ++i) {
    size_t k = border[i - 1];
    while (k > 0 && s[i] != s[k]) k = border[k - 1];
    if (s[i] == s[k]) ++k;
    border[i] = k;
  }
  return s.empty() ? 0 : s.size() - border.back();
}

}  // namespace

double EstimatedSecretBits(std::string_view secret) {
  const size_t period = ShortestPeriod(secret);
  if (period <= secret.size() / 2) secret = secret.substr(0, period);  // repeats a part
  std::vector<uint8_t> bytes(secret.begin(), secret.end());
  std::vector<uint8_t> steps;
  for (size_t i = 1; i < bytes.size(); ++i) steps.push_back(bytes[i] - bytes[i - 1]);
  return std::min(EntropyBits(bytes), EntropyBits(steps));
}

ErrorCode ReadSecretFile(const std::string& path, size_t max_bytes, std::string* text,
                         std::string* why) {
  std::string dir, name;
  if (!SplitRealDirectory(path, &dir, &name, why)) {
    return errno == ENOENT ? ErrorCode::FILE_NOT_FOUND : ErrorCode::FILE_OPEN_FAIL;
  }
  // The file is looked up and opened in the very directory that is checked below.
  Fd dir_fd(open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0) {
    *why = "cannot open its directory " + dir + ": " + std::strerror(errno);
    return ErrorCode::FILE_OPEN_FAIL;
  }
  // Its kind before opening it: a device is never opened, a FIFO never waited on.
  struct stat st;
  if (fstatat(dir_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    const int err = errno;
    *why = std::strerror(err);
    return err == ENOENT ? ErrorCode::FILE_NOT_FOUND : ErrorCode::FILE_OPEN_FAIL;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = std::string("not a regular file but ") + KindOf(st.st_mode) +
           (S_ISLNK(st.st_mode) ? ": name the file it points to" : ": name a regular file") +
           ", of mode 0600";
    return ErrorCode::FILE_OPEN_FAIL;
  }
  const uid_t me = geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    *why = "owned by uid " + std::to_string(st.st_uid) + ", neither this process's user (uid " +
           std::to_string(me) + ") nor root: its owner chooses what it holds; chown it to " +
           "root or uid " + std::to_string(me);
    return ErrorCode::FILE_OPEN_FAIL;
  }
  if ((st.st_mode & 077) != 0) {
    *why = "mode " + ModeText(st.st_mode) + " lets group or others at it; chmod 0600 it";
    return ErrorCode::FILE_OPEN_FAIL;
  }
  std::string problem = SecretDirectoryProblem(dir);
  if (!problem.empty()) {
    *why = problem;
    return ErrorCode::FILE_OPEN_FAIL;
  }
  // O_NONBLOCK: should a FIFO take the name meanwhile, open does not wait for a writer
  // (and the fstat below refuses it).
  Fd fd(openat(dir_fd.get(), name.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    *why = std::strerror(err);
    return err == ENOENT ? ErrorCode::FILE_NOT_FOUND : ErrorCode::FILE_OPEN_FAIL;
  }
  struct stat opened;
  if (fstat(fd.get(), &opened) != 0 || opened.st_dev != st.st_dev ||
      opened.st_ino != st.st_ino || !S_ISREG(opened.st_mode)) {
    *why = "replaced while it was being checked; try again";
    return ErrorCode::FILE_OPEN_FAIL;
  }
  if (opened.st_size > static_cast<off_t>(max_bytes)) {
    *why = "larger than " + std::to_string(max_bytes / 1024) + " KiB";
    return ErrorCode::INVALID_PARAMS;
  }
  text->assign(static_cast<size_t>(opened.st_size), '\0');
  size_t done = 0;
  while (done < text->size()) {
    ssize_t n = read(fd.get(), &(*text)[done], text->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *why = n < 0 ? std::string("read: ") + std::strerror(errno) : "short read";
      return ErrorCode::FILE_READ_FAIL;
    }
    done += static_cast<size_t>(n);
  }
  return ErrorCode::OK;
}

}  // namespace mooncake
