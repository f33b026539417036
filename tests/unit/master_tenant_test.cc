// Tenants in MasterService, on the injected clock: RemoveByRegex and RemoveAll walk the
// caller's tenant only (the pattern seeing its clients' keys), and each tenant's figures
// and quota (master/directory/tenant_usage.h): a put past the quota answers -1402 while other
// tenants put on, every way a value loses its replicas gives its bytes back, concurrent
// puts never overshoot, and a restore recounts the figures from the restored objects.
// Quotas as shares of memory (master/eviction/eviction.h): eviction takes from tenants over their
// quota or without one first, and a tenant within its quota only when nothing else can go.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/base/tenant_key.h"
#include "master/log/oplog.h"
#include "master/server/rpc_handler.h"
#include "master/snapshot/snapshot_store.h"
#include "master/log/state_records.h"
#include "master/snapshot/state_restore.h"
#include "tests/harness/master_service_fixture.h"
#include "tests/harness/process_harness.h"

using mooncake::RpcHandler;
using mooncake::TenantUsage;
namespace tenant_key = mooncake::tenant_key;

namespace {

constexpr int kQuota = static_cast<int>(ErrorCode::QUOTA_EXCEEDED);

// The key tenant's clients call key, as the master stores it.
std::string K(const std::string& tenant, const std::string& key) {
  return tenant_key::Encode(tenant, key);
}

// tenant's row of GetStats (all zero when it has none).
rpc::TenantStats Of(const MasterService& s, const std::string& tenant) {
  for (const rpc::TenantStats& t : s.GetStats().tenants) {
    if (t.tenant == tenant) return t;
  }
  rpc::TenantStats none;
  none.tenant = tenant;
  return none;
}

void AssertFigures(const MasterService& s, const std::string& tenant, int64_t objects,
                   int64_t bytes) {
  rpc::TenantStats t = Of(s, tenant);
  assert_int_equal(t.objects, objects);
  assert_int_equal(t.bytes, bytes);
}

MasterOptions WithQuota(const std::string& quota) {
  MasterOptions o = Options();
  o.tenant_quota = quota;
  return o;
}

// ---- scoped walks ----------------------------------------------------------------------

void test_remove_by_regex_matches_the_callers_keys_only(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  for (const char* tenant : {"", "alice", "bob"}) {
    for (const char* key : {"k1", "k2", "other"}) Put(s, 1, K(tenant, key), 64);
  }
  // The pattern sees alice's keys as she names them: "^k1$" is her k1, nobody else's.
  assert_int_equal(s.RemoveByRegex("^k1$", true, nullptr, "alice"), 1);
  assert_int_equal(s.ExistKey(K("alice", "k1")), 0);
  assert_int_equal(s.ExistKey(K("bob", "k1")), 1);
  assert_int_equal(s.ExistKey("k1"), 1);
  // What matches everything of one tenant leaves the others alone, the default one too.
  assert_int_equal(s.RemoveByRegex("", true, nullptr, "bob"), 3);
  assert_int_equal(s.ExistKey(K("alice", "k2")), 1);
  assert_int_equal(s.ExistKey("other"), 1);
  // A pattern that would match the stored form of another tenant's key matches nothing.
  assert_int_equal(s.RemoveByRegex("alice", true), 0);
  assert_int_equal(s.RemoveByRegex("\\x00", true, nullptr, "alice"), 0);
  // The default tenant's own walk sees its keys only.
  assert_int_equal(s.RemoveByRegex("^k", true), 2);
  assert_int_equal(s.ExistKey(K("alice", "k2")), 1);
  assert_int_equal(s.RemoveByRegex("^k", true, nullptr, "no way"), kBadParams);
  AssertFigures(s, "alice", 2, 128);
  AssertFigures(s, "bob", 0, 0);
  AssertFigures(s, "", 1, 64);
}

void test_remove_all_removes_the_callers_keys_only(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  for (const char* tenant : {"", "alice", "bob"}) {
    for (const char* key : {"a", "b"}) Put(s, 1, K(tenant, key), 64);
  }
  assert_int_equal(s.RemoveAll(true, nullptr, "alice"), 2);
  assert_int_equal(s.ExistKey(K("alice", "a")), 0);
  assert_int_equal(s.ExistKey(K("bob", "a")), 1);
  assert_int_equal(s.ExistKey("a"), 1);
  assert_int_equal(s.RemoveAll(true), 2);  // the default tenant's: bob's stay
  assert_int_equal(s.ExistKey("b"), 0);
  assert_int_equal(s.ExistKey(K("bob", "b")), 1);
  assert_int_equal(s.GetStats().objects, 2);
  assert_int_equal(s.RemoveAll(true, nullptr, "a/b"), kBadParams);
  assert_int_equal(s.GetStats().objects, 2);
}

void test_stored_keys_only(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  // The longest key of the longest tenant id fits; a forged prefix does not.
  std::string longest = K(std::string(tenant_key::kMaxTenantLen, 't'),
                          std::string(MOONCAKE_STORE_MAX_KEY_LEN, 'k'));
  assert_int_equal(s.PutStart(1, longest, 64, Cfg()).code, 0);
  assert_int_equal(s.PutStart(1, std::string("\0a b\0k", 6), 64, Cfg()).code, kBadParams);
  assert_int_equal(s.PutStart(1, std::string("\0alice\0", 7), 64, Cfg()).code, kBadParams);
  assert_int_equal(s.ExistKey(std::string("\0alice", 6)), kBadParams);
}

// ---- quotas ----------------------------------------------------------------------------

void test_quota_refuses_only_its_tenant(void**) {
  MasterService s(WithQuota("alice=4KB"));
  AddDaemon(s, 1);
  for (int i = 0; i < 4; ++i) {
    Put(s, 1, K("alice", "a" + std::to_string(i)), 1024);
    Put(s, 1, K("bob", "b" + std::to_string(i)), 1024);  // between alice's: unaffected
  }
  assert_int_equal(s.PutStart(1, K("alice", "a4"), 1024, Cfg()).code, kQuota);
  assert_int_equal(s.UpsertStart(1, K("alice", "a0"), 1, Cfg()).code, kQuota);
  for (int i = 4; i < 12; ++i) Put(s, 1, K("bob", "b" + std::to_string(i)), 1024);
  Put(s, 1, "default-key", 1024);

  rpc::TenantStats alice = Of(s, "alice");
  assert_int_equal(alice.objects, 4);
  assert_int_equal(alice.bytes, 4096);
  assert_int_equal(alice.quota_bytes, 4096);
  assert_int_equal(alice.refused_puts, 2);
  rpc::TenantStats bob = Of(s, "bob");
  assert_int_equal(bob.objects, 12);
  assert_int_equal(bob.bytes, 12 * 1024);
  assert_int_equal(bob.quota_bytes, 0);
  assert_int_equal(bob.refused_puts, 0);
  AssertFigures(s, "", 1, 1024);
  assert_int_equal(Used(s), 17 * 1024);  // a refusal reserves nothing

  // Room again once alice removes something.
  assert_int_equal(ToInt(s.Remove(K("alice", "a0"), true)), 0);
  AssertFigures(s, "alice", 3, 3072);
  Put(s, 1, K("alice", "a4"), 1024);
  AssertFigures(s, "alice", 4, 4096);
}

void test_quota_per_entry_of_a_batch(void**) {
  MasterService s(WithQuota("alice=3KB"));
  AddDaemon(s, 1);
  RpcHandler handler(&s);
  std::vector<rpc::PutStartResult> out;
  std::vector<std::string> keys;
  for (int i = 0; i < 5; ++i) keys.push_back(K(i % 2 == 0 ? "alice" : "bob", std::to_string(i)));
  keys.push_back(K("alice", "big"));
  handler.BatchPutStart(out, 1, keys, {1024, 1024, 1024, 1024, 1024, 1024}, Cfg());
  // alice: 0, 2, 4 fill her 3 KB, "big" is refused; bob's entries go through.
  std::vector<int> codes;
  for (const rpc::PutStartResult& r : out) codes.push_back(r.code);
  assert_true(codes == (std::vector<int>{0, 0, 0, 0, 0, kQuota}));
  AssertFigures(s, "alice", 3, 3072);
  AssertFigures(s, "bob", 2, 2048);
}

void test_quota_counts_every_memory_replica(void**) {
  MasterService s(WithQuota("alice=4KB"));
  AddDaemon(s, 1);
  AddDaemon(s, 2);
  Put(s, 1, K("alice", "two"), 1024, Cfg(2));
  AssertFigures(s, "alice", 1, 2048);
  // 3 x 1 KiB asked is over what is left, although only two daemons could take one each.
  assert_int_equal(s.PutStart(1, K("alice", "three"), 1024, Cfg(3)).code, kQuota);
  // Asked for 2, given 2: exactly full.
  Put(s, 1, K("alice", "again"), 1024, Cfg(2));
  AssertFigures(s, "alice", 2, 4096);
  assert_int_equal(s.PutStart(1, K("alice", "x"), 1, Cfg()).code, kQuota);

  // Fewer replicas placed than asked: only those count.
  MasterService one(WithQuota("alice=8KB"));
  AddDaemon(one, 1);
  rpc::PutStartResult r = one.PutStart(1, K("alice", "k"), 1024, Cfg(3));
  assert_int_equal(r.code, 0);
  assert_int_equal(r.replicas.size(), 1);
  AssertFigures(one, "alice", 1, 1024);
}

void test_every_release_gives_bytes_back(void**) {
  MasterService s(WithQuota("alice=16KB"));
  AddDaemon(s, 1);
  AddDaemon(s, 2);
  // A revoked put.
  assert_int_equal(s.PutStart(1, K("alice", "revoked"), 1024, Cfg()).code, 0);
  AssertFigures(s, "alice", 1, 1024);
  assert_int_equal(ToInt(s.PutRevoke(1, K("alice", "revoked"))), 0);
  AssertFigures(s, "alice", 0, 0);

  // An upsert counts both values until its end, then the new one; a revoked one, neither.
  Put(s, 1, K("alice", "up"), 1024);
  assert_int_equal(s.UpsertStart(1, K("alice", "up"), 2048, Cfg()).code, 0);
  AssertFigures(s, "alice", 1, 3072);
  assert_int_equal(ToInt(s.UpsertEnd(1, K("alice", "up"))), 0);
  AssertFigures(s, "alice", 1, 2048);
  assert_int_equal(s.UpsertStart(1, K("alice", "up"), 512, Cfg()).code, 0);
  assert_int_equal(ToInt(s.UpsertRevoke(1, K("alice", "up"))), 0);
  AssertFigures(s, "alice", 1, 2048);
  // An upsert under way when its object is removed goes with it.
  assert_int_equal(s.UpsertStart(1, K("alice", "up"), 512, Cfg()).code, 0);
  assert_int_equal(ToInt(s.Remove(K("alice", "up"), true)), 0);
  AssertFigures(s, "alice", 0, 0);

  // A segment that goes takes its replicas' bytes along.
  Put(s, 1, K("alice", "both"), 1024, Cfg(2));
  AssertFigures(s, "alice", 1, 2048);
  assert_int_equal(ToInt(s.UnmountSegment(2, 21)), 0);
  AssertFigures(s, "alice", 1, 1024);
  assert_int_equal(ToInt(s.UnmountSegment(1, 11)), 0);
  AssertFigures(s, "alice", 0, 0);
}

void test_expiry_and_eviction_give_bytes_back(void**) {
  MasterService s(WithQuota("alice=64KB"));
  AddDaemon(s, 1, 16 * 1024);
  // A put whose writer never finished: released with it at the release timeout.
  assert_int_equal(s.PutStart(1, K("alice", "abandoned"), 1024, Cfg()).code, 0);
  assert_int_equal(s.UpsertStart(1, K("alice", "abandoned-up"), 1024, Cfg()).code, 0);
  Put(s, 1, K("alice", "kept"), 1024);
  assert_int_equal(s.UpsertStart(1, K("alice", "kept"), 1024, Cfg()).code, 0);
  AssertFigures(s, "alice", 3, 4096);
  g_now = kT0 + kRelease + 1000;
  s.Tick();
  AssertFigures(s, "alice", 1, 1024);

  // Eviction: the segment fills past its watermark with alice's and bob's objects.
  for (int i = 0; i < 10; ++i) {
    Put(s, 1, K(i % 2 == 0 ? "alice" : "bob", "e" + std::to_string(i)), 1024);
  }
  g_now += 10 * kLease;  // no lease holds them
  uint64_t freed = s.Evict(16 * 1024);
  assert_true(freed >= 11 * 1024);
  AssertFigures(s, "alice", 0, 0);
  AssertFigures(s, "bob", 0, 0);
  assert_int_equal(Of(s, "alice").quota_bytes, 64 * 1024);  // listed while it has a quota
}

void test_concurrent_puts_never_overshoot(void**) {
  MasterService s(WithQuota("alice=50000"));
  AddDaemon(s, 1, 4 * kMiB);
  std::atomic<int> accepted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        std::string key = K("alice", std::to_string(t) + "-" + std::to_string(i));
        int code = s.PutStart(1, key, 1000, Cfg()).code;
        if (code == 0) {
          s.PutEnd(1, key);
          ++accepted;
        } else if (code == kQuota) {
          ++refused;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  assert_int_equal(accepted.load(), 50);
  assert_int_equal(refused.load(), 110);
  AssertFigures(s, "alice", 50, 50000);
  assert_int_equal(Of(s, "alice").refused_puts, 110);
}

void test_unlisted_tenants_are_forgotten_once_empty(void**) {
  MasterService s(WithQuota("alice=1MB"));
  AddDaemon(s, 1);
  Put(s, 1, K("passing", "k"), 64);
  assert_int_equal(s.GetStats().tenants.size(), 2);  // alice (quota) and passing
  assert_int_equal(ToInt(s.Remove(K("passing", "k"), true)), 0);
  s.Tick();
  std::vector<rpc::TenantStats> tenants = s.GetStats().tenants;
  assert_int_equal(tenants.size(), 1);
  assert_string_equal(tenants[0].tenant.c_str(), "alice");
}

// ---- eviction: quotas are shares -------------------------------------------------------

constexpr int64_t kKiB = 1024;
// One 64 KiB segment of 1 KiB objects: the watermark (0.75) is 48 objects, and a round
// goes down to (0.75 - 0.25) x 64 = 32.
constexpr int64_t kSharePool = 64 * kKiB;

MasterOptions SharesOptions(const std::string& quota) {
  MasterOptions o = WithQuota(quota);
  o.eviction_high_watermark_ratio = 0.75;
  o.eviction_ratio = 0.25;
  return o;
}

std::string N(const char* prefix, int i) { return prefix + std::to_string(i); }

// Who is sheltered, from the figures as they are now: a tenant with a quota while it
// holds at most its quota; never the default tenant nor one without a quota. And the
// bytes the others hold, which bound what a round looks for among them.
void test_shelter_follows_the_figures(void**) {
  TenantUsage none({});
  assert_false(none.has_quotas());
  assert_int_equal(none.QuotaSlot(K("alice", "k")), 0);
  TenantUsage t({{"alice", 4096}, {"carol", 1}});
  assert_true(t.has_quotas());
  const uint16_t alice = t.QuotaSlot(K("alice", "k"));
  assert_true(alice != 0);
  assert_true(t.QuotaSlot(K("carol", "k")) != alice);
  assert_int_equal(t.QuotaSlot(K("bob", "k")), 0);
  assert_int_equal(t.QuotaSlot("k"), 0);
  assert_false(t.Sheltered(0));
  assert_true(t.Sheltered(alice));  // holding nothing
  t.Add(K("alice", "k"), 1, 4096);
  t.Add(K("bob", "k"), 1, 1000);
  t.Add("k", 1, 24);
  assert_true(t.Sheltered(alice));  // at its quota
  assert_int_equal(t.ExposedBytes(), 1024);
  t.Add(K("alice", "k2"), 1, 1);  // over it (a quota lowered across a restart)
  assert_false(t.Sheltered(alice));
  assert_int_equal(t.ExposedBytes(), 1024 + 4097);
  t.Add(K("alice", "k2"), -1, -1);
  assert_true(t.Sheltered(alice));
}

// Attack 6 of issue 32 on the hand-moved clock: beta, well under its quota, wrote first;
// tenants without a quota (a named one, and the default tenant) then fill the pool past
// the watermark again and again. Before, eviction took the oldest objects of any tenant:
// beta's first. Now every one of beta's stays, and the fillers lose their oldest.
void test_eviction_spares_tenants_within_their_quota(void**) {
  MasterService s(SharesOptions("beta=16KB"));
  AddDaemon(s, 1, kSharePool);
  for (int i = 0; i < 8; ++i, ++g_now) Put(s, 1, K("beta", N("b", i)), kKiB);
  for (int i = 0; i < 400; ++i, ++g_now) {
    Put(s, 1, i % 2 == 0 ? K("filler", N("f", i)) : N("d", i), kKiB);
    assert_true(Used(s) <= 48 * kKiB);  // the watermark holds as before
  }
  assert_true(s.GetStats().eviction.rounds >= 20);
  AssertFigures(s, "beta", 8, 8 * kKiB);
  for (int i = 0; i < 8; ++i) {
    assert_int_equal(s.GetReplicaList(K("beta", N("b", i))).code, 0);
  }
  // The fillers' oldest went, their newest are there.
  assert_int_equal(s.ExistKey(K("filler", "f0")), 0);
  assert_int_equal(s.ExistKey("d1"), 0);
  assert_int_equal(s.ExistKey(K("filler", "f398")), 1);
  assert_int_equal(s.ExistKey("d399"), 1);
  assert_int_equal(s.GetStats().evicted_objects, 8 + 400 - s.GetStats().objects);
}

// A tenant over its quota (here: the quota lowered across a restart, so that the restore
// finds it above) is exposed like a tenant without one, and loses its oldest objects
// before anyone within a quota, down to its quota and no further. When nothing exposed is
// left, the sheltered tenants lose their oldest, so that eviction never wedges.
void test_over_quota_goes_first_then_oldest_sheltered(void**) {
  MasterService a(WithQuota(""));
  AddDaemon(a, 1, kSharePool);
  for (int i = 0; i < 8; ++i) Put(a, 1, K("beta", N("b", i)), kKiB);
  for (int i = 0; i < 12; ++i) Put(a, 1, K("alpha", N("a", i)), kKiB);
  for (int i = 0; i < 4; ++i) Put(a, 1, N("d", i), kKiB);

  MasterService b(SharesOptions("alpha=4KB,beta=16KB"));
  for (const mooncake::SegmentRecord& segment : a.ExportSegments()) b.RestoreSegment(segment);
  a.ExportObjects([&](size_t, const std::string& bytes, uint32_t) {
    assert_true(mooncake::DecodeObjects(
        bytes, [&](mooncake::ObjectRecord&& o) { b.RestoreObject(std::move(o)); }));
    return true;
  });
  b.FinishRestore();
  assert_int_equal(ToInt(b.RegisterDaemon(1, Name(1))), 0);
  Mount(b, 1, 11, kSharePool);  // the daemon is back: its objects are candidates again
  AssertFigures(b, "alpha", 12, 12 * kKiB);  // 8 KiB over its quota
  // A restore ages every object from the restore; one existence hit each, a ms apart,
  // gives them an order again: beta's oldest, then alpha's, then the default tenant's.
  g_now += kLease;
  std::vector<std::string> order;
  for (int i = 0; i < 8; ++i) order.push_back(K("beta", N("b", i)));
  for (int i = 0; i < 12; ++i) order.push_back(K("alpha", N("a", i)));
  for (int i = 0; i < 4; ++i) order.push_back(N("d", i));
  for (const std::string& key : order) {
    assert_int_equal(b.ExistKey(key), 1);
    ++g_now;
  }
  // alpha's 8 oldest: older than the default tenant's, younger than beta's.
  assert_int_equal(b.Evict(8 * kKiB), 8 * kKiB);
  AssertFigures(b, "alpha", 4, 4 * kKiB);
  AssertFigures(b, "beta", 8, 8 * kKiB);
  AssertFigures(b, "", 4, 4 * kKiB);
  // At its quota, alpha is sheltered too: the default tenant goes, although newer.
  assert_int_equal(b.Evict(4 * kKiB), 4 * kKiB);
  AssertFigures(b, "", 0, 0);
  AssertFigures(b, "alpha", 4, 4 * kKiB);
  // Nothing exposed is left: the oldest of the sheltered go, beta's first two.
  assert_int_equal(b.Evict(2 * kKiB), 2 * kKiB);
  AssertFigures(b, "beta", 6, 6 * kKiB);
  AssertFigures(b, "alpha", 4, 4 * kKiB);
  for (size_t i = 0; i < order.size(); ++i) {
    bool kept = (i >= 2 && i < 8) || (i >= 16 && i < 20);
    assert_int_equal(b.ExistKey(order[i]), kept ? 1 : 0);
  }
}

// Sheltered objects are candidates still: with every exposed object read-leased, puts
// past the watermark take the sheltered tenant's oldest (not wedged at -200), and the
// leased ones stay.
void test_sheltered_objects_go_when_nothing_else_can(void**) {
  MasterService s(SharesOptions("beta=1MB"));
  AddDaemon(s, 1, kSharePool);
  for (int i = 0; i < 8; ++i, ++g_now) Put(s, 1, K("filler", N("f", i)), kKiB);
  for (int i = 0; i < 40; ++i, ++g_now) Put(s, 1, K("beta", N("b", i)), kKiB);
  for (int i = 0; i < 8; ++i) assert_int_equal(s.GetReplicaList(K("filler", N("f", i))).code, 0);
  for (int i = 40; i < 57; ++i, ++g_now) Put(s, 1, K("beta", N("b", i)), kKiB);
  assert_true(Used(s) <= 48 * kKiB);
  assert_int_equal(s.GetStats().eviction.no_space_puts, 0);
  for (int i = 0; i < 8; ++i) assert_int_equal(s.ExistKey(K("filler", N("f", i))), 1);
  assert_int_equal(s.ExistKey(K("beta", "b0")), 0);
  assert_int_equal(s.ExistKey(K("beta", "b56")), 1);
}

// ---- durability ------------------------------------------------------------------------

void test_restore_recounts_the_figures(void**) {
  const std::string quota = "alice=4KB";
  MasterService a(WithQuota(quota));
  AddDaemon(a, 1);
  AddDaemon(a, 2);
  Put(a, 1, K("alice", "x"), 1024, Cfg(2));
  Put(a, 1, K("alice", "y"), 1024);
  Put(a, 1, K("bob", "x"), 512);
  Put(a, 1, "x", 256);
  assert_int_equal(a.PutStart(1, K("alice", "unfinished"), 512, Cfg()).code, 0);  // not kept

  // What a snapshot holds, loaded as a restore loads it.
  MasterService b(WithQuota(quota));
  for (const mooncake::SegmentRecord& segment : a.ExportSegments()) b.RestoreSegment(segment);
  a.ExportObjects([&](size_t, const std::string& bytes, uint32_t) {
    assert_true(mooncake::DecodeObjects(
        bytes, [&](mooncake::ObjectRecord&& o) { b.RestoreObject(std::move(o)); }));
    return true;
  });
  b.FinishRestore();
  AssertFigures(b, "alice", 2, 3072);
  AssertFigures(b, "bob", 1, 512);
  AssertFigures(b, "", 1, 256);
  // The quota holds on what was restored.
  AddDaemon(b, 3);
  assert_int_equal(b.PutStart(3, K("alice", "z"), 2048, Cfg()).code, kQuota);
  assert_int_equal(b.PutStart(3, K("alice", "z"), 1024, Cfg()).code, 0);
}

void test_log_replay_recounts_the_figures(void**) {
  const std::string dir = mooncake::testing::MakeTempDir("mc-tenant-oplog-");
  mooncake::OpLogOptions log_options;
  log_options.dir = dir + "/oplog";
  auto log = std::make_unique<mooncake::OpLog>(log_options);
  assert_true(log->Recover(0, [](uint64_t, std::string_view) { return true; }).ok());
  assert_int_equal(ToInt(log->Start(0)), 0);
  MasterService a(WithQuota("alice=64KB"));
  a.AttachOpLog(log.get(), /*strict=*/false);
  AddDaemon(a, 1);
  AddDaemon(a, 2);
  // Every kind of record: publishes, a removal, an upsert's swap, an unmount.
  Put(a, 1, K("alice", "x"), 1024, Cfg(2));
  Put(a, 1, K("alice", "y"), 1024);
  Put(a, 1, K("bob", "x"), 2048, Cfg(2));
  Put(a, 1, "x", 512);
  assert_int_equal(ToInt(a.Remove(K("alice", "y"), true)), 0);
  assert_int_equal(a.UpsertStart(1, K("alice", "x"), 4096, Cfg(2)).code, 0);
  assert_int_equal(ToInt(a.UpsertEnd(1, K("alice", "x"))), 0);
  // Both keep one replica: segment 11 holds one of each pair.
  assert_int_equal(ToInt(a.UnmountSegment(2, 21)), 0);
  std::vector<rpc::TenantStats> before = a.GetStats().tenants;
  AssertFigures(a, "alice", 1, 4096);
  AssertFigures(a, "bob", 1, 2048);
  assert_int_equal(ToInt(log->Sync(log->last())), 0);
  log.reset();  // the crash

  MasterService b(WithQuota("alice=64KB"));
  mooncake::SnapshotStore store(dir);
  mooncake::OpLog replay(log_options);
  assert_true(mooncake::RestoreMasterState(&b, &store, &replay).ok());
  std::vector<rpc::TenantStats> after = b.GetStats().tenants;
  assert_int_equal(after.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    assert_string_equal(after[i].tenant.c_str(), before[i].tenant.c_str());
    assert_int_equal(after[i].objects, before[i].objects);
    assert_int_equal(after[i].bytes, before[i].bytes);
    assert_int_equal(after[i].quota_bytes, before[i].quota_bytes);
  }
  mooncake::testing::RemoveTree(dir);
}

// ---- the flag --------------------------------------------------------------------------

void test_quota_flag(void**) {
  TenantUsage::Quotas q;
  std::string error;
  assert_true(TenantUsage::ParseQuotas("", &q, &error));
  assert_true(q.empty());
  assert_true(TenantUsage::ParseQuotas(" alice = 1GB , bob=512MB,c=4096", &q, &error));
  assert_int_equal(q.size(), 3);
  assert_true(q["alice"] == 1ull << 30);
  assert_true(q["bob"] == 512ull << 20);
  assert_true(q["c"] == 4096);
  for (const char* bad : {"alice", "alice=", "alice=0", "alice=-1", "alice=1XB", "=1GB",
                          "a b=1GB", "alice=1GB,alice=2GB", "alice=1GB,"}) {
    assert_false(TenantUsage::ParseQuotas(bad, &q, &error));
    assert_true(!error.empty());
  }
  // Each tenant with a quota has a 16-bit slot in its objects' metadata.
  std::string many;
  for (size_t i = 0; i <= TenantUsage::kMaxQuotas; ++i) many += "t" + std::to_string(i) + "=1,";
  many.pop_back();
  assert_false(TenantUsage::ParseQuotas(many, &q, &error));
  assert_true(error.find("more than 65535 tenants") != std::string::npos);
  MasterOptions o = Options();
  o.tenant_quota = "alice=lots";
  assert_false(mooncake::ValidateMasterOptions(o, &error));
  assert_true(error.find("--tenant_quota") != std::string::npos);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_remove_by_regex_matches_the_callers_keys_only),
      cmocka_unit_test(test_remove_all_removes_the_callers_keys_only),
      cmocka_unit_test(test_stored_keys_only),
      cmocka_unit_test(test_quota_refuses_only_its_tenant),
      cmocka_unit_test(test_quota_per_entry_of_a_batch),
      cmocka_unit_test(test_quota_counts_every_memory_replica),
      cmocka_unit_test(test_every_release_gives_bytes_back),
      cmocka_unit_test(test_expiry_and_eviction_give_bytes_back),
      cmocka_unit_test(test_concurrent_puts_never_overshoot),
      cmocka_unit_test(test_unlisted_tenants_are_forgotten_once_empty),
      cmocka_unit_test(test_shelter_follows_the_figures),
      cmocka_unit_test(test_eviction_spares_tenants_within_their_quota),
      cmocka_unit_test(test_over_quota_goes_first_then_oldest_sheltered),
      cmocka_unit_test(test_sheltered_objects_go_when_nothing_else_can),
      cmocka_unit_test(test_restore_recounts_the_figures),
      cmocka_unit_test(test_log_replay_recounts_the_figures),
      cmocka_unit_test(test_quota_flag),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
