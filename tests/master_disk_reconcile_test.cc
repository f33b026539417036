// The reconciliation of a daemon's SSD with the master (docs/ssd.md, "Reconciliation";
// issue 33), in mooncake::MasterService on the hand-moved clock: after a (re-)mount the
// daemon begins a round, registers what its SSD holds, and ends the round; the master then
// drops every disk replica of the segment the round did not vouch for (what the SSD lost:
// a relaxed-mode crash), counted as objects_dropped{reason="disk_reconcile"}. Until the
// end a re-attached segment lists only what was vouched for. Rounds repeated, ended twice,
// ended under another token, overtaken by a re-attach, and replicas created meanwhile.

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/logging.h"
#include "tests/master_disk_fixture.h"

namespace {

rpc::DiskObject On(const std::string& key, int64_t size, int64_t checksum) {
  rpc::DiskObject o;
  o.key = key;
  o.size = size;
  o.checksum = checksum;
  return o;
}

int64_t Dropped(const MasterService& s) {
  return s.GetStats().objects_dropped.at("disk_reconcile");
}

int Begin(MasterService& s, int64_t daemon, int64_t round) {
  return ToInt(s.BeginDiskReconciliation(daemon, DiskId(1), round));
}

int End(MasterService& s, int64_t daemon, int64_t round) {
  return ToInt(s.EndDiskReconciliation(daemon, DiskId(1), round));
}

// Daemon 1 with an SSD holding "held" and "lost" (disk only, adopted) and "mixed" (a
// memory replica on daemon 2, and a disk replica on daemon 1 proven by its checksum).
void ThreeOnDisk(MasterService& s) {
  AddDiskDaemon(s, 1);
  AddDaemon(s, 2);
  assert_int_equal(s.PutStart(2, "mixed", 1000, On(2)).code, 0);
  assert_int_equal(ToInt(s.PutEnd(2, "mixed", 77)), 0);
  std::vector<int32_t> codes = s.RegisterDiskReplicas(
      1, DiskId(1), {On("held", 1000, 1), On("lost", 1000, 2), On("mixed", 1000, 77)});
  for (int32_t code : codes) assert_int_equal(code, 0);
  assert_string_equal(Kinds(s, "mixed").c_str(), "MD");
}

// The daemon restarts (a new process, id 101, under its name) and takes its SSD back.
void Restart(MasterService& s) {
  assert_int_equal(ToInt(s.RegisterDaemon(101, Name(1))), 0);
  assert_int_equal(ToInt(s.MountSegment(DiskSegment(1, 101))), 0);
}

void test_restarted_daemon_round_drops_what_its_ssd_lost(void**) {
  MasterService s(Options());
  ThreeOnDisk(s);
  Restart(s);
  // Re-attached, not reconciled: nothing of it is listed or counted as present yet.
  assert_int_equal(s.GetReplicaList("held").code, kNotReady);
  assert_int_equal(s.ExistKey("held"), 0);
  assert_string_equal(Kinds(s, "mixed").c_str(), "M");
  assert_int_equal(Begin(s, 101, 0), kBadParams);
  assert_int_equal(Begin(s, 1, 55), kUnknownDaemon);  // the dead predecessor
  assert_int_equal(Begin(s, 101, 55), 0);
  assert_int_equal(Begin(s, 101, 55), 0);  // a repeat changes nothing
  // The SSD lost "lost" and "mixed" (a kill -9 in relaxed mode): it registers "held".
  assert_int_equal(s.RegisterDiskReplicas(101, DiskId(1), {On("held", 1000, 1)}, 55)[0], 0);
  assert_string_equal(Kinds(s, "held").c_str(), "D");  // vouched for: listed at once
  assert_int_equal(s.ExistKey("held"), 1);
  assert_int_equal(s.GetReplicaList("lost").code, kNotReady);
  // Another token ends nothing.
  assert_int_equal(End(s, 101, 56), kUnavailable);
  assert_int_equal(s.GetReplicaList("lost").code, kNotReady);
  assert_int_equal(Dropped(s), 0);
  assert_int_equal(End(s, 101, 55), 0);
  assert_int_equal(s.GetReplicaList("lost").code, kNotFound);  // it had no other replica
  assert_int_equal(s.ExistKey("lost"), 0);
  assert_string_equal(Kinds(s, "mixed").c_str(), "M");        // its memory replica stays
  assert_string_equal(Kinds(s, "held").c_str(), "D");
  assert_int_equal(Dropped(s), 2);
  rpc::DiskStats d = Disk(s);
  assert_int_equal(d.objects, 1);
  assert_int_equal(d.disk_only_objects, 1);
  assert_int_equal(s.GetStats().objects, 2);
  // Ended twice (a reply lost): OK, nothing more goes.
  assert_int_equal(End(s, 101, 55), 0);
  assert_int_equal(Dropped(s), 2);
  assert_string_equal(Kinds(s, "held").c_str(), "D");
  // The key can be put again, and is readable.
  Put(s, 2, "lost", 1000, On(2));
  assert_string_equal(Kinds(s, "lost").c_str(), "M");
}

void test_round_overtaken_by_a_reattach_or_another_round(void**) {
  MasterOptions o = Options();
  o.client_live_ttl_ms = 1000;
  o.daemon_grace_ms = 50000;
  MasterService s(o);
  ThreeOnDisk(s);
  Restart(s);
  assert_int_equal(Begin(s, 101, 7), 0);
  assert_int_equal(s.RegisterDiskReplicas(101, DiskId(1), {On("held", 1000, 1)}, 7)[0], 0);
  // The daemon falls silent mid-round (or the master lost it): detached, then mounted
  // again, which starts over. The old round's end applies to nothing.
  Advance(s, 1500);
  AddDaemon(s, 2);  // silent too meanwhile: back with its memory
  assert_int_equal(ToInt(s.RegisterDaemon(101, Name(1))), 0);
  assert_int_equal(ToInt(s.MountSegment(DiskSegment(1, 101))), 0);
  assert_int_equal(s.GetReplicaList("held").code, kNotReady);  // vouched in the old round
  assert_int_equal(End(s, 101, 7), kUnavailable);
  assert_int_equal(Dropped(s), 0);
  // A batch of a round that is not the current one vouches for nothing.
  assert_int_equal(Begin(s, 101, 8), 0);
  assert_int_equal(Begin(s, 101, 9), 0);
  assert_int_equal(s.RegisterDiskReplicas(101, DiskId(1), {On("lost", 1000, 2)}, 8)[0], 0);
  assert_int_equal(s.RegisterDiskReplicas(101, DiskId(1), {On("held", 1000, 1)}, 9)[0], 0);
  // A replica created during the round (an offload of a put on the restarted daemon) is
  // vouched for by its creation: kept, though the round never registered it.
  rpc::SegmentInfo memory = SegmentOf(101, 1011, kMiB);
  memory.name = Name(1);
  assert_int_equal(ToInt(s.MountSegment(memory)), 0);
  rpc::ReplicateConfig there = Offload();
  there.preferred_segments = {Name(1)};
  Put(s, 101, "fresh", 1000, there);
  std::vector<rpc::OffloadTask> tasks = Fetch(s, 101);
  assert_int_equal(tasks.size(), 1);
  assert_int_equal(s.ReportOffloads(101, DiskId(1), {"fresh"}, {tasks[0].replica_id}, {0})[0], 0);
  assert_int_equal(End(s, 101, 9), 0);
  assert_string_equal(Kinds(s, "held").c_str(), "D");
  assert_string_equal(Kinds(s, "fresh").c_str(), "MD");
  assert_int_equal(s.GetReplicaList("lost").code, kNotFound);
  assert_string_equal(Kinds(s, "mixed").c_str(), "M");
  assert_int_equal(Dropped(s), 2);
}

void test_repeated_round_on_a_reconciled_segment(void**) {
  MasterService s(Options());
  ThreeOnDisk(s);
  // A segment this master mounted new lists its replicas during a round: nothing about it
  // is in doubt until its daemon says otherwise.
  assert_int_equal(Begin(s, 1, 31), 0);
  assert_string_equal(Kinds(s, "lost").c_str(), "D");
  std::vector<int32_t> codes =
      s.RegisterDiskReplicas(1, DiskId(1), {On("held", 1000, 1), On("mixed", 1000, 77)}, 31);
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[1], 0);
  assert_int_equal(End(s, 1, 31), 0);
  assert_int_equal(s.GetReplicaList("lost").code, kNotFound);
  assert_int_equal(Dropped(s), 1);
  // Repeated whole: what it registers again stays, nothing else goes.
  assert_int_equal(Begin(s, 1, 32), 0);
  codes = s.RegisterDiskReplicas(1, DiskId(1), {On("held", 1000, 1), On("mixed", 1000, 77)}, 32);
  assert_int_equal(codes[0], 0);
  assert_int_equal(End(s, 1, 32), 0);
  assert_string_equal(Kinds(s, "held").c_str(), "D");
  assert_string_equal(Kinds(s, "mixed").c_str(), "MD");
  assert_int_equal(Dropped(s), 1);
  // A value the SSD holds under the key that is not the master's: that replica goes, and
  // counts too.
  codes = s.RegisterDiskReplicas(1, DiskId(1), {On("mixed", 1000, 78)});
  assert_int_equal(codes[0], kNotFound);
  assert_string_equal(Kinds(s, "mixed").c_str(), "M");
  assert_int_equal(Dropped(s), 2);
  // Only the owner reconciles its segment.
  assert_int_equal(Begin(s, 2, 33), kNotOwner);
  assert_int_equal(End(s, 2, 32), kNotOwner);
}

}  // namespace

int main(void) {
  mooncake::SetLogLevel(mooncake::LogLevel::kError);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_restarted_daemon_round_drops_what_its_ssd_lost),
      cmocka_unit_test(test_round_overtaken_by_a_reattach_or_another_round),
      cmocka_unit_test(test_repeated_round_on_a_reconciled_segment),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
