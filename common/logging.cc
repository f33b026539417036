#include "common/base/logging.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <errno.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace mooncake {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<const char*> g_component{nullptr};

const char* Basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}
}  // namespace

void SetLogComponent(const char* component) { g_component.store(component); }

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

bool ParseLogLevel(const std::string& text, LogLevel* level) {
  static const struct {
    const char* name;
    LogLevel level;
  } kNames[] = {{"debug", LogLevel::kDebug},
                {"info", LogLevel::kInfo},
                {"warning", LogLevel::kWarning},
                {"error", LogLevel::kError}};
  for (const auto& n : kNames) {
    if (text == n.name) {
      *level = n.level;
      return true;
    }
  }
  return false;
}

void LogMessage(LogLevel level, const char* file, int line, const char* format, ...) {
  static const char kLetters[] = {'D', 'I', 'W', 'E'};
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  localtime_r(&ts.tv_sec, &tm);

  // Format into one buffer and write it with a single call so that lines from several
  // threads never interleave.
  const char* component = g_component.load(std::memory_order_relaxed);
  if (component == nullptr) component = program_invocation_short_name;
  char buf[4096];
  int n = std::snprintf(buf, sizeof(buf),
                        "%04d-%02d-%02d %02d:%02d:%02d.%03ld %c %s [%ld] %s:%d ",
                        tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                        tm.tm_sec, ts.tv_nsec / 1000000, kLetters[static_cast<int>(level)],
                        component, static_cast<long>(syscall(SYS_gettid)), Basename(file),
                        line);
  va_list args;
  va_start(args, format);
  if (n >= 0 && n < static_cast<int>(sizeof(buf))) {
    int m = std::vsnprintf(buf + n, sizeof(buf) - n, format, args);
    n = (m < 0) ? n : std::min<int>(n + m, sizeof(buf) - 2);
  }
  va_end(args);
  buf[n++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, buf, n);
  (void)ignored;
}

}  // namespace mooncake
