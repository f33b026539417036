// A client that speaks docs/protocol.md directly to a real mooncaked, for the daemon
// integration suites (daemon_protocol_test, daemon_read_cache_test, uds_limits_test): a
// sealed memfd pool, a connection with blocking request/response helpers, a master and
// daemon of a test's own, and a Thrift peek at the master. Failures are CMocka assertions.
#ifndef MOONCAKE_TESTS_DAEMON_TEST_CLIENT_H_
#define MOONCAKE_TESTS_DAEMON_TEST_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/base/error_code.h"
#include "common/uds/uds_ops.h"
#include "include/mooncake_store.h"
#include "tests/process_harness.h"

namespace mooncake {
namespace testing {

// The pool size most tests map.
inline constexpr uint64_t kPoolSize = 4 << 20;
// What the daemon answers to a request it refuses (-600).
inline const int32_t kInvalid = ToInt(ErrorCode::INVALID_PARAMS);

// A master and daemon shared by a test group; the group's setup fills g_fixture.
struct Fixture {
  ChildProcess master;
  ChildProcess daemon;
  std::string dir;
  std::string socket_path;
  int master_port = 0;
};
extern Fixture* g_fixture;
// A group teardown's part for f: the daemon (if still running) killed, the master
// stopped, f->dir removed unless MC_KEEP_TEST_DIR is set (then its path is printed).
void StopFixture(Fixture* f);

// A sealed memfd pool (unsealed if !seal), mapped here as libmc would.
struct Pool {
  int fd = -1;
  char* base = nullptr;
  uint64_t size = 0;
  explicit Pool(uint64_t bytes, bool seal = true);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
};

// One connection to the daemon, with blocking request/response helpers. Requests are
// sequential unless a test sends frames itself with Send and reads them with Recv.
// Receiving gives up after kRecvTimeoutS: far longer than any answer takes, even on a
// machine busy with other work; a test that expects no answer sets its own timeout.
struct Conn {
  static constexpr int kRecvTimeoutS = 30;

  int fd = -1;
  uint64_t next_id = 1;
  uds::FrameReader reader;

  Conn();  // to g_fixture's daemon
  explicit Conn(const std::string& socket_path);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  void Close();
  bool SendRaw(const std::string& bytes);
  bool Send(uds::FrameBuilder* frame, int pass_fd = -1);
  // false on end-of-file or timeout (kRecvTimeoutS).
  bool Recv(uds::Message* out);
  // True when the daemon closed the connection (end-of-file or a reset within
  // kRecvTimeoutS, no frame first); false when a frame came or the time ran out.
  bool ClosedByPeer();
  // Sends, then waits for the response with the same id; returns its head (the code).
  int64_t Call(uds::FrameBuilder* frame, uint64_t id, uds::Message* out, int pass_fd = -1);
  // HELLO with pool's descriptor (override_fd instead, unless it is -2), naming tenant
  // ("": none); the daemon's host:port goes to *hostname on success.
  int64_t Hello(const Pool* pool, uint64_t abi = MOONCAKE_STORE_ABI_VERSION,
                const std::string& master = "", std::string* hostname = nullptr,
                int override_fd = -2, const std::string& tenant = "");
  // Ops whose results are integers: returns the code, fills *values.
  int64_t Ints(uds::Op op, const std::function<void(uds::FrameBuilder*)>& pack, uint32_t argc,
               std::vector<int64_t>* values = nullptr);
  int64_t Put(const std::string& key, uint64_t offset, uint64_t size, uds::Op op = uds::Op::kPut);
  // Bytes read, or a code.
  int64_t Get(const std::string& key, uint64_t offset, uint64_t capacity);
  // [bytes or code, ...] of one BATCH_GET; every entry reads into the same capacity.
  int64_t BatchGet(const std::vector<std::string>& keys, uint64_t offset, uint64_t capacity,
                   std::vector<int64_t>* v);
  int64_t GetSize(const std::string& key);
  int64_t Remove(const std::string& key);  // forced
  int64_t Exist(const std::string& key);
  int64_t Health();
};

// n pseudo-random bytes from seed.
void Fill(char* p, size_t n, uint32_t seed);

// payload behind its 4-byte length, as the wire frames it.
std::string Frame(const std::string& payload);

// PUT_BEGIN (not an upsert); *v gets [put_id, ...].
int64_t PutBegin(Conn* c, const std::string& key, uint64_t size, std::vector<int64_t>* v);

// A master and daemon of the test's own, so that it can choose the lease and stop the
// master (SIGSTOP) without disturbing a shared fixture.
struct OwnCluster {
  ChildProcess master;
  ChildProcess daemon;
  std::string dir;
  std::string socket_path;
  int master_port = 0;
  bool paused = false;

  OwnCluster(const std::string& lease, std::vector<std::string> daemon_flags);
  ~OwnCluster();
  // A stopped master accepts connections (the kernel does) but never answers: whatever
  // reaches it now fails with -900 or -901 after the daemon's --rpc_timeout.
  void Pause();
  void Resume();
};

// -900 or -901: the request needed the master and could not reach it.
bool MasterUnreachable(int64_t code);

int64_t ElapsedMs(std::chrono::steady_clock::time_point since);

// How many segments the master on 127.0.0.1:port has mounted (0 if it cannot be asked),
// asked over Thrift as a daemon would.
size_t MasterSegmentCount(int port);

}  // namespace testing
}  // namespace mooncake

#endif  // MOONCAKE_TESTS_DAEMON_TEST_CLIENT_H_
