// Start-up shared by mooncaked and mooncake-master: the log level, and the stop signals
// that one thread takes with sigwait while every other thread runs unbothered.
#ifndef MOONCAKE_COMMON_PROCESS_SETUP_H_
#define MOONCAKE_COMMON_PROCESS_SETUP_H_

#include <signal.h>

#include <string>

namespace mooncake {

// Sets the log level from its flag value (debug|info|warning|error, validated with the
// other flags); a name ParseLogLevel does not know leaves the level as it is.
void InitLogging(const std::string& level_name);

// Blocks SIGINT and SIGTERM in the calling thread (and so in every thread it starts after)
// and ignores SIGPIPE and SIGXFSZ (a write past a file-size limit then fails with EFBIG,
// which the writer reports and survives, instead of killing the process). Call it before
// starting threads; returns the blocked set for sigwait.
sigset_t BlockStopSignals();

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_PROCESS_SETUP_H_
