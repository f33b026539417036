// Copy and move tasks at the master (issue 31; master/directory/replica_tasks.h,
// master_service_tasks.cc) on the hand-moved clock: the table's transitions, retries,
// timeouts and pruning; creation's checks in Mooncake's order and codes; a fetch reserving
// targets and a report publishing them (or failing cleanly when the object changed); and
// the naming of lent memory by its client (SegmentInfo.lender), with clear's lease on a
// just-put key.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "master/directory/replica_tasks.h"
#include "tests/harness/master_service_fixture.h"

namespace {

using mooncake::ReplicaTask;
using mooncake::ReplicaTaskLimits;
using mooncake::ReplicaTasks;
using mooncake::TaskId;
using mooncake::TaskStatus;
using mooncake::TaskType;

constexpr int kLimit = static_cast<int>(ErrorCode::RESOURCE_LIMIT_EXCEEDED);
constexpr int64_t kUnix0 = 1700000000000;
constexpr int kPid = 4242;

ReplicaTask CopyOf(const std::string& key, int64_t daemon) {
  ReplicaTask t;
  t.type = TaskType::kCopy;
  t.key = key;
  t.source = Name(daemon);
  t.targets = {"b:1"};
  t.daemon = daemon;
  return t;
}

TaskStatus StatusOf(const ReplicaTasks& tasks, const TaskId& id) {
  ReplicaTask t;
  assert_true(tasks.Get(id, &t));
  return t.status;
}

// ---- the table ----------------------------------------------------------------------

void test_table_moves_a_task_through_its_states(void**) {
  ReplicaTasks tasks(ReplicaTaskLimits{});
  TaskId id;
  assert_int_equal(ToInt(tasks.Submit(CopyOf("k", 1), 10, kUnix0, &id)), 0);
  assert_true(id.high != 0 || id.low != 0);
  assert_int_equal(static_cast<int>(StatusOf(tasks, id)), static_cast<int>(TaskStatus::kPending));
  assert_true(tasks.Take(2, 8, 10, kUnix0).empty());  // another daemon's queue
  std::vector<ReplicaTask> taken = tasks.Take(1, 8, 20, kUnix0 + 10);
  assert_int_equal(taken.size(), 1);
  assert_true(taken[0].id == id);
  assert_int_equal(static_cast<int>(StatusOf(tasks, id)),
                   static_cast<int>(TaskStatus::kProcessing));
  assert_true(tasks.Take(1, 8, 30, kUnix0).empty());  // handed out once
  // Only its daemon ends it, once.
  assert_int_equal(ToInt(tasks.Finish(id, 2, true, "x", 40, kUnix0)), kNotOwner);
  assert_int_equal(ToInt(tasks.Finish(id, 1, true, "done", 40, kUnix0 + 30)), 0);
  assert_int_equal(ToInt(tasks.Finish(id, 1, false, "again", 50, kUnix0)), kNotFound);
  ReplicaTask t;
  assert_true(tasks.Find(id, "", &t));
  assert_int_equal(static_cast<int>(t.status), static_cast<int>(TaskStatus::kSuccess));
  assert_string_equal(t.message.c_str(), "done");
  assert_int_equal(t.created_unix_ms, kUnix0);
  assert_int_equal(t.updated_unix_ms, kUnix0 + 30);
  assert_int_equal(tasks.counts().finished, 1);
}

void test_table_retries_after_a_pause_then_fails(void**) {
  ReplicaTaskLimits limits;
  limits.max_retry_attempts = 2;
  ReplicaTasks tasks(limits);
  TaskId id;
  assert_int_equal(ToInt(tasks.Submit(CopyOf("k", 1), 0, kUnix0, &id)), 0);
  int64_t now = 0;
  for (uint32_t attempt = 1; attempt <= 2; ++attempt) {
    assert_int_equal(tasks.Take(1, 8, now, kUnix0).size(), 1);
    assert_true(tasks.Retry(id, "no room", now, kUnix0));
    assert_int_equal(static_cast<int>(StatusOf(tasks, id)),
                     static_cast<int>(TaskStatus::kPending));
    // Not handed out again before its pause (kRetryPauseMs times the attempt) is over.
    now += ReplicaTasks::kRetryPauseMs * attempt - 1;
    assert_true(tasks.Take(1, 8, now, kUnix0).empty());
    now += 1;
  }
  assert_int_equal(tasks.Take(1, 8, now, kUnix0).size(), 1);
  assert_true(tasks.Retry(id, "no room", now, kUnix0));
  ReplicaTask t;
  assert_true(tasks.Get(id, &t));
  assert_int_equal(static_cast<int>(t.status), static_cast<int>(TaskStatus::kFailed));
  assert_string_equal(t.message.c_str(), "no room (max retries reached: 2)");
  assert_false(tasks.Retry(id, "no room", now, kUnix0));  // not processing any more
}

void test_table_times_out_and_forgets(void**) {
  ReplicaTaskLimits limits;
  limits.pending_timeout_ms = 100;
  limits.processing_timeout_ms = 50;
  limits.max_finished = 2;
  ReplicaTasks tasks(limits);
  auto live = [](int64_t daemon) { return daemon != 9; };
  TaskId waiting, running, orphan;
  assert_int_equal(ToInt(tasks.Submit(CopyOf("a", 1), 0, kUnix0, &waiting)), 0);
  assert_int_equal(ToInt(tasks.Submit(CopyOf("b", 2), 0, kUnix0, &running)), 0);
  assert_int_equal(ToInt(tasks.Submit(CopyOf("c", 9), 0, kUnix0, &orphan)), 0);
  assert_int_equal(tasks.Take(2, 8, 60, kUnix0).size(), 1);
  // A daemon the master no longer knows: its task fails at the next upkeep.
  assert_true(tasks.Expire(61, kUnix0, live).empty());
  ReplicaTask t;
  assert_true(tasks.Get(orphan, &t));
  assert_int_equal(static_cast<int>(t.status), static_cast<int>(TaskStatus::kFailed));
  // Not yet: pending 100 ms from creation, processing 50 ms from the take.
  assert_true(tasks.Expire(100, kUnix0, live).empty());
  std::vector<ReplicaTask> failed = tasks.Expire(111, kUnix0, live);
  assert_int_equal(failed.size(), 1);  // the processing one: its reservation is released
  assert_true(failed[0].id == running);
  assert_true(tasks.Get(running, &t));
  assert_string_equal(t.message.c_str(), "processing timeout");
  assert_true(tasks.Get(waiting, &t));
  assert_string_equal(t.message.c_str(), "pending timeout");
  // Three finished, two kept: the oldest is forgotten.
  assert_false(tasks.Get(orphan, &t));
  assert_int_equal(tasks.counts().finished, 2);
  assert_int_equal(tasks.counts().pending + tasks.counts().processing, 0);
}

void test_table_bounds_pending_and_keeps_tenants_apart(void**) {
  ReplicaTaskLimits limits;
  limits.max_pending = 2;
  limits.max_processing = 1;
  ReplicaTasks tasks(limits);
  TaskId a, b, c;
  const std::string alices = mooncake::tenant_key::Encode("alice", "k");
  assert_int_equal(ToInt(tasks.Submit(CopyOf(alices, 1), 0, kUnix0, &a)), 0);
  assert_int_equal(ToInt(tasks.Submit(CopyOf("k", 1), 0, kUnix0, &b)), 0);
  assert_int_equal(ToInt(tasks.Submit(CopyOf("k", 1), 0, kUnix0, &c)), kLimit);
  ReplicaTask t;
  assert_true(tasks.Find(a, "alice", &t));
  assert_false(tasks.Find(a, "", &t));
  assert_false(tasks.Find(a, "bob", &t));
  assert_true(tasks.Find(b, "", &t));
  // One at a time runs.
  assert_int_equal(tasks.Take(1, 8, 0, kUnix0).size(), 1);
  assert_true(tasks.Take(1, 8, 0, kUnix0).empty());
}

// ---- the service --------------------------------------------------------------------

// A segment lent at daemon by a client of that name (its process kPid).
rpc::SegmentInfo LentAs(int64_t daemon, int64_t segment_id, const std::string& name,
                        int64_t pid = kPid) {
  rpc::SegmentInfo info = SegmentOf(daemon, segment_id, kMiB);
  info.lent_by_client = true;
  info.name = name;
  info.lender = pid;
  return info;
}

// Daemons 1 and 2 with their own MiB; clients "c1:1" and "c2:2" lend a MiB at daemon 1.
MasterService* Cluster() {
  MasterOptions o = Options();
  o.unix_ms = [] { return kUnix0 + g_now; };
  o.max_retry_attempts = 1;
  auto* s = new MasterService(o);
  AddDaemon(*s, 1);
  AddDaemon(*s, 2);
  assert_int_equal(ToInt(s->MountSegment(LentAs(1, 12, "c1:1"))), 0);
  assert_int_equal(ToInt(s->MountSegment(LentAs(1, 13, "c2:2", kPid + 1))), 0);
  return s;
}

std::vector<std::string> Locations(MasterService& s, const std::string& key) {
  std::vector<std::string> out;
  for (const rpc::ReplicaDescriptor& d : s.GetReplicaList(key).replicas) {
    out.push_back(d.segment_name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

rpc::QueryTaskResult Query(MasterService& s, const rpc::TaskResult& created) {
  return s.QueryTask(created.id_high, created.id_low, "");
}

int32_t Report(MasterService& s, int64_t daemon, const rpc::ReplicaTaskAssignment& task,
               int32_t code = 0) {
  rpc::ReplicaTaskOutcome outcome;
  outcome.id_high = task.id_high;
  outcome.id_low = task.id_low;
  outcome.code = code;
  std::vector<int32_t> codes = s.CompleteReplicaTasks(daemon, {outcome});
  assert_int_equal(codes.size(), 1);
  return codes[0];
}

void test_creation_checks_in_mooncakes_order(void**) {
  std::unique_ptr<MasterService> s(Cluster());
  Put(*s, 1, "k", 4096, On(1));
  assert_int_equal(s->CreateCopyTask("k", {}).code, kBadParams);
  assert_int_equal(s->CreateCopyTask("missing", {"c1:1"}).code, kNotFound);
  assert_int_equal(s->CreateCopyTask("k", {"c1:1", "nobody:9"}).code, kBadParams);
  assert_int_equal(s->CreateMoveTask("missing", Name(1), "c1:1").code, kNotFound);
  assert_int_equal(s->CreateMoveTask("k", Name(1), Name(1)).code, kBadParams);
  assert_int_equal(s->CreateMoveTask("k", Name(1), "nobody:9").code, kBadParams);
  assert_int_equal(s->CreateMoveTask("k", "c2:2", "c1:1").code, kBadParams);  // no replica there
  // A draining target takes no allocation.
  rpc::DrainBatchResult drain = s->DrainSegment(1, 13, 0, 16, {});
  assert_int_equal(drain.code, 0);
  assert_int_equal(s->CreateCopyTask("k", {"c2:2"}).code, kUnavailable);
  rpc::TaskResult ok = s->CreateCopyTask("k", {"c1:1"});
  assert_int_equal(ok.code, 0);
  rpc::QueryTaskResult q = Query(*s, ok);
  assert_int_equal(q.code, 0);
  assert_int_equal(q.task.status, static_cast<int32_t>(TaskStatus::kPending));
  assert_int_equal(q.task.assigned_daemon, 1);  // the holder of the source
  assert_int_equal(q.task.created_unix_ms, kUnix0 + g_now);
  assert_int_equal(s->QueryTask(ok.id_high, ok.id_low ^ 1, "").code, kNotFound);
  assert_int_equal(s->QueryTask(ok.id_high, ok.id_low, "alice").code, kNotFound);
}

void test_copy_reserves_then_publishes(void**) {
  std::unique_ptr<MasterService> s(Cluster());
  Put(*s, 2, "k", 4096, On(2));
  rpc::TaskResult created = s->CreateCopyTask("k", {"c1:1", "c2:2", Name(2)});
  assert_int_equal(created.code, 0);
  assert_int_equal(s->FetchReplicaTasks(1, 8).tasks.size(), 0);  // daemon 2 holds the source
  const int64_t used = Used(*s);
  rpc::ReplicaTasksResult fetched = s->FetchReplicaTasks(2, 8);
  assert_int_equal(fetched.code, 0);
  assert_int_equal(fetched.tasks.size(), 1);
  const rpc::ReplicaTaskAssignment& task = fetched.tasks[0];
  assert_int_equal(task.source_segment_id, 21);
  assert_int_equal(task.size, 4096);
  assert_int_equal(task.targets.size(), 2);  // Name(2) holds one already
  assert_true(Used(*s) >= used + 2 * 4096);  // reserved
  assert_int_equal(Query(*s, created).task.status, static_cast<int32_t>(TaskStatus::kProcessing));
  // Readers see only the source until the report.
  assert_int_equal(Locations(*s, "k").size(), 1);
  assert_int_equal(Report(*s, 2, task), 0);
  std::vector<std::string> want = {"c1:1", "c2:2", Name(2)};
  std::sort(want.begin(), want.end());
  assert_true(Locations(*s, "k") == want);
  rpc::QueryTaskResult q = Query(*s, created);
  assert_int_equal(q.task.status, static_cast<int32_t>(TaskStatus::kSuccess));
  assert_string_equal(q.task.message.c_str(), "Task completed successfully");
  // Copying to where it is already ends at once, with nothing handed out.
  rpc::TaskResult again = s->CreateCopyTask("k", {"c1:1"});
  assert_int_equal(s->FetchReplicaTasks(1, 8).tasks.size() + s->FetchReplicaTasks(2, 8).tasks.size(), 0);
  assert_int_equal(Query(*s, again).task.status, static_cast<int32_t>(TaskStatus::kSuccess));
}

void test_move_swaps_the_source(void**) {
  std::unique_ptr<MasterService> s(Cluster());
  Put(*s, 1, "k", 4096, On(1));
  rpc::TaskResult created = s->CreateMoveTask("k", Name(1), "c2:2");
  assert_int_equal(created.code, 0);
  rpc::ReplicaTasksResult fetched = s->FetchReplicaTasks(1, 8);
  assert_int_equal(fetched.tasks.size(), 1);
  assert_int_equal(fetched.tasks[0].targets.size(), 1);
  assert_int_equal(fetched.tasks[0].targets[0].segment_id, 13);
  assert_int_equal(Report(*s, 1, fetched.tasks[0]), 0);
  assert_true(Locations(*s, "k") == std::vector<std::string>{"c2:2"});
  // The source's range is freed once no lease covers it (the read above took one).
  g_now += kLease + 1;
  s->Tick();
  assert_int_equal(SegmentUsed(*s, 11), 0);
  // A move to a name holding a replica already only drops the source.
  Put(*s, 1, "two", 4096, [] {
    rpc::ReplicateConfig c = Cfg(2);
    c.preferred_segments = {"c1:1", Name(2)};
    return c;
  }());
  created = s->CreateMoveTask("two", "c1:1", Name(2));
  assert_int_equal(created.code, 0);
  assert_int_equal(s->FetchReplicaTasks(1, 8).tasks.size(), 0);
  assert_int_equal(Query(*s, created).task.status, static_cast<int32_t>(TaskStatus::kSuccess));
  assert_true(Locations(*s, "two") == std::vector<std::string>{Name(2)});
}

void test_failures_leave_the_object_as_it_was(void**) {
  std::unique_ptr<MasterService> s(Cluster());
  Put(*s, 1, "k", 4096, On(1));
  const int64_t used = Used(*s);
  // The daemon's copy failed: the task fails with its reason, the targets are freed.
  rpc::TaskResult copy = s->CreateCopyTask("k", {"c1:1"});
  rpc::ReplicaTasksResult fetched = s->FetchReplicaTasks(1, 8);
  assert_int_equal(Report(*s, 1, fetched.tasks[0], ToInt(ErrorCode::TRANSFER_FAIL)), 0);
  rpc::QueryTaskResult q = Query(*s, copy);
  assert_int_equal(q.task.status, static_cast<int32_t>(TaskStatus::kFailed));
  assert_true(q.task.message.find("TRANSFER_FAIL") == 0);
  assert_int_equal(Used(*s), used);
  // Removed while copying: the report answers -704 and nothing comes back.
  copy = s->CreateCopyTask("k", {"c1:1"});
  fetched = s->FetchReplicaTasks(1, 8);
  assert_int_equal(fetched.tasks.size(), 1);
  assert_int_equal(ToInt(s->Remove("k", true)), 0);
  assert_int_equal(Report(*s, 1, fetched.tasks[0]), kNotFound);
  assert_int_equal(Query(*s, copy).task.status, static_cast<int32_t>(TaskStatus::kFailed));
  assert_int_equal(s->GetReplicaList("k").code, kNotFound);
  // Timed out while processing: failed at the upkeep, and the late report publishes nothing.
  Put(*s, 1, "late", 4096, On(1));
  copy = s->CreateCopyTask("late", {"c2:2"});
  fetched = s->FetchReplicaTasks(1, 8);
  g_now += 300001;
  s->Tick();
  q = Query(*s, copy);
  assert_int_equal(q.task.status, static_cast<int32_t>(TaskStatus::kFailed));
  assert_string_equal(q.task.message.c_str(), "processing timeout");
  assert_int_equal(Report(*s, 1, fetched.tasks[0]), kNotFound);
  assert_true(Locations(*s, "late") == std::vector<std::string>{Name(1)});
}

void test_no_room_retries_then_fails(void**) {
  std::unique_ptr<MasterService> s(Cluster());
  Put(*s, 1, "big", kMiB / 2, On(1));
  Put(*s, 1, "fill", kMiB / 2 + 4096, [] {
    rpc::ReplicateConfig c = Cfg();
    c.preferred_segments = {"c1:1"};
    return c;
  }());
  rpc::TaskResult copy = s->CreateCopyTask("big", {"c1:1"});
  assert_int_equal(s->FetchReplicaTasks(1, 8).tasks.size(), 0);  // no room: retried later
  assert_int_equal(Query(*s, copy).task.status, static_cast<int32_t>(TaskStatus::kPending));
  g_now += ReplicaTasks::kRetryPauseMs;
  assert_int_equal(s->FetchReplicaTasks(1, 8).tasks.size(), 0);  // max_retry_attempts 1
  rpc::QueryTaskResult q = Query(*s, copy);
  assert_int_equal(q.task.status, static_cast<int32_t>(TaskStatus::kFailed));
  assert_true(q.task.message.find("NO_AVAILABLE_HANDLE") == 0);
  assert_true(q.task.message.find("(max retries reached: 1)") != std::string::npos);
}

// ---- drain jobs ------------------------------------------------------------------------

rpc::ReplicateConfig At(const std::string& name) {
  rpc::ReplicateConfig c = Cfg();
  c.preferred_segments = {name};
  return c;
}

int32_t StatusOf(MasterService& s, const std::string& name) {
  int32_t status = 0;
  ErrorCode rc = s.SegmentStatusOf(name, &status);
  return rc == ErrorCode::OK ? status : ToInt(rc);
}

void test_drain_job_moves_everything_out(void**) {
  std::unique_ptr<MasterService> s(Cluster());
  const std::vector<std::string> keys = {"d0", "d1", "d2"};
  for (const std::string& k : keys) Put(*s, 1, k, 4096, At("c1:1"));
  TaskId job;
  assert_int_equal(ToInt(s->CreateDrainJob({}, {}, 2, &job)), kBadParams);
  assert_int_equal(ToInt(s->CreateDrainJob({"c1:1"}, {}, 0, &job)), kBadParams);
  assert_int_equal(ToInt(s->CreateDrainJob({"nobody:9"}, {}, 2, &job)), kNoSegment);
  assert_int_equal(ToInt(s->CreateDrainJob({"c1:1"}, {"c1:1"}, 2, &job)), kBadParams);
  assert_int_equal(ToInt(s->CreateDrainJob({"c1:1"}, {"c2:2"}, 2, &job)), 0);
  assert_int_equal(StatusOf(*s, "c1:1"), 2);  // DRAINING
  assert_int_equal(StatusOf(*s, "c2:2"), 1);  // OK
  assert_int_equal(StatusOf(*s, "nobody:9"), kNoSegment);
  assert_int_equal(ToInt(s->CreateDrainJob({"c1:1"}, {}, 2, &job)), kUnavailable);  // held
  // A put that prefers a held segment goes elsewhere.
  std::vector<rpc::ReplicaDescriptor> late = Put(*s, 1, "late", 4096, At("c1:1"));
  assert_true(late[0].segment_name != "c1:1");
  // Each upkeep round plans up to two moves; daemon 1, the source's, runs them.
  MasterService::DrainJobView view;
  for (int round = 0; round < 10; ++round) {
    s->Tick();
    assert_int_equal(ToInt(s->QueryDrainJob(job, &view)), 0);
    if (view.status != MasterService::JobStatus::kRunning) break;
    assert_true(view.active_units <= 2);
    for (const rpc::ReplicaTaskAssignment& t : s->FetchReplicaTasks(1, 8).tasks) {
      assert_int_equal(t.targets.size(), 1);
      assert_int_equal(t.targets[0].segment_id, 13);  // the target named
      assert_int_equal(Report(*s, 1, t), 0);
    }
  }
  assert_int_equal(static_cast<int>(view.status),
                   static_cast<int>(MasterService::JobStatus::kSucceeded));
  assert_int_equal(view.succeeded_units, 3);
  assert_int_equal(view.migrated_bytes, 3 * 4096);
  assert_true(view.segments == std::vector<std::string>{"c1:1"});
  s->Tick();  // the sources' ranges freed (no lease ran on them)
  assert_int_equal(StatusOf(*s, "c1:1"), 3);  // DRAINED: empty, still taking nothing
  for (const std::string& k : keys) assert_true(Locations(*s, k) == std::vector<std::string>{"c2:2"});
  assert_int_equal(ToInt(s->CancelDrainJob(job)), kUnavailable);  // ended
  assert_int_equal(ToInt(s->QueryDrainJob(TaskId{1, 2}, &view)), kNotFound);
}

// ---- names ---------------------------------------------------------------------------

void test_a_name_is_one_lenders(void**) {
  std::unique_ptr<MasterService> s(Cluster());
  // The same process lends more under its name; another process, or another daemon's
  // client, may not; nor may a client take a daemon's name.
  assert_int_equal(ToInt(s->MountSegment(LentAs(1, 14, "c1:1"))), 0);
  assert_int_equal(ToInt(s->MountSegment(LentAs(1, 15, "c1:1", kPid + 7))), kSegmentExists);
  assert_int_equal(ToInt(s->MountSegment(LentAs(2, 22, "c1:1"))), kSegmentExists);
  assert_int_equal(ToInt(s->MountSegment(LentAs(2, 23, Name(1)))), kSegmentExists);
  // A name whose segments all drain (a client leaving) is free for a new one.
  assert_int_equal(s->DrainSegment(1, 13, 0, 16, {}).code, 0);
  assert_int_equal(ToInt(s->MountSegment(LentAs(2, 24, "c2:2", kPid + 9))), 0);
  // Two replicas never share a name while other names have room.
  for (int i = 0; i < 8; ++i) {
    std::string key = "r" + std::to_string(i);
    rpc::ReplicateConfig c = Cfg(2);
    c.preferred_segments = {"c1:1"};
    Put(*s, 1, key, 4096, c);
    std::vector<std::string> at = Locations(*s, key);
    assert_int_equal(at.size(), 2);
    assert_true(at[0] != at[1]);
  }
}

void test_clear_leaves_a_just_put_key_for_one_lease(void**) {
  std::unique_ptr<MasterService> s(Cluster());
  Put(*s, 1, "fresh", 4096, On(1));
  std::vector<int32_t> codes = s->BatchReplicaClear({"fresh"}, "");
  assert_int_equal(codes[0], kLeased);
  assert_int_equal(ToInt(s->Remove("fresh", false)), 0);  // a remove is not held up
  Put(*s, 1, "fresh", 4096, On(1));
  g_now += kLease + 1;
  codes = s->BatchReplicaClear({"fresh"}, Name(1));
  assert_int_equal(codes[0], 0);
}

}  // namespace

int main(void) {
  mooncake::SetLogLevel(mooncake::LogLevel::kError);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_moves_a_task_through_its_states),
      cmocka_unit_test(test_table_retries_after_a_pause_then_fails),
      cmocka_unit_test(test_table_times_out_and_forgets),
      cmocka_unit_test(test_table_bounds_pending_and_keeps_tenants_apart),
      cmocka_unit_test(test_creation_checks_in_mooncakes_order),
      cmocka_unit_test(test_copy_reserves_then_publishes),
      cmocka_unit_test(test_move_swaps_the_source),
      cmocka_unit_test(test_failures_leave_the_object_as_it_was),
      cmocka_unit_test(test_no_room_retries_then_fails),
      cmocka_unit_test(test_drain_job_moves_everything_out),
      cmocka_unit_test(test_a_name_is_one_lenders),
      cmocka_unit_test(test_clear_leaves_a_just_put_key_for_one_lease),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
