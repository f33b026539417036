// MasterService's verification of replicas it cannot vouch for, in process on the
// hand-moved clock (docs/durability.md, "Verification after restore" and "A daemon that
// returns late"): every restored memory replica is unverified until its daemon reports on
// it, a bad report drops it (counted restore_checksum), an object without a checksum is
// kept (counted restore_unverifiable); a segment dropped past its grace parks its objects,
// which its daemon's return adopts -- unless their key was written or removed meanwhile,
// or the TTL ran out.

#include <string>
#include <vector>

#include "master/snapshot/snapshot_codec.h"
#include "master/snapshot/snapshot_store.h"
#include "master/snapshot/snapshot_writer.h"
#include "master/snapshot/snapshotter.h"
#include "master/log/oplog.h"
#include "master/snapshot/state_restore.h"
#include "tests/harness/master_service_fixture.h"
#include "tests/harness/process_harness.h"

namespace {

constexpr int64_t kTtl = 1000;
constexpr int64_t kGrace = 2000;
constexpr int64_t kParkTtl = 10000;
constexpr int64_t kTick = 100;

MasterOptions VerifyOptions() {
  MasterOptions o = Options();
  o.client_live_ttl_ms = kTtl;
  o.daemon_grace_ms = kGrace;
  o.reattach_grace_ms = kGrace;
  o.parked_segment_ttl_ms = kParkTtl;
  return o;
}

rpc::SegmentInfo Seg(int64_t daemon, int64_t incarnation = 7) {
  rpc::SegmentInfo info = SegmentOf(daemon, daemon * 10 + 1, kMiB);
  info.incarnation = incarnation;
  return info;
}

void Join(MasterService& s, int64_t daemon, int64_t incarnation = 7) {
  assert_int_equal(ToInt(s.RegisterDaemon(daemon, Name(daemon))), 0);
  assert_int_equal(ToInt(s.MountSegment(Seg(daemon, incarnation))), 0);
}

// A put with a checksum (-1: none); returns the replica's offset.
int64_t PutSum(MasterService& s, int64_t writer, const std::string& key, int64_t checksum,
               const rpc::ReplicateConfig& c) {
  rpc::PutStartResult r = s.PutStart(writer, key, 4096, c);
  assert_int_equal(r.code, 0);
  assert_int_equal(ToInt(s.PutEnd(writer, key, checksum)), 0);
  return r.replicas[0].offset;
}

// The clock moves by ms in upkeep rounds; the daemons in beating heartbeat every round.
void Run(MasterService& s, int64_t ms, std::vector<int64_t> beating) {
  for (int64_t end = g_now + ms; g_now < end;) {
    g_now += kTick;
    for (int64_t d : beating) s.Heartbeat(d);
    s.Tick();
  }
}

// Every replica ListUnverified pages out for daemon's segment.
std::vector<rpc::UnverifiedReplica> ListAll(MasterService& s, int64_t daemon) {
  std::vector<rpc::UnverifiedReplica> all;
  for (int64_t cursor = 0; cursor >= 0;) {
    rpc::UnverifiedPage page = s.ListUnverified(daemon, daemon * 10 + 1, cursor, 2);
    assert_int_equal(page.code, 0);
    all.insert(all.end(), page.replicas.begin(), page.replicas.end());
    cursor = page.next_cursor;
  }
  return all;
}

const rpc::UnverifiedReplica* Find(const std::vector<rpc::UnverifiedReplica>& list,
                                   const std::string& key) {
  for (const auto& r : list) {
    if (r.key == key) return &r;
  }
  return nullptr;
}

int Report(MasterService& s, int64_t daemon, const rpc::UnverifiedReplica& r, bool ok) {
  rpc::VerifiedReplica v;
  v.key = r.key;
  v.offset = r.offset;
  v.ok = ok;
  return s.ReportVerified(daemon, daemon * 10 + 1, {v})[0];
}

int64_t Dropped(const MasterService& s, const std::string& reason) {
  auto stats = s.GetStats();
  auto it = stats.objects_dropped.find(reason);
  return it == stats.objects_dropped.end() ? -1 : it->second;
}

struct TempDir {
  std::string path = mooncake::testing::MakeTempDir("mc-verify-");
  ~TempDir() { mooncake::testing::RemoveTree(path); }
};

// Snapshots from into dir, then restores a new master from it.
std::unique_ptr<MasterService> SnapshotAndRestore(MasterService& from, const std::string& dir) {
  mooncake::SnapshotWriter writer(dir, 0, 1);
  mooncake::SnapshotFigures figures;
  std::string error;
  assert_int_equal(ToInt(writer.Begin(&error)), 0);
  assert_int_equal(ToInt(mooncake::WriteSnapshotPayloads(&from, &writer, &figures, &error)), 0);
  assert_int_equal(ToInt(writer.Publish({}, &error)), 0);
  auto s = std::make_unique<MasterService>(VerifyOptions());
  mooncake::SnapshotStore store(dir);
  mooncake::OpLogOptions o;
  o.dir = dir + "/oplog";
  mooncake::OpLog log(o);
  assert_true(mooncake::RestoreMasterState(s.get(), &store, &log).ok());
  return s;
}

// ---- verification after a restore --------------------------------------------------------

void TestRestoredReplicasWaitForTheirDaemon(void**) {
  TempDir dir;
  MasterService a(VerifyOptions());
  Join(a, 1);
  const int64_t at = PutSum(a, 1, "good", 1234, On(1));
  PutSum(a, 1, "bad", 5678, On(1));
  PutSum(a, 1, "nosum", -1, On(1));
  // Fresh puts are verified: nothing to list.
  assert_false(a.GetReplicaList("good").replicas[0].unverified);
  assert_true(ListAll(a, 1).empty());

  auto s = SnapshotAndRestore(a, dir.path);
  assert_int_equal(ToInt(s->RegisterDaemon(1, Name(1))), 0);
  assert_int_equal(ToInt(s->MountSegment(Seg(1))), 0);
  rpc::ReplicaListResult listed = s->GetReplicaList("good");
  assert_int_equal(listed.code, 0);
  assert_true(listed.replicas[0].unverified);  // fragment reads skip it
  assert_int_equal(s->GetStats().unverified_replicas, 3);

  std::vector<rpc::UnverifiedReplica> pending = ListAll(*s, 1);
  assert_int_equal(pending.size(), 3);
  const rpc::UnverifiedReplica* good = Find(pending, "good");
  assert_non_null(good);
  assert_int_equal(good->offset, at);
  assert_int_equal(good->size, 4096);
  assert_int_equal(good->checksum, 1234);
  assert_int_equal(Find(pending, "nosum")->checksum, -1);

  assert_int_equal(Report(*s, 1, *good, true), 0);
  assert_false(s->GetReplicaList("good").replicas[0].unverified);
  assert_int_equal(Report(*s, 1, *Find(pending, "bad"), false), 0);
  assert_int_equal(s->GetReplicaList("bad").code, kNotFound);  // dropped, never served
  // No checksum: nothing to check against; kept, counted.
  assert_int_equal(Report(*s, 1, *Find(pending, "nosum"), false), 0);
  assert_int_equal(s->GetReplicaList("nosum").code, 0);
  assert_false(s->GetReplicaList("nosum").replicas[0].unverified);
  // A repeat finds nothing waiting and changes nothing.
  assert_int_equal(Report(*s, 1, *good, false), kNotFound);
  assert_int_equal(s->GetReplicaList("good").code, 0);

  assert_int_equal(Dropped(*s, "restore_checksum"), 1);
  assert_int_equal(Dropped(*s, "restore_unverifiable"), 1);
  assert_int_equal(s->GetStats().unverified_replicas, 0);
  assert_true(ListAll(*s, 1).empty());
  // Another daemon cannot list or report on the segment.
  assert_int_equal(s->ListUnverified(2, 11, 0, 10).code, kUnknownDaemon);
  assert_int_equal(s->ListUnverified(1, 11, 0, 0).code, kBadParams);
}

void TestBadReplicaGoesButTheOtherStays(void**) {
  TempDir dir;
  MasterService a(VerifyOptions());
  Join(a, 1);
  Join(a, 2);
  PutSum(a, 1, "two", 99, Cfg(2));
  auto s = SnapshotAndRestore(a, dir.path);
  for (int64_t d : {1, 2}) {
    s->RegisterDaemon(d, Name(d));
    assert_int_equal(ToInt(s->MountSegment(Seg(d))), 0);
  }
  std::vector<rpc::UnverifiedReplica> on1 = ListAll(*s, 1);
  assert_int_equal(on1.size(), 1);
  assert_int_equal(Report(*s, 1, on1[0], false), 0);
  rpc::ReplicaListResult left = s->GetReplicaList("two");
  assert_int_equal(left.code, 0);
  assert_int_equal(left.replicas.size(), 1);
  assert_int_equal(left.replicas[0].daemon_id, 2);
  assert_true(left.replicas[0].unverified);
  assert_int_equal(Dropped(*s, "restore_checksum"), 1);
}

// A restored replica dropped another way before its check (a reader's report, a remove)
// stops counting as waiting at once: the count must reach zero even when the daemon's
// report on it, arriving after, finds nothing.
void TestDroppedElsewhereStopsWaiting(void**) {
  TempDir dir;
  MasterService a(VerifyOptions());
  Join(a, 1);
  PutSum(a, 1, "read-bad", 11, On(1));
  PutSum(a, 1, "removed", 12, On(1));
  PutSum(a, 1, "kept", 13, On(1));
  auto s = SnapshotAndRestore(a, dir.path);
  Join(*s, 1);
  std::vector<rpc::UnverifiedReplica> pending = ListAll(*s, 1);
  assert_int_equal(pending.size(), 3);
  assert_int_equal(s->GetStats().unverified_replicas, 3);

  rpc::ReplicaListResult listed = s->GetReplicaList("read-bad");
  assert_int_equal(listed.code, 0);
  assert_int_equal(
      s->ReportBadReplicas(1, {Mismatch("read-bad", listed.replicas[0].replica_id, 4096, 11)})[0],
      0);
  assert_int_equal(s->GetStats().unverified_replicas, 2);
  g_now += 2 * kTtl;  // past the read lease GetReplicaList granted
  assert_int_equal(ToInt(s->Remove("removed", false)), 0);
  assert_int_equal(s->GetStats().unverified_replicas, 1);

  // The daemon's reports, computed before those drops, find nothing to settle.
  assert_int_equal(Report(*s, 1, *Find(pending, "read-bad"), false), kNotFound);
  assert_int_equal(Report(*s, 1, *Find(pending, "removed"), true), kNotFound);
  assert_int_equal(s->GetStats().unverified_replicas, 1);
  assert_int_equal(Report(*s, 1, *Find(pending, "kept"), true), 0);
  assert_int_equal(s->GetStats().unverified_replicas, 0);
  assert_int_equal(Dropped(*s, "restore_checksum"), 0);
  assert_int_equal(Dropped(*s, "unreadable"), 1);
}

// A standby taking over (ha.md) may lack what the old leader wrote alone: its replicas
// start unverified as after a restore, even those checked before.
void TestTakeOverUnverifiesAgain(void**) {
  TempDir dir;
  MasterService a(VerifyOptions());
  Join(a, 1);
  PutSum(a, 1, "k", 42, On(1));
  auto s = SnapshotAndRestore(a, dir.path);
  Join(*s, 1);
  for (const auto& r : ListAll(*s, 1)) assert_int_equal(Report(*s, 1, r, true), 0);
  assert_int_equal(s->GetStats().unverified_replicas, 0);
  s->TakeOver();
  assert_int_equal(s->GetStats().unverified_replicas, 1);
  Join(*s, 1);
  std::vector<rpc::UnverifiedReplica> again = ListAll(*s, 1);
  assert_int_equal(again.size(), 1);
  assert_string_equal(again[0].key.c_str(), "k");
}

// ---- a daemon that returns late ------------------------------------------------------------

// Daemon 1 (segment 11) with "kept", "re-put", "removed"; daemon 2 beats throughout.
// Daemon 1 falls silent past its grace: its segment is dropped and its objects parked.
void SilentPastGrace(MasterService& s, std::vector<int64_t>* offsets) {
  s.Tick();
  Join(s, 1);
  Join(s, 2);
  for (const char* key : {"kept", "re-put", "removed"}) {
    offsets->push_back(PutSum(s, 1, key, 4242, On(1)));
  }
  Run(s, kTtl + kGrace + 4 * kTick, {2});
  assert_int_equal(s.GetStats().parked_objects, 3);
  assert_int_equal(s.GetReplicaList("kept").code, kNotFound);  // parked: not in the directory
  assert_int_equal(s.ExistKey("kept"), 0);
}

void TestParkedObjectsAreAdoptedBack(void**) {
  MasterService s(VerifyOptions());
  std::vector<int64_t> offsets;
  SilentPastGrace(s, &offsets);
  // Meanwhile: "re-put" is written again (on daemon 2), "removed" removed.
  PutSum(s, 2, "re-put", 77, On(2));
  assert_int_equal(ToInt(s.Remove("removed", false)), kNotFound);
  assert_int_equal(s.GetStats().parked_objects, 2);

  // The same process comes back: same id, base, size and incarnation.
  Join(s, 1);
  // The parked ranges are reserved before anything else lands in the segment.
  for (int i = 0; i < 8; ++i) {
    int64_t at = PutSum(s, 2, "new-" + std::to_string(i), -1, On(1));
    assert_true(at != offsets[0] && at != offsets[1]);
  }
  std::vector<rpc::UnverifiedReplica> pending = ListAll(s, 1);
  assert_int_equal(pending.size(), 2);  // "removed" never comes back
  assert_null(Find(pending, "removed"));
  for (const auto& r : pending) assert_int_equal(Report(s, 1, r, true), 0);

  rpc::ReplicaListResult kept = s.GetReplicaList("kept");
  assert_int_equal(kept.code, 0);
  assert_int_equal(kept.replicas[0].offset, offsets[0]);
  assert_int_equal(kept.replicas[0].daemon_id, 1);
  assert_int_equal(kept.checksum, 4242);
  rpc::ReplicaListResult reput = s.GetReplicaList("re-put");
  assert_int_equal(reput.code, 0);
  assert_int_equal(reput.replicas[0].daemon_id, 2);  // the newer state stands
  assert_int_equal(reput.checksum, 77);
  assert_int_equal(s.GetReplicaList("removed").code, kNotFound);
  assert_int_equal(s.GetStats().parked_adopted, 1);
  assert_int_equal(s.GetStats().parked_objects, 0);
  // The superseded range was freed: it takes a new put again.
  bool reused = false;
  for (int i = 0; i < 200 && !reused; ++i) {
    reused = PutSum(s, 2, "fill-" + std::to_string(i), -1, On(1)) == offsets[1];
  }
  assert_true(reused);
}

void TestParkedBadBytesAreDropped(void**) {
  MasterService s(VerifyOptions());
  std::vector<int64_t> offsets;
  SilentPastGrace(s, &offsets);
  Join(s, 1);
  std::vector<rpc::UnverifiedReplica> pending = ListAll(s, 1);
  assert_int_equal(pending.size(), 3);
  for (const auto& r : pending) assert_int_equal(Report(s, 1, r, r.key != "kept"), 0);
  assert_int_equal(s.GetReplicaList("kept").code, kNotFound);
  assert_int_equal(s.GetReplicaList("re-put").code, 0);
  assert_int_equal(Dropped(s, "restore_checksum"), 1);
}

void TestParkedObjectsExpire(void**) {
  MasterService s(VerifyOptions());
  std::vector<int64_t> offsets;
  SilentPastGrace(s, &offsets);
  Run(s, kParkTtl + kTick, {2});
  assert_int_equal(s.GetStats().parked_objects, 0);
  assert_int_equal(Dropped(s, "parked_expired"), 3);
  Join(s, 1);
  assert_true(ListAll(s, 1).empty());
  assert_int_equal(s.GetReplicaList("kept").code, kNotFound);
}

void TestAnotherIncarnationDiscardsThem(void**) {
  MasterService s(VerifyOptions());
  std::vector<int64_t> offsets;
  SilentPastGrace(s, &offsets);
  Join(s, 1, /*incarnation=*/8);  // restarted: its memory is gone
  assert_true(ListAll(s, 1).empty());
  assert_int_equal(s.GetStats().parked_objects, 0);
  assert_int_equal(Dropped(s, "parked_expired"), 3);
}

void TestRemoveAllDiscardsParked(void**) {
  MasterService s(VerifyOptions());
  std::vector<int64_t> offsets;
  SilentPastGrace(s, &offsets);
  assert_int_equal(s.RemoveByRegex("^re", false), 0);
  assert_int_equal(s.GetStats().parked_objects, 1);
  s.RemoveAll(false);
  assert_int_equal(s.GetStats().parked_objects, 0);
  Join(s, 1);
  assert_true(ListAll(s, 1).empty());
}

void TestNoParkingWithTtlZero(void**) {
  MasterOptions o = VerifyOptions();
  o.parked_segment_ttl_ms = 0;
  MasterService s(o);
  s.Tick();
  Join(s, 1);
  Join(s, 2);
  PutSum(s, 1, "gone", 1, On(1));
  Run(s, kTtl + kGrace + 4 * kTick, {2});
  assert_int_equal(s.GetStats().parked_objects, 0);
  Join(s, 1);
  assert_true(ListAll(s, 1).empty());
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(TestRestoredReplicasWaitForTheirDaemon),
      cmocka_unit_test(TestBadReplicaGoesButTheOtherStays),
      cmocka_unit_test(TestDroppedElsewhereStopsWaiting),
      cmocka_unit_test(TestTakeOverUnverifiesAgain),
      cmocka_unit_test(TestParkedObjectsAreAdoptedBack),
      cmocka_unit_test(TestParkedBadBytesAreDropped),
      cmocka_unit_test(TestParkedObjectsExpire),
      cmocka_unit_test(TestAnotherIncarnationDiscardsThem),
      cmocka_unit_test(TestRemoveAllDiscardsParked),
      cmocka_unit_test(TestNoParkingWithTtlZero),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
