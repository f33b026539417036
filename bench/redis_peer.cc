#include "bench/redis_peer.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace mooncake {
namespace store_bench {

namespace {

// The last lines of a log, for an error message.
std::string Tail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += "\n    " + all[i];
  }
  return out;
}

}  // namespace

// ---- RedisServer ---------------------------------------------------------------------------

RedisServer::~RedisServer() { Stop(); }

std::string RedisServer::Find(const std::string& binary) {
  if (binary.find('/') != std::string::npos) {
    return access(binary.c_str(), X_OK) == 0 ? binary : "";
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + binary;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

bool RedisServer::Start(const std::string& binary, std::string* error) {
  dir_ = testing::MakeTempDir("mc-bench-redis");
  const std::string log = dir_ + "/redis.log";
  // A port free a moment ago may be taken by the time redis binds it: a few tries.
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = testing::FreeTcpPort();
    std::vector<std::string> argv = {binary,   "--port",       std::to_string(port_),
                                     "--bind", "127.0.0.1",    "--save",
                                     "",       "--appendonly", "no",
                                     "--dir",  dir_,           "--daemonize",
                                     "no",     "--logfile",    ""};
    config_.clear();
    for (size_t i = 1; i < argv.size(); ++i) {
      config_ += (i > 1 ? " " : "") + (argv[i].empty() ? std::string("\"\"") : argv[i]);
    }
    if (!process_.Start(argv, log)) {
      *error = "cannot fork for " + binary;
      return false;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (process_.Wait(0) != -1) break;  // it exited (port taken?): try another port
      RedisClient client;
      std::string pong;
      if (client.Connect(port_) && client.Simple({"PING"}, &pong) && pong == "PONG") {
        std::string info;
        if (client.Info("server", &info)) {
          size_t at = info.find("redis_version:");
          if (at != std::string::npos) {
            version_ = info.substr(at + 14, info.find_first_of("\r\n", at) - at - 14);
          }
        }
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    process_.Stop(SIGKILL, 2000);
  }
  *error = binary + " did not answer PING on 127.0.0.1 (log " + log + "):" + Tail(log, 8);
  return false;
}

void RedisServer::Stop() {
  if (process_.running()) process_.Stop(SIGTERM, 5000);  // kills it if it takes longer
  if (!dir_.empty()) testing::RemoveTree(dir_);
  dir_.clear();
}

// ---- RedisClient ---------------------------------------------------------------------------

RedisClient::~RedisClient() {
  if (fd_ >= 0) close(fd_);
}

bool RedisClient::Fail(const std::string& what) {
  error_ = what;
  return false;
}

bool RedisClient::Connect(int port) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return Fail(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Fail("connect to 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno));
  }
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return true;
}

bool RedisClient::Send(const std::vector<iovec>& arguments) {
  // The framing ("*N\r\n", then "$len\r\n" before and "\r\n" after each argument) goes into
  // header_ first, where each value goes noted: header_ must not move once iov_ points in it.
  header_.clear();
  offsets_.clear();
  header_ += "*" + std::to_string(arguments.size()) + "\r\n";
  for (const iovec& a : arguments) {
    header_ += "$" + std::to_string(a.iov_len) + "\r\n";
    offsets_.push_back(header_.size());  // where this argument's value goes
    header_ += "\r\n";
  }
  iov_.clear();
  size_t from = 0;
  for (size_t i = 0; i < arguments.size(); ++i) {
    // The framing up to this argument's value (the previous CRLF, "$len\r\n"), the value.
    size_t to = offsets_[i];
    iov_.push_back({&header_[from], to - from});
    iov_.push_back(arguments[i]);
    from = to;
  }
  iov_.push_back({&header_[from], header_.size() - from});
  size_t first = 0;
  while (first < iov_.size()) {
    int count = static_cast<int>(std::min<size_t>(iov_.size() - first, IOV_MAX));
    ssize_t n = writev(fd_, &iov_[first], count);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Fail(std::string("write: ") + std::strerror(errno));
    size_t left = static_cast<size_t>(n);
    while (left > 0 && left >= iov_[first].iov_len) left -= iov_[first++].iov_len;
    if (left > 0) {
      iov_[first].iov_base = static_cast<char*>(iov_[first].iov_base) + left;
      iov_[first].iov_len -= left;
    }
    while (first < iov_.size() && iov_[first].iov_len == 0) ++first;
  }
  return true;
}

bool RedisClient::Fill() {
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
  if (in_end_ == in_.size()) {
    if (in_begin_ == 0) return Fail("a reply line longer than the read buffer");
    std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  }
  for (;;) {
    ssize_t n = read(fd_, in_.data() + in_end_, in_.size() - in_end_);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return Fail("the server closed the connection");
    if (n < 0) return Fail(std::string("read: ") + std::strerror(errno));
    in_end_ += static_cast<size_t>(n);
    return true;
  }
}

bool RedisClient::ReadLine(std::string* line) {
  size_t scanned = in_begin_;
  for (;;) {
    for (; scanned + 1 < in_end_; ++scanned) {
      if (in_[scanned] == '\r' && in_[scanned + 1] == '\n') {
        line->assign(in_.data() + in_begin_, scanned - in_begin_);
        in_begin_ = scanned + 2;
        if (!line->empty() && (*line)[0] == '-') return Fail("error reply: " + line->substr(1));
        return true;
      }
    }
    size_t seen = scanned - in_begin_;
    if (!Fill()) return false;
    scanned = in_begin_ + seen;
  }
}

bool RedisClient::ReadBulk(void* buffer, size_t size, int64_t* length) {
  std::string line;
  if (!ReadLine(&line)) return false;
  if (line.empty() || line[0] != '$') return Fail("expected a bulk string, got '" + line + "'");
  char* end = nullptr;
  long long n = std::strtoll(line.c_str() + 1, &end, 10);
  if (*end != '\0' || n < -1) return Fail("bad bulk length '" + line + "'");
  *length = n;
  if (n == -1) return true;
  if (static_cast<unsigned long long>(n) > size) {
    return Fail("a value of " + std::to_string(n) + " bytes for a buffer of " +
                std::to_string(size));
  }
  // What is buffered already, then the rest straight into the caller's buffer.
  char* out = static_cast<char*>(buffer);
  size_t want = static_cast<size_t>(n), have = std::min(want, in_end_ - in_begin_);
  std::memcpy(out, in_.data() + in_begin_, have);
  in_begin_ += have;
  while (have < want) {
    ssize_t r = read(fd_, out + have, want - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return Fail("read of a value: connection closed or failed");
    have += static_cast<size_t>(r);
  }
  while (in_end_ - in_begin_ < 2) {
    if (!Fill()) return false;
  }
  if (in_[in_begin_] != '\r' || in_[in_begin_ + 1] != '\n') return Fail("no CRLF after a value");
  in_begin_ += 2;
  return true;
}

bool RedisClient::ReadBulkString(std::string* text) {
  text->assign(1 << 16, '\0');
  int64_t length = 0;
  if (!ReadBulk(&(*text)[0], text->size(), &length)) return false;
  text->resize(length < 0 ? 0 : static_cast<size_t>(length));
  return true;
}

bool RedisClient::ExpectStatus(const char* want) {
  std::string line;
  if (!ReadLine(&line)) return false;
  if (line != std::string("+") + want)
    return Fail("expected +" + std::string(want) + ", got '" + line + "'");
  return true;
}

bool RedisClient::Simple(const std::vector<std::string>& args, std::string* status) {
  std::vector<iovec> pieces;
  for (const std::string& a : args) pieces.push_back({const_cast<char*>(a.data()), a.size()});
  std::string line;
  if (!Send(pieces) || !ReadLine(&line)) return false;
  if (line.empty() || (line[0] != '+' && line[0] != ':')) {
    return Fail("expected a status or an integer, got '" + line + "'");
  }
  *status = line.substr(1);
  return true;
}

bool RedisClient::Info(const std::string& section, std::string* text) {
  std::string info = "INFO";
  return Send({{&info[0], info.size()}, {const_cast<char*>(section.data()), section.size()}}) &&
         ReadBulkString(text);
}

namespace {
iovec Piece(const char* text) { return {const_cast<char*>(text), std::strlen(text)}; }
}  // namespace

bool RedisClient::Set(const char* key, const void* value, size_t size) {
  return Send({Piece("SET"), Piece(key), {const_cast<void*>(value), size}}) && ExpectStatus("OK");
}

bool RedisClient::Get(const char* key, void* buffer, size_t size, int64_t* length) {
  return Send({Piece("GET"), Piece(key)}) && ReadBulk(buffer, size, length);
}

bool RedisClient::MSet(const char* const* keys, void* const* values, const size_t* sizes,
                       size_t count) {
  std::vector<iovec> pieces{Piece("MSET")};
  for (size_t i = 0; i < count; ++i) {
    pieces.push_back(Piece(keys[i]));
    pieces.push_back({values[i], sizes[i]});
  }
  return Send(pieces) && ExpectStatus("OK");
}

bool RedisClient::MGet(const char* const* keys, void* const* buffers, const size_t* sizes,
                       size_t count, int64_t* lengths) {
  std::vector<iovec> pieces{Piece("MGET")};
  for (size_t i = 0; i < count; ++i) pieces.push_back(Piece(keys[i]));
  std::string line;
  if (!Send(pieces) || !ReadLine(&line)) return false;
  if (line != "*" + std::to_string(count))
    return Fail("MGET: expected *" + std::to_string(count) + ", got '" + line + "'");
  for (size_t i = 0; i < count; ++i) {
    if (!ReadBulk(buffers[i], sizes[i], &lengths[i])) return false;
  }
  return true;
}

bool RedisClient::Exists(const char* const* keys, size_t count, int64_t* present) {
  std::vector<iovec> pieces{Piece("EXISTS")};
  for (size_t i = 0; i < count; ++i) pieces.push_back(Piece(keys[i]));
  std::string line;
  if (!Send(pieces) || !ReadLine(&line)) return false;
  char* end = nullptr;
  if (line.size() < 2 || line[0] != ':')
    return Fail("EXISTS: expected an integer, got '" + line + "'");
  *present = std::strtoll(line.c_str() + 1, &end, 10);
  if (*end != '\0') return Fail("EXISTS: bad integer '" + line + "'");
  return true;
}

}  // namespace store_bench
}  // namespace mooncake
