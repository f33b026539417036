#include "common/base/master_endpoint.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/base/host_lookup.h"
#include "common/base/master_address.h"
#include "common/base/text.h"

namespace mooncake {

namespace {

constexpr char kEtcdScheme[] = "etcd://";

// "ip:port" of one host:port item, "[ip]:port" for IPv6. A bracketed host ("[::1]") is
// read without its brackets. The address is LookUpHost's choice, as ResolveHostAddress's.
bool CanonicalHostPort(const std::string& item, HostLookup lookup, std::string* out,
                       std::string* error) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(item, &host, &port)) {
    *error = "'" + item + "' is not host:port";
    return false;
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  HostLookupResult found = LookUpHost(host, lookup == HostLookup::kNumericOnly);
  if (found.gai_code != 0) {
    *error = lookup == HostLookup::kNumericOnly
                 ? "host '" + host + "' is not a numeric address"
                 : "host '" + host + "' does not resolve (" + gai_strerror(found.gai_code) + ")";
    return false;
  }
  if (!found.found) {
    *error = "host '" + host + "' has no IPv4 or IPv6 address";
    return false;
  }
  const sockaddr* chosen = reinterpret_cast<const sockaddr*>(&found.address);
  char ip[INET6_ADDRSTRLEN] = {0};
  if (chosen->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(chosen)->sin_addr, ip, sizeof(ip));
    *out = std::string(ip) + ":" + std::to_string(port);
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(chosen)->sin6_addr, ip,
              sizeof(ip));
    *out = "[" + std::string(ip) + "]:" + std::to_string(port);
  }
  return true;
}

}  // namespace

bool CanonicalMasterEndpoint(const std::string& text, HostLookup lookup, std::string* out,
                             std::string* error) {
  MasterAddress parsed;
  if (!ParseMasterAddress(text, &parsed, error)) return false;
  if (!parsed.via_etcd()) return CanonicalHostPort(text, lookup, out, error);
  std::string canonical = kEtcdScheme;
  const char* separator = "";
  for (const std::string& item : SplitList(parsed.etcd_endpoints, ',')) {
    std::string endpoint;
    if (!CanonicalHostPort(item, lookup, &endpoint, error)) return false;
    canonical += separator + endpoint;
    separator = ",";
  }
  *out = std::move(canonical);
  return true;
}

}  // namespace mooncake
