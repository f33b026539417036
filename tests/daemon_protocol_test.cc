// Speaks docs/protocol.md directly to the real mooncaked (with the real master behind
// it): the handshake and its refusals, refusals' reasons, put/get through a shared-memory
// pool, pool range checks, malformed input that must cost only its own connection, a
// client dying in the middle of a staged put, the daemon killed and restarted, a master
// restart, and SIGTERM.
// The read cache has its own suite (daemon_read_cache_test.cc).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/base/error_code.h"
#include "common/uds/uds_ops.h"
#include "include/mooncake_store.h"
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

const std::vector<std::string> kMasterFlags = {"--default_kv_lease_ttl", "500ms"};
// A connect timeout far longer than a refused connection takes on any machine, so that
// "the master is down: refused at once" is told from "waited on it" by a generous bound.
constexpr int kConnectTimeoutS = 10;
const std::vector<std::string> kDaemonFlags = {
    "--heartbeat_interval", "200ms", "--global_segment_size", "256MB",
    "--connect_timeout", std::to_string(kConnectTimeoutS) + "s"};

// Polls fn until it is true, for timeout_ms at most (generous deadlines: what is awaited
// happens, just later on a loaded machine).
template <class F>
bool Eventually(F fn, int timeout_ms = 30000) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (fn()) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int GroupSetup(void** state) {
  auto* f = new Fixture;
  g_fixture = f;
  f->dir = harness::MakeTempDir("mc-daemon-proto-");
  f->socket_path = f->dir + "/run/mooncaked.sock";
  mkdir((f->dir + "/run").c_str(), 0755);  // the daemon makes no directory (issue 30)
  // A short read lease lets space held by leased test objects come back quickly.
  if (!harness::StartMaster(&f->master, &f->master_port, f->dir + "/master.log", kMasterFlags) ||
      !harness::StartDaemon(&f->daemon, f->master_port, f->socket_path, f->dir + "/daemon.log",
                            kDaemonFlags)) {
    return -1;
  }
  *state = f;
  return 0;
}

int GroupTeardown(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  StopFixture(f);
  delete f;
  return 0;
}

void test_hello_returns_host_port(void**) {
  Pool pool(kPoolSize);
  Conn c;
  std::string hostname;
  assert_int_equal(c.Hello(&pool, MOONCAKE_STORE_ABI_VERSION, "", &hostname), 0);
  assert_true(hostname.rfind("127.0.0.1:", 0) == 0);
  int port = std::atoi(hostname.c_str() + 10);
  assert_true(port >= 12300 && port <= 14300);

  uint64_t id = c.next_id++;
  uds::FrameBuilder f(id, static_cast<int64_t>(Op::kHostname), 0);
  uds::Message m;
  assert_int_equal(c.Call(&f, id, &m), 0);
  assert_string_equal(m.args.Str().c_str(), hostname.c_str());
  assert_int_equal(c.Health(), 1);

  // The master address check of setup(): equal passes, anything else is refused.
  Conn same;
  std::string master = "127.0.0.1:" + std::to_string(g_fixture->master_port);
  assert_int_equal(same.Hello(nullptr, MOONCAKE_STORE_ABI_VERSION, master), 0);
  Conn other;
  assert_int_equal(other.Hello(nullptr, MOONCAKE_STORE_ABI_VERSION, "10.1.2.3:50051"), kInvalid);
  assert_true(other.ClosedByPeer());
}

void test_hello_refusals(void**) {
  Pool unsealed(kPoolSize, false);
  Conn a;
  assert_int_equal(a.Hello(&unsealed), kInvalid);
  assert_true(a.ClosedByPeer());

  Pool pool(kPoolSize);
  Conn b;
  assert_int_equal(b.Hello(&pool, MOONCAKE_STORE_ABI_VERSION + 100), kInvalid);
  assert_true(b.ClosedByPeer());

  Conn c;  // a pool size with no descriptor
  assert_int_equal(c.Hello(&pool, MOONCAKE_STORE_ABI_VERSION, "", nullptr, -1), kInvalid);
  assert_true(c.ClosedByPeer());

  Pool small(kPoolSize / 2);  // the descriptor is smaller than the size claimed
  Conn d;
  assert_int_equal(d.Hello(&pool, MOONCAKE_STORE_ABI_VERSION, "", nullptr, small.fd), kInvalid);
  assert_true(d.ClosedByPeer());
}

// HELLO with pool, naming abi and master; the refusal's reason ("" when it connected).
std::string HelloReason(Conn* c, const Pool* pool, uint64_t abi, const std::string& master) {
  uint64_t id = c->next_id++;
  uds::RequestFrame f(id, Op::kHello,
                      uds::HelloArgs{abi, pool ? pool->size : 0, 1, master, ""});
  uds::Message m;
  int64_t code = c->Call(&f, id, &m, pool ? pool->fd : -1);
  return code == 0 ? "" : uds::ReasonOf(m);
}

// The code and reason of one request on c.
template <class Args>
int64_t Refusal(Conn* c, Op op, const Args& args, std::string* reason) {
  uint64_t id = c->next_id++;
  uds::RequestFrame f(id, op, args);
  uds::Message m;
  int64_t code = c->Call(&f, id, &m);
  *reason = uds::ReasonOf(m);
  return code;
}

// Every refusal says why (docs/protocol.md, "Reasons"): the handshake's, and a request's
// -600, naming the rule; answers that are not refusals carry none.
void test_refusals_carry_reasons(void**) {
  Pool pool(kPoolSize);
  Conn old_abi;
  std::string why = HelloReason(&old_abi, &pool, MOONCAKE_STORE_ABI_VERSION + 100, "");
  assert_true(why.find("ABI version " + std::to_string(MOONCAKE_STORE_ABI_VERSION + 100) +
                       ", daemon speaks " + std::to_string(MOONCAKE_STORE_ABI_VERSION)) == 0);
  Conn other_master;
  why = HelloReason(&other_master, &pool, MOONCAKE_STORE_ABI_VERSION, "10.1.2.3:50051");
  std::string ours = "127.0.0.1:" + std::to_string(g_fixture->master_port);
  assert_true(why.find("client expects master 10.1.2.3:50051, daemon uses " + ours) == 0);
  Pool unsealed(kPoolSize, false);
  Conn unsealed_pool;
  assert_false(HelloReason(&unsealed_pool, &unsealed, MOONCAKE_STORE_ABI_VERSION, "").empty());

  Conn c;
  assert_int_equal(c.Hello(&pool), 0);
  std::string reason;
  assert_int_equal(Refusal(&c, Op::kGet, uds::GetArgs{"", 0, 64}, &reason), kInvalid);
  assert_string_equal(reason.c_str(), "key is empty");
  assert_int_equal(Refusal(&c, Op::kGet, uds::GetArgs{std::string(4097, 'k'), 0, 64}, &reason),
                   kInvalid);
  assert_string_equal(reason.c_str(), "key longer than 4096 bytes (4097)");
  assert_int_equal(Refusal(&c, Op::kExist, uds::KeyArgs{std::string("a\0b", 3)}, &reason),
                   kInvalid);
  assert_string_equal(reason.c_str(), "key holds a NUL byte (at byte 1)");
  assert_int_equal(Refusal(&c, Op::kPut, uds::PutArgs{"k", 0, 0, {}}, &reason), kInvalid);
  assert_string_equal(reason.c_str(), "value size 0 is not 1 byte to 4 GiB");
  assert_int_equal(Refusal(&c, Op::kGet, uds::GetArgs{"k", kPoolSize, 64}, &reason), kInvalid);
  assert_string_equal(reason.c_str(), ("pool range [" + std::to_string(kPoolSize) +
                                       ", +64) is not inside the connection's pool of " +
                                       std::to_string(kPoolSize) + " bytes")
                                          .c_str());
  assert_int_equal(Refusal(&c, Op::kGetEnd, uds::StagedIdArgs{999}, &reason), kInvalid);
  assert_string_equal(reason.c_str(), "get id 999 is not open on this connection");
  // A miss is an answer, not a refusal.
  assert_int_equal(Refusal(&c, Op::kGetSize, uds::KeyArgs{"no-such-key"}, &reason),
                   ToInt(ErrorCode::OBJECT_NOT_FOUND));
  assert_string_equal(reason.c_str(), "");
}

void test_put_get_roundtrip(void**) {
  Pool pool(kPoolSize);
  Conn c;
  assert_int_equal(c.Hello(&pool), 0);
  const uint64_t n = 300000;
  Fill(pool.base, n, 1);
  assert_int_equal(c.Put("roundtrip", 0, n), 0);
  assert_int_equal(c.Exist("roundtrip"), 1);
  assert_int_equal(c.Get("roundtrip", 1 << 20, 1 << 20), static_cast<int64_t>(n));
  assert_memory_equal(pool.base, pool.base + (1 << 20), n);

  std::vector<int64_t> v;
  assert_int_equal(c.Ints(Op::kGetSize, [](uds::FrameBuilder* f) { f->args().pack("roundtrip"); },
                          1, &v), 0);
  assert_int_equal(v.at(0), n);

  // put never overwrites: 0, and the old bytes stay.
  Fill(pool.base, n, 2);
  assert_int_equal(c.Put("roundtrip", 0, n), 0);
  assert_int_equal(c.Get("roundtrip", 2 << 20, 1 << 20), static_cast<int64_t>(n));
  Fill(pool.base, n, 1);
  assert_memory_equal(pool.base, pool.base + (2 << 20), n);
  // upsert does replace.
  Fill(pool.base, n / 2, 3);
  assert_int_equal(c.Put("roundtrip", 0, n / 2, Op::kUpsert), 0);
  assert_int_equal(c.Get("roundtrip", 2 << 20, 1 << 20), static_cast<int64_t>(n / 2));
  assert_memory_equal(pool.base, pool.base + (2 << 20), n / 2);

  assert_int_equal(c.Get("roundtrip", 0, 100), kInvalid);  // capacity too small
  assert_int_equal(c.Get("no-such-key", 0, 100), ToInt(ErrorCode::OBJECT_NOT_FOUND));
  assert_int_equal(c.Exist("no-such-key"), 0);
  assert_int_equal(c.Put("", 0, 10), kInvalid);
  assert_int_equal(c.Put(std::string(4097, 'k'), 0, 10), kInvalid);

  // Batches: one result per entry; a bad entry does not spoil the others.
  Fill(pool.base, 3000, 4);
  assert_int_equal(c.Ints(Op::kBatchPut, [&](uds::FrameBuilder* f) {
    f->args().pack_array(3);
    for (int i = 0; i < 3; ++i) {
      f->args().pack_array(4);  // [key, pool_offset, size, group]
      f->args().pack("batch-" + std::to_string(i));
      f->args().pack(static_cast<uint64_t>(i == 2 ? kPoolSize : i * 1000));
      f->args().pack(uint64_t{1000});
      f->args().pack("");
    }
    uds::PackValue(f->args(), uds::WireConfig());
  }, 2, &v), 0);
  assert_int_equal(v.size(), 3);
  assert_int_equal(v[0], 0);
  assert_int_equal(v[1], 0);
  assert_int_equal(v[2], kInvalid);
  assert_int_equal(c.Ints(Op::kBatchGet, [&](uds::FrameBuilder* f) {
    f->args().pack_array(3);
    for (int i = 0; i < 3; ++i) {
      f->args().pack_array(3);
      f->args().pack("batch-" + std::to_string(i));
      f->args().pack(static_cast<uint64_t>((3 << 20) + i * 1000));
      f->args().pack(uint64_t{1000});
    }
  }, 1, &v), 0);
  assert_int_equal(v[0], 1000);
  assert_int_equal(v[1], 1000);
  assert_int_equal(v[2], ToInt(ErrorCode::OBJECT_NOT_FOUND));
  assert_memory_equal(pool.base, pool.base + (3 << 20), 2000);
  assert_int_equal(c.Ints(Op::kBatchExist, [&](uds::FrameBuilder* f) {
    f->args().pack_array(3);
    f->args().pack("batch-0");
    f->args().pack("batch-2");
    f->args().pack("");
  }, 1, &v), 0);
  assert_int_equal(v[0], 1);
  assert_int_equal(v[1], 0);
  assert_int_equal(v[2], kInvalid);

  // Staged get, chunk by chunk.
  assert_int_equal(c.Ints(Op::kGetBegin, [](uds::FrameBuilder* f) { f->args().pack("batch-1"); },
                          1, &v), 0);
  uint64_t get_id = static_cast<uint64_t>(v.at(0));
  assert_int_equal(v.at(1), 1000);
  for (uint64_t off = 0; off < 1000; off += 400) {
    uint64_t len = std::min<uint64_t>(400, 1000 - off);
    assert_int_equal(c.Ints(Op::kGetChunk, [&](uds::FrameBuilder* f) {
      f->args().pack(get_id);
      f->args().pack(off);
      f->args().pack((3 << 20) + off);
      f->args().pack(len);
    }, 4), 0);
  }
  assert_memory_equal(pool.base + 1000, pool.base + (3 << 20), 1000);
  assert_int_equal(c.Ints(Op::kGetEnd, [&](uds::FrameBuilder* f) { f->args().pack(get_id); }, 1), 0);

  // Removal, forced and by pattern.
  assert_int_equal(c.Ints(Op::kRemove, [](uds::FrameBuilder* f) {
    f->args().pack("roundtrip");
    f->args().pack(true);
  }, 2), 0);
  assert_int_equal(c.Exist("roundtrip"), 0);
  assert_int_equal(c.Ints(Op::kRemoveByRegex, [](uds::FrameBuilder* f) {
    f->args().pack("^batch-");
    f->args().pack(1);  // an integer flag is accepted too
  }, 2, &v), 0);
  assert_int_equal(v.at(0), 2);
}

void test_many_requests_in_flight(void**) {
  Pool pool(kPoolSize);
  Conn c;
  assert_int_equal(c.Hello(&pool), 0);
  Fill(pool.base, 64 * 1024, 5);
  const int kCount = 64;
  for (int i = 0; i < kCount; ++i) {  // all sent before any answer is read
    uds::FrameBuilder f(1000 + i, static_cast<int64_t>(Op::kPut), 4);
    f.args().pack("inflight-" + std::to_string(i));
    f.args().pack(static_cast<uint64_t>(i * 1024));
    f.args().pack(uint64_t{1024});
    uds::PackValue(f.args(), uds::WireConfig());
    assert_true(c.Send(&f));
  }
  std::map<uint64_t, int64_t> answers;
  for (int i = 0; i < kCount; ++i) {
    uds::Message m;
    assert_true(c.Recv(&m));
    answers[m.id] = m.head;
  }
  assert_int_equal(answers.size(), kCount);
  for (const auto& a : answers) assert_int_equal(a.second, 0);
  assert_int_equal(c.Get("inflight-63", 1 << 20, 1024), 1024);
  assert_memory_equal(pool.base + 63 * 1024, pool.base + (1 << 20), 1024);
}

void test_pool_range_past_end(void**) {
  Pool pool(kPoolSize);
  Conn c;
  assert_int_equal(c.Hello(&pool), 0);
  assert_int_equal(c.Put("range", kPoolSize - 10, 100), kInvalid);
  assert_int_equal(c.Put("range", UINT64_MAX - 5, 100), kInvalid);  // offset + size overflows
  assert_int_equal(c.Put("range", 0, kPoolSize + 1), kInvalid);
  assert_int_equal(c.Get("range", kPoolSize, 1), kInvalid);
  assert_int_equal(c.Exist("range"), 0);
  Conn no_pool;  // no pool at all: every range is outside it
  assert_int_equal(no_pool.Hello(nullptr), 0);
  assert_int_equal(no_pool.Put("range", 0, 1), kInvalid);
}

void test_malformed_input_closes_only_that_connection(void**) {
  Pool pool(kPoolSize);
  Conn healthy;
  assert_int_equal(healthy.Hello(&pool), 0);

  std::vector<std::string> bad;
  std::string garbage(200, '\0');
  Fill(&garbage[0], garbage.size(), 9);
  bad.push_back(Frame(garbage));                      // random bytes
  bad.push_back(std::string("\xff\xff\xff\xff", 4));  // length over 64 MiB
  {
    uds::FrameBuilder f(1, static_cast<int64_t>(Op::kPut), 4);  // truncated msgpack
    f.args().pack("key");
    f.args().pack(0);
    std::string whole(f.data(), f.size());
    bad.push_back(Frame(whole.substr(4, whole.size() - 4 - 2)));
  }
  {
    uds::FrameBuilder f(1, static_cast<int64_t>(Op::kPut), 4);  // key is a number
    f.args().pack(12345);
    f.args().pack(0);
    f.args().pack(10);
    uds::PackValue(f.args(), uds::WireConfig());
    bad.push_back(std::string(f.data(), f.size()));
  }
  {
    uds::FrameBuilder f(1, static_cast<int64_t>(Op::kExist), 2);  // one argument too many
    f.args().pack("key");
    f.args().pack("extra");
    bad.push_back(std::string(f.data(), f.size()));
  }
  {
    uds::FrameBuilder f(1, 99, 0);  // unknown op
    bad.push_back(std::string(f.data(), f.size()));
  }
  {
    uds::FrameBuilder f(1, static_cast<int64_t>(Op::kHello), 4);  // a second HELLO
    f.args().pack(1);
    f.args().pack(0);
    f.args().pack(1);
    f.args().pack("");
    bad.push_back(std::string(f.data(), f.size()));
  }
  for (size_t i = 0; i < bad.size(); ++i) {
    Conn c;
    assert_int_equal(c.Hello(&pool), 0);
    assert_true(c.SendRaw(bad[i]));
    assert_true(c.ClosedByPeer());
    assert_int_equal(healthy.Health(), 1);
  }
  {
    Conn c;  // a first frame that is not HELLO
    uds::FrameBuilder f(1, static_cast<int64_t>(Op::kHealth), 0);
    assert_true(c.Send(&f));
    assert_true(c.ClosedByPeer());
  }
  {
    Conn c;  // a descriptor after HELLO: -600, then closed
    assert_int_equal(c.Hello(&pool), 0);
    uds::FrameBuilder f(7, static_cast<int64_t>(Op::kHealth), 0);
    uds::Message m;
    assert_int_equal(c.Call(&f, 7, &m, pool.fd), kInvalid);
    assert_true(c.ClosedByPeer());
  }
  {
    Conn c;  // a frame cut short by the client's death
    assert_int_equal(c.Hello(&pool), 0);
    std::string partial = Frame(std::string(100, 'x')).substr(0, 20);
    assert_true(c.SendRaw(partial));
  }
  assert_int_equal(healthy.Health(), 1);
  assert_int_equal(healthy.Put("after-garbage", 0, 10), 0);
}

void test_concurrent_connections(void**) {
  constexpr int kThreads = 4;
  constexpr int kIterations = 150;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      Pool pool(1 << 20);
      Conn c;
      if (c.Hello(&pool) != 0) {
        failures[t] = -1;
        return;
      }
      for (int i = 0; i < kIterations; ++i) {
        uint64_t size = 1 + (static_cast<uint64_t>(i) * 7919) % (256 * 1024);
        std::string key = "conc-" + std::to_string(t) + "-" + std::to_string(i);
        Fill(pool.base, size, t * 100000 + i);
        if (c.Put(key, 0, size) != 0 || c.Get(key, 512 * 1024, 512 * 1024) != int64_t(size) ||
            std::memcmp(pool.base, pool.base + 512 * 1024, size) != 0) {
          ++failures[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) assert_int_equal(failures[t], 0);
}

void test_close_with_requests_in_flight(void**) {
  Pool pool(kPoolSize);
  Fill(pool.base, kPoolSize, 31);
  for (int round = 0; round < 5; ++round) {
    Conn c;
    assert_int_equal(c.Hello(&pool), 0);
    for (int i = 0; i < 32; ++i) {
      uds::FrameBuilder f(i + 1, static_cast<int64_t>(Op::kPut), 4);
      f.args().pack("abandoned-" + std::to_string(round) + "-" + std::to_string(i));
      f.args().pack(uint64_t{0});
      f.args().pack(uint64_t{256} << 10);
      uds::PackValue(f.args(), uds::WireConfig());
      assert_true(c.Send(&f));
    }
  }  // closed without reading a single answer
  Conn other;
  assert_int_equal(other.Hello(&pool), 0);
  assert_int_equal(other.Health(), 1);
  // A put whose client vanished before the publish is revoked, never half-visible: each
  // key is either absent or complete and intact. That holds at any moment; the pause
  // (not a wait for anything) only lets most of the abandoned puts end first.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 32; ++i) {
      std::string key = "abandoned-" + std::to_string(round) + "-" + std::to_string(i);
      int64_t got = other.Get(key, 1 << 20, 256 << 10);
      if (got == ToInt(ErrorCode::OBJECT_NOT_FOUND)) continue;
      assert_int_equal(got, 256 << 10);
      assert_memory_equal(pool.base, pool.base + (1 << 20), 256 << 10);
    }
  }
}

void test_client_death_revokes_staged_put(void**) {
  Pool pool(kPoolSize);
  std::vector<int64_t> v;
  {
    Conn dying;
    assert_int_equal(dying.Hello(&pool), 0);
    assert_int_equal(PutBegin(&dying, "half-written", 8 << 20, &v), 0);
    uint64_t put_id = static_cast<uint64_t>(v.at(0));
    assert_int_equal(dying.Ints(Op::kPutChunk, [&](uds::FrameBuilder* f) {
      f->args().pack(put_id);
      f->args().pack(0);
      f->args().pack(0);
      f->args().pack(kPoolSize);
    }, 4), 0);
  }  // closed with half the value written
  Conn other;
  assert_int_equal(other.Hello(&pool), 0);
  assert_int_equal(other.Exist("half-written"), 0);
  // The reservation is revoked (not merely abandoned): a new writer gets the key once the
  // dead connection's teardown is done.
  assert_true(Eventually([&] { return PutBegin(&other, "half-written", 1000, &v) == 0; }));
  uint64_t put_id = static_cast<uint64_t>(v.at(0));
  assert_int_equal(other.Ints(Op::kPutAbort, [&](uds::FrameBuilder* f) { f->args().pack(put_id); },
                              1), 0);
  assert_int_equal(other.Exist("half-written"), 0);

  // A staged put that completes is published; chunks past the value are refused.
  assert_int_equal(PutBegin(&other, "staged", 6000, &v), 0);
  put_id = static_cast<uint64_t>(v.at(0));
  Fill(pool.base, 6000, 11);
  for (uint64_t off = 0; off < 6000; off += 2000) {
    assert_int_equal(other.Ints(Op::kPutChunk, [&](uds::FrameBuilder* f) {
      f->args().pack(put_id);
      f->args().pack(off);
      f->args().pack(off);
      f->args().pack(uint64_t{2000});
    }, 4), 0);
  }
  assert_int_equal(other.Ints(Op::kPutChunk, [&](uds::FrameBuilder* f) {
    f->args().pack(put_id);
    f->args().pack(uint64_t{5000});
    f->args().pack(uint64_t{0});
    f->args().pack(uint64_t{2000});
  }, 4), kInvalid);
  assert_int_equal(other.Exist("staged"), 0);
  assert_int_equal(other.Ints(Op::kPutCommit, [&](uds::FrameBuilder* f) { f->args().pack(put_id); },
                              1), 0);
  assert_int_equal(other.Get("staged", 1 << 20, 6000), 6000);
  assert_memory_equal(pool.base, pool.base + (1 << 20), 6000);
}

void test_daemon_killed_and_restarted(void**) {
  Fixture* f = g_fixture;
  Pool pool(kPoolSize);
  std::string hostname;
  {
    Conn c;
    assert_int_equal(c.Hello(&pool, MOONCAKE_STORE_ABI_VERSION, "", &hostname), 0);
    Fill(pool.base, 4096, 41);
    assert_int_equal(c.Put("before-kill", 0, 4096), 0);
    f->daemon.Stop(SIGKILL, 5000);
    assert_true(c.ClosedByPeer());
  }
  // Same port, so the same name: the new daemon replaces the stale socket file and
  // unmounts the segment its dead predecessor left at the master.
  std::string port = hostname.substr(hostname.rfind(':') + 1);
  std::vector<std::string> flags = kDaemonFlags;
  flags.insert(flags.end(), {"--port", port});
  assert_true(harness::StartDaemon(&f->daemon, f->master_port, f->socket_path,
                                   f->dir + "/daemon2.log", flags));
  assert_int_equal(MasterSegmentCount(f->master_port), 1);
  Conn c;
  std::string again;
  assert_int_equal(c.Hello(&pool, MOONCAKE_STORE_ABI_VERSION, "", &again), 0);
  assert_string_equal(again.c_str(), hostname.c_str());
  assert_int_equal(c.Exist("before-kill"), 0);
  for (int i = 0; i < 20; ++i) {  // every put lands on the live segment
    assert_int_equal(c.Put("after-kill-" + std::to_string(i), 0, 4096), 0);
  }
}

void test_master_restart(void**) {
  Fixture* f = g_fixture;
  Pool pool(kPoolSize);
  Conn c;
  assert_int_equal(c.Hello(&pool), 0);
  Fill(pool.base, 4096, 21);
  assert_int_equal(c.Put("before-restart", 0, 4096), 0);

  f->master.Stop(SIGKILL, 5000);
  // While the master is down: -900 at once (refused, well before the connect timeout), and
  // HEALTH turns 0 within a few heartbeats.
  auto t0 = std::chrono::steady_clock::now();
  assert_int_equal(c.Put("during-outage", 0, 4096), ToInt(ErrorCode::RPC_FAIL));
  assert_true(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(kConnectTimeoutS / 2));
  assert_true(Eventually([&] { return c.Health() == 0; }));
  assert_true(harness::StartMasterOnPort(&f->master, f->master_port, f->dir + "/master2.log",
                                          kMasterFlags));
  // Within a few heartbeats the daemon registers again and re-mounts its segment, with
  // no client request to prompt it.
  assert_true(Eventually([&] { return MasterSegmentCount(f->master_port) != 0; }));
  assert_int_equal(MasterSegmentCount(f->master_port), 1);
  assert_true(Eventually([&] { return c.Put("after-restart", 0, 4096) == 0; }));
  assert_int_equal(c.Get("after-restart", 1 << 20, 4096), 4096);
  assert_memory_equal(pool.base, pool.base + (1 << 20), 4096);
  assert_int_equal(c.Exist("before-restart"), 0);  // the new master never heard of it
  assert_true(Eventually([&] { return c.Health() == 1; }));
}

// Runs last but one: the teardown of its connection unmounts the extra segment (the
// daemon forgets it, then tells the master) while the next test may already be putting,
// and a put the master places in the segment in between answers -800.
void test_extra_segment(void**) {
  Pool pool(kPoolSize);
  Conn c;
  assert_int_equal(c.Hello(&pool), 0);
  assert_int_equal(c.Ints(Op::kMountSegment, [](uds::FrameBuilder* f) {
    f->args().pack(uint64_t{16 << 20});
  }, 1), 0);
  assert_int_equal(c.Ints(Op::kMountSegment, [](uds::FrameBuilder* f) { f->args().pack(0); }, 1),
                   kInvalid);
  c.Close();  // unmounted by the teardown; the daemon keeps serving
  Conn d;
  assert_int_equal(d.Hello(&pool), 0);
  assert_int_equal(d.Health(), 1);
}

void test_sigterm_exits_cleanly(void**) {
  Fixture* f = g_fixture;
  {
    Pool pool(kPoolSize);
    Conn c;  // an idle client does not hold the shutdown up
    assert_int_equal(c.Hello(&pool), 0);
    int status = f->daemon.Stop(SIGTERM, 8000);
    assert_true(status != -1);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(c.ClosedByPeer());
  }
  struct stat st;
  assert_int_not_equal(stat(f->socket_path.c_str(), &st), 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hello_returns_host_port),
      cmocka_unit_test(test_hello_refusals),
      cmocka_unit_test(test_refusals_carry_reasons),
      cmocka_unit_test(test_put_get_roundtrip),
      cmocka_unit_test(test_many_requests_in_flight),
      cmocka_unit_test(test_pool_range_past_end),
      cmocka_unit_test(test_malformed_input_closes_only_that_connection),
      cmocka_unit_test(test_concurrent_connections),
      cmocka_unit_test(test_close_with_requests_in_flight),
      cmocka_unit_test(test_client_death_revokes_staged_put),
      cmocka_unit_test(test_daemon_killed_and_restarted),
      cmocka_unit_test(test_master_restart),
      cmocka_unit_test(test_extra_segment),
      cmocka_unit_test(test_sigterm_exits_cleanly),
  };
  return cmocka_run_group_tests(tests, GroupSetup, GroupTeardown);
}
