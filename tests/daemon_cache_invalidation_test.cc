// The writer's half of fresh reads across hosts (daemon/cluster/cache_invalidator.h), in one
// process over real loopback sockets: the INVALIDATE payload and its hostile forms, the
// holder's handler, a remote invalidation voiding a read-cache fill that was in flight,
// and Forget's waits: none for a holder that answers, its deadline (no longer) for one
// that is stopped, refuses or has no address, and holders told in parallel.
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/base/error_code.h"
#include "common/base/little_endian.h"
#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "daemon/cluster/cache_invalidator.h"
#include "daemon/cluster/read_cache.h"
#include "daemon/transfer/tcp_transport.h"
#include "daemon/transfer/transfer_protocol.h"
#include "daemon/transfer/transfer_server.h"
#include "include/mooncake_store.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

using namespace mooncake;
using Clock = std::chrono::steady_clock;

namespace {

std::string Address(int port) { return "127.0.0.1:" + std::to_string(port); }

// A live entry for key (a remote replica: the cache needs no memory behind it).
ReadCache::Entry EntryFor(int64_t ms) {
  ReadCache::Entry e;
  e.where.remote = std::make_shared<RemoteSegment>();
  e.where.segment_id = 7;
  e.size = 100;
  e.deadline = Clock::now() + std::chrono::milliseconds(ms);
  return e;
}

bool Cached(ReadCache& cache, const std::string& key) {
  ReadCache::Entry e;
  return cache.Lookup(key, &e);
}

// A holder daemon: a read cache behind a transfer port that answers INVALIDATE.
struct Holder {
  Holder() : cache(true) {
    int fd = testing::ListenOnLoopback(&port);
    assert_true(fd >= 0);
    server = std::make_unique<TransferServer>(
        fd, [](int64_t) { return std::shared_ptr<SegmentMemory>(); }, TransferServer::Options());
    server->SetControlHandler(transfer::ControlChannel::kCacheInvalidate,
                              CacheInvalidator::Handler(&cache));
    server->Start();
  }
  ReadCache cache;
  int port = 0;
  std::unique_ptr<TransferServer> server;
};

// The writer's side: a TCP transport (the CONTROL caller) and the invalidator.
struct Writer {
  Writer() : tcp(Options()), invalidator(&tcp) {}
  static TcpTransport::Options Options() {
    TcpTransport::Options o;
    o.address = "127.0.0.1:1";  // the name its HELLO gives (an empty one is refused)
    o.connect_timeout_ms = 1000;
    o.stall_timeout_ms = 5000;  // longer than the leases below: the deadline must bound
    return o;
  }
  TcpTransport tcp;
  CacheInvalidator invalidator;
};

rpc::CacheHolder HolderAt(int64_t daemon, const std::string& address, int64_t ms_left,
                          std::vector<int32_t> keys = {}) {
  rpc::CacheHolder h;
  h.daemon_id = daemon;
  h.address = address;
  h.ms_left = ms_left;
  h.keys = std::move(keys);
  return h;
}

StaleCaches Stale(std::vector<rpc::CacheHolder> holders) {
  StaleCaches s;
  s.holders = std::move(holders);
  s.received_at = Clock::now();
  return s;
}

int64_t MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// ---- the payload -----------------------------------------------------------------------

void test_payloads_round_trip_and_split(void**) {
  // The longest key a tenant can have stored travels too (common/base/tenant_key.h).
  std::vector<std::string> keys = {
      "a", tenant_key::Encode(std::string(tenant_key::kMaxTenantLen, 't'),
                              std::string(MOONCAKE_STORE_MAX_KEY_LEN, 'k')),
      "ccc"};
  std::vector<std::string> payloads = invalidation::EncodeKeys(keys, {}, 1 << 16);
  assert_int_equal(payloads.size(), 1);
  bool everything = true;
  std::vector<std::string> got;
  assert_true(invalidation::Decode(payloads[0], &everything, &got));
  assert_false(everything);
  assert_true(got == keys);
  // Only the chosen ones, in order.
  payloads = invalidation::EncodeKeys(keys, {0, 2}, 1 << 16);
  assert_true(invalidation::Decode(payloads[0], &everything, &got));
  assert_true(got == (std::vector<std::string>{"a", "ccc"}));
  // Many keys go in several payloads, none over the bound, all of them there.
  std::vector<std::string> many;
  for (int i = 0; i < 5000; ++i) many.push_back("key-" + std::to_string(i) + std::string(20, 'x'));
  payloads = invalidation::EncodeKeys(many, {}, transfer::kMaxControlPayload);
  assert_true(payloads.size() > 1);
  std::vector<std::string> all;
  for (const std::string& p : payloads) {
    assert_true(p.size() <= transfer::kMaxControlPayload);
    assert_true(invalidation::Decode(p, &everything, &got));
    all.insert(all.end(), got.begin(), got.end());
  }
  assert_true(all == many);
  assert_true(invalidation::Decode(invalidation::EncodeEverything(), &everything, &got));
  assert_true(everything);
  assert_true(got.empty());
}

void test_hostile_payloads_are_refused(void**) {
  bool everything = false;
  std::vector<std::string> keys;
  std::string one = invalidation::EncodeKeys({"key"}, {}, 1 << 16)[0];
  auto refused = [&](const std::string& p) { return !invalidation::Decode(p, &everything, &keys); };
  assert_true(refused(""));
  assert_true(refused(one.substr(0, 4)));                  // a short header
  assert_true(refused(one.substr(0, one.size() - 1)));     // a short key
  assert_true(refused(one + "x"));                         // bytes left over
  assert_true(refused(invalidation::EncodeEverything() + "x"));
  std::string what = one;
  what[0] = 3;  // neither keys nor everything
  assert_true(refused(what));
  // A count the payload cannot hold: refused before anything is reserved for it.
  std::string lie;
  AppendLittleEndian(&lie, 1, 1);
  AppendLittleEndian(&lie, 0xFFFFFFFF, 4);
  assert_true(refused(lie));
  // Keys of length 0 or over the limit.
  std::string empty_key;
  AppendLittleEndian(&empty_key, 1, 1);
  AppendLittleEndian(&empty_key, 1, 4);
  AppendLittleEndian(&empty_key, 0, 2);
  assert_true(refused(empty_key));
  std::string long_key;
  AppendLittleEndian(&long_key, 1, 1);
  AppendLittleEndian(&long_key, 1, 4);
  AppendLittleEndian(&long_key, tenant_key::kMaxStoredKeyLen + 1, 2);
  long_key += std::string(tenant_key::kMaxStoredKeyLen + 1, 'k');
  assert_true(refused(long_key));
  // The handler answers -600 and forgets nothing.
  ReadCache cache(true);
  cache.Fill("key", cache.Begin("key"), EntryFor(5000));
  std::string reply = "untouched";
  assert_int_equal(ToInt(CacheInvalidator::Handler(&cache)(lie, &reply)),
                   ToInt(ErrorCode::INVALID_PARAMS));
  assert_true(Cached(cache, "key"));
}

void test_handler_forgets_keys_or_everything(void**) {
  ReadCache cache(true);
  for (const char* k : {"a", "b", "c"}) cache.Fill(k, cache.Begin(k), EntryFor(5000));
  ControlHandler handler = CacheInvalidator::Handler(&cache);
  std::string reply = "x";
  assert_int_equal(ToInt(handler(invalidation::EncodeKeys({"a", "c"}, {}, 1 << 16)[0], &reply)), 0);
  assert_true(reply.empty());
  assert_false(Cached(cache, "a"));
  assert_true(Cached(cache, "b"));
  assert_false(Cached(cache, "c"));
  assert_int_equal(ToInt(handler(invalidation::EncodeEverything(), &reply)), 0);
  assert_int_equal(cache.size(), 0);
}

// ---- over the transfer port ------------------------------------------------------------

// The holder's read asked the master before the change (its ticket is older), and its
// answer arrives after the INVALIDATE: the fill is dropped, so the old value is not cached.
// A read that began after the INVALIDATE fills as usual.
void test_remote_invalidation_voids_a_fill_in_flight(void**) {
  Holder holder;
  Writer writer;
  ReadCache::Ticket before = holder.cache.Begin("k");
  holder.cache.Fill("other", holder.cache.Begin("other"), EntryFor(5000));
  CacheInvalidator::Outcome out = writer.invalidator.Forget(
      Stale({HolderAt(2, Address(holder.port), 5000)}), {"k"}, false);
  assert_int_equal(out.told, 1);
  assert_int_equal(out.waited_out, 0);
  holder.cache.Fill("k", before, EntryFor(5000));
  assert_false(Cached(holder.cache, "k"));
  assert_true(Cached(holder.cache, "other"));  // only k was named
  holder.cache.Fill("k", holder.cache.Begin("k"), EntryFor(5000));
  assert_true(Cached(holder.cache, "k"));
  // A fill that completed before the INVALIDATE is erased by it; everything goes with
  // "everything", fills in flight for any key included.
  ReadCache::Ticket pending = holder.cache.Begin("late");
  out = writer.invalidator.Forget(Stale({HolderAt(2, Address(holder.port), 5000)}), {}, true);
  assert_int_equal(out.told, 1);
  assert_int_equal(holder.cache.size(), 0);
  holder.cache.Fill("late", pending, EntryFor(5000));
  assert_false(Cached(holder.cache, "late"));
}

void test_a_batch_tells_each_holder_its_own_keys(void**) {
  Holder h2, h3;
  Writer writer;
  for (const char* k : {"k0", "k1", "k2"}) {
    h2.cache.Fill(k, h2.cache.Begin(k), EntryFor(5000));
    h3.cache.Fill(k, h3.cache.Begin(k), EntryFor(5000));
  }
  CacheInvalidator::Outcome out = writer.invalidator.Forget(
      Stale({HolderAt(2, Address(h2.port), 5000, {0, 2}), HolderAt(3, Address(h3.port), 5000, {1})}),
      {"k0", "k1", "k2"}, false);
  assert_int_equal(out.told, 2);
  assert_false(Cached(h2.cache, "k0"));
  assert_true(Cached(h2.cache, "k1"));
  assert_false(Cached(h2.cache, "k2"));
  assert_true(Cached(h3.cache, "k0"));
  assert_false(Cached(h3.cache, "k1"));
  assert_true(Cached(h3.cache, "k2"));
}

// A holder that cannot answer is waited for until its deadline, no longer (the transport's
// stall timeout is 5 s): stopped (the kernel accepts, nobody reads), gone (refused), or
// without an address. Meanwhile a holder that answers is told at once, in parallel.
void test_unanswering_holders_are_waited_out_to_their_deadline(void**) {
  Holder live;
  Writer writer;
  int stopped_port = 0;
  int stopped = testing::ListenOnLoopback(&stopped_port);  // accepts, never answers
  assert_true(stopped >= 0);
  int gone_port = 0;
  close(testing::ListenOnLoopback(&gone_port));  // nothing listens there
  live.cache.Fill("k", live.cache.Begin("k"), EntryFor(5000));
  constexpr int64_t kLeft = 600;
  for (const std::string& address : {Address(stopped_port), Address(gone_port), std::string()}) {
    Clock::time_point t0 = Clock::now();
    CacheInvalidator::Outcome out = writer.invalidator.Forget(
        Stale({HolderAt(9, address, kLeft), HolderAt(2, Address(live.port), 5000)}), {"k"}, false);
    int64_t took = MsSince(t0);
    assert_int_equal(out.told, 1);
    assert_int_equal(out.waited_out, 1);
    assert_true(took >= kLeft - 5);
    assert_true(took < kLeft + 3000);  // the deadline, not the 5 s stall timeout
    assert_false(Cached(live.cache, "k"));
    live.cache.Fill("k", live.cache.Begin("k"), EntryFor(5000));
  }
  close(stopped);
}

void test_nobody_to_tell_costs_nothing(void**) {
  Writer writer;
  Clock::time_point t0 = Clock::now();
  CacheInvalidator::Outcome out = writer.invalidator.Forget(Stale({}), {"k"}, false);
  assert_int_equal(out.told + out.waited_out, 0);
  // A holder whose lease already ended by the time the reply was read: nothing to wait for.
  // Its lease is long, so that waiting it out by mistake would take far longer than a
  // loaded machine takes to do nothing (the bound below tells the two apart).
  constexpr int64_t kLease = 60000;
  StaleCaches late = Stale({HolderAt(2, "", kLease)});
  late.received_at -= std::chrono::milliseconds(kLease + 100);
  out = writer.invalidator.Forget(late, {"k"}, false);
  assert_int_equal(out.told + out.waited_out, 0);
  assert_true(MsSince(t0) < kLease / 4);
}

}  // namespace

int main() {
  SetLogLevel(LogLevel::kError);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_payloads_round_trip_and_split),
      cmocka_unit_test(test_hostile_payloads_are_refused),
      cmocka_unit_test(test_handler_forgets_keys_or_everything),
      cmocka_unit_test(test_remote_invalidation_voids_a_fill_in_flight),
      cmocka_unit_test(test_a_batch_tells_each_holder_its_own_keys),
      cmocka_unit_test(test_unanswering_holders_are_waited_out_to_their_deadline),
      cmocka_unit_test(test_nobody_to_tell_costs_nothing),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
