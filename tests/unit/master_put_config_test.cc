// MasterService and Mooncake's ReplicateConfig (docs/mooncake-api.md, "put-config"): the
// soft-pin action and TTL with their fixed deadline on the injected clock, the deadline in
// the durable records, and placement on the writer's daemon (prefer_local, local_first).
#include <string>
#include <vector>

#include "master/log/state_records.h"
#include "tests/harness/master_service_fixture.h"

namespace {

int64_t g_unix = 1700000000000;

rpc::ReplicateConfig Action(int32_t action) {
  rpc::ReplicateConfig c = Cfg();
  c.soft_pin_action = action;
  return c;
}

rpc::ReplicateConfig Enable(int64_t ttl_ms) {
  rpc::ReplicateConfig c = Action(1);
  c.soft_pin_ttl_given = true;
  c.soft_pin_ttl_ms = ttl_ms;
  return c;
}

MasterOptions PinOptions() {
  MasterOptions o = Options();
  o.unix_ms = [] { return g_unix; };
  o.max_kv_soft_pin_ttl_ms = 50000;
  o.default_kv_soft_pin_ttl_ms = 20000;
  return o;
}

int64_t Remaining(MasterService& s, const std::string& key) {
  MasterService::KeyDescription d;
  assert_int_equal(ToInt(s.DescribeKey(key, &d)), 0);
  return d.soft_pinned ? d.soft_pin_remaining_ms : 0;
}

void Upsert(MasterService& s, int64_t writer, const std::string& key, int64_t size,
            const rpc::ReplicateConfig& c) {
  assert_int_equal(s.UpsertStart(writer, key, size, c).code, 0);
  assert_int_equal(ToInt(s.UpsertEnd(writer, key, -1, nullptr)), 0);
}

// The deadline is the publication + TTL, and reads do not move it.
void test_deadline_is_fixed_at_publication(void**) {
  MasterService s(PinOptions());
  AddDaemon(s, 1);
  assert_int_equal(s.PutStart(1, "k", 4096, Enable(5000)).code, 0);
  g_now += 700;  // the write takes a while: the TTL counts from PutEnd
  assert_int_equal(ToInt(s.PutEnd(1, "k")), 0);
  assert_int_equal(Remaining(s, "k"), 5000);
  g_now += 3000;
  assert_int_equal(s.GetReplicaList("k", 1).code, 0);  // a read: no extension
  assert_int_equal(Remaining(s, "k"), 2000);
  g_now += 1999;
  assert_int_equal(Remaining(s, "k"), 1);
  g_now += 1;  // past the deadline: an ordinary object again
  assert_int_equal(Remaining(s, "k"), 0);
}

// ENABLE without a TTL takes the master's default; with 0 it pins nothing.
void test_default_and_zero_ttl(void**) {
  MasterService s(PinOptions());
  AddDaemon(s, 1);
  Put(s, 1, "default", 4096, Action(1));
  assert_int_equal(Remaining(s, "default"), 20000);
  Put(s, 1, "zero", 4096, Enable(0));
  assert_int_equal(Remaining(s, "zero"), 0);
  Put(s, 1, "preserve", 4096, Action(0));  // nothing to preserve on a new object
  assert_int_equal(Remaining(s, "preserve"), 0);
}

// Mooncake's rules: a TTL only with ENABLE, at most --max_kv_soft_pin_ttl, a known action.
void test_bad_soft_pin_requests(void**) {
  MasterService s(PinOptions());
  AddDaemon(s, 1);
  rpc::ReplicateConfig ttl_with_preserve = Action(0);
  ttl_with_preserve.soft_pin_ttl_given = true;
  ttl_with_preserve.soft_pin_ttl_ms = 10;
  assert_int_equal(s.PutStart(1, "a", 4096, ttl_with_preserve).code, kBadParams);
  rpc::ReplicateConfig ttl_with_disable = ttl_with_preserve;
  ttl_with_disable.soft_pin_action = 2;
  assert_int_equal(s.PutStart(1, "a", 4096, ttl_with_disable).code, kBadParams);
  assert_int_equal(s.PutStart(1, "a", 4096, Enable(50001)).code, kBadParams);
  assert_int_equal(s.UpsertStart(1, "a", 4096, Enable(50001)).code, kBadParams);
  assert_int_equal(s.PutStart(1, "a", 4096, Action(3)).code, kBadParams);
  assert_int_equal(s.PutStart(1, "a", 4096, Enable(-1)).code, kBadParams);
  assert_int_equal(Used(s), 0);  // nothing was reserved
  assert_int_equal(s.PutStart(1, "a", 4096, Enable(50000)).code, 0);  // the maximum itself
}

// An older daemon's config (no action): with_soft_pin, its TTL clamped, as before.
void test_config_without_action(void**) {
  MasterService s(PinOptions());
  AddDaemon(s, 1);
  Put(s, 1, "old", 4096, Pinned(false));
  assert_int_equal(Remaining(s, "old"), 20000);
  rpc::ReplicateConfig long_ttl = Pinned(false);
  long_ttl.soft_pin_ttl_ms = 90000;
  Put(s, 1, "clamped", 4096, long_ttl);
  assert_int_equal(Remaining(s, "clamped"), 50000);
}

// Upserts: PRESERVE keeps the deadline where it was, ENABLE sets a new one from the
// upsert's publication, DISABLE drops it; a hard pin survives any upsert.
void test_upsert_actions(void**) {
  MasterService s(PinOptions());
  AddDaemon(s, 1);
  Put(s, 1, "k", 4096, Enable(10000));
  g_now += 4000;
  Upsert(s, 1, "k", 8192, Action(0));
  assert_int_equal(Remaining(s, "k"), 6000);
  g_now += 1000;
  Upsert(s, 1, "k", 4096, Enable(3000));
  assert_int_equal(Remaining(s, "k"), 3000);
  Upsert(s, 1, "k", 4096, Action(2));
  assert_int_equal(Remaining(s, "k"), 0);
  Upsert(s, 1, "k", 4096, Action(0));  // nothing to preserve
  assert_int_equal(Remaining(s, "k"), 0);
  // An expired pin is not brought back by PRESERVE.
  Put(s, 1, "short", 4096, Enable(100));
  g_now += 200;
  Upsert(s, 1, "short", 4096, Action(0));
  assert_int_equal(Remaining(s, "short"), 0);
  // Hard pin: sticky.
  Put(s, 1, "hard", 4096, Pinned(true));
  Upsert(s, 1, "hard", 4096, Cfg());
  MasterService::KeyDescription d;
  assert_int_equal(ToInt(s.DescribeKey("hard", &d)), 0);
  assert_true(d.hard_pinned);
}

// A pinned object outlives plain ones in eviction until its deadline; then it goes first
// (it is the oldest).
void test_eviction_honours_the_deadline(void**) {
  MasterOptions o = PinOptions();
  o.allow_evict_soft_pinned_objects = false;
  MasterService s(o);
  AddDaemon(s, 1, 64 * 1024);
  Put(s, 1, "pinned", 16 * 1024, Enable(5000));
  g_now += 1;
  Put(s, 1, "plain", 16 * 1024);
  g_now += kLease * 2;
  s.Evict(16 * 1024);
  assert_int_equal(s.ExistKey("pinned"), 1);
  assert_int_equal(s.ExistKey("plain"), 0);
  g_now += 5000;  // past the deadline
  Put(s, 1, "plain2", 16 * 1024);
  g_now += kLease * 2;
  s.Evict(16 * 1024);
  assert_int_equal(s.ExistKey("pinned"), 0);
  assert_int_equal(s.ExistKey("plain2"), 1);
}

// The snapshot's objects carry the deadline in Unix-epoch ms, and a restore on another
// master (another monotonic clock, later in time) keeps it where it was.
void test_restore_keeps_the_deadline(void**) {
  std::vector<mooncake::ObjectRecord> records;
  {
    MasterService a(PinOptions());
    AddDaemon(a, 1);
    Put(a, 1, "pinned", 4096, Enable(10000));
    Put(a, 1, "plain", 4096);
    a.ExportObjects([&](size_t, const std::string& bytes, uint32_t) {
      assert_true(mooncake::DecodeObjects(
          bytes, [&](mooncake::ObjectRecord&& o) { records.push_back(std::move(o)); }));
      return true;
    });
  }
  assert_int_equal(records.size(), 2);
  for (const auto& r : records) {
    assert_int_equal(r.soft_pin_until_unix_ms, r.key == "pinned" ? g_unix + 10000 : 0);
  }
  MasterService b(PinOptions());  // its clock restarts at kT0
  g_now += 123456;                // an unrelated monotonic reading
  g_unix += 4000;                 // 4 s later in real time
  AddDaemon(b, 1);
  for (auto& r : records) b.RestoreObject(std::move(r));
  assert_int_equal(Remaining(b, "pinned"), 6000);
  assert_int_equal(Remaining(b, "plain"), 0);
  g_unix += 7000;  // restored after the deadline: no pin
  mooncake::ObjectRecord late;
  late.key = "late";
  late.size = 4096;
  late.replicas.push_back({11, 0, 0});
  late.soft_pin_until_unix_ms = g_unix - 1;
  b.RestoreObject(std::move(late));
  assert_int_equal(Remaining(b, "late"), 0);
}

// A publish record without a pin is the 5-field record older masters wrote; with one, the
// deadline is a 6th field both directions read.
void test_publish_record_shape(void**) {
  mooncake::ReplicaRecord replica{11, 64, 0};
  std::string plain, pinned;
  mooncake::AppendPublishRecord(&plain, "k", 10, -1, false, &replica, 1);
  mooncake::AppendPublishRecord(&pinned, "k", 10, -1, false, &replica, 1, 1234);
  assert_true(pinned.size() > plain.size());
  mooncake::LogRecord r;
  assert_true(mooncake::DecodeLogRecord(plain, &r));
  assert_int_equal(r.object.soft_pin_until_unix_ms, 0);
  assert_true(mooncake::DecodeLogRecord(pinned, &r));
  assert_int_equal(r.object.soft_pin_until_unix_ms, 1234);
}

int64_t DaemonOf(const std::vector<rpc::ReplicaDescriptor>& replicas, size_t i) {
  assert_true(replicas.size() > i);
  return replicas[i].daemon_id;
}

// prefer_local: the first replica on the writer's daemon, whatever the strategy.
void test_prefer_local_places_on_the_writer(void**) {
  MasterService s(PinOptions());
  for (int64_t d = 1; d <= 4; ++d) AddDaemon(s, d);
  rpc::ReplicateConfig local = Cfg();
  local.prefer_local = true;
  for (int i = 0; i < 20; ++i) {
    int64_t writer = 1 + i % 4;
    auto replicas = Put(s, writer, "k" + std::to_string(i), 4096, local);
    assert_int_equal(DaemonOf(replicas, 0), writer);
  }
  // Two replicas: the first local, the second on another daemon.
  rpc::ReplicateConfig two = local;
  two.replica_num = 2;
  auto replicas = Put(s, 3, "two", 4096, two);
  assert_int_equal(DaemonOf(replicas, 0), 3);
  assert_int_not_equal(DaemonOf(replicas, 1), 3);
  // The writer's segment full: elsewhere, not a failure.
  MasterService small(PinOptions());
  AddDaemon(small, 1, 8192);
  AddDaemon(small, 2);
  Put(small, 1, "fills", 8192, local);
  assert_int_equal(DaemonOf(Put(small, 1, "spills", 4096, local), 0), 2);
}

// --allocation_strategy local_first: every put as if it asked for prefer_local; random
// (the default) spreads a writer's puts over the daemons.
void test_local_first_strategy(void**) {
  MasterOptions o = PinOptions();
  o.allocation_strategy = "local_first";
  MasterService s(o);
  for (int64_t d = 1; d <= 4; ++d) AddDaemon(s, d);
  for (int i = 0; i < 20; ++i) {
    assert_int_equal(DaemonOf(Put(s, 2, "k" + std::to_string(i), 4096), 0), 2);
  }
  MasterService r(PinOptions());
  for (int64_t d = 1; d <= 4; ++d) AddDaemon(r, d);
  int local = 0;
  for (int i = 0; i < 40; ++i) local += DaemonOf(Put(r, 2, "k" + std::to_string(i), 4096), 0) == 2;
  assert_true(local < 40);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_deadline_is_fixed_at_publication),
      cmocka_unit_test(test_default_and_zero_ttl),
      cmocka_unit_test(test_bad_soft_pin_requests),
      cmocka_unit_test(test_config_without_action),
      cmocka_unit_test(test_upsert_actions),
      cmocka_unit_test(test_eviction_honours_the_deadline),
      cmocka_unit_test(test_restore_keeps_the_deadline),
      cmocka_unit_test(test_publish_record_shape),
      cmocka_unit_test(test_prefer_local_places_on_the_writer),
      cmocka_unit_test(test_local_first_strategy),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
