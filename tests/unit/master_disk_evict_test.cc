// Eviction with the SSD tier in mooncake::MasterService, on the hand-moved clock (docs/
// master.md, "Eviction"; docs/ssd.md, "master"): offload on eviction pins the object until
// the report and frees its memory after it; a failure keeps it in memory unless
// --allow_evict_without_offload; objects with a disk replica lose only their memory, and
// those on disk only are never candidates; early offloads make a round free at once; and a
// restore from a snapshot plus the log keeps disk replicas and LOCAL_DISK segments; the
// offloads follow the tenants' quota shares as eviction does.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "master/snapshot/snapshot_codec.h"
#include "master/log/state_records.h"
#include "tests/harness/master_disk_fixture.h"
#include "tests/harness/master_restart_fixture.h"

namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kPool = 64 * kKiB;

MasterOptions EvictToDisk(bool allow_without = false) {
  MasterOptions o = Options();
  o.offload_on_evict = true;
  o.allow_evict_without_offload = allow_without;
  return o;
}

std::string Key(int i) { return "k" + std::to_string(i); }

// Keys [from, to) of 1 KiB, one ms apart (a strict eviction order).
void PutRange(MasterService& s, int from, int to, const rpc::ReplicateConfig& c = Cfg()) {
  for (int i = from; i < to; ++i, ++g_now) Put(s, 1, Key(i), kKiB, c);
}

int64_t TenantBytes(const MasterService& s) {
  for (const rpc::TenantStats& t : s.GetStats().tenants) {
    if (t.tenant.empty()) return t.bytes;
  }
  return 0;
}

void test_offload_on_evict_pins_then_frees(void**) {
  MasterService s(EvictToDisk());
  AddDiskDaemon(s, 1, kPool);
  PutRange(s, 0, 4);
  assert_int_equal(s.Evict(kKiB), 0);  // queued, not freed
  assert_int_equal(Disk(s).evict_offloads, 1);
  assert_int_equal(Used(s), 4 * kKiB);
  // Pinned while its task is open, and the open task covers the next round's need.
  assert_int_equal(s.Evict(kKiB), 0);
  assert_int_equal(Disk(s).evict_offloads, 1);
  std::vector<rpc::OffloadTask> tasks = Fetch(s, 1);
  assert_int_equal(tasks.size(), 1);
  assert_string_equal(tasks[0].key.c_str(), "k0");  // the oldest
  assert_true(tasks[0].for_eviction);
  assert_int_equal(Report(s, 1, tasks)[0], 0);
  // Its memory is freed; it lives on disk only.
  assert_int_equal(Used(s), 3 * kKiB);
  assert_int_equal(TenantBytes(s), 3 * kKiB);
  assert_string_equal(Kinds(s, "k0").c_str(), "D");
  assert_int_equal(s.ExistKey("k0"), 1);
  assert_int_equal(Disk(s).disk_only_objects, 1);
  // A disk-only object is never a candidate: the next round offloads the next oldest.
  g_now += 10 * kLease;
  assert_int_equal(s.Evict(kKiB), 0);
  tasks = Fetch(s, 1);
  assert_int_equal(tasks.size(), 1);
  assert_string_equal(tasks[0].key.c_str(), "k1");
  assert_string_equal(Kinds(s, "k0").c_str(), "D");
}

void test_failed_offload_keeps_memory(void**) {
  MasterService s(EvictToDisk());
  AddDiskDaemon(s, 1, kPool);
  PutRange(s, 0, 4);
  s.Evict(kKiB);
  std::vector<rpc::OffloadTask> tasks = Fetch(s, 1);
  assert_int_equal(Report(s, 1, tasks, kNoSupport)[0], 0);
  assert_int_equal(Disk(s).offloads_failed, 1);
  assert_string_equal(Kinds(s, "k0").c_str(), "M");
  // Not offered again for a while, and not freed either: the round moves on to k1.
  g_now += 10 * kLease;
  assert_int_equal(s.Evict(kKiB), 0);
  tasks = Fetch(s, 1);
  assert_int_equal(tasks.size(), 1);
  assert_string_equal(tasks[0].key.c_str(), "k1");
  assert_string_equal(Kinds(s, "k0").c_str(), "M");
  assert_int_equal(Used(s), 4 * kKiB);
}

void test_allow_evict_without_offload(void**) {
  MasterService s(EvictToDisk(/*allow_without=*/true));
  AddDiskDaemon(s, 1, kPool);
  PutRange(s, 0, 4);
  s.Evict(kKiB);
  Report(s, 1, Fetch(s, 1), kNoSupport);
  g_now += 10 * kLease;
  assert_int_equal(s.Evict(kKiB), kKiB);  // its offload failed: freed anyway
  assert_int_equal(s.GetReplicaList("k0").code, kNotFound);
}

void test_disk_replica_loses_only_memory(void**) {
  MasterService s(Options());  // no offload on eviction needed for this
  AddDiskDaemon(s, 1, kPool);
  PutRange(s, 0, 1, Offload());
  PutRange(s, 1, 2);
  assert_int_equal(OffloadAll(s, 1), 1);
  assert_int_equal(s.Evict(kKiB), kKiB);
  assert_string_equal(Kinds(s, "k0").c_str(), "D");
  assert_string_equal(Kinds(s, "k1").c_str(), "M");
  g_now += 10 * kLease;
  // Everything evictable: k1 goes, k0 (no memory) stays.
  assert_int_equal(s.Evict(64 * kKiB), kKiB);
  assert_string_equal(Kinds(s, "k0").c_str(), "D");
  assert_int_equal(s.GetReplicaList("k1").code, kNotFound);
  assert_int_equal(Used(s), 0);
}

void test_daemon_without_ssd_evicts_as_before(void**) {
  MasterService s(EvictToDisk());
  AddDaemon(s, 1, kPool);
  PutRange(s, 0, 2);
  assert_int_equal(s.Evict(kKiB), kKiB);
  assert_int_equal(s.GetReplicaList("k0").code, kNotFound);
  assert_int_equal(Disk(s).evict_offloads, 0);
}

void test_full_queue_drops_tasks(void**) {
  MasterService s(Options());
  AddDiskDaemon(s, 1, 8 * kMiB);
  const size_t n = mooncake::OffloadQueues::kMaxPerDaemon + 2;
  for (size_t i = 0; i < n; ++i) Put(s, 1, "q" + std::to_string(i), 64, Offload());
  assert_int_equal(Disk(s).offloads_queued, mooncake::OffloadQueues::kMaxPerDaemon);
  assert_int_equal(Disk(s).offloads_dropped, 2);
}

// Past high - eviction_ratio the upkeep offloads the oldest objects early, so that the
// round past the high watermark frees their memory at once.
void test_early_offloads(void**) {
  MasterOptions o = EvictToDisk();
  o.eviction_high_watermark_ratio = 0.75;  // 48 objects
  o.eviction_ratio = 0.25;                 // a round goes down to 32
  MasterService s(o);
  AddDiskDaemon(s, 1, kPool);
  PutRange(s, 0, 40);
  s.Tick();
  std::vector<rpc::OffloadTask> tasks = Fetch(s, 1);
  // (40 - 32) + 16 objects: those past the low mark and one round more.
  assert_int_equal(tasks.size(), 24);
  for (const rpc::OffloadTask& t : tasks) {
    assert_false(t.for_eviction);
    assert_true(std::stoi(t.key.substr(1)) < 24);  // the oldest ones
  }
  for (int32_t code : Report(s, 1, tasks)) assert_int_equal(code, 0);
  assert_int_equal(Disk(s).objects, 24);
  // Puts past the watermark: each round frees memory of objects already on disk.
  PutRange(s, 40, 60);
  assert_true(Used(s) <= 48 * kKiB);
  assert_int_equal(s.GetStats().eviction.no_space_puts, 0);
  for (int i = 0; i < 24; ++i) assert_true(Kinds(s, Key(i)) == "D" || Kinds(s, Key(i)) == "MD");
  assert_true(Disk(s).disk_only_objects > 0);
  assert_int_equal(s.GetStats().objects, 60);  // nothing lost
}

// Quotas as shares with the SSD tier: the early offloads and the round's offloads follow
// the same order as eviction (tenants without a quota first), and what a tenant has on
// disk does not count against its quota: beta, within its quota and older than everything,
// keeps its memory replicas while the filler's objects move to disk, none lost.
void test_offloads_follow_quota_shares(void**) {
  MasterOptions o = EvictToDisk();
  o.eviction_high_watermark_ratio = 0.75;  // 48 objects
  o.eviction_ratio = 0.25;                 // a round goes down to 32
  o.tenant_quota = "beta=16KB";
  MasterService s(o);
  AddDiskDaemon(s, 1, kPool);
  std::vector<std::string> beta;
  for (int i = 0; i < 8; ++i, ++g_now) {
    beta.push_back(mooncake::tenant_key::Encode("beta", Key(i)));
    Put(s, 1, beta.back(), kKiB);
  }
  PutRange(s, 8, 40);
  s.Tick();
  std::vector<rpc::OffloadTask> tasks = Fetch(s, 1);
  assert_int_equal(tasks.size(), 24);
  for (const rpc::OffloadTask& t : tasks) {
    assert_true(t.key[0] == 'k' && std::stoi(t.key.substr(1)) < 32);  // the filler's oldest
  }
  for (int32_t code : Report(s, 1, tasks)) assert_int_equal(code, 0);
  PutRange(s, 40, 70);
  assert_true(Used(s) <= 48 * kKiB);
  assert_int_equal(s.GetStats().eviction.no_space_puts, 0);
  for (const std::string& key : beta) assert_string_equal(Kinds(s, key).c_str(), "M");
  assert_true(Disk(s).disk_only_objects > 0);
  assert_int_equal(s.GetStats().objects, 70);  // nothing lost
  for (const rpc::TenantStats& t : s.GetStats().tenants) {
    if (t.tenant == "beta") assert_int_equal(t.bytes, 8 * kKiB);
  }
}

// ---- durability --------------------------------------------------------------------------

void test_restore_keeps_disk_replicas(void**) {
  TempDir dir;
  std::unique_ptr<mooncake::OpLog> log = StartedLog(dir.path);
  MasterService a(EvictToDisk());
  a.AttachOpLog(log.get(), /*strict=*/false);
  AddDiskDaemon(a, 1, kPool);
  PutRange(a, 0, 1, Offload());  // k0: memory + disk, in the snapshot
  assert_int_equal(OffloadAll(a, 1), 1);
  TakeSnapshot(a, dir.path, log->last());
  PutRange(a, 1, 2, Offload());  // k1: memory + disk, in the log only
  assert_int_equal(OffloadAll(a, 1), 1);
  rpc::DiskObject adopted;
  adopted.key = "adopted";
  adopted.size = 10;
  adopted.checksum = 3;
  assert_int_equal(a.RegisterDiskReplicas(1, DiskId(1), {adopted})[0], 0);
  PutRange(a, 2, 3);  // k2: evicted to disk
  g_now += 10 * kLease;
  a.Evict(1);  // k0 is the oldest candidate: it has a disk replica and loses its memory
  assert_string_equal(Kinds(a, "k0").c_str(), "D");
  assert_int_equal(ToInt(log->Sync(log->last())), 0);
  rpc::DiskStats before = Disk(a);
  log.reset();

  std::unique_ptr<MasterService> b = Restore(dir.path, EvictToDisk());
  rpc::DiskStats after = Disk(*b);
  assert_int_equal(after.segments, 1);
  assert_int_equal(after.capacity_bytes, kSsd);
  assert_int_equal(after.objects, before.objects);
  assert_int_equal(after.bytes, before.bytes);
  assert_int_equal(after.disk_only_objects, before.disk_only_objects);
  // Detached until the daemon comes back.
  assert_int_equal(b->GetReplicaList("adopted").code, kNotReady);
  assert_int_equal(b->GetStats().pending_segments, 2);
  // The daemon restarted meanwhile: a new process under its name takes its SSD back (its
  // memory is gone with the old process).
  assert_int_equal(ToInt(b->RegisterDaemon(101, Name(1))), 0);
  assert_int_equal(ToInt(b->MountSegment(DiskSegment(1, 101))), 0);
  // Listed once the daemon's reconciliation vouched for them (docs/ssd.md).
  assert_int_equal(b->GetReplicaList("k0").code, kNotReady);
  assert_int_equal(ToInt(b->BeginDiskReconciliation(101, DiskId(1), 5)), 0);
  rpc::DiskObject held;
  held.size = kKiB;
  held.checksum = -1;
  std::vector<rpc::DiskObject> ssd(2, held);
  ssd[0].key = "k0";
  ssd[1].key = "k1";
  ssd.push_back(adopted);
  for (int32_t code : b->RegisterDiskReplicas(101, DiskId(1), ssd, 5)) assert_int_equal(code, 0);
  assert_int_equal(ToInt(b->EndDiskReconciliation(101, DiskId(1), 5)), 0);
  assert_string_equal(Kinds(*b, "k0").c_str(), "D");
  assert_string_equal(Kinds(*b, "k1").c_str(), "D");
  assert_string_equal(Kinds(*b, "adopted").c_str(), "D");
  assert_int_equal(b->GetReplicaList("adopted").checksum, 3);
  assert_int_equal(b->GetStats().objects, 3);  // k2 had no disk replica: gone with memory
  // Restored, so known to this master: nothing it lacks is adopted.
  rpc::DiskObject stale;
  stale.key = "removed-before";
  stale.size = 5;
  stale.checksum = -1;
  assert_int_equal(b->RegisterDiskReplicas(101, DiskId(1), {stale})[0], kNotFound);
}

void test_segment_records_carry_their_kind(void**) {
  mooncake::SegmentRecord disk;
  disk.segment_id = 19;
  disk.name = "h:1";
  disk.size = 100;
  disk.kind = 1;
  std::string bytes;
  mooncake::AppendArrayHeader(&bytes, 1);
  mooncake::AppendSegment(&bytes, disk);
  std::vector<mooncake::SegmentRecord> read;
  assert_true(mooncake::DecodeSegments(bytes, &read));
  assert_int_equal(read.size(), 1);
  assert_int_equal(read[0].kind, 1);
  // A record of 8 fields, as the previous version wrote it: a memory segment.
  std::string old;
  mooncake::AppendArrayHeader(&old, 1);
  std::string one;
  mooncake::AppendSegment(&one, disk);
  one[0] = static_cast<char>(0x98);  // fixarray of 8 ...
  one.pop_back();                    // ... without the kind (a positive fixint)
  old += one;
  assert_true(mooncake::DecodeSegments(old, &read));
  assert_int_equal(read[0].kind, 0);
  assert_int_equal(read[0].segment_id, 19);
}

}  // namespace

int main(void) {
  mooncake::SetLogLevel(mooncake::LogLevel::kError);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_offload_on_evict_pins_then_frees),
      cmocka_unit_test(test_failed_offload_keeps_memory),
      cmocka_unit_test(test_allow_evict_without_offload),
      cmocka_unit_test(test_disk_replica_loses_only_memory),
      cmocka_unit_test(test_daemon_without_ssd_evicts_as_before),
      cmocka_unit_test(test_full_queue_drops_tasks),
      cmocka_unit_test(test_early_offloads),
      cmocka_unit_test(test_offloads_follow_quota_shares),
      cmocka_unit_test(test_restore_keeps_disk_replicas),
      cmocka_unit_test(test_segment_records_carry_their_kind),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
