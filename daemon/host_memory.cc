#include "daemon/memory/host_memory.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/base/units.h"

namespace mooncake {

uint64_t HostMemory::MeminfoBytes(const std::string& meminfo, const std::string& field) {
  // Lines read "MemAvailable:   23573000 kB" (HugePages_Free is a bare count).
  std::istringstream in(meminfo);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, field.size() + 1, field + ":") != 0) continue;
    char* end = nullptr;
    unsigned long long value = std::strtoull(line.c_str() + field.size() + 1, &end, 10);
    while (*end == ' ') ++end;
    return std::string(end) == "kB" ? value * 1024 : value;
  }
  return 0;
}

std::string HostMemory::ReadMeminfo() {
  std::ifstream in("/proc/meminfo");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

HostMemory HostMemory::Parse(const std::string& meminfo) {
  HostMemory m;
  m.total_ = MeminfoBytes(meminfo, "MemTotal");
  m.available_ = MeminfoBytes(meminfo, "MemAvailable");
  if (m.available_ == 0) m.available_ = MeminfoBytes(meminfo, "MemFree");  // before 3.14
  const uint64_t free_pages = MeminfoBytes(meminfo, "HugePages_Free");
  const uint64_t reserved_pages = MeminfoBytes(meminfo, "HugePages_Rsvd");
  m.huge_page_size_ = MeminfoBytes(meminfo, "Hugepagesize");
  m.free_huge_ = free_pages > reserved_pages ? (free_pages - reserved_pages) * m.huge_page_size_ : 0;
  return m;
}

uint64_t HostMemory::reserve() const {
  return std::max(total_ / kReserveDivisor, kReserveFloor);
}

uint64_t HostMemory::ordinary() const {
  return available_ > reserve() ? available_ - reserve() : 0;
}

uint64_t HostMemory::backable(uint64_t pending) const {
  const uint64_t most = std::max(ordinary(), free_huge_);
  return most > pending ? most - pending : 0;
}

bool HostMemory::Admits(uint64_t size, uint64_t pending, bool* huge_pages_only,
                        std::string* why) const {
  auto fits = [pending](uint64_t need, uint64_t room) {
    return room >= pending && need <= room - pending;
  };
  // On huge pages a segment takes whole pages.
  uint64_t on_huge = size;
  if (huge_page_size_ > 0) {
    on_huge = (size / huge_page_size_ + (size % huge_page_size_ != 0)) * huge_page_size_;
  }
  *huge_pages_only = false;
  if (known() && fits(size, ordinary())) return true;
  if (known() && on_huge >= size && fits(on_huge, free_huge_)) {
    *huge_pages_only = true;
    return true;
  }
  *why = "segment " + FormatSize(size) + " over the " + FormatSize(backable(pending)) +
         " this host can back now (" + Describe();
  if (pending > 0) *why += "; " + FormatSize(pending) + " promised to mounts being mapped";
  *why += ")";
  return false;
}

std::string HostMemory::Describe() const {
  if (!known()) return "/proc/meminfo unreadable: this host's memory is unknown";
  return "MemAvailable " + FormatSize(available_) + " - reserve " + FormatSize(reserve()) +
         "; free huge pages " + FormatSize(free_huge_);
}

}  // namespace mooncake
