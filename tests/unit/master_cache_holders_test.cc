// Tests for the master's record of which daemons may cache which objects
// (master/directory/cache_holders.h, MasterService::DescribeHolders), on the hand-driven clock: a
// reader that names itself is named to the next writer, with what is left of its lease;
// the writer, expired leases and anonymous reads are left out; a batch says which keys
// each holder had; past a cap every daemon is named; what the master cannot name (a holder
// it forgot, the leases of the master before a restore) is "unknown, wait"; records go
// when their leases do.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/base/logging.h"
#include "master/service/master_service.h"
#include "tests/harness/master_service_fixture.h"

namespace {

using mooncake::CacheHolderSet;
using mooncake::CacheHolderTable;

// DescribeHolders' answer by daemon id (0: the unknown ones).
std::map<int64_t, rpc::CacheHolder> ById(const std::vector<rpc::CacheHolder>& holders) {
  std::map<int64_t, rpc::CacheHolder> out;
  for (const rpc::CacheHolder& h : holders) {
    assert_true(out.emplace(h.daemon_id, h).second);  // each daemon once
  }
  return out;
}

// Upserts key by writer (its old value was put before) and returns whom the reply names.
std::map<int64_t, rpc::CacheHolder> Upsert(MasterService& s, int64_t writer,
                                           const std::string& key) {
  assert_int_equal(s.UpsertStart(writer, key, 512, Cfg()).code, 0);
  CacheHolderSet holders;
  assert_int_equal(ToInt(s.UpsertEnd(writer, key, -1, &holders)), 0);
  return ById(s.DescribeHolders(holders, writer, false));
}

void Read(MasterService& s, const std::string& key, int64_t reader) {
  assert_int_equal(s.GetReplicaList(key, reader).code, 0);
}

void test_a_reader_is_named_to_the_next_writer(void**) {
  MasterService s(Options());
  for (int64_t d = 1; d <= 3; ++d) AddDaemon(s, d);
  Put(s, 1, "k", 512);
  Read(s, "k", 2);
  assert_int_equal(s.cache_holder_records(), 1);
  g_now += 30;
  auto named = Upsert(s, 1, "k");
  assert_int_equal(named.size(), 1);
  assert_int_equal(named.at(2).ms_left, kLease - 30);  // what is left of its lease
  assert_string_equal(named.at(2).address.c_str(), Name(2).c_str());
  assert_true(named.at(2).keys.empty());
  // Told once: the writer invalidates it, so the next change has nobody to tell.
  assert_int_equal(s.cache_holder_records(), 0);
  assert_true(Upsert(s, 1, "k").empty());
  // The same reader again: one record, renewed to the later lease.
  Read(s, "k", 2);
  g_now += 40;
  Read(s, "k", 2);
  assert_int_equal(s.cache_holder_records(), 1);
  assert_int_equal(Upsert(s, 3, "k").at(2).ms_left, kLease);
}

void test_writer_expired_and_anonymous_reads_are_left_out(void**) {
  MasterService s(Options());
  for (int64_t d = 1; d <= 3; ++d) AddDaemon(s, d);
  Put(s, 1, "k", 512);
  Read(s, "k", 2);
  g_now += kLease;  // 2's lease has just ended: its entry is gone
  Read(s, "k", 1);  // the writer's own read: it forgets locally
  Read(s, "k", 0);  // a reader that will not cache
  auto named = Upsert(s, 1, "k");
  assert_true(named.empty());
  Read(s, "k", 3);
  named = Upsert(s, 1, "k");
  assert_int_equal(named.size(), 1);
  assert_int_equal(named.count(3), 1);
  assert_int_equal(s.cache_holder_records(), 0);
}

void test_removals_name_holders_only_when_they_remove(void**) {
  MasterService s(Options());
  for (int64_t d = 1; d <= 3; ++d) AddDaemon(s, d);
  Put(s, 1, "k", 512);
  Read(s, "k", 2);
  CacheHolderSet refused;
  assert_int_equal(ToInt(s.Remove("k", false, &refused)), kLeased);
  assert_true(s.DescribeHolders(refused, 1, false).empty());  // nothing changed
  CacheHolderSet missing;
  assert_int_equal(ToInt(s.Remove("nope", true, &missing)), kNotFound);
  assert_true(s.DescribeHolders(missing, 1, false).empty());
  CacheHolderSet removed;
  assert_int_equal(ToInt(s.Remove("k", true, &removed)), 0);
  auto named = ById(s.DescribeHolders(removed, 1, false));
  assert_int_equal(named.size(), 1);
  assert_int_equal(named.at(2).ms_left, kLease);
  assert_int_equal(s.cache_holder_records(), 0);
  // A failed upsert end (another writer's) changes nothing either.
  Put(s, 1, "u", 512);
  Read(s, "u", 2);
  assert_int_equal(s.UpsertStart(1, "u", 512, Cfg()).code, 0);
  CacheHolderSet foreign;
  assert_int_equal(ToInt(s.UpsertEnd(3, "u", -1, &foreign)), kNotOwner);
  assert_true(s.DescribeHolders(foreign, 3, false).empty());
  assert_int_equal(s.cache_holder_records(), 1);
}

void test_a_batch_says_which_keys_each_holder_had(void**) {
  MasterService s(Options());
  for (int64_t d = 1; d <= 3; ++d) AddDaemon(s, d);
  std::vector<std::string> keys = {"b0", "b1", "b2", "b3"};
  for (const std::string& k : keys) Put(s, 1, k, 512);
  Read(s, "b0", 2);
  g_now += 10;
  Read(s, "b2", 2);
  Read(s, "b2", 3);
  Read(s, "b3", 3);
  CacheHolderSet holders;
  for (size_t i = 0; i < keys.size(); ++i) {
    assert_int_equal(ToInt(s.Remove(keys[i], true, &holders, static_cast<int32_t>(i))), 0);
  }
  auto named = ById(s.DescribeHolders(holders, 1, true));
  assert_int_equal(named.size(), 2);
  assert_true(named.at(2).keys == (std::vector<int32_t>{0, 2}));
  assert_true(named.at(3).keys == (std::vector<int32_t>{2, 3}));
  assert_int_equal(named.at(2).ms_left, kLease);  // the later of its two leases
  // Without keys (a single change): the lists stay empty.
  for (const auto& h : s.DescribeHolders(holders, 1, false)) assert_true(h.keys.empty());
}

void test_pattern_removals_name_every_holder_of_what_they_removed(void**) {
  MasterService s(Options());
  for (int64_t d = 1; d <= 4; ++d) AddDaemon(s, d);
  Put(s, 1, "p-1", 512);
  Put(s, 1, "p-2", 512);
  Put(s, 1, "q-1", 512);
  Read(s, "p-1", 2);
  Read(s, "p-2", 3);
  Read(s, "q-1", 4);  // not removed by the pattern: not named
  CacheHolderSet holders;
  assert_int_equal(s.RemoveByRegex("^p-", true, &holders), 2);
  auto named = ById(s.DescribeHolders(holders, 1, false));
  assert_int_equal(named.size(), 2);
  assert_int_equal(named.count(2) + named.count(3), 2);
  CacheHolderSet all;
  assert_int_equal(s.RemoveAll(true, &all), 1);
  named = ById(s.DescribeHolders(all, 1, false));
  assert_int_equal(named.size(), 1);
  assert_int_equal(named.count(4), 1);
  assert_int_equal(s.cache_holder_records(), 0);
}

void test_past_the_per_object_cap_every_daemon_is_named(void**) {
  MasterService s(Options());
  const int64_t daemons = CacheHolderTable::kMaxPerObject + 4;
  for (int64_t d = 1; d <= daemons; ++d) AddDaemon(s, d, 64 * 1024);
  Put(s, 1, "hot", 512);
  for (int64_t d = 2; d <= static_cast<int64_t>(CacheHolderTable::kMaxPerObject) + 2; ++d) {
    Read(s, "hot", d);  // one more reader than the object keeps records of
  }
  assert_int_equal(s.cache_holder_records(), CacheHolderTable::kMaxPerObject);
  g_now += 20;
  auto named = Upsert(s, 1, "hot");
  // Every daemon but the writer, also those that never read, until the object's lease ends.
  assert_int_equal(named.size(), daemons - 1);
  assert_int_equal(named.count(1), 0);
  for (const auto& [daemon, h] : named) {
    assert_int_equal(h.ms_left, kLease - 20);
    assert_string_equal(h.address.c_str(), Name(daemon).c_str());
  }
  // Tracked again from here on.
  assert_int_equal(s.cache_holder_records(), 0);
  Read(s, "hot", 5);
  assert_int_equal(Upsert(s, 1, "hot").size(), 1);
  // An object whose untracked leases have all ended is tracked again too.
  for (int64_t d = 2; d <= daemons; ++d) Read(s, "hot", d);
  g_now += kLease;
  Read(s, "hot", 7);
  named = Upsert(s, 1, "hot");
  assert_int_equal(named.size(), 1);
  assert_int_equal(named.count(7), 1);
}

void test_with_no_room_for_records_every_daemon_is_named(void**) {
  MasterOptions o = Options();
  o.max_cache_holders = 0;
  MasterService s(o);
  for (int64_t d = 1; d <= 3; ++d) AddDaemon(s, d);
  Put(s, 1, "k", 512);
  Read(s, "k", 2);
  assert_int_equal(s.cache_holder_records(), 0);
  auto named = Upsert(s, 1, "k");
  assert_int_equal(named.size(), 2);
  assert_int_equal(named.count(2) + named.count(3), 2);
  // An object nobody read through a cache names nobody, even so.
  Put(s, 1, "cold", 512);
  Read(s, "cold", 0);
  assert_true(Upsert(s, 1, "cold").empty());
}

void test_a_holder_the_master_forgot_is_waited_for(void**) {
  MasterService s(Options());
  for (int64_t d = 1; d <= 3; ++d) AddDaemon(s, d);
  Put(s, 1, "k", 512, On(3));  // not on 2's segment, which goes when 2 is replaced
  Read(s, "k", 2);
  Read(s, "k", 99);  // never registered (or declared dead and not told yet)
  // Daemon 2 restarted: its successor at the same endpoint replaces it (declared dead).
  assert_int_equal(ToInt(s.RegisterDaemon(22, Name(2))), 0);
  g_now += 10;
  auto named = Upsert(s, 1, "k");
  assert_int_equal(named.size(), 1);
  const rpc::CacheHolder& unknown = named.at(0);
  assert_string_equal(unknown.address.c_str(), "");  // nobody to tell: wait
  assert_int_equal(unknown.ms_left, kLease - 10);
}

void test_an_untracked_object_read_by_a_forgotten_daemon_is_waited_for(void**) {
  MasterOptions o = Options();
  o.max_cache_holders = 0;
  MasterService s(o);
  for (int64_t d = 1; d <= 3; ++d) AddDaemon(s, d);
  Put(s, 1, "k", 512);
  Read(s, "k", 99);  // unregistered and untracked: "every daemon" does not list it
  g_now += 10;
  auto named = Upsert(s, 1, "k");
  assert_int_equal(named.size(), 3);  // 2, 3, and the unknown one
  assert_int_equal(named.at(0).ms_left, kLease - 10);
  // A daemon declared dead may still serve what it cached: one lease, then no more.
  Put(s, 1, "j", 512, On(3));
  g_now += kLease;
  Read(s, "j", 2);
  assert_int_equal(ToInt(s.RegisterDaemon(22, Name(2))), 0);  // 2 is replaced
  named = Upsert(s, 1, "j");
  assert_int_equal(named.count(0), 1);
  assert_int_equal(named.count(2), 0);  // no longer listed, so not reachable
  assert_int_equal(named.at(0).ms_left, kLease);
  g_now += kLease;
  Read(s, "j", 3);
  named = Upsert(s, 1, "j");
  assert_int_equal(named.count(0), 0);
  assert_int_equal(named.count(3), 1);
}

void test_for_one_lease_after_a_restore_every_change_waits(void**) {
  MasterService s(Options());
  s.FinishRestore();  // nothing restored; the previous master's leases are unknown all the same
  for (int64_t d = 1; d <= 2; ++d) AddDaemon(s, d);
  Put(s, 1, "k", 512);
  g_now += 30;
  CacheHolderSet removed;
  assert_int_equal(ToInt(s.Remove("k", true, &removed)), 0);
  auto named = ById(s.DescribeHolders(removed, 1, false));
  assert_int_equal(named.size(), 1);
  assert_int_equal(named.at(0).ms_left, kLease - 30);
  // A change of nothing still names nobody; after the lease, nothing is unknown.
  CacheHolderSet nothing;
  assert_int_equal(ToInt(s.Remove("k", true, &nothing)), kNotFound);
  assert_true(s.DescribeHolders(nothing, 1, false).empty());
  g_now += kLease;
  Put(s, 1, "k", 512);
  assert_true(Upsert(s, 1, "k").empty());
}

void test_records_go_with_their_leases(void**) {
  MasterService s(Options());
  for (int64_t d = 1; d <= 3; ++d) AddDaemon(s, d, 4 * kMiB);
  for (int i = 0; i < 200; ++i) {
    std::string key = "r" + std::to_string(i);
    Put(s, 1, key, 512, On(1));
    Read(s, key, 2);
    Read(s, key, 3);
  }
  assert_int_equal(s.cache_holder_records(), 400);
  g_now += kLease;
  for (int i = 0; i < 16; ++i) s.Tick();  // a full sweep
  assert_int_equal(s.cache_holder_records(), 0);
  // An object that goes without a change (evicted, its segment gone) takes its records.
  Read(s, "r0", 2);
  Read(s, "r1", 2);
  assert_int_equal(s.cache_holder_records(), 2);
  assert_int_equal(ToInt(s.UnmountSegment(1, 11)), 0);
  assert_int_equal(s.cache_holder_records(), 0);
}

}  // namespace

int main() {
  mooncake::SetLogLevel(mooncake::LogLevel::kError);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_reader_is_named_to_the_next_writer),
      cmocka_unit_test(test_writer_expired_and_anonymous_reads_are_left_out),
      cmocka_unit_test(test_removals_name_holders_only_when_they_remove),
      cmocka_unit_test(test_a_batch_says_which_keys_each_holder_had),
      cmocka_unit_test(test_pattern_removals_name_every_holder_of_what_they_removed),
      cmocka_unit_test(test_past_the_per_object_cap_every_daemon_is_named),
      cmocka_unit_test(test_with_no_room_for_records_every_daemon_is_named),
      cmocka_unit_test(test_a_holder_the_master_forgot_is_waited_for),
      cmocka_unit_test(test_an_untracked_object_read_by_a_forgotten_daemon_is_waited_for),
      cmocka_unit_test(test_for_one_lease_after_a_restore_every_change_waits),
      cmocka_unit_test(test_records_go_with_their_leases),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
