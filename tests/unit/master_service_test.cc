// Tests for mooncake::MasterService: placement, the put/upsert lifecycle, leases, pins,
// removal, daemon liveness and checksums, driven with a hand-moved clock (eviction and
// exist leases: tests/unit/master_eviction_test.cc).

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/base/logging.h"
#include "master/service/master_service.h"
#include "tests/harness/master_service_fixture.h"

static_assert(MasterService::kShardCount == 1024, "metadata is sharded 1024 ways");

namespace {

template <typename Field>
std::set<int64_t> Distinct(const std::vector<rpc::ReplicaDescriptor>& replicas, Field field) {
  std::set<int64_t> out;
  for (const rpc::ReplicaDescriptor& d : replicas) out.insert(d.*field);
  return out;
}

bool Same(const rpc::ReplicaDescriptor& a, const rpc::ReplicaDescriptor& b) {
  return a.segment_id == b.segment_id && a.offset == b.offset;
}

// ---- rule 2: allocation ----------------------------------------------------------------

void test_replicas_on_distinct_segments_and_daemons(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);  // segment 11
  Mount(s, 1, 12, kMiB);
  Mount(s, 1, 13, kMiB);
  AddDaemon(s, 2);  // segment 21
  for (int i = 0; i < 20; ++i) {
    // Two replicas: one per daemon, though daemon 1 has three of the four segments.
    rpc::PutStartResult two = s.PutStart(1, "two" + std::to_string(i), 1000, Cfg(2));
    assert_int_equal(two.code, 0);
    assert_int_equal(two.replicas.size(), 2);
    assert_true(Distinct(two.replicas, &rpc::ReplicaDescriptor::daemon_id) ==
                (std::set<int64_t>{1, 2}));
    // Three replicas: three distinct segments, both daemons used.
    rpc::PutStartResult three = s.PutStart(1, "three" + std::to_string(i), 1000, Cfg(3));
    assert_int_equal(three.code, 0);
    assert_int_equal(three.replicas.size(), 3);
    assert_int_equal(Distinct(three.replicas, &rpc::ReplicaDescriptor::segment_id).size(), 3);
    assert_int_equal(Distinct(three.replicas, &rpc::ReplicaDescriptor::daemon_id).size(), 2);
    for (const rpc::ReplicaDescriptor& d : three.replicas) {
      assert_int_equal(d.status, rpc::ReplicaStatus::PROCESSING);
      assert_int_equal(d.size, 1000);
    }
  }
}

void test_preferred_segments_first_avoided_last(void**) {
  MasterService s(Options());
  for (int64_t d = 1; d <= 4; ++d) AddDaemon(s, d);
  for (int i = 0; i < 20; ++i) {
    rpc::ReplicateConfig c = Cfg(2);
    c.preferred_segments = {Name(3), Name(1)};
    rpc::PutStartResult r = s.PutStart(2, "k" + std::to_string(i), 100, c);
    assert_int_equal(r.code, 0);
    assert_int_equal(r.replicas.size(), 2);
    assert_string_equal(r.replicas[0].segment_name.c_str(), Name(3).c_str());
    assert_string_equal(r.replicas[1].segment_name.c_str(), Name(1).c_str());

    c = Cfg(3);
    c.preferred_segments = {Name(4)};
    r = s.PutStart(2, "p" + std::to_string(i), 100, c);
    assert_int_equal(r.code, 0);
    assert_int_equal(r.replicas.size(), 3);
    assert_int_equal(r.replicas[0].daemon_id, 4);
    assert_int_equal(Distinct(r.replicas, &rpc::ReplicaDescriptor::daemon_id).size(), 3);

    // Avoided daemons come last (the writer just failed to reach them), unless preferred.
    c = Cfg(4);
    c.avoided_segments = {Name(1), Name(2)};
    c.preferred_segments = {Name(2)};
    r = s.PutStart(2, "a" + std::to_string(i), 100, c);
    assert_int_equal(r.replicas.size(), 4);
    assert_int_equal(r.replicas[0].daemon_id, 2);
    assert_int_equal(r.replicas[3].daemon_id, 1);
  }
}

void test_allocation_best_effort_and_no_space(void**) {
  MasterService s(Options());
  assert_int_equal(ToInt(s.RegisterDaemon(1, Name(1))), 0);
  // No segment at all.
  assert_int_equal(s.PutStart(1, "k", 64, Cfg()).code, kNoSpace);
  Mount(s, 1, 11, 1024);
  AddDaemon(s, 2);  // 1 MiB
  // Three replicas asked, two segments: two given.
  rpc::PutStartResult r = s.PutStart(1, "three", 64, Cfg(3));
  assert_int_equal(r.code, 0);
  assert_int_equal(r.replicas.size(), 2);
  assert_int_equal(ToInt(s.PutEnd(1, "three")), 0);
  assert_int_equal(s.GetReplicaList("three").replicas.size(), 2);
  // 2048 bytes fit only on daemon 2's segment: one replica.
  r = s.PutStart(1, "big", 2048, Cfg(2));
  assert_int_equal(r.code, 0);
  assert_int_equal(r.replicas.size(), 1);
  assert_int_equal(r.replicas[0].daemon_id, 2);
  // Fits on no segment, even with eviction: -200 and nothing left reserved.
  int64_t used = Used(s);
  assert_int_equal(s.PutStart(1, "huge", 2 * kMiB, Cfg()).code, kNoSpace);
  assert_int_equal(s.ExistKey("huge"), 0);
  assert_int_equal(Used(s), used);  // the failed attempt left nothing reserved
}

// ---- rule 3: PutStart on an existing key -----------------------------------------------

// Where 32 puts of two replicas each land among four daemons, with placement_seed seed.
std::vector<int64_t> Placements(int64_t seed) {
  MasterOptions o = Options();
  o.placement_seed = seed;
  MasterService s(o);
  for (int64_t d = 1; d <= 4; ++d) AddDaemon(s, d);
  std::vector<int64_t> at;
  for (int i = 0; i < 32; ++i) {
    for (const rpc::ReplicaDescriptor& r : Put(s, 1, "k" + std::to_string(i), 1024, Cfg(2))) {
      at.push_back(r.segment_id);
    }
  }
  return at;
}

// --placement_seed: the same seed, daemons and puts place every replica alike (a test can
// rely on where they land); another seed places them otherwise (still random, only
// reproducible); either way they spread over every daemon.
void test_placement_seed_reproduces_placement(void**) {
  const std::vector<int64_t> seeded = Placements(34);
  assert_true(seeded == Placements(34));
  assert_true(seeded != Placements(35));
  assert_int_equal(std::set<int64_t>(seeded.begin(), seeded.end()).size(), 4);
  const std::vector<int64_t> unseeded = Placements(0);
  assert_int_equal(std::set<int64_t>(unseeded.begin(), unseeded.end()).size(), 4);
}

void test_put_start_on_complete_key(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  Put(s, 1, "done", 64);
  assert_int_equal(s.PutStart(1, "done", 64, Cfg()).code, kExists);
  g_now += 10 * kRelease;  // a complete object never turns into an "abandoned" one
  assert_int_equal(s.PutStart(1, "done", 64, Cfg()).code, kExists);
  assert_int_equal(Used(s), 64);
}

void test_abandoned_put_taken_over_and_released_late(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  AddDaemon(s, 2);
  const rpc::ReplicateConfig on1 = On(1);
  rpc::PutStartResult old = s.PutStart(1, "k", 256, on1);
  assert_int_equal(old.code, 0);
  assert_int_equal(Used(s), 256);

  g_now = kT0 + kDiscard - 1;  // still young: nobody else may write the key
  assert_int_equal(s.PutStart(2, "k", 256, on1).code, kExists);
  assert_int_equal(Used(s), 256);

  g_now = kT0 + kDiscard + 1;  // abandoned: writer 2 takes over with fresh space
  rpc::PutStartResult taken = s.PutStart(2, "k", 256, on1);
  assert_int_equal(taken.code, 0);
  assert_int_equal(taken.replicas.size(), 1);
  assert_false(Same(taken.replicas[0], old.replicas[0]));
  assert_int_equal(Used(s), 512);  // the old writer may still be copying into its range
  assert_int_equal(ToInt(s.PutEnd(1, "k")), kNotOwner);
  assert_int_equal(s.GetReplicaList("k").code, kNotReady);

  g_now = kT0 + kRelease - 1;
  s.Tick();
  assert_int_equal(Used(s), 512);
  g_now = kT0 + kRelease;  // release timeout counted from the OLD put's start
  s.Tick();
  assert_int_equal(Used(s), 256);

  assert_int_equal(ToInt(s.PutEnd(2, "k")), 0);
  rpc::ReplicaListResult got = s.GetReplicaList("k");
  assert_int_equal(got.code, 0);
  assert_int_equal(got.replicas.size(), 1);
  assert_true(Same(got.replicas[0], taken.replicas[0]));
  // The lease names the master that granted it (owners refuse reads under another's).
  assert_true(got.master_epoch != 0 && got.master_epoch == s.Heartbeat(2).master_epoch);
}

void test_processing_put_released_after_release_timeout(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  assert_int_equal(s.PutStart(1, "k", 256, Cfg()).code, 0);
  g_now = kT0 + kRelease - 1;
  s.Tick();
  assert_int_equal(Used(s), 256);
  g_now = kT0 + kRelease + 1000;
  s.Tick();
  assert_int_equal(Used(s), 0);
  assert_int_equal(s.GetReplicaList("k").code, kNotFound);
}

// ---- rule 4: writers own their puts; readers see COMPLETE only -------------------------

void test_end_and_revoke_only_by_writer(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  AddDaemon(s, 2);
  assert_int_equal(s.PutStart(1, "k", 64, Cfg()).code, 0);
  assert_int_equal(ToInt(s.PutEnd(2, "k")), kNotOwner);
  assert_int_equal(ToInt(s.PutRevoke(2, "k")), kNotOwner);
  assert_int_equal(s.GetReplicaList("k").code, kNotReady);
  assert_int_equal(Used(s), 64);
  assert_int_equal(ToInt(s.PutEnd(1, "k")), 0);
  assert_int_equal(s.ExistKey("k"), 1);
}

void test_readers_never_see_processing(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  AddDaemon(s, 2);
  assert_int_equal(s.ExistKey("k"), 0);
  assert_int_equal(s.GetReplicaList("k").code, kNotFound);
  rpc::PutStartResult r = s.PutStart(1, "k", 300, Cfg(2));
  assert_int_equal(r.code, 0);
  assert_int_equal(s.ExistKey("k"), 0);
  assert_int_equal(s.GetReplicaList("k").code, kNotReady);

  assert_int_equal(ToInt(s.PutEnd(1, "k")), 0);
  assert_int_equal(s.ExistKey("k"), 1);
  rpc::ReplicaListResult got = s.GetReplicaList("k");
  assert_int_equal(got.code, 0);
  assert_int_equal(got.size, 300);
  assert_int_equal(got.lease_ttl_ms, kLease);
  assert_int_equal(got.replicas.size(), 2);
  for (size_t i = 0; i < got.replicas.size(); ++i) {
    assert_int_equal(got.replicas[i].status, rpc::ReplicaStatus::COMPLETE);
    assert_int_equal(got.replicas[i].size, 300);
  }
  assert_true(Distinct(got.replicas, &rpc::ReplicaDescriptor::offset) ==
              Distinct(r.replicas, &rpc::ReplicaDescriptor::offset));
}

void test_put_revoke_frees_space(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  assert_int_equal(s.PutStart(1, "k", 4096, Cfg()).code, 0);
  assert_int_equal(Used(s), 4096);
  assert_int_equal(s.GetStats().objects, 1);
  assert_int_equal(ToInt(s.PutRevoke(1, "k")), 0);
  assert_int_equal(Used(s), 0);
  assert_int_equal(s.GetStats().objects, 0);
  assert_int_equal(s.GetReplicaList("k").code, kNotFound);
  assert_int_equal(s.ExistKey("k"), 0);
  Put(s, 1, "k", 64);  // the key is free again
}

// ---- rule 5: leases and pins -----------------------------------------------------------

void test_read_extends_lease(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  Put(s, 1, "k", 64);
  assert_int_equal(s.GetReplicaList("k").code, 0);  // leased until T0 + 100
  g_now = kT0 + 50;
  assert_int_equal(s.GetReplicaList("k").code, 0);  // now until T0 + 150
  g_now = kT0 + 120;
  assert_int_equal(ToInt(s.Remove("k", false)), kLeased);
  g_now = kT0 + 150;
  assert_int_equal(ToInt(s.Remove("k", false)), 0);
  assert_int_equal(s.ExistKey("k"), 0);
}

void test_read_never_shortens_lease(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  Put(s, 1, "k", 64);
  assert_int_equal(s.GetReplicaList("k").code, 0);  // leased until T0 + 100
  g_now = kT0 - 50;  // a read whose now + ttl is earlier must not cut the lease
  assert_int_equal(s.GetReplicaList("k").code, 0);
  g_now = kT0 + 75;
  assert_int_equal(ToInt(s.Remove("k", false)), kLeased);
  g_now = kT0 + kLease;
  assert_int_equal(ToInt(s.Remove("k", false)), 0);
}

void test_remove_rules(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  assert_int_equal(ToInt(s.Remove("missing", false)), kNotFound);
  assert_int_equal(s.PutStart(1, "writing", 64, Cfg()).code, 0);
  assert_int_equal(ToInt(s.Remove("writing", false)), kNotReady);
  assert_int_equal(ToInt(s.Remove("writing", true)), kNotReady);

  Put(s, 1, "pinned", 64, Pinned(/*hard=*/true));
  assert_int_equal(ToInt(s.Remove("pinned", false)), kUnavailable);
  assert_int_equal(s.RemoveAll(false), 0);
  assert_int_equal(s.ExistKey("pinned"), 1);
  assert_int_equal(ToInt(s.Remove("pinned", true)), 0);
  assert_int_equal(s.ExistKey("pinned"), 0);
  assert_int_equal(ToInt(s.PutEnd(1, "writing")), 0);  // untouched by all of the above
}

void test_remove_all(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  Put(s, 1, "a", 64);
  Put(s, 1, "b", 64);
  Put(s, 1, "c", 64);
  Put(s, 1, "hard", 64, Pinned(/*hard=*/true));
  assert_int_equal(s.PutStart(1, "writing", 64, Cfg()).code, 0);
  assert_int_equal(s.GetReplicaList("b").code, 0);  // leased
  assert_int_equal(s.RemoveAll(false), 2);          // a and c
  assert_int_equal(s.ExistKey("a"), 0);
  assert_int_equal(s.ExistKey("c"), 0);
  assert_int_equal(s.GetStats().objects, 3);
  assert_int_equal(s.RemoveAll(true), 2);  // b and hard; a PROCESSING put stays
  assert_int_equal(s.ExistKey("b"), 0);
  assert_int_equal(s.ExistKey("hard"), 0);
  assert_int_equal(s.GetStats().objects, 1);
  assert_int_equal(s.GetReplicaList("writing").code, kNotReady);
}

void test_forced_remove_of_leased_defers_free(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  Put(s, 1, "k", 256);
  assert_int_equal(s.GetReplicaList("k").code, 0);  // leased until T0 + 100
  assert_int_equal(ToInt(s.Remove("k", true)), 0);
  assert_int_equal(s.GetReplicaList("k").code, kNotFound);
  assert_int_equal(Used(s), 256);  // a reader may still be copying the bytes
  g_now = kT0 + kLease - 1;
  s.Tick();
  assert_int_equal(Used(s), 256);
  g_now = kT0 + kLease;
  s.Tick();
  assert_int_equal(Used(s), 0);
  // An unleased object is freed at once.
  Put(s, 1, "u", 256);
  assert_int_equal(ToInt(s.Remove("u", true)), 0);
  assert_int_equal(Used(s), 0);
}

// ---- rule 6: RemoveByRegex -------------------------------------------------------------

void test_remove_by_regex(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  for (const char* key : {"user/1/a", "user/1/b", "user/2/a", "other"}) Put(s, 1, key, 64);
  assert_int_equal(s.RemoveByRegex("(", false), kBadParams);
  assert_int_equal(s.RemoveByRegex("[a-", true), kBadParams);
  assert_int_equal(s.GetStats().objects, 4);
  assert_int_equal(s.RemoveByRegex("^user/1/", false), 2);
  assert_int_equal(s.ExistKey("user/1/a"), 0);
  assert_int_equal(s.ExistKey("user/1/b"), 0);
  assert_int_equal(s.ExistKey("user/2/a"), 1);
  assert_int_equal(s.ExistKey("other"), 1);
  assert_int_equal(s.RemoveByRegex("^nothing$", true), 0);
  assert_int_equal(s.GetReplicaList("user/2/a").code, 0);
  assert_int_equal(s.RemoveByRegex("/a$", false), 0);  // user/2/a is leased now
  assert_int_equal(s.RemoveByRegex("/a$", true), 1);
  assert_int_equal(s.ExistKey("other"), 1);
}

// ---- rule 7: daemon liveness -----------------------------------------------------------

// A daemon that registers with a known daemon's endpoint is that daemon restarted: the
// old registration, its segments and its objects go at once, not after client_live_ttl.
void test_restarted_daemon_replaces_old_one(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);  // segment 11, named Name(1)
  AddDaemon(s, 2);
  Put(s, 1, "on-old-1", 256, On(1));
  Put(s, 1, "on-2", 256, On(2));
  assert_int_equal(s.RegisterDaemon(3, Name(1)), 0);  // same endpoint, new id
  assert_int_equal(s.Heartbeat(1).code, kUnknownDaemon);
  assert_int_equal(s.GetReplicaList("on-old-1").code, kNotFound);
  assert_int_equal(s.GetReplicaList("on-2").code, 0);
  std::vector<rpc::SegmentInfo> segments = s.GetAllSegments();
  assert_int_equal(segments.size(), 1);
  assert_int_equal(segments[0].daemon_id, 2);
  assert_int_equal(s.GetStats().daemons, 2);
  // Registering again under the same id is only a refresh.
  assert_int_equal(s.RegisterDaemon(2, Name(2)), 0);
  assert_int_equal(s.GetAllSegments().size(), 1);
  assert_int_equal(s.GetReplicaList("on-2").code, 0);
}

// A daemon silent past the TTL is detached first (master_liveness_test covers its coming
// back); once its grace runs out it is dead: its segments go, with the objects only they
// held, and its unfinished puts are revoked.
void test_dead_daemon_is_dropped(void**) {
  MasterOptions o = Options();
  o.client_live_ttl_ms = 1000;
  o.daemon_grace_ms = 300;
  MasterService s(o);
  assert_int_equal(s.Heartbeat(99).code, kUnknownDaemon);
  AddDaemon(s, 1);  // segment 11
  AddDaemon(s, 2);  // segment 21
  Put(s, 2, "only-on-1", 256, On(1));
  Put(s, 2, "only-on-2", 256, On(2));
  Put(s, 2, "both", 256, Cfg(2));
  assert_int_equal(s.PutStart(1, "writing-by-1", 256, On(2)).code, 0);  // space on daemon 2
  assert_int_equal(SegmentUsed(s, 21), 768);

  g_now = kT0 + 500;
  assert_int_equal(s.Heartbeat(1).code, 0);
  assert_int_equal(s.Heartbeat(2).code, 0);
  g_now = kT0 + 1400;  // 1400 ms since registering, 900 since the heartbeat
  s.Tick();
  assert_int_equal(s.GetStats().daemons, 2);
  assert_int_equal(s.GetAllSegments().size(), 2);

  assert_int_equal(s.Heartbeat(2).code, 0);  // daemon 1 falls silent
  g_now = kT0 + 1501;
  s.Tick();
  assert_int_equal(s.GetStats().daemons, 1);
  assert_int_equal(s.GetStats().pending_segments, 1);  // detached, not dropped
  assert_int_equal(s.Heartbeat(1).code, kUnknownDaemon);
  assert_int_equal(s.GetReplicaList("only-on-1").code, kNotReady);
  assert_int_equal(s.GetStats().objects, 4);

  g_now = kT0 + 1700;
  assert_int_equal(s.Heartbeat(2).code, 0);
  s.Tick();
  g_now = kT0 + 1802;  // the grace (300 ms) is over
  s.Tick();
  assert_int_equal(s.GetStats().pending_segments, 0);
  std::vector<rpc::SegmentInfo> segments = s.GetAllSegments();
  assert_int_equal(segments.size(), 1);
  assert_int_equal(segments[0].segment_id, 21);

  assert_int_equal(s.GetReplicaList("only-on-1").code, kNotFound);
  assert_int_equal(s.GetReplicaList("only-on-2").code, 0);
  rpc::ReplicaListResult both = s.GetReplicaList("both");
  assert_int_equal(both.code, 0);
  assert_int_equal(both.replicas.size(), 1);
  assert_int_equal(both.replicas[0].daemon_id, 2);
  // The dead writer's reservation is revoked; its space on daemon 2 comes back only
  // put_start_release_timeout after the put started: the "dead" writer may only be
  // stopped, and copy on when it resumes.
  assert_int_equal(s.GetReplicaList("writing-by-1").code, kNotFound);
  assert_int_equal(s.GetStats().objects, 2);
  assert_int_equal(s.PutStart(2, "writing-by-1", 256, Cfg()).code, 0);
  assert_int_equal(ToInt(s.PutRevoke(2, "writing-by-1")), 0);
  assert_int_equal(SegmentUsed(s, 21), 768);
  for (g_now = kT0 + 2000; g_now <= kT0 + kRelease + 100; g_now += 100) {
    assert_int_equal(s.Heartbeat(2).code, 0);
    s.Tick();
  }
  assert_int_equal(SegmentUsed(s, 21), 512);
}

// ---- rule 8: validation ----------------------------------------------------------------

void test_put_validation(void**) {
  MasterService s(Options());
  AddDaemon(s, 1, 8 * 1024);
  assert_int_equal(s.PutStart(1, "", 64, Cfg()).code, kBadParams);
  assert_int_equal(s.PutStart(1, std::string(4097, 'k'), 64, Cfg()).code, kBadParams);
  assert_int_equal(s.PutStart(1, std::string("a\0b", 3), 64, Cfg()).code, kBadParams);
  assert_int_equal(s.PutStart(1, "k", 0, Cfg()).code, kBadParams);
  assert_int_equal(s.PutStart(1, "k", -1, Cfg()).code, kBadParams);
  assert_int_equal(s.PutStart(1, "k", INT64_MIN, Cfg()).code, kBadParams);
  assert_int_equal(s.PutStart(1, "k", (int64_t{4} << 30) + 1, Cfg()).code, kBadParams);
  assert_int_equal(s.PutStart(1, "k", 64, Cfg(0)).code, kBadParams);
  assert_int_equal(s.PutStart(1, "k", 64, Cfg(-3)).code, kBadParams);
  assert_int_equal(s.UpsertStart(1, "", 64, Cfg()).code, kBadParams);
  assert_int_equal(s.UpsertStart(1, "k", 0, Cfg()).code, kBadParams);
  assert_int_equal(s.PutStart(77, "k", 64, Cfg()).code, kUnknownDaemon);
  assert_int_equal(Used(s), 0);
  assert_int_equal(s.GetStats().objects, 0);
  // Boundaries that are valid: a 4096-byte key; 4 GiB is a legal size (just no room here).
  Put(s, 1, std::string(4096, 'k'), 64);
  assert_int_equal(s.PutStart(1, "k", int64_t{4} << 30, Cfg()).code, kNoSpace);
  // Every key-taking call rejects a bad key instead of crashing.
  assert_int_equal(ToInt(s.PutEnd(1, "")), kBadParams);
  assert_int_equal(ToInt(s.PutRevoke(1, std::string(5000, 'x'))), kBadParams);
  assert_int_equal(s.GetReplicaList("").code, kBadParams);
  assert_int_equal(s.ExistKey(""), kBadParams);
  assert_int_equal(ToInt(s.Remove("", true)), kBadParams);
}

// ---- rule 9: eviction: tests/unit/master_eviction_test.cc ----------------------------------

// ---- rule 10: upserts ------------------------------------------------------------------

void test_upsert_swaps_on_end(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  AddDaemon(s, 2);
  std::vector<rpc::ReplicaDescriptor> old = Put(s, 1, "k", 256);
  rpc::PutStartResult up = s.UpsertStart(2, "k", 512, Cfg());
  assert_int_equal(up.code, 0);
  assert_int_equal(up.replicas.size(), 1);
  assert_int_equal(up.replicas[0].status, rpc::ReplicaStatus::PROCESSING);
  assert_int_equal(up.replicas[0].size, 512);
  assert_false(Same(up.replicas[0], old[0]));
  assert_int_equal(Used(s), 768);

  rpc::ReplicaListResult got = s.GetReplicaList("k");  // leases the old bytes to T0 + 100
  assert_int_equal(got.code, 0);
  assert_int_equal(got.size, 256);
  assert_true(Same(got.replicas[0], old[0]));
  assert_int_equal(ToInt(s.UpsertEnd(1, "k")), kNotOwner);

  assert_int_equal(ToInt(s.UpsertEnd(2, "k")), 0);
  got = s.GetReplicaList("k");
  assert_int_equal(got.code, 0);
  assert_int_equal(got.size, 512);
  assert_int_equal(got.replicas.size(), 1);
  assert_true(Same(got.replicas[0], up.replicas[0]));
  assert_int_equal(got.replicas[0].status, rpc::ReplicaStatus::COMPLETE);
  assert_int_equal(Used(s), 768);  // the old bytes wait for their lease to end
  g_now = kT0 + kLease;
  s.Tick();
  assert_int_equal(Used(s), 512);
}

void test_upsert_revoke_keeps_old_value(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  AddDaemon(s, 2);
  std::vector<rpc::ReplicaDescriptor> old = Put(s, 1, "k", 256);
  assert_int_equal(s.UpsertStart(2, "k", 512, Cfg()).code, 0);
  assert_int_equal(ToInt(s.UpsertRevoke(1, "k")), kNotOwner);
  assert_int_equal(ToInt(s.UpsertRevoke(2, "k")), 0);
  assert_int_equal(Used(s), 256);
  rpc::ReplicaListResult got = s.GetReplicaList("k");
  assert_int_equal(got.code, 0);
  assert_int_equal(got.size, 256);
  assert_true(Same(got.replicas[0], old[0]));
}

// An upsert the master dropped (here abandoned past the release timeout; also when its
// segment goes or its writer is revoked) must not be acknowledged: its writer wrote the
// previous value too, so PutEnd's "retried PutEnd" rule would answer OK for a value
// nobody published. A retry of an UpsertEnd that did publish still answers OK.
void test_dropped_upsert_is_not_acknowledged(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  assert_int_equal(s.PutStart(1, "k", 64, Cfg()).code, 0);
  assert_int_equal(ToInt(s.PutEnd(1, "k", 111)), 0);
  assert_int_equal(s.UpsertStart(1, "k", 128, Cfg()).code, 0);
  g_now = kT0 + kRelease + 1000;
  s.Tick();  // the upsert is abandoned and dropped
  assert_int_equal(ToInt(s.UpsertEnd(1, "k", 222)), kNotOwner);
  rpc::ReplicaListResult got = s.GetReplicaList("k");
  assert_int_equal(got.size, 64);
  assert_int_equal(got.checksum, 111);

  assert_int_equal(s.UpsertStart(1, "k", 128, Cfg()).code, 0);
  assert_int_equal(ToInt(s.UpsertEnd(1, "k", 222)), 0);
  assert_int_equal(ToInt(s.UpsertEnd(1, "k", 222)), 0);  // a retry of the publish
  assert_int_equal(ToInt(s.UpsertEnd(1, "k", 333)), kNotOwner);
  assert_int_equal(ToInt(s.UpsertEnd(2, "k", 222)), kNotOwner);
  assert_int_equal(ToInt(s.UpsertEnd(1, "k")), kNotOwner);  // no checksum: cannot tell
  assert_int_equal(s.GetReplicaList("k").size, 128);
}

void test_upsert_of_missing_key_is_a_put(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  AddDaemon(s, 2);
  rpc::PutStartResult r = s.UpsertStart(1, "k", 256, Cfg(2));
  assert_int_equal(r.code, 0);
  assert_int_equal(r.replicas.size(), 2);
  assert_int_equal(s.ExistKey("k"), 0);
  assert_int_equal(s.GetReplicaList("k").code, kNotReady);
  assert_int_equal(s.PutStart(2, "k", 256, Cfg()).code, kExists);
  assert_int_equal(ToInt(s.UpsertEnd(2, "k")), kNotOwner);
  assert_int_equal(ToInt(s.UpsertEnd(1, "k")), 0);
  rpc::ReplicaListResult got = s.GetReplicaList("k");
  assert_int_equal(got.code, 0);
  assert_int_equal(got.size, 256);
  assert_int_equal(got.replicas.size(), 2);
  // Revoking an upsert-created put frees it like PutRevoke.
  assert_int_equal(s.UpsertStart(1, "k2", 256, Cfg()).code, 0);
  assert_int_equal(ToInt(s.UpsertRevoke(1, "k2")), 0);
  assert_int_equal(s.GetReplicaList("k2").code, kNotFound);
  assert_int_equal(Used(s), 512);
}

// ---- rule 11: segments -----------------------------------------------------------------

void test_mount_and_unmount_rules(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);  // segment 11, 1 MiB
  AddDaemon(s, 2);
  rpc::SegmentInfo info = s.GetAllSegments()[0];
  assert_int_equal(info.segment_id, 11);
  assert_int_equal(ToInt(s.MountSegment(info)), 0);  // a retried mount
  assert_int_equal(s.GetAllSegments().size(), 2);
  info.size = 2 * kMiB;
  assert_int_equal(ToInt(s.MountSegment(info)), kSegmentExists);
  info.daemon_id = 3;
  assert_int_equal(ToInt(s.MountSegment(info)), kUnknownDaemon);
  assert_int_equal(s.GetStats().capacity_bytes, 2 * kMiB);

  assert_int_equal(ToInt(s.UnmountSegment(2, 11)), kNotOwner);
  assert_int_equal(ToInt(s.UnmountSegment(1, 999)), kNoSegment);
  assert_int_equal(s.GetAllSegments().size(), 2);
  // Unmounting drops the segment's replicas: objects left without one disappear.
  Put(s, 1, "solo", 64, On(1));
  Put(s, 1, "both", 64, Cfg(2));
  assert_int_equal(ToInt(s.UnmountSegment(1, 11)), 0);
  assert_int_equal(s.GetReplicaList("solo").code, kNotFound);
  rpc::ReplicaListResult both = s.GetReplicaList("both");
  assert_int_equal(both.replicas.size(), 1);
  assert_int_equal(both.replicas[0].segment_id, 21);
  std::vector<rpc::SegmentInfo> left = s.GetAllSegments();
  assert_int_equal(left.size(), 1);
  assert_int_equal(left[0].segment_id, 21);
  assert_int_equal(ToInt(s.UnmountSegment(1, 11)), kNoSegment);
}

// ---- rule 12: checksums ----------------------------------------------------------------

void test_checksum_stored_at_put_end(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  assert_int_equal(s.PutStart(1, "k", 64, Cfg()).code, 0);
  assert_int_equal(ToInt(s.PutEnd(1, "k", int64_t{1} << 32)), kBadParams);  // not 32 bits
  assert_int_equal(s.GetReplicaList("k").code, kNotReady);  // so nothing was published
  assert_int_equal(ToInt(s.PutEnd(1, "k", 0xFFFFFFFF)), 0);
  assert_int_equal(s.GetReplicaList("k").checksum, 0xFFFFFFFF);
  assert_int_equal(ToInt(s.PutEnd(1, "k", 7)), 0);  // a retried PutEnd keeps the first
  assert_int_equal(s.GetReplicaList("k").checksum, 0xFFFFFFFF);
  Put(s, 1, "none", 64);
  assert_int_equal(s.GetReplicaList("none").checksum, -1);
  assert_int_equal(s.PutStart(1, "negative", 64, Cfg()).code, 0);
  assert_int_equal(ToInt(s.PutEnd(1, "negative", -5)), 0);  // any negative is "none"
  assert_int_equal(s.GetReplicaList("negative").checksum, -1);
  assert_int_equal(s.GetReplicaList("missing").checksum, -1);
}

void test_upsert_replaces_checksum_at_end(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  assert_int_equal(s.PutStart(1, "k", 64, Cfg()).code, 0);
  assert_int_equal(ToInt(s.PutEnd(1, "k", 111)), 0);
  assert_int_equal(s.UpsertStart(1, "k", 128, Cfg()).code, 0);
  assert_int_equal(s.GetReplicaList("k").checksum, 111);  // the old value's, while readable
  assert_int_equal(ToInt(s.UpsertEnd(1, "k", int64_t{1} << 32)), kBadParams);
  assert_int_equal(s.GetReplicaList("k").checksum, 111);
  assert_int_equal(ToInt(s.UpsertEnd(1, "k", 222)), 0);
  rpc::ReplicaListResult got = s.GetReplicaList("k");
  assert_int_equal(got.size, 128);
  assert_int_equal(got.checksum, 222);
  // A new value without a checksum does not inherit the old one's.
  assert_int_equal(s.UpsertStart(1, "k", 64, Cfg()).code, 0);
  assert_int_equal(ToInt(s.UpsertEnd(1, "k")), 0);
  assert_int_equal(s.GetReplicaList("k").checksum, -1);
  // An upsert that creates the key stores its checksum as a put does.
  assert_int_equal(s.UpsertStart(1, "new", 64, Cfg()).code, 0);
  assert_int_equal(ToInt(s.UpsertEnd(1, "new", 333)), 0);
  assert_int_equal(s.GetReplicaList("new").checksum, 333);
}

}  // namespace

int main(void) {
  mooncake::SetLogLevel(mooncake::LogLevel::kError);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replicas_on_distinct_segments_and_daemons),
      cmocka_unit_test(test_preferred_segments_first_avoided_last),
      cmocka_unit_test(test_allocation_best_effort_and_no_space),
      cmocka_unit_test(test_placement_seed_reproduces_placement),
      cmocka_unit_test(test_put_start_on_complete_key),
      cmocka_unit_test(test_dropped_upsert_is_not_acknowledged),
      cmocka_unit_test(test_abandoned_put_taken_over_and_released_late),
      cmocka_unit_test(test_processing_put_released_after_release_timeout),
      cmocka_unit_test(test_end_and_revoke_only_by_writer),
      cmocka_unit_test(test_readers_never_see_processing),
      cmocka_unit_test(test_put_revoke_frees_space),
      cmocka_unit_test(test_read_extends_lease),
      cmocka_unit_test(test_read_never_shortens_lease),
      cmocka_unit_test(test_remove_rules),
      cmocka_unit_test(test_remove_all),
      cmocka_unit_test(test_forced_remove_of_leased_defers_free),
      cmocka_unit_test(test_remove_by_regex),
      cmocka_unit_test(test_dead_daemon_is_dropped),
      cmocka_unit_test(test_restarted_daemon_replaces_old_one),
      cmocka_unit_test(test_put_validation),
      cmocka_unit_test(test_upsert_swaps_on_end),
      cmocka_unit_test(test_upsert_revoke_keeps_old_value),
      cmocka_unit_test(test_upsert_of_missing_key_is_a_put),
      cmocka_unit_test(test_mount_and_unmount_rules),
      cmocka_unit_test(test_checksum_stored_at_put_end),
      cmocka_unit_test(test_upsert_replaces_checksum_at_end),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
