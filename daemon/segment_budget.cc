#include "daemon/segment_budget.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/units.h"

namespace mooncake {

uint64_t SegmentBudget::MeminfoBytes(const std::string& meminfo, const std::string& field) {
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

std::string SegmentBudget::ReadMeminfo() {
  std::ifstream in("/proc/meminfo");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

SegmentBudget::Limits SegmentBudget::Resolve(uint64_t total_flag, uint64_t per_client_flag,
                                             const std::string& meminfo,
                                             uint64_t physical_bytes) {
  Limits limits;
  uint64_t available = MeminfoBytes(meminfo, "MemAvailable");
  if (available == 0) available = MeminfoBytes(meminfo, "MemTotal");
  if (available == 0) available = physical_bytes;
  limits.total = total_flag > 0 ? total_flag : available / 2;
  limits.per_client = per_client_flag > 0 ? per_client_flag : limits.total / 4;
  return limits;
}

SegmentBudget::SegmentBudget(Limits limits, std::function<std::string()> meminfo)
    : limits_(limits), meminfo_(std::move(meminfo)) {}

bool SegmentBudget::Reserve(uint64_t size, std::string* why) {
  std::string meminfo = meminfo_();
  uint64_t available = MeminfoBytes(meminfo, "MemAvailable") +
                       MeminfoBytes(meminfo, "HugePages_Free") *
                           MeminfoBytes(meminfo, "Hugepagesize");
  if (!meminfo.empty() && size > available / 2) {
    *why = "more than half of the memory available now (" + FormatSize(available) + ")";
    return false;
  }
  uint64_t used = used_.load();
  do {
    if (size > limits_.total || used > limits_.total - size) {
      *why = "over --client_segment_budget (" + FormatSize(used) + " of " +
             FormatSize(limits_.total) + " mounted for clients)";
      return false;
    }
  } while (!used_.compare_exchange_weak(used, used + size));
  return true;
}

std::shared_ptr<SegmentMemory> SegmentBudget::Map(uint64_t size, ErrorCode* code,
                                                  std::string* why) {
  if (!Reserve(size, why)) {
    *code = ErrorCode::RESOURCE_LIMIT_EXCEEDED;
    return nullptr;
  }
  std::unique_ptr<SegmentMemory> memory = SegmentMemory::Create(size, why);
  if (memory == nullptr) {
    Release(size);
    *code = ErrorCode::NO_AVAILABLE_HANDLE;
    return nullptr;
  }
  // The budget outlives every segment it paid for: each one holds it.
  std::shared_ptr<SegmentBudget> self = shared_from_this();
  return std::shared_ptr<SegmentMemory>(memory.release(), [self, size](SegmentMemory* m) {
    delete m;
    self->Release(size);
  });
}

}  // namespace mooncake
