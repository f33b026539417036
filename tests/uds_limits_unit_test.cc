// Issue 11's Unix-socket limits, unit by unit (no master, no daemon process):
//  - frame decode (common/uds/uds_protocol.h): nesting, arrays, maps, ext, string length,
//    objects per frame and trailing bytes are refused with a reason; a message parsed in
//    place points into its payload, a detached one does not;
//  - FrameReader: its buffer grows to one announced frame and no further, never reads an
//    oversized one, and is given back once consumed;
//  - PoolFences (daemon/service/pool_fences.h): a fence waits exactly for earlier connections of
//    its pool and is answered by the teardown that completes it;
//  - libmc's Pool pins and PoolQuarantine (libmc/pool_quarantine.h): memory held until the
//    fence's answer or the daemon's exit, then given back.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/uds/uds_ops.h"
#include "daemon/service/client_connection.h"
#include "daemon/service/pool_fences.h"
#include "libmc/pool.h"
#include "libmc/pool_quarantine.h"
#include "tests/cmocka_cpp.h"

using namespace mooncake;
using namespace mooncake::uds;

namespace {

// ---- frame decode ----

// [1, 2, args] with args packed by fill, as a payload.
template <class Fill>
std::string Payload(Fill fill) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(3);
  pk.pack(1);
  pk.pack(2);
  fill(pk);
  return std::string(buf.data(), buf.size());
}

bool Parses(const std::string& payload, std::string* why = nullptr) {
  Message m;
  std::string reason;
  bool ok = ParseMessage(payload.data(), payload.size(), &m, &reason);
  if (why != nullptr) *why = reason;
  return ok;
}

void test_decode_refuses_what_exceeds_the_limits(void**) {
  std::string why;
  // Nesting: the top array and args are 2 levels; kMaxDepth in all is fine, one more not.
  auto nested = [](size_t levels) {
    return Payload([levels](msgpack::packer<msgpack::sbuffer>& pk) {
      for (size_t i = 0; i < levels; ++i) pk.pack_array(1);
      pk.pack_nil();
    });
  };
  assert_true(Parses(nested(kMaxDepth - 1)));
  assert_false(Parses(nested(kMaxDepth), &why));
  assert_string_equal(why.c_str(),
                      "an array, string or nesting over the protocol's limits, or a map or ext");
  // Maps and ext values are in no op.
  assert_false(Parses(Payload([](msgpack::packer<msgpack::sbuffer>& pk) {
    pk.pack_map(1);
    pk.pack(1);
    pk.pack(2);
  })));
  assert_false(Parses(Payload([](msgpack::packer<msgpack::sbuffer>& pk) {
    pk.pack_array(1);
    pk.pack_ext(1, 7);
    pk.pack_ext_body("x", 1);
  })));
  // A string of kMaxStringBytes is fine, one byte more is not.
  for (size_t n : {kMaxStringBytes, kMaxStringBytes + 1}) {
    std::string s(n, 's');
    bool ok = Parses(Payload([&](msgpack::packer<msgpack::sbuffer>& pk) {
      pk.pack_array(1);
      pk.pack(s);
    }));
    assert_int_equal(ok, n == kMaxStringBytes);
  }
  // Objects: 8 arrays of 60000 nils fit kMaxFrameObjects, 9 do not (counted before any
  // object is built).
  for (int arrays : {8, 9}) {
    std::string payload = Payload([&](msgpack::packer<msgpack::sbuffer>& pk) {
      pk.pack_array(arrays);
      for (int a = 0; a < arrays; ++a) {
        pk.pack_array(60000);
        for (int i = 0; i < 60000; ++i) pk.pack_nil();
      }
    });
    assert_int_equal(Parses(payload, &why), arrays == 8);
  }
  assert_string_equal(why.c_str(), "more msgpack objects than a frame may hold");
  // An array cannot declare more items than the frame has bytes, even a short one.
  std::string claims = Payload([](msgpack::packer<msgpack::sbuffer>& pk) { pk.pack_array(1000); });
  assert_false(Parses(claims));
}

void test_trailing_bytes_are_malformed(void**) {
  FrameBuilder b(3, static_cast<int64_t>(Op::kHealth), 0);
  const char* data = b.data();
  std::string payload(data + kFrameHeaderBytes, b.size() - kFrameHeaderBytes);
  assert_true(Parses(payload));
  std::string why;
  assert_false(Parses(payload + '\xc0', &why));
  assert_string_equal(why.c_str(), "bytes after the message");
  assert_false(Parses(payload + payload));  // two messages in one frame
}

void test_in_place_points_into_the_payload_and_detach_copies(void**) {
  FrameBuilder b(5, static_cast<int64_t>(Op::kExist), 1);
  b.args().pack(std::string("a-key-long-enough-to-matter"));
  const char* data = b.data();
  std::string payload(data + kFrameHeaderBytes, b.size() - kFrameHeaderBytes);
  Message in_place;
  assert_true(ParseMessageInPlace(payload.data(), payload.size(), &in_place));
  const msgpack::object* items = in_place.handle.get().via.array.ptr[2].via.array.ptr;
  const char* at = items[0].via.str.ptr;
  assert_true(at >= payload.data() && at < payload.data() + payload.size());

  Message detached = Detach(in_place);
  assert_true(detached.bytes > 0);
  std::fill(payload.begin(), payload.end(), '\0');  // the payload is gone
  assert_int_equal(detached.id, 5);
  assert_int_equal(detached.head, static_cast<int64_t>(Op::kExist));
  assert_string_equal(detached.args.Str().c_str(), "a-key-long-enough-to-matter");
  assert_true(detached.args.ok());
}

// ---- FrameReader ----

void test_reader_buffer_is_bounded_and_given_back(void**) {
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  FrameBuilder big(1, static_cast<int64_t>(Op::kExist), 1);
  big.args().pack(std::string(1 << 20, 'k'));
  std::thread writer([&] { assert_true(SendFrame(sv[0], big.data(), big.size())); });
  FrameReader reader;
  const char* payload = nullptr;
  size_t length = 0;
  bool oversized = false;
  while (!reader.Next(&payload, &length, &oversized)) {
    assert_int_equal(static_cast<int>(reader.ReadFrom(sv[1])),
                     static_cast<int>(FrameReader::Status::kOk));
    assert_true(reader.capacity() <= big.size() || reader.capacity() == 64u << 10);
  }
  writer.join();
  assert_int_equal(length, big.size() - kFrameHeaderBytes);
  assert_int_equal(reader.capacity(), big.size());  // exactly one frame, not doubled
  reader.Trim();
  assert_int_equal(reader.capacity(), 0);  // consumed: given back

  // Before HELLO: a frame over the lowered maximum is reported, its payload never read.
  reader.set_max_frame_bytes(kMaxHelloFrameBytes);
  std::string header(4, '\0');
  uint32_t announced = kMaxHelloFrameBytes + 1;
  std::memcpy(&header[0], &announced, 4);
  assert_int_equal(write(sv[0], header.data(), 4), 4);
  assert_int_equal(write(sv[0], std::string(1000, 'x').data(), 1000), 1000);
  reader.ReadFrom(sv[1]);
  assert_false(reader.Next(&payload, &length, &oversized));
  assert_true(oversized);
  assert_true(reader.capacity() <= 64u << 10);
  close(sv[0]);
  close(sv[1]);
}

// ---- PoolFences ----

struct Client {
  int peer = -1;
  std::shared_ptr<ClientConnection> connection;
  std::atomic<int> teardowns{0};
  explicit Client(uint64_t id) {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    peer = sv[1];
    connection = std::make_shared<ClientConnection>(
        sv[0], id, [this](std::shared_ptr<ClientConnection>) { ++teardowns; });
  }
  ~Client() { close(peer); }
  // The code of the reply with request id, or INT64_MIN when none is waiting.
  int64_t Reply(uint64_t id) {
    char buf[256];
    ssize_t n = recv(peer, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= static_cast<ssize_t>(kFrameHeaderBytes)) return INT64_MIN;
    Message m;
    assert_true(ParseMessage(buf + kFrameHeaderBytes, n - kFrameHeaderBytes, &m));
    assert_int_equal(m.id, id);
    return m.head;
  }
};

void test_fence_waits_for_earlier_connections_of_its_pool(void**) {
  PoolFences fences;
  const PoolFences::PoolId pool{1, 100}, other{1, 200};
  Client first(1), second(2), third(3);
  fences.Mapped(pool, 1);
  fences.Mapped(pool, 2);
  fences.Mapped(other, 3);
  // The first connection of a pool, and another pool, wait for nothing.
  ClientConnection::Request r1 = first.connection->Acquire();
  assert_false(fences.Wait(pool, 1, 10, &r1));
  assert_true(static_cast<bool>(r1));
  ClientConnection::Request r3 = third.connection->Acquire();
  assert_false(fences.Wait(other, 3, 30, &r3));
  // The second waits for the first, holding its connection open meanwhile.
  ClientConnection::Request r2 = second.connection->Acquire();
  assert_true(fences.Wait(pool, 2, 20, &r2));
  assert_false(static_cast<bool>(r2));
  second.connection->Close();
  assert_int_equal(second.teardowns.load(), 0);  // the fence holds a request of it
  fences.Unmapped(other, 3);
  fences.Unmapped(pool, 99);  // never mapped: nothing happens
  assert_int_equal(second.teardowns.load(), 0);
  // Its teardown done, the first no longer maps the pool: the fence is answered (to a
  // closed connection here, so nothing is written) and its request ends.
  fences.Unmapped(pool, 1);
  assert_int_equal(second.teardowns.load(), 1);

  // An open connection gets the answer.
  Client fourth(4);
  fences.Mapped(pool, 4);  // second (2) still maps it
  ClientConnection::Request r4 = fourth.connection->Acquire();
  assert_true(fences.Wait(pool, 4, 40, &r4));
  assert_int_equal(fourth.Reply(40), INT64_MIN);
  fences.Unmapped(pool, 2);
  assert_int_equal(fourth.Reply(40), 0);
  // Abandon drops a waiting fence unanswered and lets its connection go.
  Client fifth(5);
  fences.Mapped(pool, 5);
  ClientConnection::Request r5 = fifth.connection->Acquire();
  assert_true(fences.Wait(pool, 5, 50, &r5));
  fifth.connection->Close();
  fences.Abandon();
  assert_int_equal(fifth.teardowns.load(), 1);
  assert_int_equal(fifth.Reply(50), INT64_MIN);
}

// ---- libmc: pins and the quarantine ----

constexpr uint64_t kBlock = 1 << 20;
constexpr uint64_t kPool = 2 * kBlock + 64 * 1024;  // two blocks, no third

std::shared_ptr<client::Pool> NewPool() {
  std::shared_ptr<client::Pool> pool;
  assert_int_equal(ToInt(client::Pool::Create(kPool, &pool)), 0);
  return pool;
}

void test_pinned_allocation_is_freed_with_its_last_pin(void**) {
  std::shared_ptr<client::Pool> pool = NewPool();
  void* a = pool->Allocate(kBlock);
  assert_non_null(a);
  std::shared_ptr<void> pins = pool->PinAllocations();
  std::shared_ptr<void> more = pool->PinAllocations();
  pool->Free(a);
  pool->Free(a);  // twice: ignored
  void* b = pool->Allocate(kBlock);
  assert_non_null(b);
  assert_true(b != a);
  assert_null(pool->Allocate(kBlock));  // a's range is still pinned
  pins.reset();
  assert_null(pool->Allocate(kBlock));  // by the other token too
  more.reset();
  assert_ptr_equal(pool->Allocate(kBlock), a);
  // An allocation made after the pin is not pinned.
  std::shared_ptr<void> late = pool->PinAllocations();
  pool->Free(b);
  void* c = pool->Allocate(kBlock);
  assert_null(c);  // b was live at the pin
  late.reset();
}

void test_quarantine_releases_on_fence_or_daemon_exit(void**) {
  std::shared_ptr<client::Pool> pool = NewPool();
  auto quarantine = std::make_shared<client::PoolQuarantine>(pool);
  // A block of a request in flight when the connection to daemon 7 was lost.
  std::vector<std::shared_ptr<void>> pinned{pool->TryStage(kBlock, kBlock)};
  assert_true(pinned[0] != nullptr);
  quarantine->Hold(7, -1, std::move(pinned));
  assert_int_equal(quarantine->held(), 1);
  assert_true(pool->TryStage(kBlock, kBlock) != nullptr);  // the other block only: dropped at once
  assert_true(quarantine->TakeFor(8) == nullptr);  // another daemon's fence proves nothing
  std::shared_ptr<void> fence = quarantine->TakeFor(7);
  assert_true(fence != nullptr);
  assert_int_equal(quarantine->held(), 0);
  std::shared_ptr<client::PoolBlock> one = pool->TryStage(kBlock, kBlock);
  assert_true(one != nullptr);
  assert_true(pool->TryStage(kBlock, kBlock) == nullptr);  // still held, by the fence in flight
  fence.reset();                                // its answer came
  assert_true(pool->TryStage(kBlock, kBlock) != nullptr);
  one.reset();

  // The daemon process exits: the memory comes back without any fence.
  pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  int pidfd = client::PoolQuarantine::OpenPidfd(child);
  assert_true(pidfd >= 0);
  pinned = {pool->TryStage(kBlock, kBlock)};
  quarantine->Hold(9, pidfd, std::move(pinned));
  close(pidfd);  // the quarantine has its own
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  assert_int_equal(quarantine->held(), 1);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (quarantine->held() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  assert_int_equal(quarantine->held(), 0);
  // The watcher releases the blocks just after it stops counting them as held.
  std::shared_ptr<client::PoolBlock> x, y;
  while (std::chrono::steady_clock::now() < until) {
    x = pool->TryStage(kBlock, kBlock);
    y = pool->TryStage(kBlock, kBlock);
    if (x != nullptr && y != nullptr) break;
    x.reset();
    y.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  assert_true(x != nullptr);
  assert_true(y != nullptr);
}

}  // namespace

int main() {
  // The tests count the blocks of pools of exact sizes: keep them off huge pages, which
  // would round a pool up to whole 2 MiB pages where the machine has some reserved.
  setenv("MOONCAKE_STORE_HUGE_PAGES", "0", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode_refuses_what_exceeds_the_limits),
      cmocka_unit_test(test_trailing_bytes_are_malformed),
      cmocka_unit_test(test_in_place_points_into_the_payload_and_detach_copies),
      cmocka_unit_test(test_reader_buffer_is_bounded_and_given_back),
      cmocka_unit_test(test_fence_waits_for_earlier_connections_of_its_pool),
      cmocka_unit_test(test_pinned_allocation_is_freed_with_its_last_pin),
      cmocka_unit_test(test_quarantine_releases_on_fence_or_daemon_exit),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
