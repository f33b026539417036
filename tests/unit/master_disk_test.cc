// The SSD tier in mooncake::MasterService, on the hand-moved clock (docs/ssd.md, "master"):
// LOCAL_DISK segments (one per daemon, no memory, taken back by the restarted daemon),
// offloads at put (fetched under a lease, reported, -704 once the object changed), the
// reconciliation of a daemon's SSD, dropped disk replicas, promotion, and the figures.

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/logging.h"
#include "master/directory/object_metadata.h"
#include "tests/harness/master_disk_fixture.h"

namespace {

static_assert(sizeof(void*) != 8 || sizeof(mooncake::ObjectMetadata) == 80,
              "disk replicas must not grow the metadata");

// ---- LOCAL_DISK segments ---------------------------------------------------------------

void test_disk_segment_counts_for_no_memory(void**) {
  MasterService s(Options());
  AddDiskDaemon(s, 1, 64 * 1024);
  rpc::MasterStats stats = s.GetStats();
  assert_int_equal(stats.capacity_bytes, 64 * 1024);
  assert_int_equal(stats.segments, 1);
  assert_int_equal(stats.disk.segments, 1);
  assert_int_equal(stats.disk.capacity_bytes, kSsd);
  // Listed, with its kind and endpoints, so that other daemons can reach it.
  std::vector<rpc::SegmentInfo> all = s.GetAllSegments();
  assert_int_equal(all.size(), 2);
  int disks = 0;
  for (const rpc::SegmentInfo& info : all) {
    if (info.kind != rpc::ReplicaKind::LOCAL_DISK) continue;
    ++disks;
    assert_int_equal(info.segment_id, DiskId(1));
    assert_int_equal(info.incarnation, 0);
    assert_int_equal(info.endpoints.size(), 1);
  }
  assert_int_equal(disks, 1);
  // Placement never uses it: the memory fills up, then puts find no space.
  int placed = 0;
  for (;; ++placed) {
    rpc::PutStartResult r = s.PutStart(1, "k" + std::to_string(placed), 4096, Cfg());
    if (r.code != 0) {
      assert_int_equal(r.code, kNoSpace);
      break;
    }
    assert_int_equal(r.replicas[0].segment_id, 11);
  }
  assert_int_equal(placed, 16);
}

void test_one_disk_segment_per_daemon(void**) {
  MasterService s(Options());
  AddDiskDaemon(s, 1);
  rpc::SegmentInfo second = DiskSegment(1);
  second.segment_id = 18;
  assert_int_equal(ToInt(s.MountSegment(second)), kSegmentExists);
  assert_int_equal(ToInt(s.MountSegment(DiskSegment(1))), 0);  // a retry: a no-op
  rpc::SegmentInfo bad = DiskSegment(1);
  bad.segment_id = 17;
  bad.kind = static_cast<rpc::ReplicaKind::type>(7);
  assert_int_equal(ToInt(s.MountSegment(bad)), kBadParams);
  assert_int_equal(Disk(s).segments, 1);
}

// A daemon with an object on its SSD only (memory evicted by hand: the disk replica is
// registered by an offload at put, then the memory replica's segment is unmounted).
void DiskOnlyObject(MasterService& s, int64_t daemon, const std::string& key) {
  rpc::ReplicateConfig c = Offload();
  c.preferred_segments = {Name(daemon)};
  Put(s, daemon, key, 1000, c);
  assert_int_equal(OffloadAll(s, daemon), 1);
  assert_string_equal(Kinds(s, key).c_str(), "MD");
}

void test_restarted_daemon_takes_its_disk_back(void**) {
  MasterService s(Options());
  AddDiskDaemon(s, 1);
  DiskOnlyObject(s, 1, "kept");
  // The restart: a new process (id 101) registers under the old one's name, which
  // declares the old one dead. Its memory is gone; its SSD is detached, not dropped.
  assert_int_equal(ToInt(s.RegisterDaemon(101, Name(1))), 0);
  assert_int_equal(s.GetReplicaList("kept").code, kNotReady);
  assert_int_equal(s.GetStats().pending_segments, 1);
  assert_int_equal(Disk(s).disk_only_objects, 1);
  // The incarnation is the proof.
  assert_int_equal(ToInt(s.MountSegment(DiskSegment(1, 101, 5))), kSegmentExists);
  // Another daemon cannot take it, even with the incarnation: it is not registered
  // under the segment's name.
  assert_int_equal(ToInt(s.RegisterDaemon(2, Name(2))), 0);
  assert_int_equal(ToInt(s.MountSegment(DiskSegment(1, 2))), kSegmentExists);
  assert_int_equal(ToInt(s.MountSegment(DiskSegment(1, 101))), 0);
  // Listed once its reconciliation vouched for it (master_disk_reconcile_test).
  assert_int_equal(s.GetReplicaList("kept").code, kNotReady);
  rpc::DiskObject kept;
  kept.key = "kept";
  kept.size = 1000;
  kept.checksum = -1;
  assert_int_equal(ToInt(s.BeginDiskReconciliation(101, DiskId(1), 3)), 0);
  assert_int_equal(s.RegisterDiskReplicas(101, DiskId(1), {kept}, 3)[0], 0);
  assert_int_equal(ToInt(s.EndDiskReconciliation(101, DiskId(1), 3)), 0);
  rpc::ReplicaListResult r = s.GetReplicaList("kept");
  assert_int_equal(r.code, 0);
  assert_int_equal(r.replicas.size(), 1);
  assert_int_equal(r.replicas[0].kind, rpc::ReplicaKind::LOCAL_DISK);
  assert_int_equal(r.replicas[0].daemon_id, 101);
  assert_int_equal(r.replicas[0].segment_id, DiskId(1));
  assert_int_equal(r.replicas[0].offset, 0);
  assert_int_equal(r.replicas[0].size, 1000);
  assert_int_equal(s.ExistKey("kept"), 1);
  assert_int_equal(s.GetStats().pending_segments, 0);
}

void test_dead_daemon_disk_kept_for_its_grace(void**) {
  MasterOptions o = Options();
  o.client_live_ttl_ms = 1000;
  o.daemon_grace_ms = 5000;
  MasterService s(o);
  AddDiskDaemon(s, 1);
  DiskOnlyObject(s, 1, "kept");
  Advance(s, 1500);  // silent: detached
  assert_int_equal(s.GetReplicaList("kept").code, kNotReady);
  Advance(s, 5500);  // declared dead: the memory segment goes, the SSD waits another grace
  assert_int_equal(s.GetStats().segments, 0);
  assert_int_equal(Disk(s).segments, 1);
  assert_int_equal(s.GetReplicaList("kept").code, kNotReady);
  Advance(s, 5500);  // nobody took it back: dropped with its replicas
  assert_int_equal(Disk(s).segments, 0);
  assert_int_equal(s.GetReplicaList("kept").code, kNotFound);
  assert_int_equal(Disk(s).objects, 0);
}

void test_unmount_drops_disk_replicas(void**) {
  MasterService s(Options());
  AddDiskDaemon(s, 1);
  DiskOnlyObject(s, 1, "both");
  assert_int_equal(ToInt(s.UnmountSegment(1, DiskId(1))), 0);
  assert_string_equal(Kinds(s, "both").c_str(), "M");
  assert_int_equal(Disk(s).objects, 0);
  assert_int_equal(Disk(s).segments, 0);
}

// ---- offload at put ---------------------------------------------------------------------

void test_offload_at_put(void**) {
  MasterService s(Options());
  AddDiskDaemon(s, 1);
  AddDaemon(s, 2);  // no SSD
  rpc::ReplicateConfig on_1 = Offload();
  on_1.preferred_segments = {Name(1)};
  std::vector<rpc::ReplicaDescriptor> placed = Put(s, 1, "k", 1000, on_1);
  Put(s, 1, "not-asked", 1000);
  Put(s, 1, "refused", 1000, Offload(2));
  Put(s, 2, "no-tier", 1000, [] {
    rpc::ReplicateConfig c = Offload();
    c.preferred_segments = {Name(2)};
    return c;
  }());
  assert_int_equal(Disk(s).offloads_queued, 1);
  assert_int_equal(s.FetchOffloads(2, 8).code, kNoSegment);  // no SSD tier
  assert_int_equal(s.FetchOffloads(1, 0).code, kBadParams);
  rpc::OffloadTasksResult fetched = s.FetchOffloads(1, 8);
  assert_int_equal(fetched.code, 0);
  assert_int_equal(fetched.tasks.size(), 1);
  assert_true(fetched.lease_ttl_ms > 0 && fetched.lease_ttl_ms <= kLease);
  const rpc::OffloadTask& task = fetched.tasks[0];
  assert_string_equal(task.key.c_str(), "k");
  assert_int_equal(task.size, 1000);
  assert_int_equal(task.segment_id, placed[0].segment_id);
  assert_int_equal(task.offset, placed[0].offset);
  assert_int_equal(task.replica_id, placed[0].replica_id);
  assert_false(task.for_eviction);
  assert_int_equal(Disk(s).offloads_queued, 0);
  assert_int_equal(Fetch(s, 1).size(), 0);  // handed out once
  // The read lease keeps its memory from being freed while it is copied.
  assert_int_equal(ToInt(s.Remove("k", false)), kLeased);
  std::vector<int32_t> codes = Report(s, 1, fetched.tasks);
  assert_int_equal(codes[0], 0);
  // Both kinds listed, memory first; the lease given back (no reader came meanwhile).
  assert_string_equal(Kinds(s, "k").c_str(), "MD");
  rpc::DiskStats d = Disk(s);
  assert_int_equal(d.offloads_done, 1);
  assert_int_equal(d.objects, 1);
  assert_int_equal(d.bytes, 1000);
  assert_int_equal(d.disk_only_objects, 0);
}

void test_enable_offload_is_the_default(void**) {
  MasterOptions o = Options();
  o.enable_offload = true;
  MasterService s(o);
  AddDiskDaemon(s, 1);
  Put(s, 1, "default", 1000);
  Put(s, 1, "off", 1000, Offload(2));
  std::vector<rpc::OffloadTask> tasks = Fetch(s, 1);
  assert_int_equal(tasks.size(), 1);
  assert_string_equal(tasks[0].key.c_str(), "default");
  assert_int_equal(s.PutStart(1, "bad", 1000, Offload(3)).code, kBadParams);
  // An upsert's new value is offloaded at its end too.
  assert_int_equal(s.UpsertStart(1, "off", 1000, Offload(1)).code, 0);
  assert_int_equal(ToInt(s.UpsertEnd(1, "off")), 0);
  tasks = Fetch(s, 1);
  assert_int_equal(tasks.size(), 1);
  assert_string_equal(tasks[0].key.c_str(), "off");
}

void test_report_after_the_object_changed(void**) {
  MasterService s(Options());
  AddDiskDaemon(s, 1);
  Put(s, 1, "removed", 1000, Offload());
  Put(s, 1, "replaced", 1000, Offload());
  Put(s, 1, "failed", 1000, Offload());
  std::vector<rpc::OffloadTask> tasks = Fetch(s, 1);
  assert_int_equal(tasks.size(), 3);
  assert_int_equal(ToInt(s.Remove("removed", true)), 0);
  assert_int_equal(s.UpsertStart(1, "replaced", 2000, Cfg()).code, 0);
  assert_int_equal(ToInt(s.UpsertEnd(1, "replaced")), 0);
  std::vector<std::string> keys{"removed", "replaced", "failed"};
  std::vector<int64_t> ids{tasks[0].replica_id, tasks[1].replica_id, tasks[2].replica_id};
  std::vector<int32_t> codes =
      s.ReportOffloads(1, DiskId(1), keys, ids, {0, 0, kNoSupport});
  assert_int_equal(codes[0], kNotFound);
  assert_int_equal(codes[1], kNotFound);
  assert_int_equal(codes[2], 0);  // a failure is answered OK: nothing to forget
  assert_string_equal(Kinds(s, "replaced").c_str(), "M");
  assert_string_equal(Kinds(s, "failed").c_str(), "M");
  assert_int_equal(Disk(s).offloads_failed, 1);
  assert_int_equal(Disk(s).objects, 0);
  // Wrong callers and shapes.
  assert_int_equal(s.ReportOffloads(1, DiskId(1), keys, ids, {0})[0], kBadParams);
  assert_int_equal(s.ReportOffloads(1, 11, keys, ids, {0, 0, 0})[0], kNoSegment);
  assert_int_equal(s.ReportOffloads(7, DiskId(1), keys, ids, {0, 0, 0})[0], kUnknownDaemon);
  AddDaemon(s, 2);
  assert_int_equal(s.ReportOffloads(2, DiskId(1), keys, ids, {0, 0, 0})[0], kNotOwner);
}

void test_unreported_task_times_out(void**) {
  MasterService s(Options());
  AddDiskDaemon(s, 1);
  Put(s, 1, "slow", 1000, Offload());
  std::vector<rpc::OffloadTask> tasks = Fetch(s, 1);
  g_now += kLease + MasterService::kOffloadReportMarginMs + 1;
  s.Tick();
  assert_int_equal(Disk(s).offloads_failed, 1);
  assert_int_equal(Report(s, 1, tasks)[0], kNotFound);  // too late: the daemon forgets it
  assert_string_equal(Kinds(s, "slow").c_str(), "M");
}

// ---- reconciliation ----------------------------------------------------------------------

rpc::DiskObject On(const std::string& key, int64_t size, int64_t checksum = -1) {
  rpc::DiskObject o;
  o.key = key;
  o.size = size;
  o.checksum = checksum;
  return o;
}

void test_reconcile_keeps_adopts_and_drops(void**) {
  MasterService s(Options());
  AddDiskDaemon(s, 1);
  DiskOnlyObject(s, 1, "known");                 // size 1000, no checksum
  Put(s, 1, "memory-only", 1000);
  assert_int_equal(s.PutStart(1, "proven", 1000, Cfg()).code, 0);
  assert_int_equal(ToInt(s.PutEnd(1, "proven", 77)), 0);
  std::vector<int32_t> codes = s.RegisterDiskReplicas(
      1, DiskId(1),
      {On("known", 1000), On("lost", 500, 9), On("memory-only", 1000), On("proven", 1000, 77),
       On("", 10), On("bad-size", 0)});
  assert_int_equal(codes[0], 0);           // kept
  assert_int_equal(codes[1], 0);           // adopted: disk only
  assert_int_equal(codes[2], kNotFound);   // the master knows it without that replica
  assert_int_equal(codes[3], 0);           // the same value, proven by its checksum
  assert_int_equal(codes[4], kBadParams);
  assert_int_equal(codes[5], kBadParams);
  assert_string_equal(Kinds(s, "lost").c_str(), "D");
  assert_int_equal(s.GetReplicaList("lost").checksum, 9);
  assert_string_equal(Kinds(s, "memory-only").c_str(), "M");
  assert_string_equal(Kinds(s, "proven").c_str(), "MD");
  assert_int_equal(Disk(s).adopted, 2);
  // Another value under a key it has there: the replica goes (and the object with it,
  // since it had no other).
  codes = s.RegisterDiskReplicas(1, DiskId(1), {On("lost", 501, 9)});
  assert_int_equal(codes[0], kNotFound);
  assert_int_equal(s.GetReplicaList("lost").code, kNotFound);
}

void test_reconcile_after_reattach_adopts_nothing(void**) {
  MasterOptions o = Options();
  o.client_live_ttl_ms = 1000;
  o.daemon_grace_ms = 5000;
  MasterService s(o);
  AddDiskDaemon(s, 1);
  DiskOnlyObject(s, 1, "known");
  Advance(s, 1500);  // silent: detached
  assert_int_equal(ToInt(s.RegisterDaemon(1, Name(1))), 0);
  assert_int_equal(ToInt(s.MountSegment(DiskSegment(1))), 0);
  // Removed while it was away, for all this master knows: dropped, not resurrected.
  std::vector<int32_t> codes =
      s.RegisterDiskReplicas(1, DiskId(1), {On("known", 1000), On("removed-meanwhile", 10)});
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[1], kNotFound);
  assert_int_equal(s.GetReplicaList("removed-meanwhile").code, kNotFound);
}

// ---- dropped disk replicas ---------------------------------------------------------------

void test_drop_disk_replicas(void**) {
  MasterService s(Options());
  AddDiskDaemon(s, 1);
  DiskOnlyObject(s, 1, "both");
  s.RegisterDiskReplicas(1, DiskId(1), {On("disk-only", 100)});
  Put(s, 1, "memory", 100);
  std::vector<int32_t> codes =
      s.DropDiskReplicas(1, DiskId(1), {"both", "disk-only", "memory", "nothing"});
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[1], 0);
  assert_int_equal(codes[2], kNotFound);
  assert_int_equal(codes[3], kNotFound);
  assert_string_equal(Kinds(s, "both").c_str(), "M");
  assert_int_equal(s.GetReplicaList("disk-only").code, kNotFound);  // no replica left
  assert_int_equal(s.GetStats().objects, 2);
  rpc::DiskStats d = Disk(s);
  assert_int_equal(d.dropped, 2);
  assert_int_equal(d.objects, 0);
  assert_int_equal(d.bytes, 0);
  assert_int_equal(s.DropDiskReplicas(2, DiskId(1), {"both"})[0], kUnknownDaemon);
}

// ---- promotion ---------------------------------------------------------------------------

void test_promotion(void**) {
  MasterOptions o = Options();
  o.promotion_on_hit = true;
  MasterService s(o);
  AddDiskDaemon(s, 1);
  AddDaemon(s, 2);
  s.RegisterDiskReplicas(1, DiskId(1), {On("cold", 4096, 5)});
  Put(s, 1, "warm", 4096, On(1));
  assert_false(s.GetReplicaList("warm").promote);
  assert_true(s.GetReplicaList("cold").promote);
  assert_int_equal(s.PromoteStart(2, "warm", DiskReplicaId(s, "warm")).code, kExists);
  assert_int_equal(s.PromoteStart(2, "missing", 1).code, kNotFound);
  const int64_t cold_disk = DiskReplicaId(s, "cold");
  assert_int_not_equal(cold_disk, 0);
  assert_int_equal(s.PromoteStart(2, "cold", cold_disk + 1).code, kNotFound);  // not that value
  rpc::PutStartResult started = s.PromoteStart(2, "cold", cold_disk);
  assert_int_equal(started.code, 0);
  assert_int_equal(started.replicas.size(), 1);
  assert_int_equal(started.replicas[0].status, rpc::ReplicaStatus::PROCESSING);
  assert_int_equal(started.replicas[0].kind, rpc::ReplicaKind::MEMORY);
  assert_int_equal(started.replicas[0].segment_id, 21);  // the reader's own memory
  assert_int_equal(SegmentUsed(s, 21), 4096);
  assert_false(s.GetReplicaList("cold").promote);        // one is on its way
  assert_string_equal(Kinds(s, "cold").c_str(), "D");    // not listed until published
  assert_int_equal(s.PromoteStart(1, "cold", cold_disk).code, kExists);
  assert_int_equal(ToInt(s.PromoteEnd(1, "cold", true)), kNotOwner);
  assert_int_equal(ToInt(s.PromoteEnd(2, "cold", true)), 0);
  assert_string_equal(Kinds(s, "cold").c_str(), "MD");
  assert_int_equal(s.GetReplicaList("cold").checksum, 5);
  assert_int_equal(Disk(s).promotions, 1);
  assert_int_equal(Disk(s).disk_only_objects, 0);
  assert_int_equal(ToInt(s.PromoteEnd(2, "cold", true)), kNotFound);  // nothing open
}

void test_promotion_orphaned_or_abandoned(void**) {
  MasterOptions o = Options();
  o.promotion_on_hit = true;
  MasterService s(o);
  AddDiskDaemon(s, 1);
  s.RegisterDiskReplicas(1, DiskId(1), {On("removed", 4096), On("given-up", 4096),
                                        On("abandoned", 4096)});
  assert_int_equal(s.PromoteStart(1, "removed", DiskReplicaId(s, "removed")).code, 0);
  assert_int_equal(ToInt(s.Remove("removed", true)), 0);
  assert_int_equal(ToInt(s.PromoteEnd(1, "removed", true)), kNotFound);
  assert_int_equal(s.PromoteStart(1, "given-up", DiskReplicaId(s, "given-up")).code, 0);
  assert_int_equal(ToInt(s.PromoteEnd(1, "given-up", false)), 0);
  assert_string_equal(Kinds(s, "given-up").c_str(), "D");
  assert_int_equal(Used(s), 0);
  // Never ended: freed like an abandoned put, once its writer must have given up.
  assert_int_equal(s.PromoteStart(1, "abandoned", DiskReplicaId(s, "abandoned")).code, 0);
  assert_int_equal(Used(s), 4096);
  g_now += kRelease + 1000;
  s.Tick();
  assert_int_equal(Used(s), 0);
  assert_int_equal(ToInt(s.PromoteEnd(1, "abandoned", true)), kNotFound);
  assert_string_equal(Kinds(s, "abandoned").c_str(), "D");
  // Off by default: no promote flag.
  MasterService plain(Options());
  AddDiskDaemon(plain, 1);
  plain.RegisterDiskReplicas(1, DiskId(1), {On("cold", 4096)});
  assert_false(plain.GetReplicaList("cold").promote);
}

// ---- figures -----------------------------------------------------------------------------

void test_disk_stats_and_tenants(void**) {
  MasterService s(Options());
  AddDiskDaemon(s, 1);
  AddDiskDaemon(s, 2);
  DiskOnlyObject(s, 1, "both");
  const std::string alices("\0alice\0cold", 11);  // a stored key of tenant alice's
  std::vector<int32_t> codes =
      s.RegisterDiskReplicas(2, DiskId(2), {On(alices, 300), On("plain-cold", 200)});
  assert_int_equal(codes[0], 0);
  Put(s, 1, "queued", 100, Offload());
  rpc::DiskStats d = Disk(s);
  assert_int_equal(d.segments, 2);
  assert_int_equal(d.capacity_bytes, 2 * kSsd);
  assert_int_equal(d.objects, 3);
  assert_int_equal(d.bytes, 1000 + 300 + 200);
  assert_int_equal(d.disk_only_objects, 2);
  assert_int_equal(d.offloads_queued, 1);
  assert_int_equal(d.offloads_done, 1);
  assert_int_equal(d.offloads_failed, 0);
  assert_int_equal(d.evict_offloads, 0);
  assert_int_equal(d.promotions, 0);
  assert_int_equal(d.adopted, 2);
  assert_int_equal(d.dropped, 0);
  assert_int_equal(d.offloads_dropped, 0);
  // A disk replica takes no memory: the default tenant's bytes are its memory replicas'.
  int seen = 0;
  for (const rpc::TenantStats& t : s.GetStats().tenants) {
    if (t.tenant.empty()) {
      assert_int_equal(t.objects, 3);
      assert_int_equal(t.bytes, 1000 + 100);
      ++seen;
    } else if (t.tenant == "alice") {
      assert_int_equal(t.objects, 1);
      assert_int_equal(t.bytes, 0);
      ++seen;
    }
  }
  assert_int_equal(seen, 2);
}

}  // namespace

int main(void) {
  mooncake::SetLogLevel(mooncake::LogLevel::kError);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_disk_segment_counts_for_no_memory),
      cmocka_unit_test(test_one_disk_segment_per_daemon),
      cmocka_unit_test(test_restarted_daemon_takes_its_disk_back),
      cmocka_unit_test(test_dead_daemon_disk_kept_for_its_grace),
      cmocka_unit_test(test_unmount_drops_disk_replicas),
      cmocka_unit_test(test_offload_at_put),
      cmocka_unit_test(test_enable_offload_is_the_default),
      cmocka_unit_test(test_report_after_the_object_changed),
      cmocka_unit_test(test_unreported_task_times_out),
      cmocka_unit_test(test_reconcile_keeps_adopts_and_drops),
      cmocka_unit_test(test_reconcile_after_reattach_adopts_nothing),
      cmocka_unit_test(test_drop_disk_replicas),
      cmocka_unit_test(test_promotion),
      cmocka_unit_test(test_promotion_orphaned_or_abandoned),
      cmocka_unit_test(test_disk_stats_and_tenants),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
