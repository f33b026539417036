#include "master/eviction.h"

#include <algorithm>

namespace mooncake {

void EvictionPlanner::Clear() {
  plain_.clear();
  soft_pinned_.clear();
  sampled_ = 0;
}

void EvictionPlanner::Add(EvictionTier tier, int64_t deadline, uint64_t bytes) {
  ++sampled_;
  if (tier == EvictionTier::kPlain) plain_.push_back({deadline, bytes});
  if (tier == EvictionTier::kSoftPinned) soft_pinned_.push_back({deadline, bytes});
}

EvictionThresholds EvictionPlanner::Plan(uint64_t want, int64_t total_objects,
                                         bool soft_pinned_too) {
  EvictionThresholds t;
  if (want == 0) return t;
  if (sampled_ == 0) {
    // Nothing was looked at, so nothing can be judged: the walk takes what it finds.
    t.plain = EvictionThresholds::kAll;
    if (soft_pinned_too) t.soft_pinned = EvictionThresholds::kAll;
    return t;
  }
  double fraction = total_objects > 0 ? std::min(1.0, static_cast<double>(sampled_) /
                                                          static_cast<double>(total_objects))
                                      : 1.0;
  double share = static_cast<double>(want) * fraction;
  if (fraction < 1.0) share *= 1.0 + kPartialMargin;
  double plain_bytes = 0;
  for (const Candidate& c : plain_) plain_bytes += static_cast<double>(c.bytes);
  if (plain_bytes >= share) {
    t.plain = WeightedQuantile(&plain_, share);
    return t;
  }
  t.plain = EvictionThresholds::kAll;
  if (soft_pinned_too) t.soft_pinned = WeightedQuantile(&soft_pinned_, share - plain_bytes);
  return t;
}

int64_t EvictionPlanner::WeightedQuantile(std::vector<Candidate>* v, double want) {
  if (want <= 0) return EvictionThresholds::kNone;
  double total = 0;
  for (const Candidate& c : *v) total += static_cast<double>(c.bytes);
  if (total < want) return EvictionThresholds::kAll;
  // Invariant: the answer lies in [lo, hi) once that range is in sorted order, and need is
  // what it must add to the bytes below lo. Each step splits the range at its middle
  // element (nth_element puts the smaller half left of it) and keeps the half holding the
  // answer, so the work halves each time: linear in all.
  auto by_deadline = [](const Candidate& a, const Candidate& b) { return a.deadline < b.deadline; };
  size_t lo = 0, hi = v->size();
  double need = want;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    std::nth_element(v->begin() + static_cast<std::ptrdiff_t>(lo),
                     v->begin() + static_cast<std::ptrdiff_t>(mid),
                     v->begin() + static_cast<std::ptrdiff_t>(hi), by_deadline);
    double left = 0;
    for (size_t i = lo; i < mid; ++i) left += static_cast<double>((*v)[i].bytes);
    if (left >= need) {
      hi = mid;
    } else {
      need -= left;
      lo = mid;
    }
  }
  return (*v)[lo].deadline;
}

void EvictionCounters::Round(bool by_put, uint64_t asked, uint64_t freed, int64_t elapsed_us,
                             int64_t used_after) {
  rounds_.fetch_add(1);
  if (by_put) put_rounds_.fetch_add(1);
  if (freed < asked) short_rounds_.fetch_add(1);
  evicted_bytes_.fetch_add(static_cast<int64_t>(freed));
  total_us_.fetch_add(elapsed_us);
  // One round at a time writes: no lost update between the load and the store.
  if (elapsed_us > max_us_.load()) max_us_.store(elapsed_us);
  last_us_.store(elapsed_us);
  last_used_bytes_.store(used_after);
}

rpc::EvictionStats EvictionCounters::Get() const {
  rpc::EvictionStats s;
  s.rounds = rounds_.load();
  s.put_rounds = put_rounds_.load();
  s.short_rounds = short_rounds_.load();
  s.evicted_bytes = evicted_bytes_.load();
  s.total_us = total_us_.load();
  s.max_us = max_us_.load();
  s.last_us = last_us_.load();
  s.last_used_bytes = last_used_bytes_.load();
  s.no_space_puts = no_space_puts_.load(std::memory_order_relaxed);
  s.exist_uses = exist_uses_.load(std::memory_order_relaxed);
  s.exist_leases = exist_leases_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace mooncake
