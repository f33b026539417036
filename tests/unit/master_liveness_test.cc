// Daemon liveness in MasterService, on the hand-moved clock: a stall of the master itself
// is not counted against the daemons, and a daemon that falls silent is detached for a
// grace period (its objects kept) before it is declared dead. See master_service.h,
// "Liveness".

#include <initializer_list>
#include <string>
#include <vector>

#include "tests/harness/master_service_fixture.h"

namespace {

constexpr int64_t kTtl = 1000;
constexpr int64_t kGrace = 5000;
constexpr int64_t kTick = 100;  // MasterOptions::upkeep_interval_ms

MasterOptions LivenessOptions() {
  MasterOptions o = Options();
  o.client_live_ttl_ms = kTtl;
  o.daemon_grace_ms = kGrace;
  return o;
}

// A running master: the clock moves by ms in upkeep rounds, and the daemons named in
// beating heartbeat every round.
void Run(MasterService& s, int64_t ms, std::initializer_list<int64_t> beating) {
  for (int64_t end = g_now + ms; g_now < end;) {
    g_now += kTick;
    for (int64_t d : beating) assert_int_equal(s.Heartbeat(d).code, 0);
    s.Tick();
  }
}

int64_t Pending(const MasterService& s) { return s.GetStats().pending_segments; }

// What a daemon does on -103: register again, mount its segment again (same id, same
// incarnation: SegmentOf's).
int Rejoin(MasterService& s, int64_t daemon) {
  assert_int_equal(ToInt(s.RegisterDaemon(daemon, Name(daemon))), 0);
  return ToInt(s.MountSegment(SegmentOf(daemon, daemon * 10 + 1, kMiB)));
}

// Daemons 1 and 2 (segments 11 and 21), objects only on 1, only on 2, and on both.
void Populate(MasterService& s) {
  s.Tick();  // the first round
  AddDaemon(s, 1);
  AddDaemon(s, 2);
  Put(s, 2, "only-on-1", 256, On(1));
  Put(s, 2, "only-on-2", 256, On(2));
  Put(s, 2, "both", 256, Cfg(2));
}

int64_t OffsetOf(MasterService& s, const std::string& key) {
  rpc::ReplicaListResult r = s.GetReplicaList(key);
  assert_int_equal(r.code, 0);
  return r.replicas[0].offset;
}

// ---- the master's own stall ------------------------------------------------------------

// 15 s without a round (SIGSTOP): nobody heartbeat meanwhile, and nobody is blamed. The
// clocks restart at the stall rather than stop forever: silence after it still counts.
void test_own_stall_is_not_the_daemons_silence(void**) {
  MasterService s(LivenessOptions());
  Populate(s);
  Run(s, 500, {1, 2});
  g_now += 15000;
  s.Tick();
  assert_int_equal(Pending(s), 0);
  assert_int_equal(s.GetStats().daemons, 2);
  assert_int_equal(s.GetStats().objects, 3);
  assert_int_equal(s.GetReplicaList("only-on-1").code, 0);
  assert_int_equal(s.Heartbeat(1).code, 0);
  assert_int_equal(s.Heartbeat(2).code, 0);

  Run(s, 900, {2});  // daemon 1 silent since the stall, for less than the TTL
  assert_int_equal(Pending(s), 0);
  Run(s, 200, {2});
  assert_int_equal(Pending(s), 1);
  assert_int_equal(s.Heartbeat(1).code, kUnknownDaemon);
}

// The rule's edge: a gap of 2 × upkeep_interval + 500 ms is a slow round, one ms more is
// the master's stall.
void test_stall_threshold(void**) {
  MasterService slow(LivenessOptions());
  Populate(slow);
  for (int i = 0; i < 2; ++i) {
    g_now += 2 * kTick + MasterOptions::kStallMarginMs;
    slow.Tick();
  }
  assert_int_equal(Pending(slow), 2);  // 1400 ms of silence counted

  MasterService stalled(LivenessOptions());
  Populate(stalled);
  for (int i = 0; i < 4; ++i) {
    g_now += 2 * kTick + MasterOptions::kStallMarginMs + 1;
    stalled.Tick();
  }
  assert_int_equal(Pending(stalled), 0);  // every gap forgiven
}

// A stall while a daemon is detached moves its deadline later by the time lost.
void test_stall_postpones_the_grace(void**) {
  MasterService s(LivenessOptions());
  Populate(s);
  Run(s, kTtl + kTick, {2});
  assert_int_equal(Pending(s), 1);
  Run(s, 3000, {2});
  g_now += 10000;  // stopped
  s.Tick();
  Run(s, 1500, {2});  // long past the first deadline, 4.6 s of the grace in running time
  assert_int_equal(Pending(s), 1);
  assert_int_equal(s.GetReplicaList("only-on-1").code, kNotReady);
  Run(s, 10000, {2});
  assert_int_equal(Pending(s), 0);
  assert_int_equal(s.GetReplicaList("only-on-1").code, kNotFound);
}

// ---- a silent daemon's grace -----------------------------------------------------------

// Detached: its replicas are not listed (reads go to the other copy, or answer -703),
// nothing new is placed on it, it must register again. Back with the same segment and
// incarnation, every object is where it was.
void test_silent_daemon_comes_back_with_its_objects(void**) {
  MasterService s(LivenessOptions());
  Populate(s);
  int64_t offset = OffsetOf(s, "only-on-1");
  Run(s, kTtl + kTick, {2});
  assert_int_equal(Pending(s), 1);
  assert_int_equal(s.GetStats().daemons, 1);
  assert_int_equal(s.GetStats().objects, 3);
  assert_int_equal(s.GetReplicaList("only-on-1").code, kNotReady);
  assert_int_equal(s.ExistKey("only-on-1"), 0);
  rpc::ReplicaListResult both = s.GetReplicaList("both");
  assert_int_equal(both.code, 0);
  assert_int_equal(both.replicas.size(), 1);
  assert_int_equal(both.replicas[0].daemon_id, 2);
  std::vector<rpc::SegmentInfo> listed = s.GetAllSegments();
  assert_int_equal(listed.size(), 1);
  assert_int_equal(listed[0].segment_id, 21);
  rpc::PutStartResult placed = s.PutStart(2, "new", 256, On(1));
  assert_int_equal(placed.code, 0);
  assert_int_equal(placed.replicas[0].segment_id, 21);
  assert_int_equal(ToInt(s.PutEnd(2, "new")), 0);
  assert_int_equal(s.Heartbeat(1).code, kUnknownDaemon);
  assert_int_equal(ToInt(s.MountSegment(SegmentOf(1, 11, kMiB))), kUnknownDaemon);
  assert_int_equal(s.PutStart(1, "by-1", 256, Cfg()).code, kUnknownDaemon);

  Run(s, 2000, {2});
  assert_int_equal(ToInt(s.RegisterDaemon(1, Name(1))), 0);
  rpc::SegmentInfo forged = SegmentOf(1, 11, kMiB);
  forged.incarnation = 5;
  assert_int_equal(ToInt(s.MountSegment(forged)), kSegmentExists);
  assert_int_equal(Pending(s), 1);
  assert_int_equal(Rejoin(s, 1), 0);
  assert_int_equal(Pending(s), 0);
  assert_int_equal(s.GetStats().daemons, 2);
  assert_int_equal(OffsetOf(s, "only-on-1"), offset);
  assert_int_equal(s.GetReplicaList("both").replicas.size(), 2);
  assert_int_equal(s.PutStart(2, "on-1-again", 256, On(1)).replicas[0].segment_id, 11);
  Run(s, 2 * kGrace, {1, 2});  // the old deadline means nothing any more
  assert_int_equal(Pending(s), 0);
  assert_int_equal(s.GetReplicaList("only-on-1").code, 0);
}

// Not back in time: dead, as before the grace existed. Coming back later, it finds only
// the range of its parked object held for its check (tests/unit/master_verify_test.cc): nothing
// readable until that check adopts it.
void test_silent_daemon_dead_after_grace(void**) {
  MasterService s(LivenessOptions());
  Populate(s);
  Run(s, kTtl + kTick, {2});
  Run(s, kGrace - 2 * kTick, {2});
  assert_int_equal(Pending(s), 1);
  assert_int_equal(s.GetStats().objects, 3);
  Run(s, 3 * kTick, {2});
  assert_int_equal(Pending(s), 0);
  assert_int_equal(s.GetStats().objects, 2);
  assert_int_equal(s.GetReplicaList("only-on-1").code, kNotFound);
  assert_int_equal(s.GetReplicaList("both").replicas.size(), 1);
  assert_int_equal(s.GetReplicaList("only-on-2").code, 0);
  assert_int_equal(s.GetStats().parked_objects, 1);  // "both" lives on elsewhere
  assert_int_equal(Rejoin(s, 1), 0);
  assert_true(SegmentUsed(s, 11) >= 256);
  assert_int_equal(s.GetReplicaList("only-on-1").code, kNotFound);
}

// The grace is at least one read lease: a reader granted one just before the silence may
// read the range until it ends, so it must not be handed out before.
void test_grace_at_least_a_lease(void**) {
  MasterOptions o = LivenessOptions();
  o.daemon_grace_ms = 0;
  o.default_kv_lease_ttl_ms = 1000;
  MasterService s(o);
  Populate(s);
  Run(s, kTtl + kTick, {2});
  assert_int_equal(Pending(s), 1);
  Run(s, 900, {2});
  assert_int_equal(Pending(s), 1);
  Run(s, 200, {2});
  assert_int_equal(Pending(s), 0);
}

// Registered again but unable to prove the segment is its own: live, and the segment goes
// when the grace does.
void test_unproven_segment_dropped_after_grace(void**) {
  MasterService s(LivenessOptions());
  Populate(s);
  Run(s, kTtl + kTick, {2});
  assert_int_equal(ToInt(s.RegisterDaemon(1, Name(1))), 0);
  rpc::SegmentInfo forged = SegmentOf(1, 11, kMiB);
  forged.incarnation = 5;
  assert_int_equal(ToInt(s.MountSegment(forged)), kSegmentExists);
  Run(s, kGrace + kTick, {1, 2});
  assert_int_equal(Pending(s), 0);
  assert_int_equal(s.GetStats().daemons, 2);
  assert_int_equal(s.GetReplicaList("only-on-1").code, kNotFound);
}

// A new process at the silent daemon's endpoint: the old one's memory is gone for sure.
void test_replaced_while_detached_is_dead_at_once(void**) {
  MasterService s(LivenessOptions());
  Populate(s);
  Run(s, kTtl + kTick, {2});
  assert_int_equal(Pending(s), 1);
  assert_int_equal(ToInt(s.RegisterDaemon(3, Name(1))), 0);
  assert_int_equal(Pending(s), 0);
  assert_int_equal(s.GetReplicaList("only-on-1").code, kNotFound);
  assert_int_equal(s.GetStats().objects, 2);
}

// Puts in flight survive the grace: the silent writer's own (it may finish them when it is
// back), and another writer's into the detached segment (revoked or finished as usual).
void test_puts_in_flight_across_the_grace(void**) {
  MasterService s(LivenessOptions());
  Populate(s);
  assert_int_equal(s.PutStart(1, "by-1", 256, On(2)).code, 0);
  assert_int_equal(s.PutStart(2, "into-1", 256, On(1)).code, 0);
  assert_int_equal(s.PutStart(2, "into-1-revoked", 256, On(1)).code, 0);
  int64_t used_on_1 = SegmentUsed(s, 11);
  Run(s, kTtl + kTick, {2});
  assert_int_equal(Pending(s), 1);
  assert_int_equal(s.GetReplicaList("by-1").code, kNotReady);
  assert_int_equal(ToInt(s.PutRevoke(2, "into-1-revoked")), 0);
  assert_int_equal(ToInt(s.PutEnd(2, "into-1")), 0);
  assert_int_equal(s.GetReplicaList("into-1").code, kNotReady);  // on the detached segment
  assert_int_equal(Rejoin(s, 1), 0);
  assert_int_equal(ToInt(s.PutEnd(1, "by-1")), 0);
  assert_int_equal(s.GetReplicaList("by-1").code, 0);
  assert_int_equal(s.GetReplicaList("into-1").code, 0);
  assert_int_equal(SegmentUsed(s, 11), used_on_1 - 256);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_own_stall_is_not_the_daemons_silence),
      cmocka_unit_test(test_stall_threshold),
      cmocka_unit_test(test_stall_postpones_the_grace),
      cmocka_unit_test(test_silent_daemon_comes_back_with_its_objects),
      cmocka_unit_test(test_silent_daemon_dead_after_grace),
      cmocka_unit_test(test_grace_at_least_a_lease),
      cmocka_unit_test(test_unproven_segment_dropped_after_grace),
      cmocka_unit_test(test_replaced_while_detached_is_dead_at_once),
      cmocka_unit_test(test_puts_in_flight_across_the_grace),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
