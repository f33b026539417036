// Tests for memory lent by clients at the master (issue 11, finding 4): placement keeps
// objects on the daemons' own segments while they have room, and a lent segment that
// leaves is drained (its objects moved elsewhere) with removes, upserts, evictions and a
// restart of the master in between, driven with a hand-moved clock.

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "common/base/logging.h"
#include "master/snapshot/snapshot_codec.h"
#include "master/log/state_records.h"
#include "tests/harness/master_restart_fixture.h"
#include "tests/harness/master_service_fixture.h"

namespace {

constexpr int64_t kKiB = 1024;
// Daemons 1 and 2 own segments 11 and 21; daemon 3 hosts only memory a client lent (31),
// daemon 1 also hosts some (12).
constexpr int64_t kLentOn1 = 12;
constexpr int64_t kLentOn3 = 31;

rpc::SegmentInfo Lent(int64_t daemon, int64_t segment_id, int64_t size) {
  rpc::SegmentInfo info = SegmentOf(daemon, segment_id, size);
  info.lent_by_client = true;
  return info;
}

void MountLent(MasterService& s, int64_t daemon, int64_t segment_id, int64_t size) {
  assert_int_equal(ToInt(s.MountSegment(Lent(daemon, segment_id, size))), 0);
}

// Two daemons with their own 1 MiB; daemon 1 also holds a lent MiB, daemon 3 only one.
void LentCluster(MasterService& s) {
  AddDaemon(s, 1);
  AddDaemon(s, 2);
  MountLent(s, 1, kLentOn1, kMiB);
  assert_int_equal(ToInt(s.RegisterDaemon(3, Name(3))), 0);
  MountLent(s, 3, kLentOn3, kMiB);
}

int64_t SegmentOfKey(MasterService& s, const std::string& key, size_t replica = 0) {
  rpc::ReplicaListResult r = s.GetReplicaList(key);
  if (r.code != 0 || r.replicas.size() <= replica) return -1;
  return r.replicas[replica].segment_id;
}

// ---- placement -----------------------------------------------------------------------

void test_unplaced_puts_avoid_lent_segments_while_own_have_room(void**) {
  for (const char* strategy : {"random", "free_ratio_first"}) {
    MasterOptions o = Options();
    o.allocation_strategy = strategy;
    o.placement_seed = 34;  // the same random placements every run
    MasterService s(o);
    LentCluster(s);
    // 1.5 MiB of 2 MiB owned: none of it on the lent 2 MiB, although free_ratio_first
    // would rank the emptier lent segments first.
    for (int i = 0; i < 48; ++i) {
      std::string key = "k" + std::to_string(i);
      Put(s, 1, key, 32 * kKiB);
      int64_t at = SegmentOfKey(s, key);
      assert_true(at == 11 || at == 21);
      if (i != 23) continue;
      // Two replicas: both daemons' own segments, never daemon 1's lent one. Asked half-way,
      // while each own segment surely has room (by the end, placement may have filled one
      // of them).
      std::vector<rpc::ReplicaDescriptor> two = Put(s, 1, "two", 16 * kKiB, Cfg(2));
      assert_int_equal(two.size(), 2);
      for (const rpc::ReplicaDescriptor& d : two) {
        assert_true(d.segment_id == 11 || d.segment_id == 21);
      }
    }
    assert_int_equal(SegmentUsed(s, kLentOn1) + SegmentUsed(s, kLentOn3), 0);
    // Once the own segments are full, lent memory takes the rest (no eviction needed).
    int64_t evicted = s.GetStats().evicted_objects;
    int on_lent = 0;
    for (int i = 0; i < 32; ++i) {
      std::string key = "fill" + std::to_string(i);
      Put(s, 1, key, 32 * kKiB);
      int64_t at = SegmentOfKey(s, key);
      on_lent += at == kLentOn1 || at == kLentOn3;
    }
    assert_true(on_lent >= 16);
    assert_int_equal(s.GetStats().evicted_objects, evicted);
  }
}

void test_explicit_preference_reaches_lent_memory(void**) {
  MasterService s(Options());
  LentCluster(s);
  // Daemon 3's name is its lent segment: asked for, it is used.
  Put(s, 2, "on-3", 4 * kKiB, On(3));
  assert_int_equal(SegmentOfKey(s, "on-3"), kLentOn3);
  // Daemon 1's name: its own segment first, the memory lent at it once that is full.
  Put(s, 2, "on-1", 4 * kKiB, On(1));
  assert_int_equal(SegmentOfKey(s, "on-1"), 11);
  Put(s, 2, "big-on-1", kMiB - 64 * kKiB, On(1));
  assert_int_equal(SegmentOfKey(s, "big-on-1"), 11);
  Put(s, 2, "next-on-1", 128 * kKiB, On(1));
  assert_int_equal(SegmentOfKey(s, "next-on-1"), kLentOn1);
  // GetAllSegments says which memory is lent.
  std::map<int64_t, bool> lent;
  for (const rpc::SegmentInfo& info : s.GetAllSegments()) lent[info.segment_id] = info.lent_by_client;
  assert_true((lent == std::map<int64_t, bool>{{11, false}, {12, true}, {21, false}, {31, true}}));
}

// ---- draining ------------------------------------------------------------------------

void test_drain_moves_every_object_then_unmount_keeps_them(void**) {
  MasterService s(Options());
  LentCluster(s);
  std::map<std::string, int64_t> offsets;
  for (int i = 0; i < 20; ++i) {
    std::string key = "lent" + std::to_string(i);
    std::vector<rpc::ReplicaDescriptor> at = Put(s, 2, key, 8 * kKiB, On(3));
    assert_int_equal(at[0].segment_id, kLentOn3);
    offsets[key] = at[0].offset;
  }
  int64_t own_before = SegmentUsed(s, 11) + SegmentUsed(s, 21);
  rpc::DrainBatchResult first = s.DrainSegment(3, kLentOn3, 0, 1000, {});
  assert_int_equal(first.code, 0);
  assert_int_equal(first.next_cursor, -1);
  assert_int_equal(first.moves.size(), 20);
  assert_int_equal(first.stranded + first.shed + first.busy, 0);
  std::vector<std::string> keys;
  for (const rpc::SegmentMove& m : first.moves) {
    assert_int_equal(m.from_offset, offsets.at(m.key));
    assert_int_equal(m.size, 8 * kKiB);
    assert_true(m.to.segment_id == 11 || m.to.segment_id == 21);
    assert_int_equal(m.to.status, rpc::ReplicaStatus::PROCESSING);
    // Until committed, readers keep the old place.
    assert_int_equal(SegmentOfKey(s, m.key), kLentOn3);
    keys.push_back(m.key);
  }
  // The targets are reserved: they count as used.
  assert_int_equal(SegmentUsed(s, 11) + SegmentUsed(s, 21), own_before + 20 * 8 * kKiB);
  // Draining: nothing new lands in the segment, even when asked for.
  Put(s, 2, "new-on-3", 4 * kKiB, On(3));
  assert_int_not_equal(SegmentOfKey(s, "new-on-3"), kLentOn3);
  for (int32_t code : s.CommitMoves(3, kLentOn3, keys)) assert_int_equal(code, 0);
  for (const rpc::SegmentMove& m : first.moves) {
    rpc::ReplicaListResult r = s.GetReplicaList(m.key);
    assert_int_equal(r.code, 0);
    assert_int_equal(r.replicas.size(), 1);
    assert_int_equal(r.replicas[0].segment_id, m.to.segment_id);
    assert_int_equal(r.replicas[0].offset, m.to.offset);
    assert_int_equal(r.replicas[0].status, rpc::ReplicaStatus::COMPLETE);
  }
  // A commit is not repeated; the old ranges are freed once the leases just granted end.
  assert_int_equal(s.CommitMoves(3, kLentOn3, {keys[0]})[0], kNotFound);
  assert_int_equal(SegmentUsed(s, kLentOn3), 20 * 8 * kKiB);
  g_now += 2 * kLease;
  s.Tick();
  assert_int_equal(SegmentUsed(s, kLentOn3), 0);
  // A second walk finds nothing; the unmount loses nothing.
  rpc::DrainBatchResult again = s.DrainSegment(3, kLentOn3, 0, 1000, {});
  assert_int_equal(again.moves.size() + again.stranded + again.shed + again.busy, 0);
  int64_t objects = s.GetStats().objects;
  assert_int_equal(ToInt(s.UnmountSegment(3, kLentOn3)), 0);
  assert_int_equal(s.GetStats().objects, objects);
  for (const std::string& key : keys) assert_int_equal(s.GetReplicaList(key).code, 0);
}

void test_drain_batches_are_bounded(void**) {
  MasterService s(Options());
  LentCluster(s);
  for (int i = 0; i < 300; ++i) Put(s, 2, "b" + std::to_string(i), 1 * kKiB, On(3));
  std::set<std::string> moved;
  int64_t cursor = 0;
  int batches = 0;
  do {
    rpc::DrainBatchResult r = s.DrainSegment(3, kLentOn3, cursor, 10, {});
    assert_int_equal(r.code, 0);
    // Whole shards: the one that reaches the bound is finished (300 keys over 1024
    // shards put very few in any one).
    assert_true(r.moves.size() <= 16);
    assert_true(r.next_cursor == -1 || r.next_cursor > cursor);
    std::vector<std::string> keys;
    for (const rpc::SegmentMove& m : r.moves) {
      assert_true(moved.insert(m.key).second);
      keys.push_back(m.key);
    }
    for (int32_t code : s.CommitMoves(3, kLentOn3, keys)) assert_int_equal(code, 0);
    cursor = r.next_cursor;
    ++batches;
  } while (cursor >= 0);
  assert_int_equal(moved.size(), 300);
  assert_true(batches >= 300 / 16);
  // A bad cursor or bound is refused, so are other daemons and unknown segments.
  assert_int_equal(s.DrainSegment(3, kLentOn3, -1, 10, {}).code, kBadParams);
  assert_int_equal(s.DrainSegment(3, kLentOn3, 1024, 10, {}).code, kBadParams);
  assert_int_equal(s.DrainSegment(3, kLentOn3, 0, 0, {}).code, kBadParams);
  assert_int_equal(s.DrainSegment(2, kLentOn3, 0, 10, {}).code, kNotOwner);
  assert_int_equal(s.DrainSegment(3, 999, 0, 10, {}).code, kNoSegment);
  assert_int_equal(s.DrainSegment(77, kLentOn3, 0, 10, {}).code, kUnknownDaemon);
  assert_int_equal(s.CommitMoves(2, kLentOn3, {"b1"})[0], kNotOwner);
  assert_int_equal(s.CommitMoves(3, kLentOn3, {""})[0], kBadParams);
}

void test_drain_counts_shed_stranded_and_busy(void**) {
  MasterService s(Options());
  LentCluster(s);
  // Shed: a second complete replica elsewhere keeps it readable.
  rpc::ReplicateConfig both = Cfg(2);
  both.preferred_segments = {Name(3), Name(2)};
  std::vector<rpc::ReplicaDescriptor> two = Put(s, 1, "two", 4 * kKiB, both);
  assert_int_equal(two[0].segment_id, kLentOn3);
  // Busy: a put and an upsert still writing into the segment.
  assert_int_equal(s.PutStart(1, "writing", 4 * kKiB, On(3)).code, 0);
  Put(s, 1, "upserted", 4 * kKiB, On(2));
  assert_int_equal(s.UpsertStart(1, "upserted", 4 * kKiB, On(3)).replicas[0].segment_id, kLentOn3);
  // Stranded: no room anywhere else for it.
  Put(s, 1, "huge", 900 * kKiB, On(3));
  Put(s, 1, "fill-11", 900 * kKiB, On(1));
  Put(s, 1, "fill-21", 900 * kKiB, On(2));
  Put(s, 1, "fill-12", 900 * kKiB, On(1));  // 11 is full: the memory lent at daemon 1
  assert_int_equal(SegmentOfKey(s, "fill-12"), kLentOn1);
  rpc::DrainBatchResult r = s.DrainSegment(3, kLentOn3, 0, 1000, {});
  assert_int_equal(r.code, 0);
  assert_int_equal(r.moves.size(), 0);
  assert_int_equal(r.shed, 1);
  assert_int_equal(r.busy, 2);
  assert_int_equal(r.stranded, 1);
  // The writers finish: the new values are complete in the draining segment, and the next
  // walk finds them to move (the upsert's, at least; the rest of the space is gone).
  assert_int_equal(ToInt(s.PutEnd(1, "writing")), 0);
  assert_int_equal(ToInt(s.UpsertEnd(1, "upserted")), 0);
  assert_int_equal(ToInt(s.Remove("fill-21", true)), 0);
  g_now += 2 * kLease;
  s.Tick();
  r = s.DrainSegment(3, kLentOn3, 0, 1000, {});
  assert_int_equal(r.busy, 0);
  assert_int_equal(r.moves.size(), 3);  // writing, upserted, huge: fill-21's room took them
  assert_int_equal(r.shed, 1);
  assert_int_equal(r.stranded, 0);
  // Unmounted with the moves still pending, nothing is lost but the segment's replicas:
  // "two" keeps its other one; the others never moved and go with it.
  assert_int_equal(ToInt(s.UnmountSegment(3, kLentOn3)), 0);
  assert_int_equal(SegmentOfKey(s, "two"), 21);
  assert_int_equal(s.GetReplicaList("huge").code, kNotFound);
}

void test_moves_of_changed_objects_fail_cleanly(void**) {
  MasterService s(Options());
  LentCluster(s);
  for (const char* key : {"removed", "upserted", "evicted", "revoked", "kept"}) {
    Put(s, 1, key, 64 * kKiB, On(3));
  }
  int64_t own_before = SegmentUsed(s, 11) + SegmentUsed(s, 21);
  rpc::DrainBatchResult r = s.DrainSegment(3, kLentOn3, 0, 1000, {});
  assert_int_equal(r.moves.size(), 5);
  assert_int_equal(SegmentUsed(s, 11) + SegmentUsed(s, 21), own_before + 5 * 64 * kKiB);
  // Meanwhile: a forced remove, an upsert, an eviction.
  assert_int_equal(ToInt(s.Remove("removed", true)), 0);
  assert_int_equal(s.UpsertStart(2, "upserted", 16 * kKiB, On(2)).code, 0);
  assert_int_equal(ToInt(s.UpsertEnd(2, "upserted")), 0);
  assert_int_equal(s.RevokeMoves(3, kLentOn3, {"revoked"})[0], 0);
  // A walk now counts the moves pending as busy, and moves nothing twice; "revoked" is
  // planned again.
  rpc::DrainBatchResult again = s.DrainSegment(3, kLentOn3, 0, 1000, {});
  assert_int_equal(again.moves.size(), 1);
  assert_string_equal(again.moves[0].key.c_str(), "revoked");
  assert_int_equal(again.busy, 2);  // evicted, kept
  assert_int_equal(s.RevokeMoves(3, kLentOn3, {"revoked"})[0], 0);
  // Only "evicted" is left unleased for the eviction.
  g_now += 2 * kLease;
  for (const char* key : {"upserted", "revoked", "kept"}) {
    assert_int_equal(s.GetReplicaList(key).code, 0);
  }
  assert_true(s.Evict(1) > 0);
  assert_int_equal(s.GetReplicaList("evicted").code, kNotFound);
  // "removed" is never committed: its mover could still be copying into its target.
  std::vector<int32_t> codes = s.CommitMoves(3, kLentOn3, {"upserted", "evicted", "revoked", "kept"});
  assert_int_equal(codes[0], kNotFound);
  assert_int_equal(codes[1], kNotFound);
  assert_int_equal(codes[2], kNotFound);
  assert_int_equal(codes[3], 0);
  assert_int_not_equal(SegmentOfKey(s, "kept"), kLentOn3);
  assert_int_equal(SegmentOfKey(s, "revoked"), kLentOn3);
  // The upsert's value is what is read, where the upsert put it.
  rpc::ReplicaListResult upserted = s.GetReplicaList("upserted");
  assert_int_equal(upserted.size, 16 * kKiB);
  assert_int_equal(upserted.replicas[0].segment_id, 21);
  assert_int_equal(s.GetReplicaList("removed").code, kNotFound);
  // The targets of the failed moves: freed by the failed commits (the mover is done with
  // them), the one never committed once its mover must have given up (release timeout).
  int64_t live_targets = 16 * kKiB + 64 * kKiB;  // the upsert's value, "kept" moved
  assert_int_equal(SegmentUsed(s, 11) + SegmentUsed(s, 21), own_before + live_targets + 64 * kKiB);
  g_now += kRelease + 1;
  s.Tick();
  assert_int_equal(SegmentUsed(s, 11) + SegmentUsed(s, 21), own_before + live_targets);
  assert_int_equal(s.RevokeMoves(3, kLentOn3, {"removed"})[0], kNotFound);
}

void test_dead_mover_releases_its_moves(void**) {
  MasterOptions o = Options();
  o.client_live_ttl_ms = 500;
  o.daemon_grace_ms = 0;  // the shortest grace: one read lease
  MasterService s(o);
  LentCluster(s);
  Put(s, 1, "k", 64 * kKiB, On(3));
  int64_t own_before = SegmentUsed(s, 11) + SegmentUsed(s, 21);
  assert_int_equal(s.DrainSegment(3, kLentOn3, 0, 10, {}).moves.size(), 1);
  // Daemons 1 and 2 keep beating; daemon 3 stops: past its TTL and grace, its segment and
  // its move go.
  for (int64_t waited = 0; waited <= 500 + kLease + 200; waited += 100) {
    g_now += 100;
    s.Heartbeat(1);
    s.Heartbeat(2);
    s.Tick();
  }
  assert_true(s.GetAllSegments().size() == 3);
  assert_int_equal(s.GetReplicaList("k").code, kNotFound);
  g_now += kRelease + 1;
  s.Heartbeat(1);
  s.Heartbeat(2);
  s.Tick();
  assert_int_equal(SegmentUsed(s, 11) + SegmentUsed(s, 21), own_before);
}

// ---- across a restart of the master --------------------------------------------------

// A segment record of 8 fields carries the flag; one of 7, as masters before it wrote
// them, reads as a daemon's own segment.
void test_segment_records_old_and_new(void**) {
  mooncake::SegmentRecord lent;
  lent.segment_id = 31;
  lent.name = Name(3);
  lent.size = kMiB;
  lent.lent_by_client = true;
  std::string bytes;
  mooncake::AppendArrayHeader(&bytes, 1);
  mooncake::AppendSegment(&bytes, lent);
  std::vector<mooncake::SegmentRecord> read;
  assert_true(mooncake::DecodeSegments(bytes, &read));
  assert_int_equal(read.size(), 1);
  assert_true(read[0].lent_by_client);
  assert_int_equal(read[0].segment_id, 31);

  msgpack::sbuffer old;
  msgpack::packer<msgpack::sbuffer> p(old);
  p.pack_array(1);
  p.pack_array(7);
  p.pack(int64_t{11});
  p.pack(Name(1));
  p.pack(int64_t{0});
  p.pack(int64_t{kMiB});
  p.pack(int64_t{1});
  p.pack(int64_t{7});
  p.pack_array(0);
  assert_true(mooncake::DecodeSegments(std::string_view(old.data(), old.size()), &read));
  assert_int_equal(read.size(), 1);
  assert_false(read[0].lent_by_client);
  assert_int_equal(read[0].incarnation, 7);
}

// The lent flag travels in the snapshot and in the log's mount records, and a committed
// move in the log: the restored master places as before and reads at the new place.
void test_restored_master_knows_lent_memory_and_moves(void**) {
  TempDir dir;
  std::unique_ptr<mooncake::OpLog> log = StartedLog(dir.path);
  MasterService a(Options());
  a.AttachOpLog(log.get(), /*strict=*/false);
  AddDaemon(a, 1);
  MountLent(a, 1, kLentOn1, kMiB);                 // in the snapshot
  TakeSnapshot(a, dir.path, log->last());
  assert_int_equal(ToInt(a.RegisterDaemon(3, Name(3))), 0);
  MountLent(a, 3, kLentOn3, kMiB);                 // in the log only
  Put(a, 1, "moved", 4 * kKiB, On(3));
  Put(a, 1, "stays", 4 * kKiB, On(3));
  rpc::DrainBatchResult r = a.DrainSegment(3, kLentOn3, 0, 10, {});
  assert_int_equal(r.moves.size(), 2);
  const rpc::SegmentMove& move = r.moves[0].key == "moved" ? r.moves[0] : r.moves[1];
  assert_int_equal(a.CommitMoves(3, kLentOn3, {"moved"})[0], 0);
  assert_int_equal(ToInt(log->Sync(log->last())), 0);
  log.reset();

  std::unique_ptr<MasterService> b = Restore(dir.path, Options());
  b->RegisterDaemon(1, Name(1));
  assert_int_equal(ToInt(b->MountSegment(SegmentOf(1, 11, kMiB))), 0);
  assert_int_equal(ToInt(b->MountSegment(Lent(1, kLentOn1, kMiB))), 0);
  b->RegisterDaemon(3, Name(3));
  assert_int_equal(ToInt(b->MountSegment(Lent(3, kLentOn3, kMiB))), 0);
  assert_int_equal(b->GetStats().pending_segments, 0);
  rpc::ReplicaListResult moved = b->GetReplicaList("moved");
  assert_int_equal(moved.code, 0);
  assert_int_equal(moved.replicas[0].segment_id, move.to.segment_id);
  assert_int_equal(moved.replicas[0].offset, move.to.offset);
  // The move not committed is not: "stays" is where it was, and its drain starts again.
  assert_int_equal(SegmentOfKey(*b, "stays"), kLentOn3);
  assert_int_equal(b->DrainSegment(3, kLentOn3, 0, 10, {}).moves.size(), 1);
  int lent = 0;
  for (const rpc::SegmentInfo& info : b->GetAllSegments()) lent += info.lent_by_client;
  assert_int_equal(lent, 2);
  for (int i = 0; i < 20; ++i) {
    std::string key = "after" + std::to_string(i);
    Put(*b, 1, key, 4 * kKiB);
    assert_int_equal(SegmentOfKey(*b, key), 11);
  }
}

}  // namespace

int main(void) {
  mooncake::SetLogLevel(mooncake::LogLevel::kError);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unplaced_puts_avoid_lent_segments_while_own_have_room),
      cmocka_unit_test(test_explicit_preference_reaches_lent_memory),
      cmocka_unit_test(test_drain_moves_every_object_then_unmount_keeps_them),
      cmocka_unit_test(test_drain_batches_are_bounded),
      cmocka_unit_test(test_drain_counts_shed_stranded_and_busy),
      cmocka_unit_test(test_moves_of_changed_objects_fail_cleanly),
      cmocka_unit_test(test_dead_mover_releases_its_moves),
      cmocka_unit_test(test_segment_records_old_and_new),
      cmocka_unit_test(test_restored_master_knows_lent_memory_and_moves),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
