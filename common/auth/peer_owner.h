// Who owns the other end of a TCP connection that comes from this host: what a master or
// daemon without a cluster key admits (docs/security.md, "Without a key").
//
// Without a key, "on this host" alone (PeerOnThisHost) would admit every local user: any
// of them could read a segment through the transfer port or call RemoveAll on the master.
// SO_PEERCRED answers "who" for Unix sockets only; for TCP the kernel still knows the
// owner of the peer's socket, since both ends live in this host's network namespace. We
// ask it exactly, through NETLINK_SOCK_DIAG (what `ss -tnpe` uses): one request naming the
// peer's socket by its four-tuple (its local address and port are our peer's, its remote
// ones ours), answered with that socket's uid. No scan of /proc/net/tcp, whose size grows
// with every connection of the host, and no race with a closed socket being listed in
// TIME_WAIT as root's: only an ESTABLISHED socket counts.
//
// What it cannot see: a peer in another network namespace reaches us through an address
// of ours that is not loopback, and its socket is not in our namespace's tables, so the
// lookup fails and the peer is refused (give such deployments a key).
//
// Thread safety: free functions, any thread; each call opens and closes its own netlink
// socket.
#ifndef MOONCAKE_COMMON_PEER_OWNER_H_
#define MOONCAKE_COMMON_PEER_OWNER_H_

#include <sys/types.h>

#include <string>

namespace mooncake {

// The uid owning the socket at the other end of the connected TCP socket fd, when that
// socket is in this host's network namespace and ESTABLISHED. False with *error (the
// address and why: "no socket of this host is connected from 127.0.0.1:40112", or the
// netlink error) otherwise.
bool TcpPeerOwner(int fd, uid_t* owner, std::string* error);

// Without a cluster key, whether fd's peer may talk to this process: it is on this host
// (PeerOnThisHost) and its socket belongs to this process's effective uid or to root.
// False with *why, a sentence for the refusal's log line ("uid 1005 is neither this
// process's uid 1000 nor root").
bool PeerIsThisUserOrRoot(int fd, std::string* why);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_PEER_OWNER_H_
