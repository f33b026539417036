#include "master/eviction/eviction.h"

#include <algorithm>

namespace mooncake {

void EvictionPlanner::Clear() {
  for (std::vector<Candidate>& tier : tiers_) tier.clear();
  sampled_ = 0;
}

void EvictionPlanner::Add(EvictionTier tier, int64_t deadline, uint64_t bytes) {
  ++sampled_;
  if (tier != EvictionTier::kNever) tiers_[static_cast<size_t>(tier) - 1].push_back({deadline, bytes});
}

EvictionThresholds EvictionPlanner::Plan(uint64_t want, int64_t total_objects,
                                         EvictionTierSet set) {
  EvictionThresholds t;
  if (want == 0) return t;
  // Nothing was looked at, so nothing can be judged: the walk takes what it finds.
  if (sampled_ == 0) return EvictionThresholds::All(set);
  double fraction = total_objects > 0 ? std::min(1.0, static_cast<double>(sampled_) /
                                                          static_cast<double>(total_objects))
                                      : 1.0;
  double share = static_cast<double>(want) * fraction;
  if (fraction < 1.0) share *= 1.0 + kPartialMargin;
  for (size_t i = 0; i < kEvictionTiers && share > 0; ++i) {
    if (!(set & (1u << i))) continue;
    double bytes = 0;
    for (const Candidate& c : tiers_[i]) bytes += static_cast<double>(c.bytes);
    t.at[i] = WeightedQuantile(&tiers_[i], share);  // kAll when bytes < share
    share -= bytes;
  }
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
