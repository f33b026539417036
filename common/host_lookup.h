// What a host name or numeric address resolves to, chosen as peers choose: its first IPv4
// address, else its first IPv6 one (the order in which they try them). In mc_common, so
// that libmooncake_store.so (common/base/master_endpoint.h) and the processes' mc_auth
// (common/auth/host_address.h) make the same choice. Input policy: any text; a name that does
// not resolve is an answer, not an error.
#ifndef MOONCAKE_COMMON_HOST_LOOKUP_H_
#define MOONCAKE_COMMON_HOST_LOOKUP_H_

#include <sys/socket.h>

#include <string>

namespace mooncake {

struct HostLookupResult {
  int gai_code = 0;    // getaddrinfo's failure (gai_strerror names it), else 0
  bool found = false;  // an IPv4 or IPv6 address was chosen: address holds it
  sockaddr_storage address{};
};

// Resolves host by getaddrinfo (numeric_only: AI_NUMERICHOST, so it never waits for DNS).
HostLookupResult LookUpHost(const std::string& host, bool numeric_only);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_HOST_LOOKUP_H_
