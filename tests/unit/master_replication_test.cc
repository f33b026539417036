// Replication in process (docs/ha.md, "Replication"): two or three masters in this
// process, each with its own MasterService, snapshot directory and operation log
// (master/snapshot/durability.h, with --enable_ha's tail), the leader serving Thrift on 127.0.0.1
// and the standbys following it with their real LogFollower. Roles are set by hand
// (Replication::StartAsLeader / StartAsStandby), as the election will.
//
//   - a standby started empty bootstraps from a snapshot, then follows thousands of puts,
//     removes, upserts, an eviction and an unmount: its state is the leader's, object for
//     object (size, checksum, pin, replicas); its own restart recovers it from its own
//     snapshot and log and it continues without bootstrapping again;
//   - strict: an acknowledged put is durable on the sync-set standby; with the standby
//     held, the put waits, the standby is dropped through the callback after
//     ha_sync_timeout and the put succeeds; with the callback refusing, -1600; caught up
//     again, it rejoins;
//   - a standby behind the leader's tail bootstraps again;
//   - hostile FollowLog / FetchSnapshot arguments are refused.
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <thread>
#include <tuple>

#include "master/server/authenticated_processor.h"
#include "master/snapshot/durability.h"
#include "master/ha/replication.h"
#include "master/server/rpc_handler.h"
#include "master/log/state_records.h"
#include "tests/harness/in_process_rpc_server.h"
#include "tests/harness/master_service_fixture.h"
#include "tests/harness/process_harness.h"

namespace {

using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TFramedTransport;
using apache::thrift::transport::TSocket;
using mooncake::Durability;
using mooncake::Replication;
using mooncake::ReplicationOptions;
using mooncake::RpcHandler;
namespace harness = mooncake::testing;

constexpr int kBadParamsCode = static_cast<int>(ErrorCode::INVALID_PARAMS);
constexpr int kNotLeader = static_cast<int>(ErrorCode::NOT_LEADER);

struct TempDir {
  explicit TempDir(const char* prefix) : path(harness::MakeTempDir(prefix)) {}
  ~TempDir() {
    if (getenv("MC_KEEP_TEST_DIR") == nullptr) harness::RemoveTree(path);
  }
  std::string path;
};

bool WaitFor(const std::function<bool()>& done, int64_t ms = 30000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// The sync set as published, and whether publishing succeeds (we "still lead").
struct Published {
  std::mutex mu;
  std::vector<std::vector<std::string>> sets;
  std::atomic<bool> allow{true};
  mooncake::SyncSet::PublishFn Fn() {
    return [this](const std::vector<std::string>& set) {
      if (!allow.load()) return false;
      std::lock_guard<std::mutex> lock(mu);
      sets.push_back(set);
      return true;
    };
  }
  std::vector<std::string> Last() {
    std::lock_guard<std::mutex> lock(mu);
    return sets.empty() ? std::vector<std::string>{} : sets.back();
  }
};

// One master in this process.
struct Master {
  std::string dir;
  std::string name;
  MasterOptions options;
  std::unique_ptr<MasterService> service;
  std::unique_ptr<Durability> durability;
  std::unique_ptr<Replication> replication;
  std::shared_ptr<RpcHandler> handler;
  std::unique_ptr<mooncake::testing::InProcessRpcServer> server;
  int port = 0;

  Master(std::string d, std::string n, bool strict, uint64_t tail_bytes = 64ull << 20,
         int64_t sync_timeout_ms = 1000)
      : dir(std::move(d)), name(std::move(n)) {
    options = Options();
    options.enable_snapshot = true;
    options.snapshot_dir = dir;
    options.oplog_mode = strict ? "strict" : "relaxed";
    options.oplog_flush_interval_ms = 5;
    options.enable_ha = true;
    options.ha_tail_bytes = tail_bytes;
    options.ha_sync_timeout_ms = sync_timeout_ms;
    options.snapshot_interval_ms = 3600000;
  }
  ~Master() { Close(); }

  void Open(bool restore) {
    options.enable_snapshot_restore = restore;
    service = std::make_unique<MasterService>(options);
    std::string error;
    int exit_code = 0;
    durability = Durability::Open(options, service.get(), &error, &exit_code);
    if (!durability) fail_msg("durability: %s", error.c_str());
    ReplicationOptions r;
    r.name = name;
    r.snapshot_dir = dir;
    r.sync_timeout_ms = options.ha_sync_timeout_ms;
    replication = std::make_unique<Replication>(service.get(), durability->oplog(),
                                                durability->snapshotter(), r);
    handler = std::make_shared<RpcHandler>(service.get(), durability->snapshotter(),
                                           replication.get());
    durability->Start();
  }

  void Serve() {
    server = std::make_unique<mooncake::testing::InProcessRpcServer>(
        std::make_shared<mooncake::AuthenticatedProcessorFactory>(handler, nullptr), 4);
    port = server->port();
  }

  std::string Address() const { return "127.0.0.1:" + std::to_string(port); }

  void Close() {
    server.reset();
    if (replication) replication->Stop();
    handler.reset();
    replication.reset();
    durability.reset();
    service.reset();
  }

  uint64_t last() { return durability->oplog()->last(); }
};

using ObjectState =
    std::tuple<uint64_t, int64_t, bool, std::vector<std::tuple<int64_t, uint64_t, uint8_t>>>;

std::map<std::string, ObjectState> Objects(MasterService& s) {
  std::map<std::string, ObjectState> out;
  s.ExportObjects([&](size_t, const std::string& bytes, uint32_t) {
    assert_true(mooncake::DecodeObjects(bytes, [&](mooncake::ObjectRecord&& o) {
      std::vector<std::tuple<int64_t, uint64_t, uint8_t>> replicas;
      for (const auto& r : o.replicas) replicas.emplace_back(r.segment_id, r.offset, r.kind);
      out[o.key] = ObjectState(o.size, o.checksum, o.hard_pin, replicas);
    }));
    return true;
  });
  return out;
}

std::vector<std::tuple<int64_t, std::string, int64_t, int64_t>> Segments(MasterService& s) {
  std::vector<std::tuple<int64_t, std::string, int64_t, int64_t>> out;
  for (const auto& seg : s.ExportSegments()) out.emplace_back(seg.segment_id, seg.name, seg.base, seg.size);
  std::sort(out.begin(), out.end());
  return out;
}

void AssertSameState(Master& leader, Master& standby) {
  assert_true(WaitFor([&] { return standby.last() == leader.last(); }));
  auto a = Objects(*leader.service), b = Objects(*standby.service);
  assert_int_equal(a.size(), b.size());
  assert_true(a == b);
  assert_true(Segments(*leader.service) == Segments(*standby.service));
}

int32_t PutVia(RpcHandler& h, const std::string& key, int64_t size, int64_t checksum) {
  rpc::PutStartResult r;
  h.PutStart(r, 1, key, size, Cfg());
  if (r.code != 0) return r.code;
  return h.PutEnd(1, key, checksum);
}

int32_t UpsertVia(RpcHandler& h, const std::string& key, int64_t size, int64_t checksum) {
  rpc::PutStartResult r;
  h.UpsertStart(r, 1, key, size, Cfg());
  if (r.code != 0) return r.code;
  rpc::ChangeResult c;
  h.UpsertEnd(c, 1, key, checksum);
  return c.code;
}

void StartLeader(Master& leader, Published& published) {
  leader.Open(false);
  assert_true(leader.replication->StartAsLeader(7, published.Fn()));
  leader.Serve();
  AddDaemon(*leader.service, 1, 256 * kMiB);
  AddDaemon(*leader.service, 2, 256 * kMiB);
}

bool InSyncSet(Master& leader, const std::string& name) {
  auto m = leader.replication->sync_set()->members();
  return std::find(m.begin(), m.end(), name) != m.end();
}

void test_standby_bootstraps_follows_and_restarts(void**) {
  TempDir dl("mc-repl-leader-"), ds("mc-repl-standby-");
  Published published;
  Master leader(dl.path, "127.0.0.1:1", /*strict=*/true);
  StartLeader(leader, published);
  for (int i = 0; i < 200; ++i) assert_int_equal(PutVia(*leader.handler, "pre" + std::to_string(i), 1000 + i, i), 0);

  Master standby(ds.path, "127.0.0.1:2", /*strict=*/true);
  standby.Open(false);
  assert_int_equal(ToInt(standby.replication->StartAsStandby(leader.Address(), true)), 0);
  AssertSameState(leader, standby);
  assert_true(WaitFor([&] { return InSyncSet(leader, standby.name); }));
  // Waited for first, published second: the publish may trail the membership.
  assert_true(WaitFor([&] { return published.Last() == std::vector<std::string>{standby.name}; }));

  // Thousands of changes of every kind while it follows.
  for (int i = 0; i < 3000; ++i) {
    const std::string key = "k" + std::to_string(i % 1700);
    if (i % 7 == 3) {
      rpc::ChangeResult c;
      leader.handler->Remove(c, key, true, 0);
    } else if (i % 5 == 1) {
      UpsertVia(*leader.handler, key, 2000 + i, 100000 + i);
    } else {
      PutVia(*leader.handler, key, 500 + i, i);
    }
    if (i == 1500) {
      g_now += 100000;  // leases over: evictable
      assert_true(leader.service->Evict(2 * kMiB) > 0);
    }
  }
  AddDaemon(*leader.service, 3, 64 * kMiB);
  for (int i = 0; i < 50; ++i) PutVia(*leader.handler, "on3-" + std::to_string(i), 100, i);
  assert_int_equal(ToInt(leader.service->UnmountSegment(2, 21)), 0);
  AssertSameState(leader, standby);
  rpc::MasterStats stats;
  standby.handler->GetStats(stats);
  assert_int_equal(stats.replication_bootstraps, 1);
  assert_true(stats.replication_applied > 3000);
  assert_int_equal(stats.replication_lag, 0);

  // Its own restart: its own snapshot (taken now, as the periodic ones are) + its log.
  assert_int_equal(ToInt(standby.durability->snapshotter()->Take().code), 0);
  for (int i = 0; i < 100; ++i) PutVia(*leader.handler, "after-snap" + std::to_string(i), 300, i);
  AssertSameState(leader, standby);
  const auto before = Objects(*standby.service);
  const uint64_t last = standby.last();
  standby.Close();
  standby.Open(true);
  assert_int_equal(standby.last(), last);
  assert_true(Objects(*standby.service) == before);
  assert_int_equal(ToInt(standby.replication->StartAsStandby(leader.Address(), false)), 0);
  for (int i = 0; i < 100; ++i) PutVia(*leader.handler, "after-restart" + std::to_string(i), 300, i);
  AssertSameState(leader, standby);
  standby.handler->GetStats(stats);
  assert_int_equal(stats.replication_bootstraps, 0);  // it continued after its own log
}

void test_strict_ack_waits_for_the_sync_set(void**) {
  TempDir dl("mc-repl-leader-"), ds("mc-repl-standby-");
  Published published;
  // Long enough that a put which waited for it is told from one that did not by generous
  // bounds (a loaded machine's local put may take a good part of a second).
  constexpr int kSyncTimeoutMs = 4000;
  Master leader(dl.path, "127.0.0.1:1", true, 64ull << 20, kSyncTimeoutMs);
  StartLeader(leader, published);
  Master standby(ds.path, "127.0.0.1:2", true);
  standby.Open(false);
  assert_int_equal(ToInt(standby.replication->StartAsStandby(leader.Address(), true)), 0);
  assert_true(WaitFor([&] { return InSyncSet(leader, standby.name); }));

  // Acknowledged means durable on the standby.
  for (int i = 0; i < 200; ++i) {
    assert_int_equal(PutVia(*leader.handler, "a" + std::to_string(i), 1000, i), 0);
    assert_true(standby.durability->oplog()->synced() >= mooncake::OpLog::LastAppendedByThisThread());
  }

  // Held: the put waits, the standby is dropped (published first), then the put succeeds.
  standby.replication->follower()->SetPaused(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a pull in flight ends
  const auto start = std::chrono::steady_clock::now();
  auto put = std::async(std::launch::async, [&] { return PutVia(*leader.handler, "held", 1000, 1); });
  assert_true(put.wait_for(std::chrono::milliseconds(kSyncTimeoutMs / 2)) ==
              std::future_status::timeout);
  assert_int_equal(put.get(), 0);
  const auto waited = std::chrono::steady_clock::now() - start;
  assert_true(waited >= std::chrono::milliseconds(kSyncTimeoutMs - 50));
  assert_true(published.Last().empty());
  assert_false(InSyncSet(leader, standby.name));
  // Without sync-set members, a put needs only the local disk.
  const auto quick = std::chrono::steady_clock::now();
  assert_int_equal(PutVia(*leader.handler, "alone", 1000, 1), 0);
  assert_true(std::chrono::steady_clock::now() - quick <
              std::chrono::milliseconds(kSyncTimeoutMs / 2));

  // Caught up again: it rejoins, published.
  standby.replication->follower()->SetPaused(false);
  assert_true(WaitFor([&] { return InSyncSet(leader, standby.name); }));
  // Waited for first, published second: the publish may trail the membership.
  assert_true(WaitFor([&] { return published.Last() == std::vector<std::string>{standby.name}; }));

  // Held again, and the drop cannot be published (we no longer lead): -1600, never OK.
  standby.replication->follower()->SetPaused(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  published.allow = false;
  assert_int_equal(PutVia(*leader.handler, "deposed", 1000, 1), kNotLeader);
  // And so every later acknowledgement.
  rpc::ChangeResult c;
  leader.handler->Remove(c, "a1", true, 0);
  assert_int_equal(c.code, kNotLeader);
  standby.replication->follower()->SetPaused(false);
}

void test_standby_behind_the_tail_bootstraps_again(void**) {
  TempDir dl("mc-repl-leader-"), ds("mc-repl-standby-");
  Published published;
  Master leader(dl.path, "127.0.0.1:1", true, /*tail_bytes=*/4096, /*sync_timeout_ms=*/200);
  StartLeader(leader, published);
  Master standby(ds.path, "127.0.0.1:2", true);
  standby.Open(false);
  assert_int_equal(ToInt(standby.replication->StartAsStandby(leader.Address(), true)), 0);
  AssertSameState(leader, standby);
  standby.replication->follower()->SetPaused(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 0; i < 500; ++i) assert_int_equal(PutVia(*leader.handler, "b" + std::to_string(i), 1000, i), 0);
  standby.replication->follower()->SetPaused(false);
  AssertSameState(leader, standby);
  // The follower counts a bootstrap once it has logged it, just after its state is the
  // snapshot's: the state may match a moment before the count does.
  assert_true(WaitFor([&] { return standby.replication->follower()->bootstraps() == 2; }));
  for (int i = 0; i < 20; ++i) assert_int_equal(PutVia(*leader.handler, "c" + std::to_string(i), 1000, i), 0);
  AssertSameState(leader, standby);
}

void test_hostile_arguments_refused(void**) {
  TempDir dl("mc-repl-leader-"), ds("mc-repl-standby-");
  Published published;
  Master leader(dl.path, "127.0.0.1:1", true);
  StartLeader(leader, published);
  RpcHandler& h = *leader.handler;
  rpc::FollowLogResult f;
  auto follow = [&](const std::string& n, int64_t from, int64_t durable, int64_t crc, int32_t max) {
    f = rpc::FollowLogResult();
    h.FollowLog(f, n, from, durable, crc, max);
    return f.code;
  };
  assert_int_equal(follow("127.0.0.1:9", 1, 0, -1, 1000), 0);
  assert_int_equal(follow("", 1, 0, -1, 1000), kBadParamsCode);
  assert_int_equal(follow("a/b", 1, 0, -1, 1000), kBadParamsCode);
  assert_int_equal(follow(std::string(300, 'a'), 1, 0, -1, 1000), kBadParamsCode);
  assert_int_equal(follow("x", 0, 0, -1, 1000), kBadParamsCode);
  assert_int_equal(follow("x", -5, 0, -1, 1000), kBadParamsCode);
  assert_int_equal(follow("x", 1, 1, -1, 1000), kBadParamsCode);  // durable past what it has
  assert_int_equal(follow("x", 1, -1, -1, 1000), kBadParamsCode);
  assert_int_equal(follow("x", 1, 0, -2, 1000), kBadParamsCode);
  assert_int_equal(follow("x", 1, 0, int64_t{1} << 40, 1000), kBadParamsCode);
  assert_int_equal(follow("x", 1, 0, -1, 0), kBadParamsCode);
  // Far past the end: not an error, a bootstrap; a huge max_bytes is capped.
  assert_int_equal(follow("x", int64_t{1} << 60, 0, -1, 1000), 0);
  assert_true(f.bootstrap);
  assert_int_equal(follow("x", 1, 0, -1, INT32_MAX), 0);
  assert_false(f.bootstrap);
  assert_int_equal(f.records.size(), 2);  // the two mounts
  // A standby whose record 1 is not the leader's (another history) must bootstrap.
  uint32_t crc = 0;
  assert_true(leader.durability->oplog()->tail()->Crc(1, &crc));
  assert_int_equal(follow("x", 2, 1, crc, 1000), 0);
  assert_false(f.bootstrap);
  assert_int_equal(follow("x", 2, 1, crc ^ 1, 1000), 0);
  assert_true(f.bootstrap);

  rpc::FetchSnapshotResult s;
  auto fetch = [&](const std::string& name, const std::string& file, int64_t offset, int32_t max) {
    s = rpc::FetchSnapshotResult();
    h.FetchSnapshot(s, "127.0.0.1:9", name, file, offset, max);
    return s.code;
  };
  const std::string good = "00000000000000000001-5";
  for (const std::string& name : {std::string("../../etc"), std::string("latest"),
                                  std::string("snapshots/../x"), good + "/..", good + ".invalid",
                                  std::string("/tmp")}) {
    assert_int_equal(fetch(name, "", 0, 0), kBadParamsCode);
  }
  for (const std::string& file : {std::string("../descriptor"), std::string(".."),
                                  std::string(".hidden"), std::string("a/b"),
                                  std::string("/etc/passwd"), std::string(1000, 'f')}) {
    assert_int_equal(fetch(good, file, 0, 1000), kBadParamsCode);
  }
  assert_int_equal(fetch("", "descriptor", 0, 1000), kBadParamsCode);  // a file needs a name
  assert_int_equal(fetch(good, "descriptor", -1, 1000), kBadParamsCode);
  assert_int_equal(fetch(good, "descriptor", 0, 0), kBadParamsCode);
  assert_int_equal(fetch(good, "descriptor", 0, (4 << 20) + 1), kBadParamsCode);
  assert_int_equal(fetch(good, "descriptor", 0, 1000), static_cast<int>(ErrorCode::FILE_NOT_FOUND));
  // A real one, read in chunks, within its size only.
  assert_int_equal(fetch("", "", 0, 0), 0);
  const std::string name = s.name;
  assert_true(WaitFor([&] { return fetch(name, "", 0, 0) == 0 && s.ready; }));
  assert_true(std::find(s.files.begin(), s.files.end(), "descriptor") != s.files.end());
  assert_int_equal(fetch(name, "descriptor", 0, 10), 0);
  assert_int_equal(s.data.size(), 10);
  const int64_t size = s.file_size;
  assert_int_equal(fetch(name, "descriptor", size, 10), 0);
  assert_int_equal(s.data.size(), 0);
  assert_int_equal(fetch(name, "descriptor", size + 1000, 10), 0);
  assert_int_equal(s.data.size(), 0);

  // A standby answers -1600 to both; a master without replication -1011.
  Master standby(ds.path, "127.0.0.1:2", true);
  standby.Open(false);
  assert_int_equal(ToInt(standby.replication->StartAsStandby(leader.Address(), true)), 0);
  standby.handler->FollowLog(f, "x", 1, 0, -1, 1000);
  assert_int_equal(f.code, kNotLeader);
  standby.handler->FetchSnapshot(s, "x", "", "", 0, 0);
  assert_int_equal(s.code, kNotLeader);
  RpcHandler plain(leader.service.get());
  plain.FollowLog(f, "x", 1, 0, -1, 1000);
  assert_int_equal(f.code, static_cast<int>(ErrorCode::UNAVAILABLE_IN_CURRENT_MODE));
  assert_int_equal(ToInt(standby.replication->StartAsStandby("nohost", false)), kBadParamsCode);
  assert_int_equal(ToInt(standby.replication->StartAsStandby("h:99999", false)), kBadParamsCode);

  // The same refusals over the wire.
  auto socket = std::make_shared<TSocket>("127.0.0.1", leader.port);
  socket->setRecvTimeout(5000);
  auto transport = std::make_shared<TFramedTransport>(socket);
  transport->open();
  rpc::MasterServiceClient client(std::make_shared<TBinaryProtocol>(transport));
  client.FetchSnapshot(s, "x", "../../etc", "passwd", 0, 100);
  assert_int_equal(s.code, kBadParamsCode);
  client.FollowLog(f, "x", 0, 0, -1, 100);
  assert_int_equal(f.code, kBadParamsCode);
  transport->close();
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_standby_bootstraps_follows_and_restarts),
      cmocka_unit_test(test_strict_ack_waits_for_the_sync_set),
      cmocka_unit_test(test_standby_behind_the_tail_bootstraps_again),
      cmocka_unit_test(test_hostile_arguments_refused),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
