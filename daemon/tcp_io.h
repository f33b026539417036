// Blocking TCP I/O for the transfer engine, bounded in time.
//
// Transfer sockets are blocking with SO_SNDTIMEO / SO_RCVTIMEO set to the stall timeout:
// a peer that stops reading or sending (killed, frozen, partitioned) fails the call after
// that long without progress, instead of hanging a worker. Bulk data moves in as few
// system calls as the kernel allows (MSG_WAITALL, one sendmsg for header and payload),
// straight from and into the caller's memory: no staging buffer.
#ifndef MOONCAKE_DAEMON_TCP_IO_H_
#define MOONCAKE_DAEMON_TCP_IO_H_

#include <cstddef>
#include <string>

namespace mooncake {
namespace tcp_io {

// Connects to "host:port" within timeout_ms; a blocking socket with TCP_NODELAY and the
// stall timeout set, or -1 with *error.
int Connect(const std::string& address, int timeout_ms, int stall_timeout_ms, std::string* error);

// Sets SO_SNDTIMEO and SO_RCVTIMEO (0: none) and TCP_NODELAY.
void Configure(int fd, int stall_timeout_ms);

// Sends all of head[0, head_len) then data[0, data_len); false on error or stall (errno
// set). Never raises SIGPIPE.
bool Send(int fd, const char* head, size_t head_len, const char* data, size_t data_len);

// Receives exactly n bytes; false on error, stall, or the peer closing first.
bool Recv(int fd, char* data, size_t n);

// Reads and throws away n bytes (a reply payload nobody wants); false as Recv.
bool Discard(int fd, size_t n);

}  // namespace tcp_io
}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TCP_IO_H_
