// Which master an address names, so that two spellings of one master compare equal:
// "localhost:50051", "127.0.0.1:50051" and a host name resolving to 127.0.0.1 are one
// endpoint. A client names the master it expects (mooncake_store_setup's
// master_server_addr); libmc resolves that text, and the daemon compares the result with
// its own --master, resolved once at its start (StoreService's HELLO check).
// Input policy: any text. What is not a master address (common/base/master_address.h), or names a
// host that does not resolve, is refused with a reason; kNumericOnly never waits for DNS.
#ifndef MOONCAKE_COMMON_MASTER_ENDPOINT_H_
#define MOONCAKE_COMMON_MASTER_ENDPOINT_H_

#include <string>

namespace mooncake {

// How a host name is turned into an address.
enum class HostLookup {
  kResolve,      // getaddrinfo: /etc/hosts, DNS, ...
  kNumericOnly,  // the host must already be an address: for text a peer sent, which must
                 // not make a server thread wait for a name server
};

// The canonical text of a master address (ParseMasterAddress's forms): "ip:port" ("[ip]:port"
// for IPv6), the host resolved as peers resolve it (its first IPv4 address, else its first
// IPv6 one, the choice of common/auth/host_address.h's ResolveHostAddress); for etcd://, the
// scheme and each endpoint so, in the order given. Two texts name the same master exactly
// when their canonical texts are equal. False with *error (the text's host and why).
bool CanonicalMasterEndpoint(const std::string& text, HostLookup lookup, std::string* out,
                             std::string* error);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_MASTER_ENDPOINT_H_
