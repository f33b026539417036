// A MasterService restarted from its state, for the suites that check what survives a
// master's restart (master_disk_evict_test, master_service_drain_test): a temporary
// directory, a log started in it, a snapshot taken there and a master restored from both.
// On top of tests/harness/master_service_fixture.h; every step asserts it succeeded.
#ifndef MOONCAKE_TESTS_MASTER_RESTART_FIXTURE_H_
#define MOONCAKE_TESTS_MASTER_RESTART_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "master/log/oplog.h"
#include "master/snapshot/snapshot_codec.h"
#include "master/snapshot/snapshot_store.h"
#include "master/snapshot/snapshot_writer.h"
#include "master/snapshot/state_restore.h"
#include "tests/harness/master_service_fixture.h"
#include "tests/harness/process_harness.h"

namespace {

// A directory for one test's snapshot and log (dir/oplog), removed when it ends.
struct TempDir {
  std::string path = mooncake::testing::MakeTempDir("mc-master-restart-");
  ~TempDir() { mooncake::testing::RemoveTree(path); }
};

// An empty log in dir/oplog, started: attach it to the master whose changes it records.
inline std::unique_ptr<mooncake::OpLog> StartedLog(const std::string& dir) {
  mooncake::OpLogOptions o;
  o.dir = dir + "/oplog";
  auto log = std::make_unique<mooncake::OpLog>(o);
  assert_true(log->Recover(0, [](uint64_t, std::string_view) { return true; }).ok());
  assert_int_equal(ToInt(log->Start(0)), 0);
  return log;
}

// A snapshot of from's state in dir, covering the log up to sequence.
inline void TakeSnapshot(MasterService& from, const std::string& dir, uint64_t sequence) {
  mooncake::SnapshotWriter writer(dir, sequence, 1);
  mooncake::SnapshotFigures figures;
  std::string error;
  assert_int_equal(ToInt(writer.Begin(&error)), 0);
  assert_int_equal(ToInt(mooncake::WriteSnapshotPayloads(&from, &writer, &figures, &error)), 0);
  assert_int_equal(ToInt(writer.Publish({}, &error)), 0);
}

// A master with options o restored from dir's snapshot and log; its restored segments wait
// 5 s (reattach_grace_ms) for their daemons to mount them again.
inline std::unique_ptr<MasterService> Restore(const std::string& dir, MasterOptions o) {
  o.reattach_grace_ms = 5000;
  auto s = std::make_unique<MasterService>(o);
  mooncake::SnapshotStore store(dir);
  mooncake::OpLogOptions lo;
  lo.dir = dir + "/oplog";
  mooncake::OpLog log(lo);
  assert_true(mooncake::RestoreMasterState(s.get(), &store, &log).ok());
  return s;
}

}  // namespace

#endif  // MOONCAKE_TESTS_MASTER_RESTART_FIXTURE_H_
