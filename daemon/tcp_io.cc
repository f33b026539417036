#include "daemon/transfer/tcp_io.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/base/socket_timeout.h"

namespace mooncake {
namespace tcp_io {

namespace {

using Clock = std::chrono::steady_clock;

bool SplitAddress(const std::string& address, std::string* host, std::string* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);  // [::1]:port
  }
  return true;
}

// One non-blocking connect to ai, waited for at most timeout_ms.
int ConnectOne(const addrinfo* ai, int timeout_ms) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) return -1;
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      close(fd);
      return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    if (poll(&p, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
        err != 0) {
      close(fd);
      errno = err != 0 ? err : ETIMEDOUT;
      return -1;
    }
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// A stall is detected within two slices after the stall timeout: the return that brought
// the last bytes comes up to a slice after them, and the silence is checked at the end of
// each slice. 1/32 of the timeout: 5 s are detected by 5.31 s.
constexpr int kSlicesPerStall = 32;

// Decides, each time a system call of one Send or Recv returns with the message still
// unfinished (a socket-timeout slice passed, with or without some bytes moved), whether to
// go on. No clock is read until that happens.
class Patience {
 public:
  explicit Patience(const Bounds& bounds) : bounds_(bounds) {}

  // moved: the call moved some bytes. False (errno ETIMEDOUT) to give up.
  bool Wait(bool moved) {
    Clock::time_point now = Clock::now();
    if (now >= bounds_.deadline) return TimedOut();
    if (moved) {
      silent_since_ = Clock::time_point::min();  // from this return on, if nothing comes
      return true;
    }
    if (silent_since_ == Clock::time_point::min()) {
      // Nothing came during the slice that just passed: the silence began when it began.
      silent_since_ = now - std::chrono::milliseconds(SliceMillis(bounds_.stall_timeout_ms));
    }
    if (now - silent_since_ >= std::chrono::milliseconds(bounds_.stall_timeout_ms)) {
      return TimedOut();
    }
    return true;
  }

 private:
  static bool TimedOut() {
    errno = ETIMEDOUT;
    return false;
  }

  const Bounds& bounds_;
  Clock::time_point silent_since_ = Clock::time_point::min();
};

}  // namespace

int SliceMillis(int stall_timeout_ms) {
  return stall_timeout_ms <= 0 ? 0 : std::max(1, stall_timeout_ms / kSlicesPerStall);
}

void Configure(int fd, int stall_timeout_ms) {
  int slice = SliceMillis(stall_timeout_ms);
  SetSocketTimeout(fd, SO_SNDTIMEO, slice);
  SetSocketTimeout(fd, SO_RCVTIMEO, slice);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int Connect(const std::string& address, int timeout_ms, int stall_timeout_ms, std::string* error) {
  std::string host, port;
  if (!SplitAddress(address, &host, &port)) {
    *error = "bad address '" + address + "' (want host:port)";
    return -1;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) {
    *error = "cannot resolve " + address + ": " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  int last_errno = 0;
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ConnectOne(ai, timeout_ms);
    if (fd < 0) last_errno = errno;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    *error = "cannot connect to " + address + ": " + std::strerror(last_errno);
    return -1;
  }
  Configure(fd, stall_timeout_ms);
  return fd;
}

bool Send(int fd, const char* head, size_t head_len, const char* data, size_t data_len,
          const Bounds& bounds) {
  iovec iov[2] = {{const_cast<char*>(head), head_len}, {const_cast<char*>(data), data_len}};
  int first = head_len > 0 ? 0 : 1;
  int count = data_len > 0 ? 2 : 1;
  Patience patience(bounds);
  while (first < count) {
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = static_cast<size_t>(count - first);
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !patience.Wait(false)) return false;
      continue;  // a slice passed and the peer took nothing
    }
    size_t sent = static_cast<size_t>(n);
    while (first < count && sent >= iov[first].iov_len) {
      sent -= iov[first].iov_len;
      ++first;
    }
    if (first < count) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + sent;
      iov[first].iov_len -= sent;
      if (!patience.Wait(true)) return false;  // a slice passed, some bytes went
    }
  }
  return true;
}

bool Recv(int fd, char* data, size_t n, const Bounds& bounds) {
  size_t got = 0;
  Patience patience(bounds);
  while (got < n) {
    ssize_t r = recv(fd, data + got, n - got, MSG_WAITALL);
    if (r == 0) {
      errno = ECONNRESET;
      return false;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !patience.Wait(false)) return false;
      continue;  // a slice passed without a byte
    }
    got += static_cast<size_t>(r);
    if (got < n && !patience.Wait(true)) return false;  // a slice passed, some bytes came
  }
  return true;
}

}  // namespace tcp_io
}  // namespace mooncake
