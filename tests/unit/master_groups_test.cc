// MasterService and Mooncake's object groups (ReplicateConfig.group_ids; master/directory/groups.h,
// docs/mooncake-api.md "groups"): which puts name which group, a read's lease and an
// existence hit's use given to the group, eviction taking a group together, an object
// kept in its group by upserts and let go by every way it leaves, groups per tenant, and
// the group in snapshots and log records -- on the hand-driven clock.
#include <string>
#include <vector>

#include "common/base/tenant_key.h"
#include "master/log/state_records.h"
#include "tests/harness/master_restart_fixture.h"

namespace {

rpc::ReplicateConfig InGroup(const std::string& group) {
  rpc::ReplicateConfig c = Cfg();
  c.group_ids = {group};
  return c;
}

std::string GroupOf(MasterService& s, const std::string& key) {
  MasterService::KeyDescription d;
  assert_int_equal(ToInt(s.DescribeKey(key, &d)), 0);
  return d.group;
}

// One id per key of the call (or none), each a key's length at most; "" is no group.
void test_group_ids_are_checked(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  rpc::ReplicateConfig two = Cfg();
  two.group_ids = {"g", "g"};
  assert_int_equal(s.PutStart(1, "k", 4096, two).code, kBadParams);
  assert_int_equal(s.UpsertStart(1, "k", 4096, two).code, kBadParams);
  assert_int_equal(s.PutStart(1, "k", 4096, InGroup(std::string(4097, 'g'))).code, kBadParams);
  std::vector<rpc::PutStartResult> out;
  s.BatchPutStart(1, {"a", "b", "c"}, {4096, 4096, 4096}, two, &out);
  for (const auto& r : out) assert_int_equal(r.code, kBadParams);
  assert_int_equal(s.GetStats().objects, 0);  // nothing was reserved
  Put(s, 1, "ungrouped", 4096, InGroup(""));
  assert_string_equal(GroupOf(s, "ungrouped").c_str(), "");
  Put(s, 1, "longest", 4096, InGroup(std::string(4096, 'g')));
  assert_int_equal(GroupOf(s, "longest").size(), 4096);
}

// A batch names each key's group; "" leaves a key out of every group.
void test_batch_names_each_keys_group(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  rpc::ReplicateConfig c = Cfg();
  c.group_ids = {"g", "", "h"};
  std::vector<rpc::PutStartResult> out;
  s.BatchPutStart(1, {"a", "b", "c"}, {4096, 4096, 4096}, c, &out);
  for (const auto& r : out) assert_int_equal(r.code, 0);
  std::vector<int32_t> ended;
  s.BatchPutEnd(1, {"a", "b", "c"}, {}, &ended);
  assert_string_equal(GroupOf(s, "a").c_str(), "g");
  assert_string_equal(GroupOf(s, "b").c_str(), "");
  assert_string_equal(GroupOf(s, "c").c_str(), "h");
}

// A read of one member leases every member (a remove without force then answers -706),
// no other group's and no ungrouped object's; the shared lease runs out as the reader's.
void test_read_leases_the_group(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  Put(s, 1, "a", 4096, InGroup("g"));
  Put(s, 1, "b", 4096, InGroup("g"));
  Put(s, 1, "other", 4096, InGroup("h"));
  Put(s, 1, "plain", 4096);
  assert_int_equal(s.GetReplicaList("a", 1).code, 0);
  assert_int_equal(ToInt(s.Remove("b", false)), kLeased);
  assert_int_equal(ToInt(s.Remove("other", false)), 0);
  assert_int_equal(ToInt(s.Remove("plain", false)), 0);
  g_now += kLease;
  assert_int_equal(ToInt(s.Remove("b", false)), 0);
}

// A member put after the group's lease was last shared gets it at the next read, even one
// that renews nothing of the reader's own (Mooncake's groups needing a refresh).
void test_newcomer_gets_the_lease(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  Put(s, 1, "a", 4096, InGroup("g"));
  assert_int_equal(s.GetReplicaList("a", 1).code, 0);
  Put(s, 1, "late", 4096, InGroup("g"));
  assert_int_equal(ToInt(s.Remove("late", false)), 0);  // not leased yet
  Put(s, 1, "late", 4096, InGroup("g"));
  g_now += 1;  // a's lease is still fresh: its own renewal is not due
  assert_int_equal(s.GetReplicaList("a", 1).code, 0);
  assert_int_equal(ToInt(s.Remove("late", false)), kLeased);
}

// Groups are per tenant: the same group id in two tenants is two groups.
void test_groups_are_per_tenant(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  const std::string a = mooncake::tenant_key::Encode("t1", "a");
  const std::string b = mooncake::tenant_key::Encode("t2", "b");
  const std::string c = mooncake::tenant_key::Encode("t1", "c");
  Put(s, 1, a, 4096, InGroup("g"));
  Put(s, 1, b, 4096, InGroup("g"));
  Put(s, 1, c, 4096, InGroup("g"));
  assert_int_equal(s.GetReplicaList(a, 1).code, 0);
  assert_int_equal(ToInt(s.Remove(c, false)), kLeased);  // t1's group
  assert_int_equal(ToInt(s.Remove(b, false)), 0);        // t2's is another
  assert_string_equal(GroupOf(s, a).c_str(), "g");
}

// An existence hit of one member counts as a use of every member: eviction, which takes
// the oldest first, then finds the group young.
void test_existence_hit_uses_the_group(void**) {
  MasterService s(Options());
  AddDaemon(s, 1, 64 * 1024);
  Put(s, 1, "b", 16 * 1024, InGroup("g"));
  g_now += 10;
  Put(s, 1, "x", 16 * 1024);
  g_now += 10;
  Put(s, 1, "a", 16 * 1024, InGroup("g"));
  g_now += 10;
  assert_int_equal(s.ExistKey("a"), 1);  // b, the oldest, is used now too
  assert_true(s.Evict(16 * 1024) >= 16 * 1024);
  assert_int_equal(s.ExistKey("x"), 0);
  assert_int_equal(s.ExistKey("b"), 1);
  assert_int_equal(s.ExistKey("a"), 1);
}

// Eviction that takes a member takes the rest of its group, whatever their age, except
// members it could not take alone (hard-pinned ones stay).
void test_eviction_takes_the_group(void**) {
  MasterService s(Options());
  AddDaemon(s, 1, 256 * 1024);
  Put(s, 1, "a", 16 * 1024, InGroup("g"));
  g_now += 10;
  Put(s, 1, "x", 16 * 1024);
  g_now += 10;
  Put(s, 1, "b", 16 * 1024, InGroup("g"));
  rpc::ReplicateConfig pinned = Pinned(/*hard=*/true);
  pinned.group_ids = {"g"};
  Put(s, 1, "pinned", 16 * 1024, pinned);
  g_now += 10;
  assert_true(s.Evict(16 * 1024) >= 32 * 1024);  // a, the oldest, and b with it
  assert_int_equal(s.ExistKey("a"), 0);
  assert_int_equal(s.ExistKey("b"), 0);
  assert_int_equal(s.ExistKey("x"), 1);
  assert_int_equal(s.ExistKey("pinned"), 1);
}

// An object stays in the group it was put in: an upsert naming another group, or "" for a
// grouped object (or a group for an ungrouped one), is -600 and reserves nothing; one
// naming none, or the same, keeps it.
void test_upsert_keeps_the_group(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  Put(s, 1, "a", 4096, InGroup("g"));
  Put(s, 1, "plain", 4096);
  const int64_t used = Used(s);
  assert_int_equal(s.UpsertStart(1, "a", 4096, InGroup("h")).code, kBadParams);
  assert_int_equal(s.UpsertStart(1, "a", 4096, InGroup("")).code, kBadParams);
  assert_int_equal(s.UpsertStart(1, "plain", 4096, InGroup("g")).code, kBadParams);
  assert_int_equal(Used(s), used);
  assert_int_equal(s.UpsertStart(1, "a", 8192, Cfg()).code, 0);
  assert_int_equal(ToInt(s.UpsertEnd(1, "a")), 0);
  assert_string_equal(GroupOf(s, "a").c_str(), "g");
  assert_int_equal(s.UpsertStart(1, "a", 4096, InGroup("g")).code, 0);
  assert_int_equal(ToInt(s.UpsertEnd(1, "a")), 0);
  assert_string_equal(GroupOf(s, "a").c_str(), "g");
  assert_int_equal(s.UpsertStart(1, "plain", 4096, InGroup("")).code, 0);  // stays in none
  assert_int_equal(ToInt(s.UpsertEnd(1, "plain")), 0);
  // An upsert of a missing key is a put: it names the new object's group.
  assert_int_equal(s.UpsertStart(1, "new", 4096, InGroup("h")).code, 0);
  assert_int_equal(ToInt(s.UpsertEnd(1, "new")), 0);
  assert_string_equal(GroupOf(s, "new").c_str(), "h");
}

// Every way an object goes takes it out of its group: a key put again afterwards names a
// group of its own, and the members left are not leased through it.
void test_objects_leave_their_group(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  Put(s, 1, "removed", 4096, InGroup("g"));
  Put(s, 1, "member", 4096, InGroup("g"));
  assert_int_equal(ToInt(s.Remove("removed", false)), 0);
  Put(s, 1, "removed", 4096, InGroup("h"));
  assert_string_equal(GroupOf(s, "removed").c_str(), "h");
  assert_int_equal(s.GetReplicaList("removed", 1).code, 0);
  assert_int_equal(ToInt(s.Remove("member", false)), 0);  // g's lease is g's alone
  // A revoked put, and a put abandoned and taken over by another writer.
  assert_int_equal(s.PutStart(1, "revoked", 4096, InGroup("g")).code, 0);
  assert_int_equal(ToInt(s.PutRevoke(1, "revoked")), 0);
  Put(s, 1, "revoked", 4096);
  assert_string_equal(GroupOf(s, "revoked").c_str(), "");
  AddDaemon(s, 2);
  assert_int_equal(s.PutStart(1, "abandoned", 4096, InGroup("g")).code, 0);
  g_now += kDiscard;
  Put(s, 2, "abandoned", 4096, InGroup("h"));
  assert_string_equal(GroupOf(s, "abandoned").c_str(), "h");
  // Removed all at once, and by pattern.
  Put(s, 1, "x1", 4096, InGroup("x"));
  Put(s, 1, "x2", 4096, InGroup("x"));
  assert_int_equal(s.RemoveByRegex("^x", false), 2);
  Put(s, 1, "x1", 4096);
  assert_string_equal(GroupOf(s, "x1").c_str(), "");
  assert_true(s.RemoveAll(true) > 0);
  Put(s, 1, "member", 4096);
  assert_string_equal(GroupOf(s, "member").c_str(), "");
}

// The group is the object's 7th field, written only for a grouped object (soft_pin_until
// then 0 when it has none); records of 5 and 6 fields, as older masters wrote them, name
// no group; an empty 7th field is malformed.
void test_record_shape(void**) {
  mooncake::ReplicaRecord replica{11, 64, 0};
  std::string plain, grouped;
  mooncake::AppendPublishRecord(&plain, "k", 10, -1, false, &replica, 1);
  mooncake::AppendPublishRecord(&grouped, "k", 10, -1, false, &replica, 1, 0, "g");
  assert_true(grouped.size() > plain.size());
  mooncake::LogRecord r;
  assert_true(mooncake::DecodeLogRecord(plain, &r));
  assert_string_equal(r.object.group.c_str(), "");
  assert_true(mooncake::DecodeLogRecord(grouped, &r));
  assert_string_equal(r.object.group.c_str(), "g");
  assert_int_equal(r.object.soft_pin_until_unix_ms, 0);
  std::string both;
  mooncake::AppendPublishRecord(&both, "k", 10, -1, false, &replica, 1, 1234, "g");
  assert_true(mooncake::DecodeLogRecord(both, &r));
  assert_int_equal(r.object.soft_pin_until_unix_ms, 1234);
  assert_string_equal(r.object.group.c_str(), "g");
  // A 7th field that names nothing: [1, [key, size, checksum, hard_pin, [], 0, ""]].
  std::string empty("\x92\x01\x97\xa1k\x0a\xff\xc2\x90\x00\xa0", 11);
  assert_false(mooncake::DecodeLogRecord(empty, &r));
}

// A restore (snapshot, then the log) puts every object back in its group: those in the
// snapshot and those published after it; an object removed after the snapshot is gone from
// it. The restored group shares its lease again once the daemon is back.
void test_restore_keeps_groups(void**) {
  TempDir dir;
  std::unique_ptr<mooncake::OpLog> log = StartedLog(dir.path);
  MasterService a(Options());
  a.AttachOpLog(log.get(), /*strict=*/false);
  AddDaemon(a, 1);
  Put(a, 1, "snap", 4096, InGroup("g"));
  Put(a, 1, "gone", 4096, InGroup("g"));
  Put(a, 1, "plain", 4096);
  TakeSnapshot(a, dir.path, log->last());
  Put(a, 1, "logged", 4096, InGroup("g"));
  assert_int_equal(ToInt(a.Remove("gone", false)), 0);
  assert_int_equal(a.UpsertStart(1, "snap", 8192, Cfg()).code, 0);  // keeps its group
  assert_int_equal(ToInt(a.UpsertEnd(1, "snap")), 0);
  assert_int_equal(ToInt(log->Sync(log->last())), 0);
  log.reset();

  std::unique_ptr<MasterService> b = Restore(dir.path, Options());
  assert_string_equal(GroupOf(*b, "snap").c_str(), "g");
  assert_string_equal(GroupOf(*b, "logged").c_str(), "g");
  assert_string_equal(GroupOf(*b, "plain").c_str(), "");
  assert_int_equal(b->ExistKey("gone"), 0);
  assert_int_equal(ToInt(b->RegisterDaemon(1, Name(1))), 0);
  assert_int_equal(ToInt(b->MountSegment(SegmentOf(1, 11, kMiB))), 0);
  assert_int_equal(b->GetReplicaList("snap", 1).code, 0);
  assert_int_equal(ToInt(b->Remove("logged", false)), kLeased);
  assert_int_equal(ToInt(b->Remove("plain", false)), 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_group_ids_are_checked),
      cmocka_unit_test(test_batch_names_each_keys_group),
      cmocka_unit_test(test_read_leases_the_group),
      cmocka_unit_test(test_newcomer_gets_the_lease),
      cmocka_unit_test(test_groups_are_per_tenant),
      cmocka_unit_test(test_existence_hit_uses_the_group),
      cmocka_unit_test(test_eviction_takes_the_group),
      cmocka_unit_test(test_upsert_keeps_the_group),
      cmocka_unit_test(test_objects_leave_their_group),
      cmocka_unit_test(test_record_shape),
      cmocka_unit_test(test_restore_keeps_groups),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
