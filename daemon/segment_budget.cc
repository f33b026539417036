#include "daemon/memory/segment_budget.h"

#include <algorithm>
#include <cstdint>

#include "common/base/units.h"

namespace mooncake {

namespace {

// What a client can do about a refusal, after the numbers.
constexpr char kHostFix[] = ": lend a smaller segment, or free memory on this host";

std::string CapRefusal(const char* flag, uint64_t size, uint64_t mounted, uint64_t cap,
                       const char* whose) {
  return "segment " + FormatSize(size) + " over " + flag + " (" + FormatSize(mounted) +
         " of its " + FormatSize(cap) + " already mounted for " + whose + "): lend a "
         "smaller segment, or raise " + flag;
}

}  // namespace

std::unique_ptr<SegmentMemory> SegmentBudget::CreateSegment(
    uint64_t size, bool huge_pages_only, std::function<void(uint64_t bytes)> populated,
    std::string* why) {
  return SegmentMemory::Create(size, why, huge_pages_only, std::move(populated));
}

SegmentBudget::SegmentBudget(Limits limits, std::function<std::string()> meminfo, MapFn map)
    : limits_(limits), meminfo_(std::move(meminfo)), map_(std::move(map)) {}

uint64_t SegmentBudget::PerClientCap() const {
  return limits_.per_client > 0 ? limits_.per_client : UINT64_MAX;
}

std::string SegmentBudget::PerClientRefusal(uint64_t size, uint64_t mounted) const {
  return CapRefusal("--client_segment_budget_per_client", size, mounted, limits_.per_client,
                    "this connection");
}

uint64_t SegmentBudget::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

bool SegmentBudget::Reserve(uint64_t size, bool* huge_pages_only, std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (limits_.total > 0 && (size > limits_.total || used_ > limits_.total - size)) {
    *why = CapRefusal("--client_segment_budget", size, used_, limits_.total, "clients");
    return false;
  }
  if (!HostMemory::Parse(meminfo_()).Admits(size, pending_, huge_pages_only, why)) {
    *why += kHostFix;
    return false;
  }
  used_ += size;
  pending_ += size;
  return true;
}

void SegmentBudget::Faulted(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_ -= bytes;
}

void SegmentBudget::Release(uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  used_ -= size;
}

std::shared_ptr<SegmentMemory> SegmentBudget::Map(uint64_t size, ErrorCode* code,
                                                  std::string* why) {
  bool huge_pages_only = false;
  if (!Reserve(size, &huge_pages_only, why)) {
    *code = ErrorCode::RESOURCE_LIMIT_EXCEEDED;
    return nullptr;
  }
  // Each chunk leaves the promise as it is faulted in: from then on /proc/meminfo shows it.
  uint64_t promised = size;
  std::unique_ptr<SegmentMemory> memory =
      map_(size, huge_pages_only, [this, &promised](uint64_t bytes) {
        bytes = std::min(bytes, promised);  // whole huge pages may exceed the size
        promised -= bytes;
        Faulted(bytes);
      }, why);
  Faulted(promised);  // what was never faulted in: the mapping failed, or populating did
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

std::string SegmentBudget::Describe() const {
  HostMemory host = HostMemory::Parse(meminfo_());
  std::string text = "whatever this host can back at each mount (now " +
                     FormatSize(host.backable(0)) + ": " + host.Describe() + ")";
  text += limits_.total > 0 ? ", at most " + FormatSize(limits_.total) +
                                  " in all (--client_segment_budget)"
                            : ", no cap in all";
  text += limits_.per_client > 0 ? ", at most " + FormatSize(limits_.per_client) +
                                       " per connection (--client_segment_budget_per_client)"
                                 : ", no cap per connection";
  return text;
}

}  // namespace mooncake
