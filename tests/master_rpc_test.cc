// Drives the real mooncake-master binary through the generated Thrift client: mount, put
// start/end, replica lists, lease refusal, batch forms, checksums, the cache holders a
// change names, a heartbeat timeout that drops a segment, and the exit code for bad flags.
#include <signal.h>
#include <sys/wait.h>
#include <thrift/transport/TBufferTransports.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "MasterService.h"
#include "common/base/error_code.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

using apache::thrift::protocol::T_CALL;
using apache::thrift::protocol::T_I64;
using apache::thrift::protocol::T_STRING;
using mooncake::ErrorCode;
using mooncake::ToInt;
namespace rpc = mooncake::rpc;
namespace harness = mooncake::testing;

namespace {

constexpr int64_t kDaemon = 7001;
constexpr int64_t kSegment = 9001;

struct Fixture {
  harness::ChildProcess master;
  std::string dir;
  int port = 0;
  std::shared_ptr<apache::thrift::transport::TTransport> transport;
  std::unique_ptr<rpc::MasterServiceClient> client;
};


int Setup(void** state) {
  auto* f = new Fixture;
  f->dir = harness::MakeTempDir("mc-master-rpc-");
  // A short daemon TTL, grace and lease keep the timeout tests quick; 3 s, not less, so
  // that a loaded machine does not detach the daemons of the other tests.
  if (!harness::StartMaster(&f->master, &f->port, f->dir + "/master.log",
                            {"--client_live_ttl_sec", "3", "--daemon_grace_period_sec", "3",
                             "--default_kv_lease_ttl", "400ms"})) {
    delete f;
    return -1;
  }
  std::string error;
  f->client = harness::ConnectMasterClient(f->port, &f->transport, &error);
  if (!f->client) std::fprintf(stderr, "cannot connect to the master: %s\n", error.c_str());
  if (f->client == nullptr) {
    delete f;
    return -1;
  }
  *state = f;
  return 0;
}

int Teardown(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  f->transport->close();
  int status = f->master.Stop(SIGTERM, 5000);
  bool clean = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  harness::RemoveTree(f->dir);
  delete f;
  return clean ? 0 : -1;  // SIGTERM must give a clean exit
}

void MountOne(rpc::MasterServiceClient* c, int64_t daemon, int64_t segment, int64_t size) {
  assert_int_equal(c->RegisterDaemon(daemon, "127.0.0.1:" + std::to_string(12300 + daemon % 100)),
                   0);
  rpc::SegmentInfo info;
  info.segment_id = segment;
  info.name = "127.0.0.1:" + std::to_string(12300 + daemon % 100);
  info.base = 0x7f0000000000;
  info.size = size;
  info.daemon_id = daemon;
  rpc::TransportEndpoint tcp;
  tcp.protocol = "tcp";
  tcp.address = info.name;
  info.endpoints.push_back(tcp);
  assert_int_equal(c->MountSegment(info), 0);
}

// The single-code (or count) changes, without the read-cache holders their replies carry.
int64_t Removed(rpc::MasterServiceClient* c, const std::string& key, bool force) {
  rpc::ChangeResult r;
  c->Remove(r, key, force, 0);
  return r.code;
}

int64_t RemovedByRegex(rpc::MasterServiceClient* c, const std::string& pattern, bool force) {
  rpc::ChangeResult r;
  c->RemoveByRegex(r, pattern, force, 0, "");
  return r.code;
}

int64_t RemovedAll(rpc::MasterServiceClient* c, bool force) {
  rpc::ChangeResult r;
  c->RemoveAll(r, force, 0, "");
  return r.code;
}

void test_put_get_and_lease(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  auto* c = f->client.get();
  MountOne(c, kDaemon, kSegment, 64 << 20);

  std::vector<rpc::SegmentInfo> segments;
  c->GetAllSegments(segments);
  assert_int_equal(segments.size(), 1);
  assert_int_equal(segments[0].endpoints.size(), 1);
  assert_string_equal(segments[0].endpoints[0].protocol.c_str(), "tcp");

  rpc::ReplicateConfig config;
  rpc::PutStartResult started;
  c->PutStart(started, kDaemon, "rpc-key", 4096, config);
  assert_int_equal(started.code, 0);
  assert_int_equal(started.replicas.size(), 1);
  assert_int_equal(started.replicas[0].segment_id, kSegment);
  assert_int_equal(started.replicas[0].status, rpc::ReplicaStatus::PROCESSING);

  rpc::ReplicaListResult list;
  c->GetReplicaList(list, "rpc-key", 0);
  assert_int_equal(list.code, ToInt(ErrorCode::REPLICA_IS_NOT_READY));
  assert_int_equal(c->ExistKey("rpc-key"), 0);

  assert_int_equal(c->PutEnd(kDaemon + 1, "rpc-key", -1), ToInt(ErrorCode::ILLEGAL_CLIENT));
  assert_int_equal(c->PutEnd(kDaemon, "rpc-key", -1), 0);
  c->GetReplicaList(list, "rpc-key", 0);
  assert_int_equal(list.code, 0);
  assert_int_equal(list.size, 4096);
  assert_int_equal(list.replicas.size(), 1);
  assert_int_equal(list.replicas[0].offset, started.replicas[0].offset);
  assert_int_equal(list.replicas[0].status, rpc::ReplicaStatus::COMPLETE);

  // The read above granted a lease: remove is refused until it runs out.
  assert_int_equal(Removed(c, "rpc-key", false), ToInt(ErrorCode::OBJECT_HAS_LEASE));
  c->PutStart(started, kDaemon, "rpc-key", 4096, config);
  assert_int_equal(started.code, ToInt(ErrorCode::OBJECT_ALREADY_EXISTS));
  // The 400 ms lease waited out with the real clock: the lease is the feature (no event
  // marks its end), and a slow machine only waits longer.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  assert_int_equal(Removed(c, "rpc-key", false), 0);
  c->GetReplicaList(list, "rpc-key", 0);
  assert_int_equal(list.code, ToInt(ErrorCode::OBJECT_NOT_FOUND));

  // Hostile input gets a code, never a crash.
  c->PutStart(started, kDaemon, std::string(5000, 'k'), 16, config);
  assert_int_equal(started.code, ToInt(ErrorCode::INVALID_PARAMS));
  c->PutStart(started, kDaemon, "zero", 0, config);
  assert_int_equal(started.code, ToInt(ErrorCode::INVALID_PARAMS));
  config.replica_num = 0;
  c->PutStart(started, kDaemon, "no-replicas", 16, config);
  assert_int_equal(started.code, ToInt(ErrorCode::INVALID_PARAMS));
  assert_int_equal(RemovedByRegex(c, "(unclosed", false), ToInt(ErrorCode::INVALID_PARAMS));
}

void test_batch_forms(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  auto* c = f->client.get();
  MountOne(c, kDaemon, kSegment, 64 << 20);
  std::vector<std::string> keys;
  std::vector<int64_t> sizes;
  for (int i = 0; i < 128; ++i) {
    keys.push_back("batch-" + std::to_string(i));
    sizes.push_back(1024 + i);
  }
  std::vector<rpc::PutStartResult> started;
  c->BatchPutStart(started, kDaemon, keys, sizes, rpc::ReplicateConfig());
  assert_int_equal(started.size(), keys.size());
  for (const auto& r : started) assert_int_equal(r.code, 0);
  std::vector<int32_t> codes;
  c->BatchPutEnd(codes, kDaemon, keys, {});
  assert_int_equal(codes.size(), keys.size());
  for (int32_t code : codes) assert_int_equal(code, 0);

  std::vector<std::string> probe = {"batch-0", "missing", "batch-127"};
  c->BatchExistKey(codes, probe);
  assert_int_equal(codes.size(), 3);
  assert_int_equal(codes[0], 1);
  assert_int_equal(codes[1], 0);
  assert_int_equal(codes[2], 1);
  std::vector<rpc::ReplicaListResult> lists;
  c->BatchGetReplicaList(lists, probe, 0);
  assert_int_equal(lists[0].code, 0);
  assert_int_equal(lists[0].size, 1024);
  assert_int_equal(lists[1].code, ToInt(ErrorCode::OBJECT_NOT_FOUND));
  assert_int_equal(lists[2].size, 1024 + 127);

  // Lists of different lengths: one -600 per key.
  c->BatchPutStart(started, kDaemon, {"a", "b"}, {1}, rpc::ReplicateConfig());
  assert_int_equal(started.size(), 2);
  assert_int_equal(started[0].code, ToInt(ErrorCode::INVALID_PARAMS));
  assert_int_equal(started[1].code, ToInt(ErrorCode::INVALID_PARAMS));

  rpc::BatchChangeResult removed;
  c->BatchRemove(removed, {"batch-5", "missing"}, true, 0);
  assert_int_equal(removed.codes.size(), 2);
  assert_int_equal(removed.codes[0], 0);
  assert_int_equal(removed.codes[1], ToInt(ErrorCode::OBJECT_NOT_FOUND));
  assert_int_equal(RemovedByRegex(c, "^batch-1[0-9]$", true), 10);
  assert_int_equal(RemovedAll(c, true), 128 - 1 - 10);
  rpc::MasterStats stats;
  c->GetStats(stats);
  assert_int_equal(stats.objects, 0);
  // batch-0 and batch-127 were read (leased) when force-removed: their space stays
  // reserved until the 400 ms lease runs out, then upkeep frees it.
  assert_int_equal(stats.used_bytes, 1024 + 1152);
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       stats.used_bytes != 0 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    c->GetStats(stats);
  }
  assert_int_equal(stats.used_bytes, 0);
  assert_true(stats.resident_bytes > 0);
}

void test_checksums(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  auto* c = f->client.get();
  MountOne(c, kDaemon, kSegment, 64 << 20);
  constexpr int64_t kCrc = 0xE3069283;  // above INT32_MAX: no sign trouble on the way
  constexpr int64_t kTooBig = int64_t{1} << 32;
  const int32_t kBadParams = ToInt(ErrorCode::INVALID_PARAMS);
  rpc::PutStartResult started;
  c->PutStart(started, kDaemon, "crc", 100, rpc::ReplicateConfig());
  assert_int_equal(started.code, 0);
  assert_int_equal(c->PutEnd(kDaemon, "crc", kTooBig), kBadParams);
  assert_int_equal(c->PutEnd(kDaemon, "crc", kCrc), 0);
  rpc::ReplicaListResult list;
  c->GetReplicaList(list, "crc", 0);
  assert_int_equal(list.checksum, kCrc);

  // An upsert: readers get the old value's checksum until UpsertEnd publishes the new one.
  c->UpsertStart(started, kDaemon, "crc", 200, rpc::ReplicateConfig());
  assert_int_equal(started.code, 0);
  c->GetReplicaList(list, "crc", 0);
  assert_int_equal(list.size, 100);
  assert_int_equal(list.checksum, kCrc);
  rpc::ChangeResult upserted;
  c->UpsertEnd(upserted, kDaemon, "crc", 0);
  assert_int_equal(upserted.code, 0);
  c->GetReplicaList(list, "crc", 0);
  assert_int_equal(list.size, 200);
  assert_int_equal(list.checksum, 0);

  // Batch: one checksum per key, or none at all; a list of another length fails every key.
  std::vector<std::string> keys = {"b0", "b1", "b2"};
  std::vector<rpc::PutStartResult> starts;
  c->BatchPutStart(starts, kDaemon, keys, {10, 10, 10}, rpc::ReplicateConfig());
  for (const auto& r : starts) assert_int_equal(r.code, 0);
  std::vector<int32_t> codes;
  c->BatchPutEnd(codes, kDaemon, keys, {1, 2});
  assert_int_equal(codes.size(), 3);
  for (int32_t code : codes) assert_int_equal(code, kBadParams);
  c->BatchPutEnd(codes, kDaemon, keys, {0xFFFFFFFF, -1, kTooBig});
  assert_int_equal(codes.size(), 3);
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[1], 0);
  assert_int_equal(codes[2], kBadParams);
  c->BatchPutEnd(codes, kDaemon, {"b2"}, {});
  assert_int_equal(codes[0], 0);
  std::vector<rpc::ReplicaListResult> lists;
  c->BatchGetReplicaList(lists, {"b0", "b1", "b2", "missing"}, 0);
  assert_int_equal(lists.size(), 4);
  assert_int_equal(lists[0].checksum, 0xFFFFFFFF);
  assert_int_equal(lists[1].checksum, -1);
  assert_int_equal(lists[2].checksum, -1);
  assert_int_equal(lists[3].code, ToInt(ErrorCode::OBJECT_NOT_FOUND));
  assert_int_equal(lists[3].checksum, -1);

  // A caller built before the argument existed sends PutEnd without field 3: none, not 0.
  c->PutStart(started, kDaemon, "old-caller", 100, rpc::ReplicateConfig());
  assert_int_equal(started.code, 0);
  auto out = c->getOutputProtocol();
  out->writeMessageBegin("PutEnd", T_CALL, 0);
  out->writeStructBegin("MasterService_PutEnd_args");
  out->writeFieldBegin("writer", T_I64, 1);
  out->writeI64(kDaemon);
  out->writeFieldEnd();
  out->writeFieldBegin("key", T_STRING, 2);
  out->writeString("old-caller");
  out->writeFieldEnd();
  out->writeFieldStop();
  out->writeStructEnd();
  out->writeMessageEnd();
  out->getTransport()->writeEnd();
  out->getTransport()->flush();
  assert_int_equal(c->recv_PutEnd(), 0);
  c->GetReplicaList(list, "old-caller", 0);
  assert_int_equal(list.code, 0);
  assert_int_equal(list.checksum, -1);
}

// A reader that names itself is named, over the wire, to the next change: with its address
// and what is left of its lease; a batch says which keys; the caller is left out.
void test_changes_name_cache_holders(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  auto* c = f->client.get();
  const int64_t kReader = kDaemon + 1;
  MountOne(c, kDaemon, kSegment, 64 << 20);
  MountOne(c, kReader, kSegment + 1, 64 << 20);
  std::vector<std::string> keys = {"held-0", "held-1", "held-2"};
  std::vector<rpc::PutStartResult> started;
  c->BatchPutStart(started, kDaemon, keys, {100, 100, 100}, rpc::ReplicateConfig());
  std::vector<int32_t> codes;
  c->BatchPutEnd(codes, kDaemon, keys, {});
  rpc::ReplicaListResult list;
  c->GetReplicaList(list, "held-0", kReader);
  assert_int_equal(list.code, 0);
  rpc::PutStartResult up;
  c->UpsertStart(up, kDaemon, "held-0", 200, rpc::ReplicateConfig());
  assert_int_equal(up.code, 0);
  rpc::ChangeResult changed;
  c->UpsertEnd(changed, kDaemon, "held-0", -1);
  assert_int_equal(changed.code, 0);
  assert_int_equal(changed.holders.size(), 1);
  assert_int_equal(changed.holders[0].daemon_id, kReader);
  assert_string_equal(changed.holders[0].address.c_str(),
                      ("127.0.0.1:" + std::to_string(12300 + kReader % 100)).c_str());
  assert_true(changed.holders[0].ms_left > 0 && changed.holders[0].ms_left <= 400);
  // Read by the reader and by the caller itself: only the reader is named, with its keys.
  std::vector<rpc::ReplicaListResult> lists;
  c->BatchGetReplicaList(lists, {"held-1", "held-2"}, kReader);
  c->BatchGetReplicaList(lists, {"held-0", "held-2"}, kDaemon);
  rpc::BatchChangeResult removed;
  c->BatchRemove(removed, keys, true, kDaemon);
  assert_true(removed.codes == (std::vector<int32_t>{0, 0, 0}));
  assert_int_equal(removed.holders.size(), 1);
  assert_int_equal(removed.holders[0].daemon_id, kReader);
  assert_true(removed.holders[0].keys == (std::vector<int32_t>{1, 2}));
}

void test_heartbeat_timeout_drops_segment(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  auto* c = f->client.get();
  MountOne(c, kDaemon, kSegment, 64 << 20);
  MountOne(c, kDaemon + 1, kSegment + 1, 64 << 20);
  rpc::ReplicateConfig config;
  config.preferred_segments = {"127.0.0.1:12302"};  // the second daemon
  rpc::PutStartResult started;
  c->PutStart(started, kDaemon, "on-dying", 100, config);
  assert_int_equal(started.code, 0);
  assert_int_equal(started.replicas[0].daemon_id, kDaemon + 1);
  assert_int_equal(c->PutEnd(kDaemon, "on-dying", -1), 0);

  // Only the first daemon keeps beating; the second goes silent past the 3 s TTL: its
  // segment is detached (not listed, its object unreadable), then dropped once the 3 s
  // grace is over too.
  rpc::HeartbeatResult beat;
  for (int i = 0; i < 22; ++i) {
    c->Heartbeat(beat, kDaemon);
    assert_int_equal(beat.code, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::vector<rpc::SegmentInfo> segments;
  c->GetAllSegments(segments);
  assert_int_equal(segments.size(), 1);
  assert_int_equal(segments[0].segment_id, kSegment);
  rpc::ReplicaListResult list;
  c->GetReplicaList(list, "on-dying", 0);
  assert_int_equal(list.code, ToInt(ErrorCode::REPLICA_IS_NOT_READY));
  c->Heartbeat(beat, kDaemon + 1);
  assert_int_equal(beat.code, ToInt(ErrorCode::CLIENT_NOT_FOUND));  // re-register, re-mount
  for (int i = 0; i < 50 && list.code != ToInt(ErrorCode::OBJECT_NOT_FOUND); ++i) {
    c->Heartbeat(beat, kDaemon);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    c->GetReplicaList(list, "on-dying", 0);
  }
  assert_int_equal(list.code, ToInt(ErrorCode::OBJECT_NOT_FOUND));
}

void test_bad_flags_exit_2(void** state) {
  (void)state;
  std::string dir = harness::MakeTempDir("mc-master-flags-");
  const std::vector<std::vector<std::string>> bad = {
      {"--no_such_flag", "1"},
      {"--eviction_ratio", "lots"},
      {"--allocation_strategy", "round_robin"},
      {"--eviction_high_watermark_ratio", "1.5"},
  };
  for (const auto& flags : bad) {
    harness::ChildProcess p;
    std::vector<std::string> argv = {harness::BuildPath("master/mooncake-master")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    assert_true(p.Start(argv, dir + "/out.log"));
    int status = p.Wait(5000);
    assert_true(status != -1 && WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 2);
  }
  harness::RemoveTree(dir);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_put_get_and_lease, Setup, Teardown),
      cmocka_unit_test_setup_teardown(test_batch_forms, Setup, Teardown),
      cmocka_unit_test_setup_teardown(test_checksums, Setup, Teardown),
      cmocka_unit_test_setup_teardown(test_changes_name_cache_holders, Setup, Teardown),
      cmocka_unit_test_setup_teardown(test_heartbeat_timeout_drops_segment, Setup, Teardown),
      cmocka_unit_test(test_bad_flags_exit_2),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
