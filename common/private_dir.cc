#include "common/base/private_dir.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <set>

#include "common/base/logging.h"
#include "common/base/path_trust.h"

namespace mooncake {

void KeepPrivate(const std::string& path, const char* what) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || (st.st_mode & 077) == 0) return;
  const int saved = errno;
  const mode_t tight = st.st_mode & 07700;
  if (st.st_uid == geteuid() && chmod(path.c_str(), tight) == 0) {
    MC_LOG_INFO("%s %s: mode %s -> %s: only this process's user may enter it "
                "(docs/security.md, \"Files\")",
                what, path.c_str(), ModeText(st.st_mode).c_str(), ModeText(tight).c_str());
  } else {
    static std::mutex mu;
    static std::set<std::string>* warned = new std::set<std::string>();
    std::lock_guard<std::mutex> lock(mu);
    if (warned->insert(path).second) {
      MC_LOG_WARN("%s %s: mode %s, owned by uid %u: others may list it, and read any file an "
                  "earlier version left readable; chmod go= %s (as its owner)",
                  what, path.c_str(), ModeText(st.st_mode).c_str(),
                  static_cast<unsigned>(st.st_uid), path.c_str());
    }
  }
  errno = saved;
}

bool MakePrivateDirectory(const std::string& path, const char* what) {
  if (mkdir(path.c_str(), kPrivateDirMode) == 0) return true;
  if (errno != EEXIST) return false;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return false;
  }
  KeepPrivate(path, what);
  return true;
}

bool MakePrivateDirectories(const std::string& path, const char* what) {
  for (size_t i = 1; i < path.size(); ++i) {
    if (path[i] != '/' || path[i - 1] == '/') continue;
    if (mkdir(path.substr(0, i).c_str(), kPrivateDirMode) != 0 && errno != EEXIST) {
      return false;
    }
  }
  return MakePrivateDirectory(path, what);
}

}  // namespace mooncake
