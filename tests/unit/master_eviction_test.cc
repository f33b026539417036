// Eviction and existence checks in mooncake::MasterService, on the hand-moved clock: puts
// keep usage at or under the high watermark, near-LRU order by lease deadline, what is
// never evicted (leased, exist-leased, hard-pinned; soft-pinned last, and only when
// allowed), replicas freed together, an existence hit counted as one use per access, the
// figures GetStats reports, and the selection itself (master/eviction/eviction.h).

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/logging.h"
#include "master/eviction/eviction.h"
#include "master/directory/exist_leases.h"
#include "master/service/master_service.h"
#include "tests/harness/master_service_fixture.h"

namespace {

using mooncake::EvictionPlanner;
using mooncake::EvictionThresholds;
using mooncake::EvictionTier;
using mooncake::ExistLeaseTable;
using mooncake::ObjectMetadata;

constexpr int64_t kKiB = 1024;
// One daemon, a 64 KiB segment, 1 KiB objects: the high watermark (0.75) is 48 objects,
// and a round goes down to (0.75 - 0.25) x 64 = 32 of them.
constexpr int64_t kPool = 64 * kKiB;
constexpr int64_t kObject = kKiB;
constexpr int kAtWatermark = 48;
constexpr int kAfterRound = 32;
constexpr int64_t kExistLease = 20;

MasterOptions EvictOptions(double high = 0.75, double ratio = 0.25) {
  MasterOptions o = Options();
  o.eviction_high_watermark_ratio = high;
  o.eviction_ratio = ratio;
  return o;
}

std::string Key(int i) { return "k" + std::to_string(i); }

// Puts keys [from, to) of kObject bytes, one ms apart (a strict eviction order).
void PutRange(MasterService& s, int from, int to, const rpc::ReplicateConfig& c = Cfg()) {
  for (int i = from; i < to; ++i, ++g_now) Put(s, 1, Key(i), kObject, c);
}

rpc::EvictionStats Eviction(const MasterService& s) { return s.GetStats().eviction; }

// ---- the high watermark ------------------------------------------------------------------

void test_puts_keep_usage_at_or_under_high_watermark(void**) {
  MasterService s(EvictOptions());
  AddDaemon(s, 1, kPool);
  for (int i = 0; i < 400; ++i, ++g_now) {
    Put(s, 1, Key(i), kObject);
    assert_true(Used(s) <= kAtWatermark * kObject);  // after every put, not only every round
  }
  // Each round took the pool from the watermark down to 32 objects, the new one included.
  rpc::EvictionStats e = Eviction(s);
  assert_true(e.rounds >= (400 - kAtWatermark) / (kAtWatermark + 1 - kAfterRound));
  assert_int_equal(e.put_rounds, e.rounds);  // no Tick ran
  assert_int_equal(e.short_rounds, 0);
  assert_int_equal(e.no_space_puts, 0);
  assert_int_equal(e.evicted_bytes, s.GetStats().evicted_objects * kObject);
  assert_int_equal(e.last_used_bytes, kAfterRound * kObject - kObject);
  assert_true(e.max_us >= e.last_us && e.total_us >= e.max_us);
  // Oldest first: what is left is the newest ones.
  int64_t left = s.GetStats().objects;
  for (int i = 400 - static_cast<int>(left); i < 400; ++i) assert_int_equal(s.ExistKey(Key(i)), 1);
  assert_int_equal(s.ExistKey(Key(399 - static_cast<int>(left))), 0);
}

void test_evicts_oldest_deadline_first(void**) {
  MasterService s(EvictOptions());
  AddDaemon(s, 1, kPool);
  PutRange(s, 0, kAtWatermark);
  // k0 is the oldest put, but read: its deadline (T0 + 48 + lease) is later than every
  // other's publication.
  assert_int_equal(s.GetReplicaList(Key(0)).code, 0);
  g_now += kLease;  // every lease is over
  Put(s, 1, "new", kObject);
  // Down to 32 objects with the new one: the 17 oldest deadlines, k1..k17, went.
  assert_int_equal(s.GetStats().evicted_objects, kAtWatermark + 1 - kAfterRound);
  assert_int_equal(s.ExistKey(Key(0)), 1);
  for (int i = 1; i <= 17; ++i) assert_int_equal(s.ExistKey(Key(i)), 0);
  for (int i = 18; i < kAtWatermark; ++i) assert_int_equal(s.ExistKey(Key(i)), 1);
  assert_int_equal(s.ExistKey("new"), 1);
}

// When nothing can be evicted the put takes the room above the watermark; the upkeep
// brings usage back under it once the leases end.
void test_headroom_used_when_nothing_evictable_then_upkeep_evicts(void**) {
  MasterService s(EvictOptions());
  AddDaemon(s, 1, kPool);
  PutRange(s, 0, kAtWatermark);
  for (int i = 0; i < kAtWatermark; ++i) assert_int_equal(s.GetReplicaList(Key(i)).code, 0);
  PutRange(s, kAtWatermark, kAtWatermark + 8);  // past the watermark: all leased
  assert_int_equal(Used(s), (kAtWatermark + 8) * kObject);
  assert_int_equal(s.GetStats().evicted_objects, 0);
  assert_true(Eviction(s).short_rounds >= 1);
  g_now += kLease;
  s.Tick();
  assert_int_equal(Used(s), kAfterRound * kObject);
  assert_int_equal(Eviction(s).put_rounds + 1, Eviction(s).rounds);  // the upkeep's
  s.Tick();  // under the watermark: no round
  assert_int_equal(Eviction(s).put_rounds + 1, Eviction(s).rounds);
}

// ---- what is never evicted -----------------------------------------------------------------

void test_pool_full_of_leased_objects_answers_no_space(void**) {
  MasterService s(EvictOptions(1.0, 0.25));
  AddDaemon(s, 1, kPool);
  PutRange(s, 0, 64);
  // Read in key order, so that the lease deadlines keep it.
  for (int i = 0; i < 64; ++i, ++g_now) assert_int_equal(s.GetReplicaList(Key(i)).code, 0);
  int64_t used = Used(s);
  assert_int_equal(s.PutStart(1, "n", kObject, Cfg()).code, kNoSpace);
  assert_int_equal(Used(s), used);  // nothing reserved, nothing evicted
  assert_int_equal(s.GetStats().objects, 64);
  rpc::EvictionStats e = Eviction(s);
  assert_int_equal(e.no_space_puts, 1);
  assert_int_equal(e.short_rounds, e.rounds);
  // Within kShortRoundPauseMs of that round, a retry walks nothing.
  assert_int_equal(s.PutStart(1, "n", kObject, Cfg()).code, kNoSpace);
  assert_int_equal(Eviction(s).rounds, e.rounds);
  assert_int_equal(Eviction(s).no_space_puts, 2);
  // The leases end: the next retry evicts the oldest and succeeds.
  g_now += kLease;
  assert_int_equal(s.PutStart(1, "n", kObject, Cfg()).code, 0);
  assert_int_equal(s.ExistKey(Key(0)), 0);
  assert_int_equal(s.ExistKey(Key(63)), 1);
}

void test_hard_pins_survive_any_pressure(void**) {
  MasterService s(EvictOptions());
  AddDaemon(s, 1, kPool);
  PutRange(s, 0, 16, Pinned(/*hard=*/true));
  PutRange(s, 16, 1000);  // 15 times the pool
  for (int i = 0; i < 16; ++i) assert_int_equal(s.ExistKey(Key(i)), 1);
  assert_true(Used(s) <= kAtWatermark * kObject);
  // Only hard pins left: a put that finds no room answers -200 and evicts none of them.
  MasterService full(EvictOptions(1.0, 0.25));
  AddDaemon(full, 1, kPool);
  PutRange(full, 0, 64, Pinned(/*hard=*/true));
  assert_int_equal(full.PutStart(1, "n", kObject, Cfg()).code, kNoSpace);
  assert_int_equal(full.GetStats().evicted_objects, 0);
}

void test_soft_pins_go_last(void**) {
  MasterService s(EvictOptions());
  AddDaemon(s, 1, kPool);
  PutRange(s, 0, 24, Pinned(/*hard=*/false));  // the oldest
  PutRange(s, 24, kAtWatermark);
  // 17 go, all plain ones (k24..k40), although every soft-pinned one is older.
  Put(s, 1, "new", kObject);
  assert_int_equal(s.GetStats().evicted_objects, 17);
  // More soft-pinned puts: the next round finds 8 plain candidates (k41..k47, "new") for
  // 17 objects, so the 9 oldest soft-pinned ones go too. (No existence check before the
  // end: a hit would count as a use and change the order.)
  PutRange(s, 100, 117, Pinned(/*hard=*/false));
  assert_int_equal(s.GetStats().evicted_objects, 34);
  assert_true(Used(s) <= kAtWatermark * kObject);
  for (int i = 24; i < kAtWatermark; ++i) assert_int_equal(s.ExistKey(Key(i)), 0);
  assert_int_equal(s.ExistKey("new"), 0);
  for (int i = 0; i < 9; ++i) assert_int_equal(s.ExistKey(Key(i)), 0);
  for (int i = 9; i < 24; ++i) assert_int_equal(s.ExistKey(Key(i)), 1);
  for (int i = 100; i < 117; ++i) assert_int_equal(s.ExistKey(Key(i)), 1);
}

void test_soft_pins_kept_without_the_flag(void**) {
  for (bool allowed : {false, true}) {
    MasterOptions o = EvictOptions(1.0, 0.25);
    o.allow_evict_soft_pinned_objects = allowed;
    MasterService s(o);
    AddDaemon(s, 1, kPool);
    PutRange(s, 0, 64, Pinned(/*hard=*/false));
    // A full pool of soft pins: evicted (the oldest first) only with the flag.
    assert_int_equal(s.PutStart(1, "n", kObject, Cfg()).code, allowed ? 0 : kNoSpace);
    assert_int_equal(s.GetStats().evicted_objects, allowed ? 17 : 0);
    assert_int_equal(s.ExistKey(Key(0)), allowed ? 0 : 1);
    assert_int_equal(s.ExistKey(Key(63)), 1);
  }
}

void test_replicas_freed_together(void**) {
  MasterService s(EvictOptions());
  AddDaemon(s, 1, kPool);
  AddDaemon(s, 2, kPool);
  for (int i = 0; i < 200; ++i, ++g_now) {
    std::vector<rpc::ReplicaDescriptor> r = Put(s, 1, Key(i), kObject, Cfg(2));
    assert_int_equal(r.size(), 2);
    // Both segments always hold the same objects: an eviction took both replicas or none.
    assert_int_equal(SegmentUsed(s, 11), SegmentUsed(s, 21));
  }
  assert_true(s.GetStats().evicted_objects > 0);
  assert_int_equal(Eviction(s).evicted_bytes, 2 * kObject * s.GetStats().evicted_objects);
  assert_int_equal(s.GetReplicaList(Key(0)).code, kNotFound);
  rpc::ReplicaListResult newest = s.GetReplicaList(Key(199));
  assert_int_equal(newest.code, 0);
  assert_int_equal(newest.replicas.size(), 2);
}

// ---- existence checks ------------------------------------------------------------------

// The first hit since a write or read counts as a use: eviction orders the object as if
// used then. Further hits count for nothing until the object is read again.
void test_existence_hit_counts_once_per_access(void**) {
  MasterService s(EvictOptions());  // no exist lease: the default
  AddDaemon(s, 1, kPool);
  PutRange(s, 0, kAtWatermark);             // used at T0 + 0..47
  assert_int_equal(s.ExistKey(Key(0)), 1);  // k0 counts as used at T0 + 48
  Put(s, 1, "new", kObject);                // 17 go: k1..k17, not k0
  for (int i = 1; i <= 17; ++i) assert_int_equal(s.ExistKey(Key(i)), 0);
  assert_int_equal(s.ExistKey(Key(0)), 1);  // a second hit: counts for nothing
  assert_int_equal(Eviction(s).exist_uses, 1);
  // k18 is checked at T0 + 50 and then every ms until T0 + 80; k19 once, at T0 + 60.
  g_now = kT0 + 50;
  assert_int_equal(s.ExistKey(Key(18)), 1);
  g_now = kT0 + 60;
  assert_int_equal(s.ExistKey(Key(19)), 1);
  for (; g_now < kT0 + 80; ++g_now) assert_int_equal(s.ExistKey(Key(18)), 1);
  assert_int_equal(Eviction(s).exist_uses, 3);
  // Oldest first: k20..k47, then k0 and "new" (T0 + 48), then k18 (its polls renewed
  // nothing), and k19 last.
  assert_int_equal(s.Evict(31 * kObject), 31 * kObject);
  assert_int_equal(s.ExistKey(Key(18)), 0);
  assert_int_equal(s.ExistKey(Key(19)), 1);
  assert_int_equal(s.GetStats().objects, 1);
  // A read ends the count: after its lease, a hit counts again. No exist lease is granted.
  assert_int_equal(s.GetReplicaList(Key(19)).code, 0);
  assert_int_equal(s.ExistKey(Key(19)), 1);  // the read lease covers it
  assert_int_equal(Eviction(s).exist_uses, 3);
  g_now += kLease;
  assert_int_equal(s.ExistKey(Key(19)), 1);
  assert_int_equal(Eviction(s).exist_uses, 4);
  assert_int_equal(Eviction(s).exist_leases, 0);
}

// Issue 13 on the hand-moved clock: an engine polls every key written so far after each
// put. Before, each hit renewed the read lease and nothing could be evicted; now the pool
// stays under the watermark and the newest keys stay.
void test_polling_never_pins(void**) {
  MasterService s(EvictOptions());
  AddDaemon(s, 1, kPool);
  const int n = 300;
  for (int i = 0; i < n; ++i, ++g_now) {
    Put(s, 1, Key(i), kObject);
    for (int k = 0; k <= i; ++k) s.ExistKey(Key(k));
    assert_true(Used(s) <= kAtWatermark * kObject);
  }
  for (int i = n - kAfterRound + 1; i < n; ++i) assert_int_equal(s.ExistKey(Key(i)), 1);
  assert_int_equal(s.ExistKey(Key(0)), 0);
  assert_int_equal(Eviction(s).exist_uses, n);  // one each, however often polled
}

void test_exist_lease_defers_eviction_briefly(void**) {
  MasterOptions o = EvictOptions();
  o.exist_lease_ttl_ms = kExistLease;
  MasterService s(o);
  AddDaemon(s, 1, kPool);
  PutRange(s, 0, kAtWatermark);
  for (int i = 0; i < 4; ++i) assert_int_equal(s.ExistKey(Key(i)), 1);  // until now + 20
  assert_int_equal(s.Evict(kPool), (kAtWatermark - 4) * kObject);  // all but the four
  assert_int_equal(s.GetStats().objects, 4);
  for (int i = 0; i < 4; ++i) assert_int_equal(s.ExistKey(Key(i)), 1);  // no new lease
  assert_int_equal(Eviction(s).exist_leases, 4);
  g_now += kExistLease;  // over: candidates again
  assert_int_equal(s.Evict(kPool), 4 * kObject);
  assert_int_equal(s.GetStats().objects, 0);
}

void test_read_after_exist_gets_full_lease(void**) {
  MasterOptions o = EvictOptions();
  o.exist_lease_ttl_ms = kExistLease;
  MasterService s(o);
  AddDaemon(s, 1, kPool);
  Put(s, 1, "k", kObject);
  ++g_now;
  assert_int_equal(s.ExistKey("k"), 1);
  // An exist lease holds nothing back but eviction: a remove goes through.
  assert_int_equal(ToInt(s.Remove("k", false)), 0);
  Put(s, 1, "k", kObject);
  ++g_now;
  assert_int_equal(s.ExistKey("k"), 1);
  rpc::ReplicaListResult got = s.GetReplicaList("k");
  assert_int_equal(got.code, 0);
  assert_int_equal(got.lease_ttl_ms, kLease);
  assert_int_equal(ToInt(s.Remove("k", false)), kLeased);
  // While the read lease covers it, a hit grants no exist lease; after it, one again.
  assert_int_equal(Eviction(s).exist_leases, 2);
  assert_int_equal(s.ExistKey("k"), 1);
  assert_int_equal(Eviction(s).exist_leases, 2);
  g_now += kLease;
  assert_int_equal(s.ExistKey("k"), 1);
  assert_int_equal(Eviction(s).exist_leases, 3);
}

void test_exist_lease_table_bounded(void**) {
  ExistLeaseTable t;
  std::vector<ObjectMetadata> objects(ExistLeaseTable::kMaxPerShard + 1);
  for (size_t i = 0; i < ExistLeaseTable::kMaxPerShard; ++i) {
    assert_true(t.Grant(&objects[i], 100, 0));
  }
  assert_false(t.Grant(&objects.back(), 100, 50));  // full of live leases
  assert_true(t.Live(&objects[0], 99));
  assert_false(t.Live(&objects[0], 100));
  assert_true(t.Grant(&objects.back(), 200, 100));  // the ended ones are pruned to make room
  assert_int_equal(t.size(), 1);
  t.Forget(&objects.back());
  assert_true(t.empty());
}

// ---- the selection -----------------------------------------------------------------------

void test_planner_weighted_threshold(void**) {
  using mooncake::ExposedTiers;
  using mooncake::ShelteredTiers;
  EvictionPlanner p;
  p.Clear();
  for (int64_t d = 10; d >= 1; --d) p.Add(EvictionTier::kPlain, d, 100);  // 1..10, 100 each
  p.Add(EvictionTier::kPlain, 11, 1000);
  p.Add(EvictionTier::kSoftPinned, 0, 100);
  p.Add(EvictionTier::kNever, 0, 100);
  p.Add(EvictionTier::kSheltered, -5, 100);  // the oldest of all, yet sheltered
  const int64_t total = 14;  // the whole pool was sampled
  const auto all = ExposedTiers(true) | ShelteredTiers(true);
  assert_int_equal(p.Plan(250, total, all).of(EvictionTier::kPlain), 3);  // 1..3: 300 >= 250
  assert_int_equal(p.Plan(300, total, all).of(EvictionTier::kPlain), 3);
  assert_int_equal(p.Plan(1001, total, all).of(EvictionTier::kPlain), 11);
  EvictionThresholds t = p.Plan(2000, total, all);  // 2000 plain bytes in all
  assert_int_equal(t.of(EvictionTier::kPlain), 11);
  assert_int_equal(t.of(EvictionTier::kSoftPinned), EvictionThresholds::kNone);
  assert_int_equal(t.of(EvictionTier::kSheltered), EvictionThresholds::kNone);
  t = p.Plan(2050, total, all);  // more than the plain tier holds: the soft one too
  assert_int_equal(t.of(EvictionTier::kPlain), EvictionThresholds::kAll);
  assert_int_equal(t.of(EvictionTier::kSoftPinned), 0);
  assert_int_equal(t.of(EvictionTier::kSheltered), EvictionThresholds::kNone);
  assert_false(t.Reaches(EvictionTier::kSheltered));
  assert_true(t.Reaches(EvictionTier::kSoftPinned));
  t = p.Plan(2050, total, ExposedTiers(false));
  assert_int_equal(t.of(EvictionTier::kSoftPinned), EvictionThresholds::kNone);
  assert_int_equal(t.of(EvictionTier::kPlain), EvictionThresholds::kAll);
  assert_true(t.TakesAll(ExposedTiers(false)));
  assert_false(t.TakesAll(ExposedTiers(true)));
  // Only past every exposed byte does the sheltered tier give any.
  t = p.Plan(2150, total, all);
  assert_true(t.TakesAll(ExposedTiers(true)));
  assert_int_equal(t.of(EvictionTier::kSheltered), -5);
  t = p.Plan(100, total, ShelteredTiers(true));  // the sheltered phase on its own
  assert_int_equal(t.of(EvictionTier::kPlain), EvictionThresholds::kNone);
  assert_int_equal(t.of(EvictionTier::kSheltered), -5);
  // A sample of half the pool: its share of 400 bytes is 200, aimed 25% higher.
  assert_int_equal(p.Plan(400, 2 * total, all).of(EvictionTier::kPlain), 3);
  assert_int_equal(p.sampled(), 14u);
}

// 60,000 objects in 1024 shards: the sample sees only part of the bigger tables, yet what a
// round evicts lies among the oldest.
void test_sampled_round_is_near_lru(void**) {
  MasterService s(EvictOptions(1.0, 0.25));
  const int n = 60000;
  AddDaemon(s, 1, static_cast<int64_t>(n) * 64);
  for (int i = 0; i < n; ++i, ++g_now) Put(s, 1, Key(i), 64);
  const uint64_t want = static_cast<uint64_t>(n / 10) * 64;  // the oldest tenth
  uint64_t freed = s.Evict(want);
  assert_true(freed >= want);
  assert_true(freed < want + want / 2);
  int evicted = 0, young = 0;
  for (int i = 0; i < n; ++i) {
    if (s.ExistKey(Key(i)) == 1) continue;
    ++evicted;
    if (i >= n / 10 * 3 / 2) ++young;  // outside the oldest 15%
  }
  assert_int_equal(static_cast<uint64_t>(evicted) * 64, freed);
  assert_true(young <= evicted / 50);  // at most 2% from outside, if the sample misjudged
}

}  // namespace

int main(void) {
  mooncake::SetLogLevel(mooncake::LogLevel::kWarning);  // a line per eviction round
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_puts_keep_usage_at_or_under_high_watermark),
      cmocka_unit_test(test_evicts_oldest_deadline_first),
      cmocka_unit_test(test_headroom_used_when_nothing_evictable_then_upkeep_evicts),
      cmocka_unit_test(test_pool_full_of_leased_objects_answers_no_space),
      cmocka_unit_test(test_hard_pins_survive_any_pressure),
      cmocka_unit_test(test_soft_pins_go_last),
      cmocka_unit_test(test_soft_pins_kept_without_the_flag),
      cmocka_unit_test(test_replicas_freed_together),
      cmocka_unit_test(test_existence_hit_counts_once_per_access),
      cmocka_unit_test(test_polling_never_pins),
      cmocka_unit_test(test_exist_lease_defers_eviction_briefly),
      cmocka_unit_test(test_read_after_exist_gets_full_lease),
      cmocka_unit_test(test_exist_lease_table_bounded),
      cmocka_unit_test(test_planner_weighted_threshold),
      cmocka_unit_test(test_sampled_round_is_near_lru),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
