// Bounds on blocking socket calls, shared by the daemon's Unix socket, its transfer port
// and libmc's connection.
#ifndef MOONCAKE_COMMON_SOCKET_TIMEOUT_H_
#define MOONCAKE_COMMON_SOCKET_TIMEOUT_H_

#include <sys/socket.h>
#include <sys/time.h>

namespace mooncake {

// Sets option (SO_SNDTIMEO or SO_RCVTIMEO) to ms milliseconds; 0 means no bound.
inline void SetSocketTimeout(int fd, int option, int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv));
}

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_SOCKET_TIMEOUT_H_
