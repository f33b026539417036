#include "common/base/host_lookup.h"

#include <netdb.h>

#include <cstring>

namespace mooncake {

HostLookupResult LookUpHost(const std::string& host, bool numeric_only) {
  HostLookupResult result;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (numeric_only) hints.ai_flags = AI_NUMERICHOST;
  addrinfo* found = nullptr;
  result.gai_code = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (result.gai_code != 0) return result;
  const addrinfo* chosen = nullptr;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      chosen = a;
      break;
    }
    if (a->ai_family == AF_INET6 && chosen == nullptr) chosen = a;
  }
  if (chosen != nullptr) {
    result.found = true;
    std::memcpy(&result.address, chosen->ai_addr, chosen->ai_addrlen);
  }
  freeaddrinfo(found);
  return result;
}

}  // namespace mooncake
