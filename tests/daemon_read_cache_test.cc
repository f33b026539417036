// The daemon's read cache. In process, the orderings a remote invalidation relies on
// (daemon/cluster/cache_invalidator.h): a fill whose ticket predates an invalidation of its key
// (or a Clear) is dropped, one that came first is erased, one that began after is kept,
// and an expired fill never enters. Then spoken to over docs/protocol.md: reads inside the
// lease skip the master; local writes, lease expiry, an unmounted segment and a master
// restart each invalidate; --read_cache false turns it off. Those tests run their own
// master and daemon (OwnCluster), so that they can choose the lease and stop the master.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/base/error_code.h"
#include "common/uds/uds_ops.h"
#include "daemon/cluster/read_cache.h"
#include "tests/cmocka_cpp.h"
#include "tests/daemon_test_client.h"
#include "tests/process_harness.h"

namespace uds = mooncake::uds;
namespace harness = mooncake::testing;
using mooncake::ErrorCode;
using mooncake::ToInt;
using namespace mooncake::testing;  // the protocol client (tests/daemon_test_client.h)
using uds::Op;

namespace {

// ---- ReadCache, in process ----------------------------------------------------------

using mooncake::ReadCache;

ReadCache::Entry EntryFor(std::chrono::milliseconds ttl) {
  ReadCache::Entry e;
  e.where.remote = std::make_shared<mooncake::RemoteSegment>();  // no memory needed
  e.size = 64;
  e.deadline = ReadCache::Clock::now() + ttl;
  return e;
}

bool Cached(ReadCache& cache, const std::string& key) {
  ReadCache::Entry e;
  return cache.Lookup(key, &e);
}

void test_fill_orders_against_invalidation(void**) {
  ReadCache cache(true);
  const auto live = std::chrono::seconds(10);
  // Asked before the change, answered after the holder forgot the key: dropped.
  ReadCache::Ticket before = cache.Begin("k");
  cache.Invalidate("k");
  cache.Fill("k", before, EntryFor(live));
  assert_false(Cached(cache, "k"));
  // Filled before the invalidation: erased by it.
  cache.Fill("k", cache.Begin("k"), EntryFor(live));
  assert_true(Cached(cache, "k"));
  cache.Invalidate("k");
  assert_false(Cached(cache, "k"));
  // Asked after it: kept.
  ReadCache::Ticket after = cache.Begin("k");
  cache.Fill("k", after, EntryFor(live));
  assert_true(Cached(cache, "k"));
  // Two fills raced, an old one and a new one: the invalidation between their tickets
  // drops the old whichever lands last.
  ReadCache::Ticket old_read = cache.Begin("r");
  cache.Invalidate("r");
  ReadCache::Ticket new_read = cache.Begin("r");
  cache.Fill("r", new_read, EntryFor(live));
  cache.Fill("r", old_read, EntryFor(live * 2));  // a later deadline does not help it
  ReadCache::Entry e;
  assert_true(cache.Lookup("r", &e));
  assert_true(e.deadline < ReadCache::Clock::now() + live + std::chrono::seconds(1));
}

void test_clear_voids_fills_of_every_key(void**) {
  ReadCache cache(true);
  std::vector<ReadCache::Ticket> tickets;
  for (int i = 0; i < 1000; ++i) tickets.push_back(cache.Begin("key-" + std::to_string(i)));
  cache.Fill("cached", cache.Begin("cached"), EntryFor(std::chrono::seconds(10)));
  cache.Clear();
  assert_int_equal(cache.size(), 0);
  for (int i = 0; i < 1000; ++i) {
    cache.Fill("key-" + std::to_string(i), tickets[i], EntryFor(std::chrono::seconds(10)));
  }
  assert_int_equal(cache.size(), 0);
}

// A holder stopped between the master's answer and its fill resumes after the writer has
// waited its lease out: the entry's deadline has passed, so it never enters the cache.
void test_an_expired_fill_never_enters(void**) {
  ReadCache cache(true);
  cache.Fill("k", cache.Begin("k"), EntryFor(std::chrono::milliseconds(-1)));
  assert_false(Cached(cache, "k"));
  assert_int_equal(cache.size(), 0);
  // A deadline far enough ahead that a loaded machine still looks before it passes; then
  // the real clock runs past it (the deadline is the feature).
  cache.Fill("k", cache.Begin("k"), EntryFor(std::chrono::milliseconds(500)));
  assert_true(Cached(cache, "k"));
  std::this_thread::sleep_for(std::chrono::milliseconds(510));
  assert_false(Cached(cache, "k"));  // and an entry is not served past its deadline
}

// The bounds hold however many keys are read (a full shard sweeps down to 7/8 of its
// share), what has expired goes before anything live, and long keys count by their bytes.
void test_bounded_by_entries_and_bytes(void**) {
  const auto live = std::chrono::seconds(10);
  const size_t max_entries = 64 * 16;  // 16 a shard
  ReadCache by_count(true, max_entries);
  for (int i = 0; i < 20000; ++i) {
    std::string key = "many-" + std::to_string(i);
    by_count.Fill(key, by_count.Begin(key), EntryFor(live));
  }
  assert_true(by_count.size() <= max_entries);
  assert_true(by_count.size() >= max_entries / 2);
  assert_true(Cached(by_count, "many-19999"));  // the last fill always finds room

  // Expired entries first: a cache full of them keeps every live key a fill brings (256
  // keys, about 4 a shard against a share of 16).
  ReadCache expiring(true, max_entries);
  for (size_t i = 0; i < 4 * max_entries; ++i) {
    std::string key = "old-" + std::to_string(i);
    expiring.Fill(key, expiring.Begin(key), EntryFor(std::chrono::milliseconds(20)));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  for (int i = 0; i < 256; ++i) {
    std::string key = "live-" + std::to_string(i);
    expiring.Fill(key, expiring.Begin(key), EntryFor(live));
  }
  for (int i = 0; i < 256; ++i) assert_true(Cached(expiring, "live-" + std::to_string(i)));

  // By bytes: 1000-byte keys in 64 shards of ~11 KB hold about ten keys a shard.
  ReadCache by_bytes(true, 1u << 20, 64 * 11000);
  for (int i = 0; i < 5000; ++i) {
    std::string key = std::string(990, 'b') + std::to_string(i);
    by_bytes.Fill(key, by_bytes.Begin(key), EntryFor(live));
  }
  assert_true(by_bytes.size() <= 64 * 11);
  assert_true(by_bytes.size() >= 64 * 4);
}

// ---- over the protocol ----------------------------------------------------------------

// Whether a request waited on the stopped master is told by how long each one took,
// against an RPC timeout long enough that a loaded machine answers from the cache well
// within half of it.
constexpr int64_t kRpcTimeoutMs = 3000;
const std::vector<std::string> kSlowMasterFlags = {"--rpc_timeout",
                                                   std::to_string(kRpcTimeoutMs) + "ms"};

void test_read_cache_serves_reads_within_lease(void**) {
  OwnCluster cluster("10s", kSlowMasterFlags);
  Pool pool(kPoolSize);
  Conn c(cluster.socket_path);
  assert_int_equal(c.Hello(&pool), 0);
  Fill(pool.base, 4096, 51);
  assert_int_equal(c.Put("cached", 0, 4096), 0);
  assert_int_equal(c.Put("cached-big", 0, 300000), 0);  // over the inline limit
  assert_int_equal(c.Put("never-read", 0, 4096), 0);
  assert_int_equal(c.Get("cached", 1 << 20, 4096), 4096);  // asks the master: fills
  assert_int_equal(c.Get("cached-big", 2 << 20, 1 << 20), 300000);

  cluster.Pause();
  std::memset(pool.base + (1 << 20), 0, 4096);
  // Each request's time: none waited on the stopped master.
  int64_t slowest = 0;
  auto timed = [&](auto call) {
    auto t0 = std::chrono::steady_clock::now();
    auto result = call();
    slowest = std::max(slowest, ElapsedMs(t0));
    return result;
  };
  for (int i = 0; i < 100; ++i) {
    assert_int_equal(timed([&] { return c.Get("cached", 1 << 20, 4096); }), 4096);
  }
  assert_memory_equal(pool.base, pool.base + (1 << 20), 4096);
  assert_int_equal(timed([&] { return c.Get("cached-big", 2 << 20, 1 << 20); }), 300000);
  assert_memory_equal(pool.base, pool.base + (2 << 20), 300000);
  assert_int_equal(timed([&] { return c.Exist("cached"); }), 1);
  assert_int_equal(timed([&] { return c.GetSize("cached"); }), 4096);
  // The cached size is checked too.
  assert_int_equal(timed([&] { return c.Get("cached", 0, 100); }), kInvalid);
  assert_true(slowest < kRpcTimeoutMs / 2);  // never waited on the stopped master
  // A batch takes what the cache has and asks the master only for the rest.
  std::vector<int64_t> v;
  std::memset(pool.base + (1 << 20), 0, 4096);
  assert_int_equal(c.BatchGet({"cached", "never-read"}, 1 << 20, 4096, &v), 0);
  assert_int_equal(v.at(0), 4096);
  assert_true(MasterUnreachable(v.at(1)));
  assert_memory_equal(pool.base, pool.base + (1 << 20), 4096);
  // Anything else does reach the master, and fails by the RPC timeout (not hanging).
  assert_true(MasterUnreachable(c.Get("never-read", 1 << 20, 4096)));
  assert_true(MasterUnreachable(c.Exist("never-read")));
  cluster.Resume();
  int64_t got = 0;
  for (int i = 0; i < 100 && got != 4096; ++i) {  // the master catches up
    got = c.Get("never-read", 1 << 20, 4096);
    if (got != 4096) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  assert_int_equal(got, 4096);
}

void test_read_cache_local_writes_invalidate(void**) {
  OwnCluster cluster("10s", {});
  Pool pool(kPoolSize);
  Conn c(cluster.socket_path);
  assert_int_equal(c.Hello(&pool), 0);
  const uint64_t n = 4096;

  // A forced remove here: -704 at once, though the entry had 9 s left.
  Fill(pool.base, n, 61);
  assert_int_equal(c.Put("inv", 0, n), 0);
  assert_int_equal(c.Get("inv", 1 << 20, n), n);
  assert_int_equal(c.Remove("inv"), 0);
  assert_int_equal(c.Get("inv", 1 << 20, n), ToInt(ErrorCode::OBJECT_NOT_FOUND));
  assert_int_equal(c.Exist("inv"), 0);
  assert_int_equal(c.GetSize("inv"), ToInt(ErrorCode::OBJECT_NOT_FOUND));

  // An upsert here: the new bytes (and size) at once.
  assert_int_equal(c.Put("inv", 0, n), 0);
  assert_int_equal(c.Get("inv", 1 << 20, n), n);
  Fill(pool.base, n / 2, 62);
  assert_int_equal(c.Put("inv", 0, n / 2, Op::kUpsert), 0);
  std::memset(pool.base + (1 << 20), 0, n);
  assert_int_equal(c.Get("inv", 1 << 20, n), n / 2);
  assert_memory_equal(pool.base, pool.base + (1 << 20), n / 2);
  assert_int_equal(c.GetSize("inv"), n / 2);

  // A staged upsert, published by PUT_COMMIT.
  std::vector<int64_t> v;
  assert_int_equal(c.Ints(Op::kPutBegin, [&](uds::FrameBuilder* f) {
    f->args().pack("inv");
    f->args().pack(n);
    uds::PackValue(f->args(), uds::WireConfig());
    f->args().pack(true);
  }, 4, &v), 0);
  uint64_t put_id = static_cast<uint64_t>(v.at(0));
  Fill(pool.base, n, 63);
  assert_int_equal(c.Ints(Op::kPutChunk, [&](uds::FrameBuilder* f) {
    f->args().pack(put_id);
    f->args().pack(0);
    f->args().pack(0);
    f->args().pack(n);
  }, 4), 0);
  assert_int_equal(c.Get("inv", 1 << 20, n), n / 2);  // the old value until the commit
  assert_int_equal(c.Ints(Op::kPutCommit, [&](uds::FrameBuilder* f) { f->args().pack(put_id); },
                          1), 0);
  assert_int_equal(c.Get("inv", 1 << 20, n), n);
  assert_memory_equal(pool.base, pool.base + (1 << 20), n);

  // REMOVE_BY_REGEX and REMOVE_ALL forget everything.
  assert_int_equal(c.Put("inv-2", 0, n), 0);
  assert_int_equal(c.Get("inv-2", 1 << 20, n), n);
  assert_int_equal(c.Ints(Op::kRemoveByRegex, [](uds::FrameBuilder* f) {
    f->args().pack("^inv-");
    f->args().pack(true);
  }, 2, &v), 0);
  assert_int_equal(v.at(0), 1);
  assert_int_equal(c.Get("inv-2", 1 << 20, n), ToInt(ErrorCode::OBJECT_NOT_FOUND));
  assert_int_equal(c.Get("inv", 1 << 20, n), n);
  assert_int_equal(c.Ints(Op::kRemoveAll, [](uds::FrameBuilder* f) { f->args().pack(true); }, 1,
                          &v), 0);
  assert_int_equal(c.Get("inv", 1 << 20, n), ToInt(ErrorCode::OBJECT_NOT_FOUND));
  assert_int_equal(c.Exist("inv"), 0);
}

void test_read_cache_expires_with_lease(void**) {
  OwnCluster cluster("300ms", {});  // entries live 270 ms
  Pool pool(kPoolSize);
  Conn c(cluster.socket_path);
  assert_int_equal(c.Hello(&pool), 0);
  Fill(pool.base, 4096, 71);
  assert_int_equal(c.Put("short-lease", 0, 4096), 0);
  auto filled = std::chrono::steady_clock::now();
  assert_int_equal(c.Get("short-lease", 1 << 20, 4096), 4096);
  cluster.Pause();
  if (ElapsedMs(filled) < 200) assert_int_equal(c.Get("short-lease", 1 << 20, 4096), 4096);
  std::this_thread::sleep_for(std::chrono::milliseconds(350) -
                              (std::chrono::steady_clock::now() - filled));
  // The entry ran out with the lease: the read asks the (stopped) master again.
  assert_true(MasterUnreachable(c.Get("short-lease", 1 << 20, 4096)));
  assert_true(MasterUnreachable(c.Exist("short-lease")));
  cluster.Resume();
}

void test_read_cache_can_be_turned_off(void**) {
  std::vector<std::string> flags = kSlowMasterFlags;
  flags.insert(flags.end(), {"--read_cache", "false"});
  OwnCluster cluster("10s", flags);
  Pool pool(kPoolSize);
  Conn c(cluster.socket_path);
  assert_int_equal(c.Hello(&pool), 0);
  Fill(pool.base, 4096, 81);
  assert_int_equal(c.Put("uncached", 0, 4096), 0);
  assert_int_equal(c.Get("uncached", 1 << 20, 4096), 4096);
  cluster.Pause();
  assert_true(MasterUnreachable(c.Get("uncached", 1 << 20, 4096)));
  auto t0 = std::chrono::steady_clock::now();
  int64_t health = c.Health();  // answered by the daemon alone, at once
  assert_true(health == 0 || health == 1);
  assert_true(ElapsedMs(t0) < kRpcTimeoutMs / 2);
  cluster.Resume();
}

void test_read_cache_forgets_unmounted_segment(void**) {
  // No global segment: every object lands in the connection's extra segment.
  OwnCluster cluster("10s", {"--global_segment_size", "0"});
  Pool pool(kPoolSize);
  Conn owner(cluster.socket_path);
  assert_int_equal(owner.Hello(&pool), 0);
  assert_int_equal(owner.Ints(Op::kMountSegment, [](uds::FrameBuilder* f) {
    f->args().pack(uint64_t{16 << 20});
  }, 1), 0);
  Fill(pool.base, 4096, 91);
  assert_int_equal(owner.Put("in-extra", 0, 4096), 0);
  Conn reader(cluster.socket_path);
  assert_int_equal(reader.Hello(&pool), 0);
  assert_int_equal(reader.Get("in-extra", 1 << 20, 4096), 4096);  // cached
  owner.Close();  // the teardown unmounts the segment and the master drops its objects
  int64_t got = 0;
  for (int i = 0; i < 40; ++i) {  // the teardown runs shortly after the close
    got = reader.Get("in-extra", 1 << 20, 4096);
    if (got != 4096) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  assert_int_equal(got, ToInt(ErrorCode::OBJECT_NOT_FOUND));
}

void test_read_cache_cleared_on_reregistration(void**) {
  OwnCluster cluster("10s", {});
  Pool pool(kPoolSize);
  Conn c(cluster.socket_path);
  assert_int_equal(c.Hello(&pool), 0);
  Fill(pool.base, 4096, 95);
  assert_int_equal(c.Put("old-master", 0, 4096), 0);
  assert_int_equal(c.Get("old-master", 1 << 20, 4096), 4096);  // cached for 9 s
  cluster.master.Stop(SIGKILL, 5000);
  assert_true(harness::StartMasterOnPort(&cluster.master, cluster.master_port,
                                          cluster.dir + "/master2.log",
                                          {"--default_kv_lease_ttl", "10s"}));
  size_t segments = 0;
  for (int i = 0; i < 100 && segments == 0; ++i) {  // the heartbeat registers again
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    segments = MasterSegmentCount(cluster.master_port);
  }
  assert_int_equal(segments, 1);
  // The new master never heard of the key, and may reuse its space: the entry is gone.
  assert_int_equal(c.Get("old-master", 1 << 20, 4096), ToInt(ErrorCode::OBJECT_NOT_FOUND));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fill_orders_against_invalidation),
      cmocka_unit_test(test_clear_voids_fills_of_every_key),
      cmocka_unit_test(test_an_expired_fill_never_enters),
      cmocka_unit_test(test_bounded_by_entries_and_bytes),
      cmocka_unit_test(test_read_cache_serves_reads_within_lease),
      cmocka_unit_test(test_read_cache_local_writes_invalidate),
      cmocka_unit_test(test_read_cache_expires_with_lease),
      cmocka_unit_test(test_read_cache_can_be_turned_off),
      cmocka_unit_test(test_read_cache_forgets_unmounted_segment),
      cmocka_unit_test(test_read_cache_cleared_on_reregistration),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
