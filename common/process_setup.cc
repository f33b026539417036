#include "common/base/process_setup.h"

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>

#include <cstring>

#include "common/base/logging.h"

namespace mooncake {

void InitLogging(const std::string& level_name) {
  LogLevel level;
  if (ParseLogLevel(level_name, &level)) SetLogLevel(level);
}

sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGXFSZ, SIG_IGN);
  return stop_signals;
}

bool CheckFlagDirectory(const std::string& flag, const std::string& value,
                        const std::string& dir, std::string* error) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return true;
    *error = flag + " " + value + ": " + dir + " is not a directory";
    return false;
  }
  const int e = errno;
  if (e == ENOENT) {
    *error = flag + " " + value + ": the directory " + dir + " does not exist: create it " +
             "(mkdir -p " + dir + "), or point " + flag + " elsewhere";
  } else {
    *error = flag + " " + value + ": cannot use the directory " + dir + ": " + std::strerror(e);
  }
  return false;
}

}  // namespace mooncake
