// What each tenant holds in the master (docs/security.md, "Tenants"): its objects, the
// memory they take, its quota (--tenant_quota) and the puts refused for it; GetStats shows
// them (rpc::TenantStats).
//
// Bytes are a value's size times its memory replicas, summed: an object's replicas, and an
// upsert's new value while it is written (the old one counts until UpsertEnd swaps them).
// A put reserves its bytes before space is found for it (TryCharge, at PutStart and
// UpsertStart: size x replica_num, so that concurrent puts cannot overshoot the quota
// together), then gives back what it did not get; everything that releases a value's
// replicas releases its bytes (revoke, remove, eviction, a put abandoned or revoked with its
// writer, a dropped segment). A move of a draining segment is the cluster's, not the
// tenant's: its target is not counted, and its commit swaps one replica for another. After
// a restore the figures are recounted from the restored objects (ClearUsage + Add), so they
// survive a restart as the objects do; refusals count from the master's start.
//
// Cost: the default tenant's figures are a few atomics; a named tenant's are found in a
// small map under a shared lock. A tenant without a quota keeps an entry only while it
// holds something (Prune), so claiming tenants costs nothing lasting. Eviction asks whether
// an object's tenant is within its quota (Sheltered) by the slot its metadata keeps: no
// lock and no lookup, one comparison for an object of a tenant without a quota.
//
// Thread-safety: every method may be called from any thread; the lock is a leaf (taken
// under shard locks, never the other way).
#ifndef MOONCAKE_MASTER_TENANT_USAGE_H_
#define MOONCAKE_MASTER_TENANT_USAGE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "master_types.h"

namespace mooncake {

class TenantUsage {
 public:
  // tenant id -> quota bytes (> 0).
  using Quotas = std::map<std::string, uint64_t>;
  // The most tenants --tenant_quota may name (a slot is 16 bits).
  static constexpr size_t kMaxQuotas = 65535;

  // "alice=1GB,bob=512MB" (sizes as every flag reads them; blanks around items ignored; ""
  // sets none). false with *error for a malformed item, an invalid tenant id, a size of 0
  // or one that does not parse, a tenant named twice, or more than kMaxQuotas tenants.
  static bool ParseQuotas(const std::string& text, Quotas* out, std::string* error);

  explicit TenantUsage(const Quotas& quotas);
  TenantUsage(const TenantUsage&) = delete;
  TenantUsage& operator=(const TenantUsage&) = delete;

  // Charges bytes to the tenant of the stored key, unless that would take it over its
  // quota: then nothing is charged, the refusal is counted, and false.
  bool TryCharge(std::string_view key, uint64_t bytes);
  // Changes the figures of the key's tenant unconditionally (negative: released).
  void Add(std::string_view key, int64_t objects, int64_t bytes);
  // Forgets every tenant's objects and bytes (quotas and refusals stay), for a restore
  // that then recounts them.
  void ClearUsage();
  // Drops the entries of tenants without a quota that hold nothing (the upkeep).
  void Prune();

  // Every tenant with objects, bytes, a quota or refusals, by id; the default tenant
  // while it holds objects or bytes.
  std::vector<rpc::TenantStats> Stats() const;

  // Whether any tenant has a quota.
  bool has_quotas() const { return !quota_entries_.empty(); }
  // The stored key's tenant among those with a quota, 1..kMaxQuotas; 0 for the default
  // tenant and any tenant without one. Fixed for the process (the quotas are), so it is
  // worked out once per object, where its metadata is made (ObjectMetadata::quota_slot).
  uint16_t QuotaSlot(std::string_view key) const;
  // Whether the tenant of quota slot (QuotaSlot) holds at most its quota now: its objects
  // are sheltered from eviction while others can go (master/eviction/eviction.h). Never slot 0.
  // Lock-free and a load or two: eviction asks it of every object it looks at, under a
  // shard's lock.
  bool Sheltered(uint16_t slot) const {
    if (slot == 0) return false;
    const Entry& e = *quota_entries_[slot - 1];
    return e.bytes.load(std::memory_order_relaxed) <= static_cast<int64_t>(e.quota);
  }
  // At most how many bytes the tenants that are not sheltered now hold (the default
  // tenant's, those without a quota, those over it): a round need not look for more of
  // them than this (reservations and leased objects included, so it may find less).
  uint64_t ExposedBytes() const;

 private:
  struct Entry {
    uint64_t quota = 0;  // 0: none
    std::atomic<int64_t> objects{0};
    std::atomic<int64_t> bytes{0};
    std::atomic<int64_t> refused{0};
  };

  static bool Charge(Entry& entry, uint64_t bytes);
  static rpc::TenantStats Describe(const std::string& tenant, const Entry& entry);
  // Runs fn on the entry of tenant (created if needed) under the shared lock, so that
  // Prune cannot take it away meanwhile.
  template <class Fn>
  auto WithEntry(std::string_view tenant, Fn fn);

  Entry default_;  // the default tenant: never in the map, no quota
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Entry>, std::less<>> named_ ABSL_GUARDED_BY(mu_);
  // The entries of the tenants with a quota, by slot - 1, and their slots by id: made with
  // named_ and never changed (those entries are never pruned, so they live as long as
  // named_ and need no lock to find).
  std::vector<const Entry*> quota_entries_;
  std::map<std::string, uint16_t, std::less<>> quota_slots_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_TENANT_USAGE_H_
