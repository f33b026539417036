// What a process's --master names: a fixed master "host:port", or the etcd endpoints whose
// leader key names it (docs/ha.md, "Daemons"). Parsing only, so that flag parsing needs
// neither etcd nor a network: common/master_link/master_locator.h does the finding.
// Input policy: any text; what is not one of the two forms is refused with a reason.
#ifndef MOONCAKE_COMMON_MASTER_ADDRESS_H_
#define MOONCAKE_COMMON_MASTER_ADDRESS_H_

#include <string>

namespace mooncake {

// What --master says: a fixed host:port, or etcd endpoints to read the leader key from.
struct MasterAddress {
  std::string host;            // fixed; "" with etcd
  int port = 0;                // fixed; 0 with etcd
  std::string etcd_endpoints;  // "host:port[,host:port...]"; "" = fixed
  bool via_etcd() const { return !etcd_endpoints.empty(); }
};

// Parses "host:port" or "etcd://host:port[,host:port...]". False with *error saying what
// is wrong (the caller names its flag).
bool ParseMasterAddress(const std::string& text, MasterAddress* out, std::string* error);

// "host:port" with a port in 1..65535 and a host that is not empty.
bool SplitHostPort(const std::string& text, std::string* host, int* port);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_MASTER_ADDRESS_H_
