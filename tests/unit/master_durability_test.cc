// MasterService across a restart, in process with a hand-moved clock: a snapshot written
// and read back through the real codec and store, the operation log replayed, restored
// segments detached until their daemon proves who it is, the grace period, and space freed
// by a logged change held until that record is on disk.

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/base/logging.h"
#include "master/log/oplog.h"
#include "master/snapshot/snapshot_codec.h"
#include "master/snapshot/snapshot_store.h"
#include "master/snapshot/snapshotter.h"
#include "master/snapshot/snapshot_writer.h"
#include "master/snapshot/state_restore.h"
#include "tests/harness/master_service_fixture.h"
#include "tests/harness/process_harness.h"

using mooncake::LoadSnapshotPayloads;
using mooncake::OpLog;
using mooncake::OpLogOptions;
using mooncake::SnapshotFigures;
using mooncake::SnapshotStore;
using mooncake::SnapshotWriter;

namespace {

constexpr int64_t kGrace = 5000;
constexpr int kReattached = 0;

MasterOptions DurableOptions() {
  MasterOptions o = Options();
  o.reattach_grace_ms = kGrace;
  return o;
}

int64_t Incarnation(int64_t daemon) { return daemon * 1000 + 7; }

// As the daemon mounts it, incarnation included.
rpc::SegmentInfo Segment(int64_t daemon, int64_t segment_id, int64_t size) {
  rpc::SegmentInfo info = SegmentOf(daemon, segment_id, size);
  info.incarnation = Incarnation(daemon);
  return info;
}

// A daemon with one segment (id daemon * 10 + 1), as a real one mounts it.
void Join(MasterService& s, int64_t daemon, int64_t size = kMiB) {
  assert_int_equal(ToInt(s.RegisterDaemon(daemon, Name(daemon))), 0);
  assert_int_equal(ToInt(s.MountSegment(Segment(daemon, daemon * 10 + 1, size))), 0);
}

// What a daemon does when the master says -103 after a restart: register, mount again.
int Rejoin(MasterService& s, int64_t daemon, int64_t size = kMiB) {
  s.RegisterDaemon(daemon, Name(daemon));
  return ToInt(s.MountSegment(Segment(daemon, daemon * 10 + 1, size)));
}

struct TempDir {
  std::string path = mooncake::testing::MakeTempDir("mc-durability-");
  ~TempDir() { mooncake::testing::RemoveTree(path); }
};

// Snapshots from into dir the way the forked child does (sequence: the log's last record).
void TakeSnapshot(MasterService& from, const std::string& dir, uint64_t sequence, int64_t when) {
  SnapshotWriter writer(dir, sequence, when);
  SnapshotFigures figures;
  std::string error;
  assert_int_equal(ToInt(writer.Begin(&error)), 0);
  assert_int_equal(ToInt(mooncake::WriteSnapshotPayloads(&from, &writer, &figures, &error)), 0);
  assert_int_equal(ToInt(writer.Publish({}, &error)), 0);
}

// A fresh master restored from dir (its snapshots, and its log in dir/oplog, if any).
std::unique_ptr<MasterService> Restore(const std::string& dir) {
  auto s = std::make_unique<MasterService>(DurableOptions());
  SnapshotStore store(dir);
  OpLogOptions o;
  o.dir = dir + "/oplog";
  OpLog log(o);
  auto restored = mooncake::RestoreMasterState(s.get(), &store, &log);
  assert_true(restored.ok());
  return s;
}

// Daemons 1 and 2 with an object each ("on-1", "on-2"), snapshotted, restored in a new
// master: neither has re-attached yet.
std::unique_ptr<MasterService> RestoredTwoDaemons(const std::string& dir) {
  MasterService a(DurableOptions());
  Join(a, 1);
  Join(a, 2);
  Put(a, 1, "on-1", 512, On(1));
  Put(a, 2, "on-2", 512, On(2));
  TakeSnapshot(a, dir, 0, 1);
  return Restore(dir);
}

// A log in dir/oplog, recovered (empty) and started.
std::unique_ptr<OpLog> StartedLog(const std::string& dir, int64_t flush_interval_ms = 100) {
  OpLogOptions o;
  o.dir = dir + "/oplog";
  o.flush_interval_ms = flush_interval_ms;
  auto log = std::make_unique<OpLog>(o);
  assert_true(log->Recover(0, [](uint64_t, std::string_view) { return true; }).ok());
  assert_int_equal(ToInt(log->Start(0)), 0);
  return log;
}

// Every object as the snapshot encodes it, one line each, sorted (a shard's table orders
// its objects by the history of its slots, which a restore does not repeat): two services
// hold the same directory exactly when these are equal.
std::string Export(MasterService& s) {
  std::vector<std::string> lines;
  s.ExportObjects([&](size_t, const std::string& bytes, uint32_t) {
    assert_true(mooncake::DecodeObjects(bytes, [&](mooncake::ObjectRecord&& o) {
      std::string line = o.key + " " + std::to_string(o.size) + " " +
                         std::to_string(o.checksum) + " " + std::to_string(o.hard_pin);
      for (const mooncake::ReplicaRecord& r : o.replicas) {
        line += " " + std::to_string(r.segment_id) + "@" + std::to_string(r.offset);
      }
      lines.push_back(std::move(line));
    }));
    return true;
  });
  std::sort(lines.begin(), lines.end());
  std::string all;
  for (const std::string& line : lines) all += line + "\n";
  return all;
}

struct Listed {
  int code;
  int64_t segment;
  int64_t offset;
  int64_t checksum;
};
Listed Get(MasterService& s, const std::string& key) {
  rpc::ReplicaListResult r = s.GetReplicaList(key);
  Listed l{r.code, -1, -1, r.checksum};
  if (r.code == 0) {
    l.segment = r.replicas[0].segment_id;
    l.offset = r.replicas[0].offset;
  }
  return l;
}

void test_snapshot_round_trip_and_reattach(void**) {
  TempDir dir;
  MasterService a(DurableOptions());
  Join(a, 1);
  Join(a, 2);
  rpc::ReplicateConfig both = Cfg(2);
  rpc::PutStartResult r = a.PutStart(1, "two-replicas", 1000, both);
  assert_int_equal(r.code, 0);
  assert_int_equal(ToInt(a.PutEnd(1, "two-replicas", 0xabcdef)), 0);
  Put(a, 1, "pinned", 4096, Pinned(true));
  Put(a, 2, "on-2", 512, On(2));
  Put(a, 1, "gone", 512);
  assert_int_equal(ToInt(a.Remove("gone", false)), 0);
  a.PutStart(1, "unfinished", 512, Cfg());  // never published: not kept
  Listed before = Get(a, "on-2");
  g_now += 10 * kLease;  // leases run out
  TakeSnapshot(a, dir.path, 0, 1);

  std::unique_ptr<MasterService> b = Restore(dir.path);
  // Nothing is served from a segment until its daemon is back.
  assert_int_equal(Get(*b, "on-2").code, kNotReady);
  assert_int_equal(b->ExistKey("on-2"), 0);
  assert_true(b->GetAllSegments().empty());
  assert_int_equal(b->GetStats().pending_segments, 2);
  assert_int_equal(b->Heartbeat(2).code, kUnknownDaemon);  // which makes it re-register
  assert_int_equal(b->PutStart(2, "new", 512, Cfg()).code, kUnknownDaemon);
  assert_int_equal(Rejoin(*b, 2), kReattached);
  assert_int_equal(b->GetStats().pending_segments, 1);
  Listed after = Get(*b, "on-2");
  assert_int_equal(after.code, 0);
  assert_int_equal(after.segment, before.segment);
  assert_int_equal(after.offset, before.offset);
  assert_int_equal(Rejoin(*b, 1), kReattached);
  rpc::ReplicaListResult two = b->GetReplicaList("two-replicas");
  assert_int_equal(two.code, 0);
  assert_int_equal(two.replicas.size(), 2);
  assert_int_equal(two.checksum, 0xabcdef);
  assert_int_equal(Get(*b, "gone").code, kNotFound);
  assert_int_equal(Get(*b, "unfinished").code, kNotFound);
  assert_int_equal(ToInt(b->Remove("pinned", false)), kUnavailable);  // still hard-pinned
  assert_int_equal(b->GetStats().objects, 3);
}

void test_remount_must_prove_identity(void**) {
  TempDir dir;
  MasterService a(DurableOptions());
  Join(a, 1);
  Put(a, 1, "k", 512);
  TakeSnapshot(a, dir.path, 0, 1);
  std::unique_ptr<MasterService> b = Restore(dir.path);
  assert_int_equal(ToInt(b->RegisterDaemon(1, Name(1))), 0);
  rpc::SegmentInfo forged = Segment(1, 11, kMiB);
  forged.incarnation = 0;  // what GetAllSegments shows anyone
  assert_int_equal(ToInt(b->MountSegment(forged)), kSegmentExists);
  rpc::SegmentInfo moved = Segment(1, 11, kMiB);
  moved.base += 4096;
  assert_int_equal(ToInt(b->MountSegment(moved)), kSegmentExists);
  assert_int_equal(Get(*b, "k").code, kNotReady);
  assert_int_equal(ToInt(b->MountSegment(Segment(1, 11, kMiB))), 0);
  assert_int_equal(Get(*b, "k").code, 0);
  assert_int_equal(b->GetAllSegments()[0].incarnation, 0);  // never listed
}

void test_segments_not_back_within_grace_are_dropped(void**) {
  TempDir dir;
  std::unique_ptr<MasterService> b = RestoredTwoDaemons(dir.path);
  assert_int_equal(Rejoin(*b, 1), kReattached);
  g_now += kGrace - 1;
  b->Tick();
  assert_int_equal(b->GetStats().pending_segments, 1);
  assert_int_equal(Get(*b, "on-2").code, kNotReady);
  b->Heartbeat(1);
  g_now += 2;
  b->Tick();
  assert_int_equal(b->GetStats().pending_segments, 0);
  assert_int_equal(Get(*b, "on-2").code, kNotFound);
  assert_int_equal(Get(*b, "on-1").code, 0);
  assert_int_equal(b->GetStats().objects, 1);
}

// A daemon that comes back but cannot prove a segment is its own is live, yet that segment
// goes with the grace period all the same.
void test_unproven_segment_dropped_after_grace(void**) {
  TempDir dir;
  std::unique_ptr<MasterService> b = RestoredTwoDaemons(dir.path);
  assert_int_equal(Rejoin(*b, 1), kReattached);
  assert_int_equal(ToInt(b->RegisterDaemon(2, Name(2))), 0);
  rpc::SegmentInfo forged = Segment(2, 21, kMiB);
  forged.incarnation += 1;
  assert_int_equal(ToInt(b->MountSegment(forged)), kSegmentExists);
  g_now += kGrace + 1;
  b->Heartbeat(1);
  b->Heartbeat(2);
  b->Tick();
  assert_int_equal(b->GetStats().pending_segments, 0);
  assert_int_equal(Get(*b, "on-2").code, kNotFound);
  assert_int_equal(Get(*b, "on-1").code, 0);
  assert_int_equal(b->GetStats().daemons, 2);  // both still registered
}

void test_daemon_restarted_meanwhile_replaces_restored_one(void**) {
  TempDir dir;
  std::unique_ptr<MasterService> b = RestoredTwoDaemons(dir.path);
  // A new process on daemon 2's endpoint: its memory is new, the old segment is gone.
  assert_int_equal(ToInt(b->RegisterDaemon(99, Name(2))), 0);
  assert_int_equal(Get(*b, "on-2").code, kNotFound);
  assert_int_equal(b->GetStats().pending_segments, 1);
  assert_int_equal(Rejoin(*b, 1), kReattached);
  assert_int_equal(Get(*b, "on-1").code, 0);
}

// A put that finds no room while restored segments wait for their daemons (a takeover's
// first moments) must not evict their objects: that room cannot be placed in until they
// come back, and the objects would have come back with them.
void test_put_never_evicts_what_waits_for_its_daemon(void**) {
  TempDir dir;
  std::unique_ptr<MasterService> b = RestoredTwoDaemons(dir.path);
  assert_int_equal(ToInt(b->RegisterDaemon(1, Name(1))), 0);
  assert_int_equal(b->PutStart(1, "early", 512, Cfg()).code, kNoSpace);
  g_now += 1000;  // past the pause after a round that fell short
  // Daemon 1 back and its segment filled: its own objects may go for a put, on-2 may not.
  assert_int_equal(Rejoin(*b, 1), kReattached);
  for (int i = 0; i < 3; ++i) Put(*b, 1, "fill-" + std::to_string(i), 256 * 1024);
  rpc::PutStartResult big = b->PutStart(1, "big", 256 * 1024, Cfg());
  assert_int_equal(big.code, 0);
  assert_int_equal(ToInt(b->PutEnd(1, "big")), 0);
  assert_int_equal(Rejoin(*b, 2), kReattached);
  assert_int_equal(Get(*b, "on-2").code, 0);
  assert_int_equal(Get(*b, "big").code, 0);
}

void test_new_puts_never_overlap_restored_ranges(void**) {
  TempDir dir;
  MasterService a(DurableOptions());
  Join(a, 1, 64 * 4096);
  std::vector<std::pair<int64_t, int64_t>> taken;  // offset, size
  for (int i = 0; i < 40; ++i) {
    std::string key = "old-" + std::to_string(i);
    auto replicas = Put(a, 1, key, 4096 * (1 + i % 2));
    taken.emplace_back(replicas[0].offset, replicas[0].size);
  }
  for (int i = 0; i < 40; i += 3) a.Remove("old-" + std::to_string(i), true);
  TakeSnapshot(a, dir.path, 0, 1);
  std::unique_ptr<MasterService> b = Restore(dir.path);
  assert_int_equal(Rejoin(*b, 1, 64 * 4096), kReattached);
  for (int i = 0; i < 40; ++i) {
    if (i % 3 == 0) taken[static_cast<size_t>(i)].second = 0;  // removed: free again
  }
  // Half the free space, so that no put has to evict: any overlap would be a restored
  // range handed out twice.
  int64_t room = (64 * 4096 - Used(*b)) / 2;
  int placed = 0;
  for (int i = 0; (placed + 1) * 4096 <= room; ++i) {
    rpc::PutStartResult r = b->PutStart(1, "new-" + std::to_string(i), 4096, Cfg());
    assert_int_equal(r.code, 0);
    int64_t at = r.replicas[0].offset;
    for (const auto& [offset, size] : taken) assert_true(at + 4096 <= offset || at >= offset + size);
    ++placed;
  }
  assert_true(placed > 0);
  for (int i = 1; i < 40; ++i) {
    if (i % 3 != 0) assert_int_equal(Get(*b, "old-" + std::to_string(i)).code, 0);
  }
}

// Every kind of record, replayed into a master that starts from the snapshot taken half-way,
// rebuilds exactly the directory the first one had.
void test_snapshot_plus_log_rebuilds_the_directory(void**) {
  TempDir dir;
  std::unique_ptr<OpLog> log = StartedLog(dir.path);
  MasterService a(DurableOptions());
  a.AttachOpLog(log.get(), /*strict=*/false);
  Join(a, 1, 64 * 1024);
  Join(a, 2, 64 * 1024);
  for (int i = 0; i < 20; ++i) Put(a, 1 + i % 2, "k" + std::to_string(i), 1024);
  TakeSnapshot(a, dir.path, log->last(), 1);
  Put(a, 1, "after", 2048);
  assert_int_equal(ToInt(a.Remove("k3", false)), 0);
  assert_int_equal(a.RemoveByRegex("^k1[0-4]$", false), 5);
  assert_true(a.Evict(4096) > 0);
  assert_int_equal(a.UpsertStart(2, "k5", 4096, On(1)).code, 0);
  assert_int_equal(ToInt(a.UpsertEnd(2, "k5", 42)), 0);
  // Replicas a reader found bad: one of two (a publish record), the only one (a removal).
  rpc::PutStartResult two = a.PutStart(1, "two", 1024, Cfg(2));
  assert_int_equal(two.code, 0);
  assert_int_equal(ToInt(a.PutEnd(1, "two", 7)), 0);
  rpc::PutStartResult one = a.PutStart(1, "one", 1024, Cfg());
  assert_int_equal(one.code, 0);
  assert_int_equal(ToInt(a.PutEnd(1, "one", 7)), 0);
  for (int32_t code : a.ReportBadReplicas(1, {Mismatch("two", two.replicas[0].replica_id, 1024, 7),
                                              Mismatch("one", one.replicas[0].replica_id, 1024, 7)})) {
    assert_int_equal(code, 0);
  }
  Join(a, 3, 64 * 1024);
  Put(a, 3, "on-3", 1024, On(3));
  assert_int_equal(ToInt(a.UnmountSegment(2, 21)), 0);
  std::string expected = Export(a);
  int64_t objects = a.GetStats().objects;
  assert_int_equal(ToInt(log->Sync(log->last())), 0);
  log.reset();  // the crash: a is not used again, its log is gone

  std::unique_ptr<MasterService> b = Restore(dir.path);
  for (int64_t d = 1; d <= 3; d += 2) assert_int_equal(Rejoin(*b, d, 64 * 1024), kReattached);
  assert_true(Export(*b) == expected);
  assert_int_equal(b->GetStats().objects, objects);
  Listed upserted = Get(*b, "k5");
  assert_int_equal(upserted.code, 0);
  assert_int_equal(upserted.checksum, 42);
  assert_int_equal(Get(*b, "one").code, kNotFound);
}

// Space a logged removal freed is handed out again only once that record is on disk;
// otherwise a crash could restore the object on bytes that have become another's.
void test_freed_space_waits_for_its_record(void**) {
  TempDir dir;
  // Nothing reaches the disk unless asked.
  std::unique_ptr<OpLog> started = StartedLog(dir.path, 60000);
  OpLog& log = *started;
  MasterService s(DurableOptions());
  s.AttachOpLog(&log, /*strict=*/false);
  Join(s, 1);
  Put(s, 1, "a", 256 * 1024);
  Put(s, 1, "b", 256 * 1024);
  assert_int_equal(ToInt(s.Sync()), 0);  // relaxed: acknowledges at once
  int64_t used = Used(s);
  assert_int_equal(ToInt(s.Remove("a", false)), 0);
  s.Tick();
  assert_true(log.synced() < log.last());
  assert_int_equal(Used(s), used);  // held
  assert_int_equal(ToInt(log.Sync(log.last())), 0);
  s.Tick();
  assert_int_equal(Used(s), used - 256 * 1024);
}

// Damaged state never crashes a restore: a replica overlapping another's range, one
// outside its segment, one on an unknown segment, a bad key; each is dropped and counted.
void test_restore_drops_what_cannot_be_valid(void**) {
  MasterService s(DurableOptions());
  mooncake::SegmentRecord seg;
  seg.segment_id = 11;
  seg.name = Name(1);
  seg.base = 1 << 20;
  seg.size = kMiB;
  seg.daemon_id = 1;
  s.RestoreSegment(seg);
  auto object = [](std::string key, int64_t segment, uint64_t offset) {
    mooncake::ObjectRecord o;
    o.key = std::move(key);
    o.size = 4096;
    o.replicas.push_back({segment, offset, 0});
    return o;
  };
  s.RestoreObject(object("first", 11, 0));
  s.RestoreObject(object("overlaps", 11, 2048));
  s.RestoreObject(object("outside", 11, kMiB - 1024));
  s.RestoreObject(object("elsewhere", 12, 0));
  s.RestoreObject(object(std::string("bad\0key", 7), 11, 8192));
  s.RestoreObject(object("second", 11, 4096));
  MasterService::RestoreCounts counts = s.FinishRestore();
  assert_int_equal(counts.objects, 2);
  assert_int_equal(counts.dropped_objects, 4);
  assert_false(s.ApplyLogRecord("not msgpack"));
  assert_int_equal(Rejoin(s, 1), kSegmentExists);  // the restored one has incarnation 0
}

void test_strict_sync_waits_for_the_disk(void**) {
  TempDir dir;
  std::unique_ptr<OpLog> started = StartedLog(dir.path);
  OpLog& log = *started;
  MasterService s(DurableOptions());
  s.AttachOpLog(&log, /*strict=*/true);
  Join(s, 1);
  Put(s, 1, "k", 512);
  assert_int_equal(ToInt(s.Sync()), 0);
  assert_true(log.synced() >= OpLog::LastAppendedByThisThread());
  assert_true(OpLog::LastAppendedByThisThread() > 0);
}

// ---- the snapshotter ---------------------------------------------------------------------

mooncake::SnapshotterOptions SnapOptions(const std::string& dir) {
  mooncake::SnapshotterOptions o;
  o.dir = dir;
  o.interval_ms = 3600 * 1000;
  o.retention_count = 2;
  o.child_timeout_ms = 60000;
  return o;
}

// Forked snapshots keep retention_count of themselves, and the log only back to the
// oldest kept; a restore from what is left rebuilds the directory exactly.
void test_snapshots_retained_and_log_dropped(void**) {
  TempDir dir;
  OpLogOptions lo;
  lo.dir = dir.path + "/oplog";
  lo.file_bytes = 4096;  // a file every few dozen records, so there is something to drop
  auto log = std::make_unique<OpLog>(lo);
  assert_true(log->Recover(0, [](uint64_t, std::string_view) { return true; }).ok());
  assert_int_equal(ToInt(log->Start(0)), 0);
  MasterService a(DurableOptions());
  a.AttachOpLog(log.get(), /*strict=*/true);
  Join(a, 1, 64 * kMiB);
  mooncake::Snapshotter snapshotter(&a, log.get(), SnapOptions(dir.path));
  std::vector<uint64_t> sequences;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 200; ++i) {
      Put(a, 1, "r" + std::to_string(round) + "-" + std::to_string(i), 4096);
    }
    assert_int_equal(ToInt(a.Sync()), 0);
    mooncake::SnapshotOutcome taken = snapshotter.Take();
    assert_int_equal(ToInt(taken.code), 0);
    assert_int_equal(taken.objects, 200 * (round + 1));
    assert_true(taken.pause_us > 0 && taken.bytes > 0);
    assert_false(taken.running);
    sequences.push_back(taken.sequence);
  }
  SnapshotStore store(dir.path);
  std::vector<std::string> kept = store.Candidates();
  assert_int_equal(kept.size(), 2);
  assert_int_equal(store.OldestRetainedSequence(), sequences[1]);
  // The log starts right after what the oldest snapshot kept holds: what only the dropped
  // snapshot needed is gone, what a fallback to the oldest kept one needs is there.
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(lo.dir)) {
    files.push_back(e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  assert_false(files.empty());
  uint64_t first = std::stoull(files[0]);
  assert_true(first > sequences[0] && first <= sequences[1] + 1);
  Put(a, 1, "after", 4096);
  assert_int_equal(ToInt(a.Sync()), 0);
  std::string expected = Export(a);
  log.reset();
  std::unique_ptr<MasterService> b = Restore(dir.path);
  assert_int_equal(Rejoin(*b, 1, 64 * kMiB), kReattached);
  assert_true(Export(*b) == expected);
}

// A child past its timeout is killed and leaves nothing behind; the next one works.
void test_snapshot_child_timeout(void**) {
  TempDir dir;
  MasterService a(DurableOptions());
  Join(a, 1, 1024 * kMiB);
  for (int i = 0; i < 100000; ++i) Put(a, 1, "k" + std::to_string(i), 4096);
  mooncake::SnapshotterOptions o = SnapOptions(dir.path);
  o.child_timeout_ms = 1;
  {
    mooncake::Snapshotter hasty(&a, nullptr, o);
    mooncake::SnapshotOutcome taken = hasty.Take();
    assert_int_equal(ToInt(taken.code), ToInt(ErrorCode::PERSISTENT_FAIL));
    assert_true(taken.error.find("timeout") != std::string::npos);
  }
  // Killed before it made the snapshots directory, or after: nothing of it is left.
  std::error_code ec;
  std::filesystem::directory_iterator left(dir.path + "/snapshots", ec);
  assert_true(ec || left == std::filesystem::directory_iterator());
  mooncake::Snapshotter patient(&a, nullptr, SnapOptions(dir.path));
  assert_int_equal(ToInt(patient.Take().code), 0);
  assert_int_equal(SnapshotStore(dir.path).Candidates().size(), 1);
}

// Request answers once the child has forked; Last then tells how it ended.
void test_snapshot_request_and_last(void**) {
  TempDir dir;
  MasterService a(DurableOptions());
  Join(a, 1);
  Put(a, 1, "k", 512);
  mooncake::Snapshotter snapshotter(&a, nullptr, SnapOptions(dir.path));
  assert_true(snapshotter.Last().name.empty());  // none yet
  snapshotter.Start();
  mooncake::SnapshotOutcome started = snapshotter.Request();
  assert_int_equal(ToInt(started.code), 0);
  assert_false(started.name.empty());
  mooncake::SnapshotOutcome ended;
  for (int i = 0; i < 2000 && ended.name != started.name; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ended = snapshotter.Last();
  }
  assert_string_equal(ended.name.c_str(), started.name.c_str());
  assert_int_equal(ToInt(ended.code), 0);
  assert_false(ended.running);
  assert_int_equal(ended.objects, 1);
  snapshotter.Stop();
}

// The children this process has now (listed per thread that forked them).
std::vector<std::string> Children() {
  std::vector<std::string> out;
  std::error_code ec;  // a thread may end while we look
  for (std::filesystem::directory_iterator it("/proc/self/task", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::ifstream in(it->path() / "children");
    for (std::string pid; in >> pid;) out.push_back(pid);
  }
  return out;
}

// The child holds nothing of the master's but stdio and its report pipe: not the
// listening socket (a dead master's port would stay bound), not a client's connection.
void test_snapshot_child_holds_no_descriptor_of_the_master(void**) {
  TempDir dir;
  MasterService a(DurableOptions());
  Join(a, 1, 4096 * kMiB);
  for (int i = 0; i < 300000; ++i) Put(a, 1, "k" + std::to_string(i), 4096);
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(listener >= 0);
  std::string listener_link =
      std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(listener));
  mooncake::Snapshotter snapshotter(&a, nullptr, SnapOptions(dir.path));
  snapshotter.Start();
  assert_int_equal(ToInt(snapshotter.Request().code), 0);
  // It has just forked and has 300k objects to write: it lives a while. Its first act is
  // to let go of what it inherited, so look until that has happened (or it is gone).
  std::vector<std::string> children = Children();
  assert_int_equal(children.size(), 1);
  bool let_go = false;
  int held = 0;
  for (int attempt = 0; attempt < 2000 && !let_go; ++attempt) {
    std::error_code ec;
    bool listener_held = false;
    held = 0;
    for (std::filesystem::directory_iterator it("/proc/" + children[0] + "/fd", ec), end;
         !ec && it != end; it.increment(ec)) {
      std::error_code link_ec;
      listener_held |= std::filesystem::read_symlink(it->path(), link_ec).string() == listener_link;
      ++held;
    }
    if (ec) break;  // it has ended
    // It closes what it inherited in two steps, below and above its report pipe: the
    // listener (a low descriptor) may be gone while higher ones are still open, so look
    // until the closing is over too.
    let_go = !listener_held && held <= 5;
    if (!let_go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  assert_true(let_go);
  assert_true(held >= 3 && held <= 5);  // stdio, the report pipe, the file being written
  for (int i = 0; i < 6000 && snapshotter.Last().name.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  assert_int_equal(ToInt(snapshotter.Last().code), 0);
  snapshotter.Stop();
  close(listener);
}

}  // namespace

int main(void) {
  mooncake::SetLogLevel(mooncake::LogLevel::kError);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_snapshot_round_trip_and_reattach),
      cmocka_unit_test(test_remount_must_prove_identity),
      cmocka_unit_test(test_segments_not_back_within_grace_are_dropped),
      cmocka_unit_test(test_unproven_segment_dropped_after_grace),
      cmocka_unit_test(test_daemon_restarted_meanwhile_replaces_restored_one),
      cmocka_unit_test(test_put_never_evicts_what_waits_for_its_daemon),
      cmocka_unit_test(test_new_puts_never_overlap_restored_ranges),
      cmocka_unit_test(test_snapshot_plus_log_rebuilds_the_directory),
      cmocka_unit_test(test_freed_space_waits_for_its_record),
      cmocka_unit_test(test_restore_drops_what_cannot_be_valid),
      cmocka_unit_test(test_strict_sync_waits_for_the_disk),
      cmocka_unit_test(test_snapshots_retained_and_log_dropped),
      cmocka_unit_test(test_snapshot_child_timeout),
      cmocka_unit_test(test_snapshot_request_and_last),
      cmocka_unit_test(test_snapshot_child_holds_no_descriptor_of_the_master),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
