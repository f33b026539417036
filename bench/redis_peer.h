// The Redis side of store_bench: a redis-server of the machine's (Debian's
// /usr/bin/redis-server) started on 127.0.0.1 for the run, and a minimal client of its
// protocol (RESP2) over one TCP connection, so the store's figures can be printed next to
// the store people compare it with, measured in the same run on the same cores.
//
// The client is what users of Redis have (hiredis, redis-py): one blocking connection,
// TCP_NODELAY, a request written whole and its reply read with blocking read()s; values are
// read straight into the caller's buffer, as get_into does. No pipelining beyond what a
// command does itself (MSET, MGET, EXISTS of many keys are one command each).
//
// Threads: a RedisClient belongs to one thread at a time; RedisServer is driven by one.
// Input policy: the server is ours and trusted to speak RESP, but every reply is checked
// (type, length, value) and anything unexpected is an error with a message, never a crash.
#ifndef MOONCAKE_BENCH_REDIS_PEER_H_
#define MOONCAKE_BENCH_REDIS_PEER_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/harness/process_harness.h"

namespace mooncake {
namespace store_bench {

// A redis-server child on 127.0.0.1:port() in a temp dir of its own, persistence off
// (--save "" --appendonly no), killed by the kernel if this process dies first.
class RedisServer {
 public:
  RedisServer() = default;
  ~RedisServer();  // Stop()
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // binary is a path or a name looked up on PATH; "" when it is neither.
  static std::string Find(const std::string& binary);

  // Starts it on a free port and waits (up to 10 s) until it answers PING; false with
  // *error (its log's last lines included) when it does not.
  bool Start(const std::string& binary, std::string* error);
  // SIGTERM (nothing to save), SIGKILL after 5 s; removes the temp dir. Idempotent.
  void Stop();

  int port() const { return port_; }
  const std::string& version() const { return version_; }  // INFO's redis_version
  // The flags it was started with (for the report).
  const std::string& config() const { return config_; }

 private:
  testing::ChildProcess process_;
  std::string dir_, version_, config_;
  int port_ = 0;
};

// One connection to a Redis server. Every call returns false on a transport or protocol
// error, or on a reply that is not the one the command promises; error() says which.
class RedisClient {
 public:
  RedisClient() = default;
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  bool Connect(int port);  // to 127.0.0.1:port
  // A command whose reply is a status (+OK, +PONG: *status its text) or an integer
  // (*status its digits), e.g. PING or FLUSHALL.
  bool Simple(const std::vector<std::string>& args, std::string* status);
  // INFO section: a bulk string (up to 64 KiB).
  bool Info(const std::string& section, std::string* text);

  bool Set(const char* key, const void* value, size_t size);
  // GET into buffer (capacity size): *length is the value's length, -1 when missing.
  bool Get(const char* key, void* buffer, size_t size, int64_t* length);
  bool MSet(const char* const* keys, void* const* values, const size_t* sizes, size_t count);
  // MGET: lengths[i] as Get() gives *length.
  bool MGet(const char* const* keys, void* const* buffers, const size_t* sizes, size_t count,
            int64_t* lengths);
  // EXISTS of count keys: *present how many of them exist.
  bool Exists(const char* const* keys, size_t count, int64_t* present);

  const std::string& error() const { return error_; }

 private:
  // Writes one command, argument i from arguments[i] (bytes and length), in one writev
  // where it fits (IOV_MAX pieces), the values never copied.
  bool Send(const std::vector<iovec>& arguments);
  bool Fail(const std::string& what);
  bool Fill();                       // reads more into in_ (blocking)
  bool ReadLine(std::string* line);  // one reply line, CRLF dropped
  // A bulk string read straight into buffer (capacity size); *length -1 when nil.
  bool ReadBulk(void* buffer, size_t size, int64_t* length);
  bool ReadBulkString(std::string* text);
  bool ExpectStatus(const char* want);  // the reply is +want

  // Reply bytes read but not yet parsed: in_[in_begin_, in_end_).

  int fd_ = -1;
  std::vector<char> in_ = std::vector<char>(64 << 10);
  size_t in_begin_ = 0, in_end_ = 0;
  std::string header_;           // the framing of the command being sent
  std::vector<size_t> offsets_;  // where in header_ each argument's value goes
  std::vector<iovec> iov_;       // framing and values, in order
  std::string error_;
};

}  // namespace store_bench
}  // namespace mooncake

#endif  // MOONCAKE_BENCH_REDIS_PEER_H_
