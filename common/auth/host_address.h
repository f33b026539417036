// This host's own address, where the master listens and where daemons look for it when
// nobody says otherwise; what a name resolves to; whether a connection's peer is on this
// host (what a process without a cluster key admits); addresses as text for the log.
#ifndef MOONCAKE_COMMON_HOST_ADDRESS_H_
#define MOONCAKE_COMMON_HOST_ADDRESS_H_

#include <sys/socket.h>

#include <string>

namespace mooncake {

// The address name (a host name or a numeric address) resolves to: its first IPv4
// address, else its first IPv6 one, the order in which peers try them. False, with *error
// (what getaddrinfo said), when it resolves to neither.
bool ResolveHostAddress(const std::string& name, sockaddr_storage* out, std::string* error);

// The numeric address this host's name (gethostname) resolves to (ResolveHostAddress),
// else 127.0.0.1 (a name that does not resolve). The default of the master's
// --rpc_address and of the host in the daemon's --master, so a master and daemons on one
// host find each other without flags (on Debian the name often resolves to 127.0.1.1;
// both ends ask the same question and get the same answer).
std::string ThisHostAddress();

// Whether a connection from peer that arrived at local (the address it connected to)
// comes from this host: peer is a loopback address (IsLoopbackAddress), or the very
// address it connected to, IPv4 and IPv4-mapped IPv6 alike (a daemon reaching the master
// through this host's own address). Linux drops packets from another host that carry one
// of ours as their source (net.ipv4.conf.*.accept_local is 0 by default), so a TCP
// connection cannot pose as one. local may be null (unknown): then loopback only.
bool PeerOnThisHost(const sockaddr* peer, const sockaddr* local);
// The same for the peer of the connected socket fd; false when either address cannot be
// read.
bool PeerOnThisHost(int fd);

// The numeric IP of an IPv4 or IPv6 address, "1.2.3.4" or "::1"; "?" for anything else.
std::string FormatIp(const sockaddr* addr);
// "1.2.3.4:5678" or "[::1]:5678"; "?" for anything but IPv4 and IPv6.
std::string FormatAddress(const sockaddr* addr);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_HOST_ADDRESS_H_
