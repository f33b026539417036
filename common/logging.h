// Minimal leveled logging to stderr, one line per event:
//   "2026-11-29 10:27:54.123 I master [tid] snapshotter.cc:185 message"
// the level letter (D I W E), the component (the process: master, daemon, libmc, or the
// program's name when none was set), the thread, and the source file, which names the
// subsystem. stderr because every binary runs under systemd, where journald collects it.
// The level is set by --log_level and at run time by POST /log_level (common/admin/admin_http.h).
#ifndef MOONCAKE_COMMON_LOGGING_H_
#define MOONCAKE_COMMON_LOGGING_H_

#include <string>

namespace mooncake {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Names the component in every line; call first thing in main() (a static string).
void SetLogComponent(const char* component);

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Accepts debug|info|warning|error; false for anything else.
bool ParseLogLevel(const std::string& text, LogLevel* level);

// printf-style; use the MC_LOG_* macros rather than calling this directly.
void LogMessage(LogLevel level, const char* file, int line, const char* format, ...)
    __attribute__((format(printf, 4, 5)));

}  // namespace mooncake

#define MC_LOG_AT_(level, ...)                                                   \
  do {                                                                           \
    if (static_cast<int>(level) >= static_cast<int>(::mooncake::GetLogLevel()))  \
      ::mooncake::LogMessage(level, __FILE__, __LINE__, __VA_ARGS__);            \
  } while (0)

#define MC_LOG_DEBUG(...) MC_LOG_AT_(::mooncake::LogLevel::kDebug, __VA_ARGS__)
#define MC_LOG_INFO(...) MC_LOG_AT_(::mooncake::LogLevel::kInfo, __VA_ARGS__)
#define MC_LOG_WARN(...) MC_LOG_AT_(::mooncake::LogLevel::kWarning, __VA_ARGS__)
#define MC_LOG_ERROR(...) MC_LOG_AT_(::mooncake::LogLevel::kError, __VA_ARGS__)

#endif  // MOONCAKE_COMMON_LOGGING_H_
