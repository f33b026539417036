// Speaks docs/protocol.md directly to the real mooncaked (with the real master behind
// it): the handshake and its refusals, put/get through a shared-memory pool, pool range
// checks, malformed input that must cost only its own connection, a client dying in the
// middle of a staged put, the read cache (reads inside the lease skip the master; local
// writes invalidate), a master restart, and SIGTERM.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>

#include "MasterService.h"
#include "common/error_code.h"
#include "common/uds_protocol.h"
#include "include/mooncake_store.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

namespace uds = mooncake::uds;
namespace harness = mooncake::testing;
using mooncake::ErrorCode;
using mooncake::ToInt;
using uds::Op;
using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TFramedTransport;
using apache::thrift::transport::TSocket;

namespace {

constexpr uint64_t kPoolSize = 4 << 20;
const int32_t kInvalid = ToInt(ErrorCode::INVALID_PARAMS);
const std::vector<std::string> kMasterFlags = {"--default_kv_lease_ttl", "500ms"};

struct Fixture {
  harness::ChildProcess master;
  harness::ChildProcess daemon;
  std::string dir;
  std::string socket_path;
  int master_port = 0;
};
Fixture* g_fixture = nullptr;

// A sealed memfd pool, mapped here as libmc would.
struct Pool {
  int fd = -1;
  char* base = nullptr;
  uint64_t size = 0;
  explicit Pool(uint64_t bytes, bool seal = true) : size(bytes) {
    fd = memfd_create("test-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, static_cast<off_t>(bytes)), 0);
    if (seal) assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    base = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    assert_true(base != MAP_FAILED);
  }
  ~Pool() {
    munmap(base, size);
    close(fd);
  }
};

// One connection to the daemon, with blocking request/response helpers.
struct Conn {
  int fd = -1;
  uint64_t next_id = 1;
  uds::FrameReader reader;

  Conn() : Conn(g_fixture->socket_path) {}
  explicit Conn(const std::string& socket_path) {
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, socket_path.c_str());
    assert_int_equal(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~Conn() { Close(); }
  void Close() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  bool SendRaw(const std::string& bytes) {
    return uds::SendFrame(fd, bytes.data(), bytes.size());
  }
  bool Send(uds::FrameBuilder* frame, int pass_fd = -1) {
    return uds::SendFrame(fd, frame->data(), frame->size(), pass_fd);
  }
  // false on end-of-file or timeout.
  bool Recv(uds::Message* out) {
    std::string payload;
    bool oversized = false;
    while (!reader.Next(&payload, &oversized)) {
      if (reader.ReadFrom(fd) != uds::FrameReader::Status::kOk) return false;
    }
    return uds::ParseMessage(payload.data(), payload.size(), out);
  }
  // True when the daemon closed the connection (EOF within 5 s, no frame first).
  bool ClosedByPeer() {
    uds::Message m;
    return !Recv(&m);
  }
  // Sends, then waits for the response with the same id (requests here are sequential).
  int64_t Call(uds::FrameBuilder* frame, uint64_t id, uds::Message* out, int pass_fd = -1) {
    if (!Send(frame, pass_fd)) return -9999;
    if (!Recv(out)) return -9998;
    assert_int_equal(out->id, id);
    return out->head;
  }
  int64_t Hello(const Pool* pool, uint64_t abi = MOONCAKE_STORE_ABI_VERSION,
                const std::string& master = "", std::string* hostname = nullptr,
                int override_fd = -2) {
    uint64_t id = next_id++;
    uds::FrameBuilder f(id, static_cast<int64_t>(Op::kHello), 4);
    f.args().pack(abi);
    f.args().pack(pool ? pool->size : uint64_t{0});
    f.args().pack(static_cast<uint64_t>(getpid()));
    f.args().pack(master);
    uds::Message m;
    int pass = override_fd != -2 ? override_fd : (pool ? pool->fd : -1);
    int64_t code = Call(&f, id, &m, pass);
    if (code == 0 && hostname) *hostname = m.args.Str();
    return code;
  }
  // Ops whose results are integers: returns the code, fills *values.
  int64_t Ints(Op op, const std::function<void(uds::FrameBuilder*)>& pack, uint32_t argc,
               std::vector<int64_t>* values = nullptr) {
    uint64_t id = next_id++;
    uds::FrameBuilder f(id, static_cast<int64_t>(op), argc);
    pack(&f);
    uds::Message m;
    int64_t code = Call(&f, id, &m);
    if (values) {
      values->clear();
      for (size_t i = 0; i < m.args.size(); ++i) values->push_back(m.args.I64());
    }
    return code;
  }
  int64_t Put(const std::string& key, uint64_t offset, uint64_t size, Op op = Op::kPut) {
    return Ints(op, [&](uds::FrameBuilder* f) {
      f->args().pack(key);
      f->args().pack(offset);
      f->args().pack(size);
      f->PackConfig(uds::WireConfig());
    }, 4);
  }
  // Bytes read, or a code.
  int64_t Get(const std::string& key, uint64_t offset, uint64_t capacity) {
    std::vector<int64_t> v;
    int64_t code = Ints(Op::kGet, [&](uds::FrameBuilder* f) {
      f->args().pack(key);
      f->args().pack(offset);
      f->args().pack(capacity);
    }, 3, &v);
    return code != 0 ? code : v.at(0);
  }
  // [bytes or code, ...] of one BATCH_GET; every entry reads into the same capacity.
  int64_t BatchGet(const std::vector<std::string>& keys, uint64_t offset, uint64_t capacity,
                   std::vector<int64_t>* v) {
    return Ints(Op::kBatchGet, [&](uds::FrameBuilder* f) {
      f->args().pack_array(static_cast<uint32_t>(keys.size()));
      for (size_t i = 0; i < keys.size(); ++i) {
        f->args().pack_array(3);
        f->args().pack(keys[i]);
        f->args().pack(offset + i * capacity);
        f->args().pack(capacity);
      }
    }, 1, v);
  }
  int64_t GetSize(const std::string& key) {
    std::vector<int64_t> v;
    int64_t code = Ints(Op::kGetSize, [&](uds::FrameBuilder* f) { f->args().pack(key); }, 1, &v);
    return code != 0 ? code : v.at(0);
  }
  int64_t Remove(const std::string& key) {
    return Ints(Op::kRemove, [&](uds::FrameBuilder* f) {
      f->args().pack(key);
      f->args().pack(true);
    }, 2);
  }
  int64_t Exist(const std::string& key) {
    std::vector<int64_t> v;
    int64_t code = Ints(Op::kExist, [&](uds::FrameBuilder* f) { f->args().pack(key); }, 1, &v);
    return code != 0 ? code : v.at(0);
  }
  int64_t Health() {
    std::vector<int64_t> v;
    int64_t code = Ints(Op::kHealth, [](uds::FrameBuilder*) {}, 0, &v);
    return code != 0 ? code : v.at(0);
  }
};

void Fill(char* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<char>(rng());
}

int GroupSetup(void** state) {
  auto* f = new Fixture;
  g_fixture = f;
  f->dir = harness::MakeTempDir("mc-daemon-proto-");
  f->socket_path = f->dir + "/run/mooncaked.sock";  // the daemon creates run/
  // A short read lease lets space held by leased test objects come back quickly.
  if (!harness::StartMaster(&f->master, &f->master_port, f->dir + "/master.log", kMasterFlags) ||
      !harness::StartDaemon(&f->daemon, f->master_port, f->socket_path, f->dir + "/daemon.log",
                            {"--heartbeat_interval", "200ms", "--global_segment_size", "256MB"})) {
    return -1;
  }
  *state = f;
  return 0;
}

int GroupTeardown(void** state) {
  auto* f = static_cast<Fixture*>(*state);
  if (f->daemon.running()) f->daemon.Stop(SIGKILL, 2000);
  f->master.Stop(SIGTERM, 5000);
  if (std::getenv("MC_KEEP_TEST_DIR") == nullptr) {
    harness::RemoveTree(f->dir);
  } else {
    std::printf("logs kept in %s\n", f->dir.c_str());
  }
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
      f->args().pack_array(3);
      f->args().pack("batch-" + std::to_string(i));
      f->args().pack(static_cast<uint64_t>(i == 2 ? kPoolSize : i * 1000));
      f->args().pack(uint64_t{1000});
    }
    f->PackConfig(uds::WireConfig());
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
    f.PackConfig(uds::WireConfig());
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

std::string Frame(const std::string& payload) {
  uint32_t n = static_cast<uint32_t>(payload.size());
  std::string out(reinterpret_cast<const char*>(&n), 4);  // little-endian host
  return out + payload;
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
    f.PackConfig(uds::WireConfig());
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

int64_t PutBegin(Conn* c, const std::string& key, uint64_t size, std::vector<int64_t>* v) {
  return c->Ints(Op::kPutBegin, [&](uds::FrameBuilder* f) {
    f->args().pack(key);
    f->args().pack(size);
    f->PackConfig(uds::WireConfig());
    f->args().pack(false);
  }, 4, v);
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
      f.PackConfig(uds::WireConfig());
      assert_true(c.Send(&f));
    }
  }  // closed without reading a single answer
  Conn other;
  assert_int_equal(other.Hello(&pool), 0);
  assert_int_equal(other.Health(), 1);
  // A put whose client vanished before the publish is revoked, never half-visible: each
  // key is either absent or complete and intact.
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
  // The reservation is revoked (not merely abandoned): a new writer gets the key at once.
  int64_t code = -1;
  for (int i = 0; i < 100 && code != 0; ++i) {
    code = PutBegin(&other, "half-written", 1000, &v);
    if (code != 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  assert_int_equal(code, 0);
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

// ---- the read cache ----

// A master and daemon of the test's own, so that it can choose the lease and stop the
// master (SIGSTOP) without disturbing the shared fixture.
struct OwnCluster {
  harness::ChildProcess master;
  harness::ChildProcess daemon;
  std::string dir;
  std::string socket_path;
  int master_port = 0;
  bool paused = false;

  OwnCluster(const std::string& lease, std::vector<std::string> daemon_flags) {
    dir = harness::MakeTempDir("mc-daemon-cache-");
    socket_path = dir + "/mooncaked.sock";
    // A short RPC timeout bounds what a request costs while the master is stopped.
    daemon_flags.insert(daemon_flags.begin(), {"--rpc_timeout", "500ms", "--heartbeat_interval",
                                               "200ms", "--global_segment_size", "64MB"});
    bool ok = harness::StartMaster(&master, &master_port, dir + "/master.log",
                                   {"--default_kv_lease_ttl", lease}) &&
              harness::StartDaemon(&daemon, master_port, socket_path, dir + "/daemon.log",
                                   daemon_flags);
    assert_true(ok);
  }
  ~OwnCluster() {
    Resume();
    daemon.Stop(SIGKILL, 2000);
    master.Stop(SIGKILL, 2000);
    if (std::getenv("MC_KEEP_TEST_DIR") == nullptr) harness::RemoveTree(dir);
  }
  // A stopped master accepts connections (the kernel does) but never answers: whatever
  // reaches it now fails with -900 or -901 after the daemon's --rpc_timeout.
  void Pause() {
    assert_int_equal(kill(master.pid(), SIGSTOP), 0);
    paused = true;
    // kill() returns before every thread has stopped; one still running could answer.
    assert_true(AllThreadsStopped(master.pid()));
  }
  static bool AllThreadsStopped(pid_t pid) {
    std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    for (int attempt = 0; attempt < 200; ++attempt) {
      bool all = true;
      for (const auto& t : std::filesystem::directory_iterator(tasks)) {
        std::ifstream stat(t.path() / "stat");
        std::string line;
        std::getline(stat, line);
        size_t paren = line.rfind(')');  // the state follows the command name
        if (paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'T') {
          all = false;
        }
      }
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  void Resume() {
    if (paused) kill(master.pid(), SIGCONT);
    paused = false;
  }
};

bool MasterUnreachable(int64_t code) {
  return code == ToInt(ErrorCode::RPC_FAIL) || code == ToInt(ErrorCode::RPC_TIMEOUT);
}

int64_t ElapsedMs(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               since).count();
}

void test_read_cache_serves_reads_within_lease(void**) {
  OwnCluster cluster("10s", {});
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
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) assert_int_equal(c.Get("cached", 1 << 20, 4096), 4096);
  assert_memory_equal(pool.base, pool.base + (1 << 20), 4096);
  assert_int_equal(c.Get("cached-big", 2 << 20, 1 << 20), 300000);
  assert_memory_equal(pool.base, pool.base + (2 << 20), 300000);
  assert_int_equal(c.Exist("cached"), 1);
  assert_int_equal(c.GetSize("cached"), 4096);
  assert_int_equal(c.Get("cached", 0, 100), kInvalid);  // the cached size is checked too
  assert_true(ElapsedMs(t0) < 400);  // never waited on the stopped master
  // A batch takes what the cache has and asks the master only for the rest.
  std::vector<int64_t> v;
  std::memset(pool.base + (1 << 20), 0, 4096);
  assert_int_equal(c.BatchGet({"cached", "never-read"}, 1 << 20, 4096, &v), 0);
  assert_int_equal(v.at(0), 4096);
  assert_true(MasterUnreachable(v.at(1)));
  assert_memory_equal(pool.base, pool.base + (1 << 20), 4096);
  // Anything else does reach the master, and fails within the RPC timeout.
  t0 = std::chrono::steady_clock::now();
  assert_true(MasterUnreachable(c.Get("never-read", 1 << 20, 4096)));
  assert_true(MasterUnreachable(c.Exist("never-read")));
  assert_true(ElapsedMs(t0) < 5000);
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
    f->PackConfig(uds::WireConfig());
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
  OwnCluster cluster("10s", {"--read_cache", "false"});
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
  assert_true(ElapsedMs(t0) < 400);
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

size_t MasterSegmentCount(int port);

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

// How many segments the master has mounted, asked over Thrift as a daemon would.
size_t MasterSegmentCount(int port) {
  try {
    auto socket = std::make_shared<TSocket>("127.0.0.1", port);
    socket->setRecvTimeout(2000);
    auto transport = std::make_shared<TFramedTransport>(socket);
    transport->open();
    mooncake::rpc::MasterServiceClient client(std::make_shared<TBinaryProtocol>(transport));
    std::vector<mooncake::rpc::SegmentInfo> segments;
    client.GetAllSegments(segments);
    transport->close();
    return segments.size();
  } catch (const std::exception&) {
    return 0;
  }
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
  assert_true(harness::StartDaemon(&f->daemon, f->master_port, f->socket_path,
                                   f->dir + "/daemon2.log",
                                   {"--heartbeat_interval", "200ms", "--global_segment_size",
                                    "256MB", "--port", port}));
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
  // While the master is down: quick -900, and HEALTH turns 0 within a few heartbeats.
  auto t0 = std::chrono::steady_clock::now();
  assert_int_equal(c.Put("during-outage", 0, 4096), ToInt(ErrorCode::RPC_FAIL));
  assert_true(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
  for (int i = 0; i < 50 && c.Health() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  assert_int_equal(c.Health(), 0);
  assert_true(harness::StartMasterOnPort(&f->master, f->master_port, f->dir + "/master2.log",
                                          kMasterFlags));
  // Within a few heartbeats the daemon registers again and re-mounts its segment, with
  // no client request to prompt it.
  size_t segments = 0;
  for (int i = 0; i < 100 && segments == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    segments = MasterSegmentCount(f->master_port);
  }
  assert_int_equal(segments, 1);
  int64_t code = -1;
  for (int i = 0; i < 100 && code != 0; ++i) {
    code = c.Put("after-restart", 0, 4096);
    if (code != 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  assert_int_equal(code, 0);
  assert_int_equal(c.Get("after-restart", 1 << 20, 4096), 4096);
  assert_memory_equal(pool.base, pool.base + (1 << 20), 4096);
  assert_int_equal(c.Exist("before-restart"), 0);  // the new master never heard of it
  for (int i = 0; i < 50 && c.Health() != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  assert_int_equal(c.Health(), 1);
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
      cmocka_unit_test(test_put_get_roundtrip),
      cmocka_unit_test(test_many_requests_in_flight),
      cmocka_unit_test(test_pool_range_past_end),
      cmocka_unit_test(test_malformed_input_closes_only_that_connection),
      cmocka_unit_test(test_concurrent_connections),
      cmocka_unit_test(test_close_with_requests_in_flight),
      cmocka_unit_test(test_client_death_revokes_staged_put),
      cmocka_unit_test(test_extra_segment),
      cmocka_unit_test(test_read_cache_serves_reads_within_lease),
      cmocka_unit_test(test_read_cache_local_writes_invalidate),
      cmocka_unit_test(test_read_cache_expires_with_lease),
      cmocka_unit_test(test_read_cache_can_be_turned_off),
      cmocka_unit_test(test_read_cache_forgets_unmounted_segment),
      cmocka_unit_test(test_read_cache_cleared_on_reregistration),
      cmocka_unit_test(test_daemon_killed_and_restarted),
      cmocka_unit_test(test_master_restart),
      cmocka_unit_test(test_sigterm_exits_cleanly),
  };
  return cmocka_run_group_tests(tests, GroupSetup, GroupTeardown);
}
