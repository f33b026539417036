// Blocking TCP I/O for the transfer engine, bounded in time.
//
// Transfer sockets are blocking; bulk data moves in as few system calls as the kernel
// allows (MSG_WAITALL, one sendmsg for header and payload), straight from and into the
// caller's memory: no staging buffer.
//
// Time. A Send or Recv fails with ETIMEDOUT once no byte has moved for its stall timeout
// (a peer that stopped reading or sending: killed, frozen, partitioned), counted from the
// last byte that moved, or once its deadline has passed, whichever comes first. The
// kernel's SO_RCVTIMEO / SO_SNDTIMEO bound one system call, not a silence: a MSG_WAITALL
// receive that got part of a message and then waits returns at the timeout with what it
// has, and the next call waits a whole timeout again, so with the plain options a peer
// that stalled mid-message would be dropped only after up to twice the stall timeout. So
// Configure sets the socket timeouts to a slice (1/32) of the stall timeout and the calls
// watch the slices that pass without a byte: a stall is detected within two slices after
// the stall timeout (never before it), a deadline within one slice after it passes. A call that completes at once
// (the common case) costs nothing more: no clock is read, no extra system call made.
#ifndef MOONCAKE_DAEMON_TCP_IO_H_
#define MOONCAKE_DAEMON_TCP_IO_H_

#include <chrono>
#include <cstddef>
#include <string>

namespace mooncake {
namespace tcp_io {

// How long one Send or Recv may take. stall_timeout_ms must be what the socket was
// configured with (Connect, Configure).
struct Bounds {
  int stall_timeout_ms = 5000;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// The socket timeout Configure sets for a stall timeout: the granularity of the bounds.
int SliceMillis(int stall_timeout_ms);

// Connects to "host:port" within timeout_ms; a blocking socket with TCP_NODELAY and the
// stall timeout configured, or -1 with *error.
int Connect(const std::string& address, int timeout_ms, int stall_timeout_ms, std::string* error);

// Sets SO_SNDTIMEO and SO_RCVTIMEO to SliceMillis(stall_timeout_ms), and TCP_NODELAY.
void Configure(int fd, int stall_timeout_ms);

// Sends all of head[0, head_len) then data[0, data_len); false on error or timeout (errno
// set; ETIMEDOUT for a stall or the deadline). Never raises SIGPIPE.
bool Send(int fd, const char* head, size_t head_len, const char* data, size_t data_len,
          const Bounds& bounds);

// Receives exactly n bytes; false on error, timeout (ETIMEDOUT) or the peer closing first
// (ECONNRESET).
bool Recv(int fd, char* data, size_t n, const Bounds& bounds);

}  // namespace tcp_io
}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TCP_IO_H_
