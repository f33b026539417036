// Start-up shared by mooncaked and mooncake-master: the log level, the stop signals that
// one thread takes with sigwait while every other thread runs unbothered, and the
// directories their flags name.
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

// Directories a flag names (--ssd_path, --snapshot_dir), or that hold what it names (the
// directory of --socket), must exist: nothing creates a missing one. A mistyped path then
// stops the start with the flag's name, instead of leaving a tree of directories where
// nobody looks, on a file system nobody chose. A process creates only what lives inside
// them (the socket file, its own subdirectories). The operator makes them: mkdir, or
// systemd's StateDirectory= / RuntimeDirectory= (deploy/*.service).
//
// true when dir is a directory; else false with *error naming the flag, its value, the
// directory and the fix: "--socket /a/b.sock: the directory /a does not exist: create it
// (mkdir -p /a), or point --socket elsewhere".
bool CheckFlagDirectory(const std::string& flag, const std::string& value,
                        const std::string& dir, std::string* error);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_PROCESS_SETUP_H_
