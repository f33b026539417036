#include "common/auth/peer_owner.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/auth/host_address.h"

namespace mooncake {

namespace {

constexpr int kTcpEstablished = 1;  // TCP_ESTABLISHED in the kernel's numbering

// A socket address's family, IP (4 or 16 bytes, as inet_diag_sockid wants them) and port.
struct Endpoint {
  int family = AF_UNSPEC;
  uint32_t ip[4] = {0, 0, 0, 0};
  uint16_t port_be = 0;  // network order
};

bool ToEndpoint(const sockaddr_storage& address, Endpoint* out) {
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    out->family = AF_INET;
    std::memcpy(out->ip, &in->sin_addr, 4);
    out->port_be = in->sin_port;
    return true;
  }
  if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    out->family = AF_INET6;
    std::memcpy(out->ip, &in6->sin6_addr, 16);
    out->port_be = in6->sin6_port;
    return true;
  }
  return false;
}

// An IPv4-mapped IPv6 endpoint (::ffff:a.b.c.d) as the IPv4 one it stands for.
bool UnmapV4(const Endpoint& mapped, Endpoint* v4) {
  static const unsigned char kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (mapped.family != AF_INET6 || std::memcmp(mapped.ip, kPrefix, sizeof(kPrefix)) != 0) {
    return false;
  }
  *v4 = Endpoint{};
  v4->family = AF_INET;
  v4->ip[0] = mapped.ip[3];
  v4->port_be = mapped.port_be;
  return true;
}

// Asks the kernel for the ESTABLISHED TCP socket of family whose local end is `source` and
// remote end `destination`. 1: found (*owner set); 0: no such socket; -1: netlink failed
// (*error set).
int QuerySocketOwner(int family, const Endpoint& source, const Endpoint& destination,
                     uid_t* owner, std::string* error) {
  int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) {
    *error = std::string("cannot open a NETLINK_SOCK_DIAG socket: ") + std::strerror(errno);
    return -1;
  }
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } message{};
  message.header.nlmsg_len = sizeof(message);
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST;  // one socket, not a dump
  message.request.sdiag_family = static_cast<uint8_t>(family);
  message.request.sdiag_protocol = IPPROTO_TCP;
  message.request.idiag_states = 1u << kTcpEstablished;  // checked in the reply too
  message.request.id.idiag_sport = source.port_be;
  message.request.id.idiag_dport = destination.port_be;
  std::memcpy(message.request.id.idiag_src, source.ip, sizeof(source.ip));
  std::memcpy(message.request.id.idiag_dst, destination.ip, sizeof(destination.ip));
  message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(nl, &message, sizeof(message), 0, reinterpret_cast<sockaddr*>(&kernel),
             sizeof(kernel)) != static_cast<ssize_t>(sizeof(message))) {
    *error = std::string("cannot ask the kernel who owns a socket: ") + std::strerror(errno);
    close(nl);
    return -1;
  }
  alignas(nlmsghdr) char reply[8192];
  ssize_t length = recv(nl, reply, sizeof(reply), 0);
  int saved_errno = errno;
  close(nl);
  if (length < 0) {
    *error = std::string("no answer from the kernel about a socket's owner: ") +
             std::strerror(saved_errno);
    return -1;
  }
  for (auto* header = reinterpret_cast<nlmsghdr*>(reply); NLMSG_OK(header, length);
       header = NLMSG_NEXT(header, length)) {
    if (header->nlmsg_type == NLMSG_ERROR) {
      const auto* failure = static_cast<const nlmsgerr*>(NLMSG_DATA(header));
      if (failure->error == -ENOENT) return 0;
      if (failure->error == 0) continue;
      *error = std::string("the kernel would not say who owns a socket: ") +
               std::strerror(-failure->error);
      return -1;
    }
    if (header->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
        header->nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg))) {
      const auto* found = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
      // A lookup by four-tuple ignores idiag_states and also finds closing sockets, those
      // in TIME_WAIT listed as root's: only a live connection's owner counts.
      if (found->idiag_state != kTcpEstablished) return 0;
      *owner = found->idiag_uid;
      return 1;
    }
  }
  return 0;
}

}  // namespace

bool TcpPeerOwner(int fd, uid_t* owner, std::string* error) {
  sockaddr_storage peer{}, local{};
  socklen_t peer_length = sizeof(peer), local_length = sizeof(local);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0) {
    *error = std::string("cannot read the connection's addresses: ") + std::strerror(errno);
    return false;
  }
  Endpoint source, destination;  // of the peer's socket: its local end is our peer
  if (!ToEndpoint(peer, &source) || !ToEndpoint(local, &destination)) {
    *error = "the connection is not TCP over IPv4 or IPv6";
    return false;
  }
  // The peer's socket may be of either family when ours sees IPv4-mapped addresses: an
  // IPv4 client reaching a dual-stack listener, or an IPv6 socket that connected to one.
  int found = QuerySocketOwner(source.family, source, destination, owner, error);
  Endpoint source_v4, destination_v4;
  if (found == 0 && UnmapV4(source, &source_v4) && UnmapV4(destination, &destination_v4)) {
    found = QuerySocketOwner(AF_INET, source_v4, destination_v4, owner, error);
  }
  if (found < 0) return false;
  if (found == 0) {
    *error = "no socket of this host's network namespace is connected from " +
             FormatAddress(reinterpret_cast<const sockaddr*>(&peer));
    return false;
  }
  return true;
}

bool PeerIsThisUserOrRoot(int fd, std::string* why) {
  if (!PeerOnThisHost(fd)) {
    *why = "it is not on this host";
    return false;
  }
  uid_t owner = 0;
  std::string error;
  if (!TcpPeerOwner(fd, &owner, &error)) {
    *why = error;
    return false;
  }
  uid_t self = geteuid();
  if (owner == 0 || owner == self) return true;
  *why = "its socket belongs to uid " + std::to_string(owner) + ", neither this process's uid " +
         std::to_string(self) + " nor root";
  return false;
}

}  // namespace mooncake
