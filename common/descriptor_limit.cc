#include "common/base/descriptor_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

namespace mooncake {

namespace {

std::string Show(rlim_t v) { return v == RLIM_INFINITY ? "unlimited" : std::to_string(v); }

}  // namespace

uint64_t RaiseDescriptorLimit(std::string* message) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    *message = std::string("descriptors: getrlimit failed: ") + std::strerror(errno);
    return 1024;  // the usual default: assume little
  }
  rlim_t was = limit.rlim_cur;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      *message = "descriptors: limit " + Show(was) + " (raising it to the hard limit " +
                 Show(limit.rlim_max) + " failed: " + std::strerror(errno) + ")";
      return was;
    }
    *message = "descriptors: limit " + Show(limit.rlim_cur) + " (soft limit raised from " +
               Show(was) + ")";
    return limit.rlim_cur;
  }
  *message = "descriptors: limit " + Show(was) + " (the hard limit)";
  return was;
}

}  // namespace mooncake
