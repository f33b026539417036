#include "common/auth/host_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstring>

#include "common/auth/cluster_key.h"
#include "common/base/host_lookup.h"

namespace mooncake {

namespace {

// The IP of an IPv4 or IPv6 (possibly IPv4-mapped) address as 16 bytes, for comparing.
bool AddressBytes(const sockaddr* addr, unsigned char out[16]) {
  static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (addr->sa_family == AF_INET) {
    std::memcpy(out, kMapped, sizeof(kMapped));
    std::memcpy(out + 12, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, 4);
    return true;
  }
  if (addr->sa_family == AF_INET6) {
    std::memcpy(out, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, 16);
    return true;
  }
  return false;
}

}  // namespace

bool ResolveHostAddress(const std::string& name, sockaddr_storage* out, std::string* error) {
  HostLookupResult found = LookUpHost(name, /*numeric_only=*/false);
  if (found.gai_code != 0) {
    *error = gai_strerror(found.gai_code);
    return false;
  }
  if (!found.found) {
    *error = "no IPv4 or IPv6 address";
    return false;
  }
  *out = found.address;
  return true;
}

std::string ThisHostAddress() {
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "127.0.0.1";
  sockaddr_storage address{};
  std::string error;
  if (!ResolveHostAddress(name, &address, &error)) return "127.0.0.1";
  return FormatIp(reinterpret_cast<const sockaddr*>(&address));
}

bool PeerOnThisHost(const sockaddr* peer, const sockaddr* local) {
  if (IsLoopbackAddress(peer)) return true;
  unsigned char a[16], b[16];
  return local != nullptr && AddressBytes(peer, a) && AddressBytes(local, b) &&
         std::memcmp(a, b, sizeof(a)) == 0;
}

bool PeerOnThisHost(int fd) {
  sockaddr_storage peer{}, local{};
  socklen_t peer_length = sizeof(peer), local_length = sizeof(local);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0) {
    return false;
  }
  return PeerOnThisHost(reinterpret_cast<const sockaddr*>(&peer),
                        reinterpret_cast<const sockaddr*>(&local));
}

std::string FormatIp(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof(text));
  } else if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text,
              sizeof(text));
  }
  return text;
}

std::string FormatAddress(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    return FormatIp(addr) + ":" +
           std::to_string(ntohs(reinterpret_cast<const sockaddr_in*>(addr)->sin_port));
  }
  if (addr->sa_family == AF_INET6) {
    return "[" + FormatIp(addr) + "]:" +
           std::to_string(ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port));
  }
  return "?";
}

}  // namespace mooncake
