#include "common/host_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstring>

#include "common/cluster_key.h"

namespace mooncake {

std::string ThisHostAddress() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(name, nullptr, &hints, &found) != 0 || found == nullptr) return "127.0.0.1";
  const addrinfo* chosen = nullptr;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      chosen = a;
      break;
    }
    if (a->ai_family == AF_INET6 && chosen == nullptr) chosen = a;
  }
  char text[INET6_ADDRSTRLEN] = "127.0.0.1";
  if (chosen != nullptr) {
    const void* raw = chosen->ai_family == AF_INET
                          ? static_cast<const void*>(
                                &reinterpret_cast<const sockaddr_in*>(chosen->ai_addr)->sin_addr)
                          : static_cast<const void*>(
                                &reinterpret_cast<const sockaddr_in6*>(chosen->ai_addr)->sin6_addr);
    inet_ntop(chosen->ai_family, raw, text, sizeof(text));
  }
  freeaddrinfo(found);
  return text;
}

bool PeerIsThisHost(int fd) {
  sockaddr_storage peer{}, local{};
  socklen_t peer_length = sizeof(peer), local_length = sizeof(local);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0) {
    return false;
  }
  if (IsLoopbackAddress(reinterpret_cast<const sockaddr*>(&peer))) return true;
  if (peer.ss_family != local.ss_family) return false;
  if (peer.ss_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&local)->sin_addr.s_addr;
  }
  if (peer.ss_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(&local)->sin6_addr,
                       sizeof(in6_addr)) == 0;
  }
  return false;
}

std::string FormatAddress(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    return std::string(text) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "?";
}

}  // namespace mooncake
