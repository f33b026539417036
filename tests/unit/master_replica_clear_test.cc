// MasterService::BatchReplicaClear (issue 17, Mooncake's batch_replica_clear) on the
// hand-moved clock: leased keys are skipped, one segment name clears only the replicas
// there, refusals answer per key, and both kinds of clear reach the operation log so that a
// restored master holds exactly what the cleared one held, its freed space reused only
// once the record is on disk.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/base/logging.h"
#include "master/log/oplog.h"
#include "master/snapshot/snapshot_store.h"
#include "master/snapshot/state_restore.h"
#include "tests/harness/master_service_fixture.h"
#include "tests/harness/process_harness.h"

using mooncake::OpLog;
using mooncake::OpLogOptions;

namespace {

constexpr int kHardPinned = kUnavailable;

std::vector<int32_t> Clear(MasterService& s, const std::vector<std::string>& keys,
                           const std::string& segment = "") {
  return s.BatchReplicaClear(keys, segment);
}

size_t Replicas(MasterService& s, const std::string& key) {
  rpc::ReplicaListResult r = s.GetReplicaList(key);
  return r.code == 0 ? r.replicas.size() : 0;
}

void test_leased_keys_are_skipped(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  Put(s, 1, "read", 1024);
  Put(s, 1, "idle", 1024);
  // Just put, both are in use by their writer for one lease (docs/mooncake-api.md, "leases").
  assert_int_equal(Clear(s, {"idle"})[0], kLeased);
  g_now += kLease + 1;
  assert_int_equal(s.GetReplicaList("read").code, 0);  // a read lease of kLease
  std::vector<int32_t> codes = Clear(s, {"read", "idle", "missing"});
  assert_int_equal(codes.size(), 3);
  assert_int_equal(codes[0], kLeased);
  assert_int_equal(codes[1], 0);
  assert_int_equal(codes[2], kNotFound);
  assert_int_equal(s.ExistKey("idle"), 0);
  assert_int_equal(s.ExistKey("read"), 1);
  assert_int_equal(Used(s), 1024);
  g_now += kLease + 1;  // the lease runs out
  assert_int_equal(Clear(s, {"read"})[0], 0);
  assert_int_equal(s.ExistKey("read"), 0);
  assert_int_equal(Used(s), 0);  // no log: freed at once
  assert_int_equal(s.GetStats().objects, 0);
  assert_true(Clear(s, {}).empty());
}

void test_one_segment_name_clears_only_its_replicas(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  AddDaemon(s, 2);
  Put(s, 1, "two", 4096, Cfg(2));  // one replica on each daemon
  Put(s, 1, "on-2", 4096, On(2));
  g_now += kLease + 1;
  assert_int_equal(SegmentUsed(s, 11), 4096);
  assert_int_equal(SegmentUsed(s, 21), 8192);

  std::vector<int32_t> codes = Clear(s, {"two", "on-2"}, Name(1));
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[1], kNoSegment);  // nothing of it on daemon 1: untouched
  assert_int_equal(SegmentUsed(s, 11), 0);
  rpc::ReplicaListResult left = s.GetReplicaList("two");
  assert_int_equal(left.code, 0);
  assert_int_equal(left.replicas.size(), 1);
  assert_int_equal(left.replicas[0].segment_id, 21);
  assert_int_equal(Replicas(s, "on-2"), 1);

  g_now += kLease + 1;
  assert_int_equal(Clear(s, {"two"}, Name(1))[0], kNoSegment);  // already gone from there
  assert_int_equal(Clear(s, {"two"}, "10.0.0.9:7000")[0], kNoSegment);  // no such name
  // Its last replica: the object goes.
  assert_int_equal(Clear(s, {"two"}, Name(2))[0], 0);
  assert_int_equal(s.GetReplicaList("two").code, kNotFound);
  assert_int_equal(SegmentUsed(s, 21), 4096);
  assert_int_equal(s.GetStats().objects, 1);
}

void test_refusals_answer_per_key(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  assert_int_equal(s.PutStart(1, "writing", 100, Cfg()).code, 0);
  Put(s, 1, "pinned", 100, Pinned(/*hard=*/true));
  Put(s, 1, "soft", 100, Pinned(/*hard=*/false));
  g_now += kLease + 1;  // past the lease a put is held in use for
  std::vector<int32_t> codes = Clear(s, {"writing", "pinned", "", "soft"});
  assert_int_equal(codes[0], kNotReady);
  assert_int_equal(codes[1], kHardPinned);  // as a Remove without force keeps it
  assert_int_equal(codes[2], kBadParams);
  assert_int_equal(codes[3], 0);  // a soft pin is no lease
  // A name no segment can have answers -600 for every key, and clears nothing.
  codes = Clear(s, {"pinned", "writing"}, std::string(300, 'h'));
  assert_int_equal(codes[0], kBadParams);
  assert_int_equal(codes[1], kBadParams);
  assert_int_equal(ToInt(s.PutEnd(1, "writing")), 0);
  assert_int_equal(s.GetStats().objects, 2);
}

// ---- the log ----

struct TempDir {
  std::string path = mooncake::testing::MakeTempDir("mc-replica-clear-");
  ~TempDir() { mooncake::testing::RemoveTree(path); }
};

std::unique_ptr<OpLog> StartedLog(const std::string& dir, int64_t flush_interval_ms) {
  OpLogOptions o;
  o.dir = dir + "/oplog";
  o.flush_interval_ms = flush_interval_ms;
  auto log = std::make_unique<OpLog>(o);
  assert_true(log->Recover(0, [](uint64_t, std::string_view) { return true; }).ok());
  assert_int_equal(ToInt(log->Start(0)), 0);
  return log;
}

std::unique_ptr<MasterService> Restore(const std::string& dir) {
  MasterOptions options = Options();
  auto s = std::make_unique<MasterService>(options);
  mooncake::SnapshotStore store(dir);
  OpLogOptions o;
  o.dir = dir + "/oplog";
  OpLog log(o);
  assert_true(mooncake::RestoreMasterState(s.get(), &store, &log).ok());
  return s;
}

// Each object as "key size [segment@offset ...]", sorted.
std::string Export(MasterService& s) {
  std::vector<std::string> lines;
  s.ExportObjects([&](size_t, const std::string& bytes, uint32_t) {
    assert_true(mooncake::DecodeObjects(bytes, [&](mooncake::ObjectRecord&& o) {
      std::string line = o.key + " " + std::to_string(o.size);
      std::vector<std::string> at;
      for (const mooncake::ReplicaRecord& r : o.replicas) {
        at.push_back(std::to_string(r.segment_id) + "@" + std::to_string(r.offset));
      }
      std::sort(at.begin(), at.end());
      for (const std::string& a : at) line += " " + a;
      lines.push_back(std::move(line));
    }));
    return true;
  });
  std::sort(lines.begin(), lines.end());
  std::string all;
  for (const std::string& line : lines) all += line + "\n";
  return all;
}

void test_clears_are_logged_and_restored(void**) {
  TempDir dir;
  std::unique_ptr<OpLog> log = StartedLog(dir.path, 100);
  MasterService a(Options());
  a.AttachOpLog(log.get(), /*strict=*/false);
  AddDaemon(a, 1);
  AddDaemon(a, 2);
  Put(a, 1, "two", 4096, Cfg(2));
  Put(a, 1, "all", 4096);
  Put(a, 2, "kept", 4096, On(2));
  g_now += kLease + 1;
  assert_int_equal(Clear(a, {"two"}, Name(1))[0], 0);  // logged as its new state
  assert_int_equal(Clear(a, {"all"})[0], 0);           // logged as a removal
  std::string expected = Export(a);
  assert_true(expected.find("all ") == std::string::npos);
  assert_true(expected.find("two 4096 21@") != std::string::npos);
  assert_int_equal(ToInt(log->Sync(log->last())), 0);
  log.reset();  // the crash

  std::unique_ptr<MasterService> b = Restore(dir.path);
  for (int64_t d = 1; d <= 2; ++d) {
    b->RegisterDaemon(d, Name(d));
    assert_int_equal(ToInt(b->MountSegment(SegmentOf(d, d * 10 + 1, kMiB))), 0);
  }
  assert_true(Export(*b) == expected);
  assert_int_equal(Replicas(*b, "two"), 1);
  assert_int_equal(b->GetReplicaList("all").code, kNotFound);
}

// Space a clear freed is handed out again only once its record is on disk.
void test_freed_space_waits_for_the_record(void**) {
  TempDir dir;
  std::unique_ptr<OpLog> log = StartedLog(dir.path, 60000);  // nothing flushed unless asked
  MasterService s(Options());
  s.AttachOpLog(log.get(), /*strict=*/false);
  AddDaemon(s, 1);
  AddDaemon(s, 2);
  Put(s, 1, "two", 4096, Cfg(2));
  Put(s, 1, "one", 4096, On(1));
  g_now += kLease + 1;
  int64_t used = Used(s);
  assert_int_equal(Clear(s, {"two"}, Name(2))[0], 0);
  assert_int_equal(Clear(s, {"one"})[0], 0);
  s.Tick();
  assert_true(log->synced() < log->last());
  assert_int_equal(Used(s), used);  // held until the records are on disk
  assert_int_equal(ToInt(log->Sync(log->last())), 0);
  s.Tick();
  assert_int_equal(Used(s), used - 2 * 4096);
}

}  // namespace

int main(void) {
  mooncake::SetLogLevel(mooncake::LogLevel::kError);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_leased_keys_are_skipped),
      cmocka_unit_test(test_one_segment_name_clears_only_its_replicas),
      cmocka_unit_test(test_refusals_answer_per_key),
      cmocka_unit_test(test_clears_are_logged_and_restored),
      cmocka_unit_test(test_freed_space_waits_for_the_record),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
