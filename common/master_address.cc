#include "common/base/master_address.h"

#include <cstdlib>

#include "common/base/text.h"

namespace mooncake {

namespace {

constexpr char kEtcdScheme[] = "etcd://";

}  // namespace

bool SplitHostPort(const std::string& text, std::string* host, int* port) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return false;
  char* end = nullptr;
  long p = std::strtol(text.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p <= 0 || p > 65535) return false;
  *host = text.substr(0, colon);
  *port = static_cast<int>(p);
  return true;
}

bool ParseMasterAddress(const std::string& text, MasterAddress* out, std::string* error) {
  *out = MasterAddress{};
  if (text.compare(0, sizeof(kEtcdScheme) - 1, kEtcdScheme) != 0) {
    if (!SplitHostPort(text, &out->host, &out->port)) {
      *error = "must be host:port or etcd://host:port[,host:port...]";
      return false;
    }
    return true;
  }
  std::string endpoints = text.substr(sizeof(kEtcdScheme) - 1);
  for (const std::string& item : SplitList(endpoints, ',')) {
    std::string host;
    int port = 0;
    if (!SplitHostPort(item, &host, &port)) {
      *error = "etcd://: '" + item + "' is not host:port (endpoints are comma-separated)";
      return false;
    }
  }
  out->etcd_endpoints = endpoints;
  return true;
}

}  // namespace mooncake
