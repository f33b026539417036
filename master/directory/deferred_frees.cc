#include "master/directory/deferred_frees.h"

#include <algorithm>

namespace mooncake {

void DeferredFrees::Add(const ReplicaList& replicas, int64_t due_ms, uint64_t due_seq) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (!replicas[i].memory()) continue;
    ranges_.push_back({due_ms, due_seq, replicas[i].segment, replicas[i].alloc_node});
  }
}

void DeferredFrees::FreeDue(int64_t now, uint64_t synced) {
  std::vector<Range> due;
  {
    absl::MutexLock lock(&mu_);
    auto split = std::partition(ranges_.begin(), ranges_.end(), [&](const Range& r) {
      return r.due_ms > now || r.due_seq > synced;
    });
    due.assign(split, ranges_.end());
    ranges_.erase(split, ranges_.end());
  }
  // Freed with no lock of ours held: the registry's lock is not below this leaf.
  for (const Range& r : due) segments_.Free(r.slot, r.node);
}

void DeferredFrees::Clear() {
  absl::MutexLock lock(&mu_);
  ranges_.clear();
}

}  // namespace mooncake
