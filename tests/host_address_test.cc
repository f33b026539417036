// common/host_address: whether a peer is on this host (from its addresses, and from a
// connected socket), addresses as text, what a name resolves to, this host's own
// address.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "common/auth/host_address.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

using namespace mooncake;

namespace {

sockaddr_storage Address(const char* ip, uint16_t port = 0) {
  sockaddr_storage s{};
  if (std::strchr(ip, ':') != nullptr) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&s);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    assert_int_equal(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1);
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&s);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    assert_int_equal(inet_pton(AF_INET, ip, &in->sin_addr), 1);
  }
  return s;
}

bool OnThisHost(const char* peer, const char* local) {
  sockaddr_storage p = Address(peer), l = Address(local);
  return PeerOnThisHost(reinterpret_cast<sockaddr*>(&p), reinterpret_cast<sockaddr*>(&l));
}

void test_peer_on_this_host(void**) {
  assert_true(OnThisHost("127.0.0.1", "127.0.0.1"));
  assert_true(OnThisHost("127.9.8.7", "10.0.0.1"));  // loopback, whatever it reached
  assert_true(OnThisHost("::1", "::1"));
  assert_true(OnThisHost("::ffff:127.0.0.1", "::ffff:127.0.0.1"));
  assert_true(OnThisHost("10.0.0.1", "10.0.0.1"));  // this host's own address
  assert_true(OnThisHost("::ffff:10.0.0.1", "10.0.0.1"));
  assert_false(OnThisHost("10.0.0.2", "10.0.0.1"));  // another host
  assert_false(OnThisHost("10.0.0.1", "127.0.0.1"));
  assert_false(OnThisHost("192.0.2.2", "::ffff:127.0.0.1"));
  assert_false(OnThisHost("fd00::2", "fd00::3"));
  sockaddr_storage p = Address("10.0.0.1");
  assert_false(PeerOnThisHost(reinterpret_cast<sockaddr*>(&p), nullptr));
}

// The socket form reads both addresses of a real connection; a socket without a peer is
// not on this host.
void test_peer_on_this_host_of_a_socket(void**) {
  int port = 0;
  int listener = testing::ListenOnLoopback(&port);
  assert_true(listener >= 0);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_storage addr = Address("127.0.0.1", static_cast<uint16_t>(port));
  assert_int_equal(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(sockaddr_in)), 0);
  int accepted = accept(listener, nullptr, nullptr);
  assert_true(accepted >= 0);
  assert_true(PeerOnThisHost(accepted));
  assert_true(PeerOnThisHost(fd));
  assert_false(PeerOnThisHost(listener));  // no peer at all
  close(accepted);
  close(fd);
  close(listener);
}

void test_addresses_as_text(void**) {
  sockaddr_storage v4 = Address("127.0.0.1", 5678), v6 = Address("::1", 5678);
  assert_string_equal(FormatIp(reinterpret_cast<sockaddr*>(&v4)).c_str(), "127.0.0.1");
  assert_string_equal(FormatAddress(reinterpret_cast<sockaddr*>(&v4)).c_str(), "127.0.0.1:5678");
  assert_string_equal(FormatIp(reinterpret_cast<sockaddr*>(&v6)).c_str(), "::1");
  assert_string_equal(FormatAddress(reinterpret_cast<sockaddr*>(&v6)).c_str(), "[::1]:5678");
  sockaddr_storage unix_family{};
  unix_family.ss_family = AF_UNIX;
  assert_string_equal(FormatIp(reinterpret_cast<sockaddr*>(&unix_family)).c_str(), "?");
  assert_string_equal(FormatAddress(reinterpret_cast<sockaddr*>(&unix_family)).c_str(), "?");
}

// A name's first IPv4 address, else its first IPv6 one; a name that does not resolve says
// why.
void test_resolve_host_address(void**) {
  sockaddr_storage out{};
  std::string error;
  assert_true(ResolveHostAddress("127.0.0.1", &out, &error));
  assert_string_equal(FormatIp(reinterpret_cast<sockaddr*>(&out)).c_str(), "127.0.0.1");
  assert_true(ResolveHostAddress("::1", &out, &error));
  assert_int_equal(out.ss_family, AF_INET6);
  assert_string_equal(FormatIp(reinterpret_cast<sockaddr*>(&out)).c_str(), "::1");
  assert_true(ResolveHostAddress("localhost", &out, &error));  // IPv4 before ::1
  assert_int_equal(out.ss_family, AF_INET);
  assert_false(ResolveHostAddress("no-such-host.invalid", &out, &error));
  assert_false(error.empty());
}

// Whatever the host's name resolves to, it is a numeric address one can bind.
void test_this_host_address(void**) {
  std::string self = ThisHostAddress();
  in6_addr parsed{};
  assert_true(inet_pton(AF_INET, self.c_str(), &parsed) == 1 ||
              inet_pton(AF_INET6, self.c_str(), &parsed) == 1);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_peer_on_this_host),
      cmocka_unit_test(test_peer_on_this_host_of_a_socket),
      cmocka_unit_test(test_addresses_as_text),
      cmocka_unit_test(test_resolve_host_address),
      cmocka_unit_test(test_this_host_address),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
