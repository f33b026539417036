#include "common/process_setup.h"

#include <pthread.h>

#include "common/logging.h"

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

}  // namespace mooncake
