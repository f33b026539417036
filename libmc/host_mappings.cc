#include "libmc/host_mappings.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>

#include "common/base/logging.h"

namespace mooncake {
namespace client {

namespace {

using Access = HostMappings::Access;

// The mapping of /proc/self/maps ("start-end perms offset dev inode path" lines) that holds
// addr: true with its range and access, false when none does. *no_file when the file
// cannot be read.
bool ReadMapping(uintptr_t addr, uintptr_t* start, uintptr_t* end, Access* access,
                 bool* no_file) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *no_file = true;
    return false;
  }
  std::string text;
  char buf[64 << 10];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const char* line = text.c_str();
  while (*line != '\0') {
    char* rest = nullptr;
    unsigned long long first = std::strtoull(line, &rest, 16);
    if (*rest != '-') break;
    unsigned long long last = std::strtoull(rest + 1, &rest, 16);
    if (*rest == ' ' && addr >= first && addr < last) {
      const char* perms = rest + 1;
      *start = first;
      *end = last;
      *access = perms[0] != 'r' ? Access::kNone
                                : perms[1] == 'w' ? Access::kReadWrite : Access::kReadOnly;
      return true;
    }
    const char* newline = std::strchr(line, '\n');
    if (newline == nullptr) break;
    line = newline + 1;
  }
  return false;
}

}  // namespace

HostMappings& HostMappings::Get() {
  static HostMappings* const mappings = new HostMappings();  // used until the process ends
  return *mappings;
}

const HostMappings::Mapping* HostMappings::Find(uintptr_t addr) const {
  auto it = mappings_.upper_bound(addr);
  if (it == mappings_.begin()) return nullptr;
  --it;
  return addr < it->second.end ? &it->second : nullptr;
}

HostMappings::Access HostMappings::At(uintptr_t addr) {
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (const Mapping* m = Find(addr)) return m->access;
  }
  uintptr_t start = 0, end = 0;
  Access access = Access::kNone;
  bool no_file = false;
  if (!ReadMapping(addr, &start, &end, &access, &no_file)) {
    if (!no_file) return Access::kNone;
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
      MC_LOG_WARN("/proc/self/maps cannot be read (%s): buffers are taken for host memory "
                  "unchecked", std::strerror(errno));
    }
    return Access::kReadWrite;
  }
  if (access == Access::kNone) return access;
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (mappings_.size() >= kMaxMappings) mappings_.clear();
  // Mappings cached before that this one overlaps are gone: the address space changed.
  auto it = mappings_.lower_bound(start);
  if (it != mappings_.begin() && std::prev(it)->second.end > start) --it;
  while (it != mappings_.end() && it->first < end) it = mappings_.erase(it);
  mappings_.emplace(start, Mapping{end, access});
  return access;
}

}  // namespace client
}  // namespace mooncake
