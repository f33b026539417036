// Eviction's choice of victims, and its figures (the rule: docs/master.md, "Eviction").
//
// A round wants some bytes back. The master keeps no LRU list (16 bytes more on each of
// millions of objects), so objects are ordered by their lease deadline
// (ObjectMetadata::time_ms: the end of the last read's lease, the first existence hit
// since, or the publication), and the deadline below which enough bytes lie is found from
// a sample, not a sort:
//   1. every shard adds the objects in a window of kSampleSlots slots of its table at a
//      random place (all of a small table: a small pool is sampled whole, and its order is
//      then exact LRU);
//   2. Plan picks, per tier (EvictionTier: each only when the ones before it cannot cover
//      the round), the deadline at which the sampled candidates' bytes reach the round's
//      share of the sample: a weighted selection by repeated nth_element, linear in the
//      sample. A partial sample is aimed kPartialMargin higher, so that one walk usually
//      frees the whole round;
//   3. MasterService walks every shard and evicts the candidates at or below the thresholds
//      until the round's bytes are freed (master_service_evict.cc). It plans and walks the
//      exposed tiers first, and the sheltered ones (tenants within their quota) only once
//      a walk taking every exposed candidate has fallen short: a sample, being partial,
//      cannot prove that no exposed candidate is left.
// What is evicted is thus always among the oldest candidates of its tier, but not in
// strict order: the walk takes those under the threshold in table order.
//
// Not thread-safe: one round at a time uses it (MasterService's evict_mu_).
#ifndef MOONCAKE_MASTER_EVICTION_H_
#define MOONCAKE_MASTER_EVICTION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "master_types.h"

namespace mooncake {

// Who may be evicted, in the order they go. Never: unfinished, hard-pinned, read-leased
// or exist-leased objects (--exist_lease_ttl), nor soft-pinned ones without
// --allow_evict_soft_pinned_objects. Quotas are shares of memory (docs/security.md,
// "Tenants"): objects of a tenant at or under its quota (--tenant_quota) are sheltered,
// taken only once nothing of the tenants over their quota or without one (the default
// tenant, tenants not listed) is left to take. Within each, plain objects before
// soft-pinned ones.
enum class EvictionTier : uint8_t {
  kNever = 0,
  kPlain = 1,
  kSoftPinned = 2,
  kSheltered = 3,
  kShelteredSoftPinned = 4,
};
constexpr size_t kEvictionTiers = 4;  // kNever aside

// A set of tiers, one bit each (kPlain: bit 0).
using EvictionTierSet = uint8_t;
constexpr EvictionTierSet TierBit(EvictionTier tier) {
  return tier == EvictionTier::kNever
             ? 0
             : static_cast<EvictionTierSet>(1u << (static_cast<unsigned>(tier) - 1));
}
// What a round takes first: the plain tier, and the soft-pinned one when allowed.
constexpr EvictionTierSet ExposedTiers(bool soft_pinned_too) {
  return TierBit(EvictionTier::kPlain) | (soft_pinned_too ? TierBit(EvictionTier::kSoftPinned) : 0);
}
// What it takes only when those cannot cover it: the sheltered tiers.
constexpr EvictionTierSet ShelteredTiers(bool soft_pinned_too) {
  return TierBit(EvictionTier::kSheltered) |
         (soft_pinned_too ? TierBit(EvictionTier::kShelteredSoftPinned) : 0);
}

// Deadlines at or below which a tier's candidates are evicted.
struct EvictionThresholds {
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::min();
  static constexpr int64_t kAll = std::numeric_limits<int64_t>::max();
  int64_t at[kEvictionTiers] = {kNone, kNone, kNone, kNone};  // by tier, kPlain first

  // Every candidate of the tiers in set.
  static EvictionThresholds All(EvictionTierSet set) {
    EvictionThresholds t;
    for (size_t i = 0; i < kEvictionTiers; ++i) {
      if (set & (1u << i)) t.at[i] = kAll;
    }
    return t;
  }
  int64_t of(EvictionTier tier) const { return at[static_cast<size_t>(tier) - 1]; }
  bool Takes(EvictionTier tier, int64_t deadline) const {
    return tier != EvictionTier::kNever && deadline <= of(tier);
  }
  // Some candidates of tier (a group's other members go with one taken, whatever their
  // deadline, when the round reaches their tier).
  bool Reaches(EvictionTier tier) const {
    return tier != EvictionTier::kNever && of(tier) != kNone;
  }
  bool TakesAll(EvictionTierSet set) const {
    for (size_t i = 0; i < kEvictionTiers; ++i) {
      if ((set & (1u << i)) && at[i] != kAll) return false;
    }
    return true;
  }
};

class EvictionPlanner {
 public:
  // Slots of each shard's table a round samples (a table this small is sampled whole).
  static constexpr size_t kSampleSlots = 64;
  // How much higher a partial sample aims: its quantile is an estimate.
  static constexpr double kPartialMargin = 0.25;

  // Starts a round's sample.
  void Clear();
  // An object the sample looked at, a candidate (tier != kNever) or not.
  void Add(EvictionTier tier, int64_t deadline, uint64_t bytes);
  size_t sampled() const { return sampled_; }

  // Thresholds for freeing want bytes from a pool of total_objects objects, of which the
  // sample looked at sampled(), taking from the tiers in set only: a tier's share of the
  // sample is want scaled down by the sampled fraction (times 1 + kPartialMargin when that
  // is below 1). Tiers in their order: each one gets what the ones before it cannot
  // cover (kAll for those; kNone for the ones after the first that covers it, and for
  // those not in set). Reorders the sample.
  EvictionThresholds Plan(uint64_t want, int64_t total_objects, EvictionTierSet set);

 private:
  struct Candidate {
    int64_t deadline;
    uint64_t bytes;
  };
  // The smallest deadline d such that the candidates at or below d hold at least want
  // bytes (kAll when all of them hold less). Expected linear time; reorders v.
  static int64_t WeightedQuantile(std::vector<Candidate>* v, double want);

  std::vector<Candidate> tiers_[kEvictionTiers];  // by tier, kPlain first
  size_t sampled_ = 0;
};

// What operators see of eviction (rpc::EvictionStats in GetStats). Written by one round at
// a time (and counted by puts), read by GetStats at any time.
class EvictionCounters {
 public:
  void Round(bool by_put, uint64_t asked, uint64_t freed, int64_t elapsed_us,
             int64_t used_after);
  void NoSpace() { no_space_puts_.fetch_add(1, std::memory_order_relaxed); }
  void ExistUse() { exist_uses_.fetch_add(1, std::memory_order_relaxed); }
  void ExistLease() { exist_leases_.fetch_add(1, std::memory_order_relaxed); }
  int64_t rounds() const { return rounds_.load(); }
  rpc::EvictionStats Get() const;

 private:
  std::atomic<int64_t> rounds_{0}, put_rounds_{0}, short_rounds_{0}, evicted_bytes_{0},
      total_us_{0}, max_us_{0}, last_us_{0}, last_used_bytes_{0}, no_space_puts_{0},
      exist_uses_{0}, exist_leases_{0};
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_EVICTION_H_
