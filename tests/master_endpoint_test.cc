// common/master_endpoint (issue 17, part package): the canonical endpoint of a master
// address — names resolved, numeric forms normalised, IPv6 bracketed, etcd lists endpoint
// by endpoint, no lookup under kNumericOnly, malformed text and unresolvable names refused —
// and the daemon's HELLO check built on it, against a real master and daemon: any numeric
// spelling of its master is admitted, a name (which the daemon must not look up; libmc
// resolves it first) and other endpoints are refused.
#include <string>

#include "common/base/master_endpoint.h"
#include "tests/daemon_test_client.h"
#include "tests/cmocka_cpp.h"

using namespace mooncake;
using namespace mooncake::testing;

namespace {

std::string Canonical(const std::string& text, HostLookup lookup = HostLookup::kResolve) {
  std::string out, error;
  if (!CanonicalMasterEndpoint(text, lookup, &out, &error)) {
    assert_false(error.empty());
    return "refused: " + error;
  }
  return out;
}

void test_canonical_forms(void**) {
  assert_string_equal(Canonical("127.0.0.1:50051").c_str(), "127.0.0.1:50051");
  assert_string_equal(Canonical("localhost:50051").c_str(), "127.0.0.1:50051");
  assert_string_equal(Canonical("127.1:7").c_str(), "127.0.0.1:7");  // inet_aton's form
  assert_string_equal(Canonical("[::1]:7").c_str(), "[::1]:7");
  assert_string_equal(Canonical("::1:7").c_str(), "[::1]:7");  // the last colon ends the host
  assert_string_equal(Canonical("[0:0::1]:7").c_str(), "[::1]:7");
  assert_string_equal(Canonical("etcd://localhost:2379, 127.0.0.1:2380").c_str(),
                      "etcd://127.0.0.1:2379,127.0.0.1:2380");
  // Numeric only: addresses are read, names are not looked up.
  assert_string_equal(Canonical("127.1:7", HostLookup::kNumericOnly).c_str(), "127.0.0.1:7");
  assert_string_equal(Canonical("[::1]:7", HostLookup::kNumericOnly).c_str(), "[::1]:7");
  assert_string_equal(Canonical("localhost:7", HostLookup::kNumericOnly).c_str(),
                      "refused: host 'localhost' is not a numeric address");
  assert_string_equal(Canonical("etcd://127.0.0.1:1,localhost:2", HostLookup::kNumericOnly).c_str(),
                      "refused: host 'localhost' is not a numeric address");
}

void test_refusals(void**) {
  for (const char* bad : {"", "localhost", "localhost:", ":7", "localhost:0", "localhost:65536",
                          "localhost:7x", "etcd://", "etcd://a:1,,b:2", "etcd://a"}) {
    std::string out, error;
    assert_false(CanonicalMasterEndpoint(bad, HostLookup::kResolve, &out, &error));
    assert_false(error.empty());
  }
  std::string out, error;
  assert_false(CanonicalMasterEndpoint("no-such-host.invalid:7", HostLookup::kResolve, &out,
                                       &error));
  assert_true(error.find("no-such-host.invalid") != std::string::npos);
  assert_true(error.find("does not resolve") != std::string::npos);
}

// The daemon's --master is 127.0.0.1:P (tests/process_harness's StartDaemon).
void test_daemon_hello_compares_endpoints(void**) {
  OwnCluster cluster("10s", {});
  std::string port = std::to_string(cluster.master_port);
  for (const std::string& same : {"127.0.0.1:" + port, "127.1:" + port, "[127.0.0.1]:" + port}) {
    Conn c(cluster.socket_path);
    assert_int_equal(c.Hello(nullptr, MOONCAKE_STORE_ABI_VERSION, same), 0);
  }
  for (const std::string& other : {"localhost:" + port, "127.0.0.2:" + port, "[::1]:" + port,
                                   std::string("127.0.0.1:1"), "etcd://127.0.0.1:" + port,
                                   std::string("nonsense")}) {
    Conn c(cluster.socket_path);
    assert_int_equal(c.Hello(nullptr, MOONCAKE_STORE_ABI_VERSION, other), kInvalid);
    assert_true(c.ClosedByPeer());
  }
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_canonical_forms),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_daemon_hello_compares_endpoints),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
