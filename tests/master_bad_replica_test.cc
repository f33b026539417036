// ReportBadReplicas in mooncake::MasterService, on the hand-moved clock (docs/master.md,
// "Checksums"): a replica a reader found unreadable is dropped only while it is still the
// replica of the value the reader read (a stale report of a re-placed or re-written value
// drops nothing), the object goes with its last replica and a put then stores the key
// afresh, a not-held report comes from the SSD's owner only, and the drops are counted.

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/logging.h"
#include "tests/master_disk_fixture.h"

namespace {

constexpr int64_t kSize = 1000;
constexpr int64_t kCrc = 0x1234;

// PutStart + PutEnd with a checksum, asserted OK; the replicas.
std::vector<rpc::ReplicaDescriptor> PutSummed(MasterService& s, const std::string& key,
                                              int64_t checksum,
                                              const rpc::ReplicateConfig& c = Cfg(),
                                              int64_t size = kSize) {
  rpc::PutStartResult r = s.PutStart(1, key, size, c);
  assert_int_equal(r.code, 0);
  assert_int_equal(ToInt(s.PutEnd(1, key, checksum)), 0);
  return r.replicas;
}

rpc::BadReplica NotHeld(const std::string& key, int64_t disk_segment_id, int64_t checksum) {
  rpc::BadReplica bad;
  bad.key = key;
  bad.reason = rpc::BadReplicaReason::NOT_HELD;
  bad.segment_id = disk_segment_id;
  bad.size = kSize;
  bad.checksum = checksum;
  return bad;
}

int64_t Unreadable(const MasterService& s) {
  auto figures = s.GetStats().objects_dropped;
  return figures.count("unreadable") != 0 ? figures["unreadable"] : -1;
}

void test_drops_the_replica_then_the_object(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  AddDaemon(s, 2);
  assert_int_equal(Unreadable(s), 0);  // the series exists before any drop
  std::vector<rpc::ReplicaDescriptor> r = PutSummed(s, "k", kCrc, Cfg(2));
  assert_int_equal(r.size(), 2);
  std::vector<int32_t> codes = s.ReportBadReplicas(2, {Mismatch("k", r[0].replica_id, kSize, kCrc)});
  assert_int_equal(codes[0], 0);
  rpc::ReplicaListResult list = s.GetReplicaList("k");
  assert_int_equal(list.code, 0);
  assert_int_equal(list.replicas.size(), 1);
  assert_int_equal(list.replicas[0].replica_id, r[1].replica_id);
  assert_int_equal(list.checksum, kCrc);
  // The same report again (a retried RPC): nothing more to drop.
  assert_int_equal(s.ReportBadReplicas(2, {Mismatch("k", r[0].replica_id, kSize, kCrc)})[0],
                   kNotFound);
  assert_int_equal(Unreadable(s), 1);
  // The last one: the object goes, and a put stores the key again.
  assert_int_equal(s.ReportBadReplicas(1, {Mismatch("k", r[1].replica_id, kSize, kCrc)})[0], 0);
  assert_int_equal(s.GetReplicaList("k").code, kNotFound);
  assert_int_equal(s.ExistKey("k"), 0);
  assert_int_equal(s.GetStats().objects, 0);
  assert_int_equal(Unreadable(s), 2);
  PutSummed(s, "k", kCrc + 1);
  assert_int_equal(s.GetReplicaList("k").checksum, kCrc + 1);
}

void test_stale_report_drops_nothing(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  std::vector<rpc::ReplicaDescriptor> old = PutSummed(s, "k", kCrc);
  // Removed and put again: likely at the very same place (the same replica id).
  assert_int_equal(ToInt(s.Remove("k", true)), 0);
  Advance(s, 1000);
  std::vector<rpc::ReplicaDescriptor> now = PutSummed(s, "k", kCrc + 1);
  // A report about the old value (its checksum), late: the new value stays.
  assert_int_equal(s.ReportBadReplicas(1, {Mismatch("k", old[0].replica_id, kSize, kCrc)})[0],
                   kNotFound);
  // Another size is another value too.
  assert_int_equal(
      s.ReportBadReplicas(1, {Mismatch("k", now[0].replica_id, kSize + 1, kCrc + 1)})[0],
      kNotFound);
  // A replica id the object does not have.
  assert_int_equal(
      s.ReportBadReplicas(1, {Mismatch("k", now[0].replica_id + 1, kSize, kCrc + 1)})[0],
      kNotFound);
  assert_int_equal(s.GetReplicaList("k").code, 0);
  assert_int_equal(Unreadable(s), 0);
}

void test_report_rules(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  std::vector<rpc::ReplicaDescriptor> summed = PutSummed(s, "summed", kCrc);
  std::vector<rpc::ReplicaDescriptor> plain = PutSummed(s, "plain", -1);
  const int64_t id = summed[0].replica_id;
  rpc::BadReplica no_crc = Mismatch("summed", id, kSize, -1);  // nothing to mismatch
  rpc::BadReplica big_crc = Mismatch("summed", id, kSize, int64_t{1} << 32);
  rpc::BadReplica no_size = Mismatch("summed", id, 0, kCrc);
  rpc::BadReplica bad_key = Mismatch("", id, kSize, kCrc);
  rpc::BadReplica bad_reason = Mismatch("summed", id, kSize, kCrc);
  bad_reason.reason = static_cast<rpc::BadReplicaReason::type>(9);
  std::vector<int32_t> codes =
      s.ReportBadReplicas(1, {no_crc, big_crc, no_size, bad_key, bad_reason});
  for (int32_t code : codes) assert_int_equal(code, kBadParams);
  // An object put without a checksum cannot fail one: a claim that it did is not about it.
  assert_int_equal(
      s.ReportBadReplicas(1, {Mismatch("plain", plain[0].replica_id, kSize, kCrc)})[0],
      kNotFound);
  // Only a registered daemon reports.
  assert_int_equal(s.ReportBadReplicas(7, {Mismatch("summed", id, kSize, kCrc)})[0],
                   kUnknownDaemon);
  // A put in progress has no complete replica to drop.
  rpc::PutStartResult started = s.PutStart(1, "writing", kSize, Cfg());
  assert_int_equal(started.code, 0);
  assert_int_equal(
      s.ReportBadReplicas(1, {Mismatch("writing", started.replicas[0].replica_id, kSize, kCrc)})[0],
      kNotFound);
  assert_int_equal(s.GetStats().objects, 3);
  assert_int_equal(Unreadable(s), 0);
}

// The memory of a dropped replica is freed only once the lease a reader holds has run out.
void test_dropped_memory_waits_for_the_lease(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  std::vector<rpc::ReplicaDescriptor> r = PutSummed(s, "k", kCrc);
  int64_t used = Used(s);
  assert_true(used > 0);
  assert_int_equal(s.GetReplicaList("k").code, 0);  // leased from now on
  assert_int_equal(s.ReportBadReplicas(1, {Mismatch("k", r[0].replica_id, kSize, kCrc)})[0], 0);
  assert_int_equal(Used(s), used);
  Advance(s, kLease + 200);
  assert_int_equal(Used(s), 0);
}

void test_not_held_from_the_owner_only(void**) {
  MasterService s(Options());
  AddDiskDaemon(s, 1);
  AddDiskDaemon(s, 2);
  rpc::ReplicateConfig c = Offload();
  c.preferred_segments = {Name(1)};
  PutSummed(s, "both", kCrc, c);
  PutSummed(s, "disk-only", kCrc, c);
  assert_int_equal(OffloadAll(s, 1), 2);
  assert_string_equal(Kinds(s, "both").c_str(), "MD");
  // Memory replica of disk-only gone: its disk replica is its only one.
  rpc::ReplicaListResult listed = s.GetReplicaList("disk-only");
  for (const rpc::ReplicaDescriptor& d : listed.replicas) {
    if (d.kind == rpc::ReplicaKind::MEMORY) {
      assert_int_equal(
          s.ReportBadReplicas(1, {Mismatch("disk-only", d.replica_id, kSize, kCrc)})[0], 0);
    }
  }
  assert_string_equal(Kinds(s, "disk-only").c_str(), "D");
  // Another daemon cannot speak for daemon 1's SSD; nor can anyone for a memory segment.
  assert_int_equal(s.ReportBadReplicas(2, {NotHeld("both", DiskId(1), kCrc)})[0], kNotOwner);
  assert_int_equal(s.ReportBadReplicas(1, {NotHeld("both", 11, kCrc)})[0], kBadParams);
  // Another value than the SSD's owner read.
  assert_int_equal(s.ReportBadReplicas(1, {NotHeld("both", DiskId(1), kCrc + 1)})[0], kNotFound);
  std::vector<int32_t> codes = s.ReportBadReplicas(
      1, {NotHeld("both", DiskId(1), kCrc), NotHeld("disk-only", DiskId(1), kCrc)});
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[1], 0);
  assert_string_equal(Kinds(s, "both").c_str(), "M");
  assert_int_equal(s.GetReplicaList("disk-only").code, kNotFound);
  rpc::DiskStats d = Disk(s);
  assert_int_equal(d.objects, 0);
  assert_int_equal(d.bytes, 0);
  assert_int_equal(d.disk_only_objects, 0);
  assert_int_equal(Unreadable(s), 3);
}

}  // namespace

int main(void) {
  mooncake::SetLogLevel(mooncake::LogLevel::kError);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_drops_the_replica_then_the_object),
      cmocka_unit_test(test_stale_report_drops_nothing),
      cmocka_unit_test(test_report_rules),
      cmocka_unit_test(test_dropped_memory_waits_for_the_lease),
      cmocka_unit_test(test_not_held_from_the_owner_only),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
