// common/peer_owner: the kernel's answer to "who owns the other end of this loopback TCP
// connection", for IPv4, IPv6 and a dual-stack listener's IPv4-mapped peers, and the
// no-key admission built on it (this process's uid or root, nobody else).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "common/auth/peer_owner.h"
#include "tests/cmocka_cpp.h"

using namespace mooncake;

namespace {

constexpr uid_t kNobody = 65534;

// A listener on ip (port chosen by the kernel); v6only as given for IPv6.
int Listen(int family, const char* ip, bool v6only, sockaddr_storage* bound) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  sockaddr_storage address{};
  socklen_t length;
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&address);
    in->sin_family = AF_INET;
    assert_int_equal(inet_pton(AF_INET, ip, &in->sin_addr), 1);
    length = sizeof(sockaddr_in);
  } else {
    int only = v6only ? 1 : 0;
    assert_int_equal(setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof(only)), 0);
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
    in6->sin6_family = AF_INET6;
    assert_int_equal(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1);
    length = sizeof(sockaddr_in6);
  }
  assert_int_equal(bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  assert_int_equal(listen(fd, 4), 0);
  length = sizeof(*bound);
  assert_int_equal(getsockname(fd, reinterpret_cast<sockaddr*>(bound), &length), 0);
  return fd;
}

// Connects a socket of family to the listener at target (given as family's address).
int Connect(int family, const char* ip, uint16_t port) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  sockaddr_storage address{};
  socklen_t length;
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&address);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    assert_int_equal(inet_pton(AF_INET, ip, &in->sin_addr), 1);
    length = sizeof(sockaddr_in);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    assert_int_equal(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1);
    length = sizeof(sockaddr_in6);
  }
  assert_int_equal(connect(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  return fd;
}

uint16_t PortOf(const sockaddr_storage& bound) {
  return bound.ss_family == AF_INET
             ? ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port)
             : ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port);
}

// One connection from a socket of client_family to a listener of listen_family; the
// accepted end is asked who owns the peer.
void ExpectOwnPeer(int listen_family, const char* listen_ip, bool v6only, int client_family,
                   const char* connect_ip) {
  sockaddr_storage bound{};
  int listener = Listen(listen_family, listen_ip, v6only, &bound);
  int client = Connect(client_family, connect_ip, PortOf(bound));
  int accepted = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  assert_true(accepted >= 0);
  uid_t owner = 12345;
  std::string error;
  bool found = TcpPeerOwner(accepted, &owner, &error);
  if (!found) fprintf(stderr, "TcpPeerOwner: %s\n", error.c_str());
  assert_true(found);
  assert_int_equal(owner, geteuid());
  std::string why;
  assert_true(PeerIsThisUserOrRoot(accepted, &why));
  close(accepted);
  close(client);
  close(listener);
}

void test_ipv4_peer_is_this_process(void** /*state*/) {
  ExpectOwnPeer(AF_INET, "127.0.0.1", false, AF_INET, "127.0.0.1");
}

void test_ipv6_peer_is_this_process(void** /*state*/) {
  ExpectOwnPeer(AF_INET6, "::1", true, AF_INET6, "::1");
}

// An IPv4 client of a dual-stack listener: the accepted socket sees ::ffff:127.0.0.1,
// while the peer's own socket is an IPv4 one.
void test_ipv4_client_of_a_dual_stack_listener(void** /*state*/) {
  ExpectOwnPeer(AF_INET6, "::", false, AF_INET, "127.0.0.1");
}

// The other end closed: nothing ESTABLISHED is left to ask about, and a socket lingering
// in TIME_WAIT (listed with uid 0) must not pass as root's.
void test_a_closed_peer_is_not_found(void** /*state*/) {
  sockaddr_storage bound{};
  int listener = Listen(AF_INET, "127.0.0.1", false, &bound);
  int client = Connect(AF_INET, "127.0.0.1", PortOf(bound));
  int accepted = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  assert_true(accepted >= 0);
  close(client);
  char byte;
  assert_int_equal(read(accepted, &byte, 1), 0);  // its FIN arrived
  uid_t owner = 0;
  std::string error;
  assert_false(TcpPeerOwner(accepted, &owner, &error));
  assert_non_null(strstr(error.c_str(), "no socket of this host"));
  std::string why;
  assert_false(PeerIsThisUserOrRoot(accepted, &why));
  close(accepted);
  close(listener);
}

// Another uid's socket is named as such and refused. Needs root to become that uid.
void test_another_users_peer_is_refused(void** /*state*/) {
  if (geteuid() != 0) {
    fprintf(stderr, "skipped: needs root to connect as uid %u\n", kNobody);
    skip();
  }
  sockaddr_storage bound{};
  int listener = Listen(AF_INET, "127.0.0.1", false, &bound);
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    close(ready[1]);
    if (setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(2);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(PortOf(bound));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) _exit(3);
    char byte = 0;
    (void)read(ready[0], &byte, 1);  // hold the connection until the parent has asked
    _exit(0);
  }
  close(ready[0]);
  int accepted = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  assert_true(accepted >= 0);
  uid_t owner = 0;
  std::string error;
  bool found = TcpPeerOwner(accepted, &owner, &error);
  if (!found) fprintf(stderr, "TcpPeerOwner: %s\n", error.c_str());
  assert_true(found);
  assert_int_equal(owner, kNobody);
  std::string why;
  assert_false(PeerIsThisUserOrRoot(accepted, &why));
  assert_non_null(strstr(why.c_str(), "uid 65534"));
  close(ready[1]);
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(accepted);
  close(listener);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ipv4_peer_is_this_process),
      cmocka_unit_test(test_ipv6_peer_is_this_process),
      cmocka_unit_test(test_ipv4_client_of_a_dual_stack_listener),
      cmocka_unit_test(test_a_closed_peer_is_not_found),
      cmocka_unit_test(test_another_users_peer_is_refused),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
