// common/cluster_key: the key file's policy and the proofs of the handshake.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <string>

#include "common/cluster_key.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

using namespace mooncake;
using Role = ClusterKey::Role;

namespace {

const std::string kKeyA(64, 'a');
const std::string kKeyB = "0123456789abcdef0123456789abcdef";

std::string WriteKeyFile(const std::string& dir, const std::string& text, mode_t mode) {
  std::string path = dir + "/key";
  std::ofstream(path, std::ios::trunc) << text;
  chmod(path.c_str(), mode);
  return path;
}

ErrorCode LoadCode(const std::string& path, std::string* error) {
  return ClusterKey::Load(path, error).code();
}

void test_key_file_policy(void** state) {
  (void)state;
  std::string dir = testing::MakeTempDir("mc-key");
  std::string error;
  assert_int_equal(ToInt(LoadCode(dir + "/none", &error)), ToInt(ErrorCode::FILE_NOT_FOUND));
  // Readable by the group: refused, and the message says how to fix it.
  std::string path = WriteKeyFile(dir, kKeyA + "\n", 0640);
  assert_int_equal(ToInt(LoadCode(path, &error)), ToInt(ErrorCode::FILE_OPEN_FAIL));
  assert_non_null(strstr(error.c_str(), "chmod 0600"));
  path = WriteKeyFile(dir, "short\n", 0600);
  assert_int_equal(ToInt(LoadCode(path, &error)), ToInt(ErrorCode::INVALID_PARAMS));
  path = WriteKeyFile(dir, "# only a comment\n\n", 0600);
  assert_int_equal(ToInt(LoadCode(path, &error)), ToInt(ErrorCode::INVALID_PARAMS));
  assert_int_equal(ToInt(LoadCode(dir, &error)), ToInt(ErrorCode::FILE_OPEN_FAIL));
  // Two keys, a comment and blanks around them.
  path = WriteKeyFile(dir, "# rotated 2026-12\n  " + kKeyB + " \n\n" + kKeyA, 0600);
  Result<ClusterKey> key = ClusterKey::Load(path, &error);
  assert_true(key.ok());
  assert_int_equal(key.value().size(), 2);
  assert_string_equal(key.value().Fingerprint().c_str(),
                      ClusterKey::FromKeys({kKeyB}).Fingerprint().c_str());
  testing::RemoveTree(dir);
}

void test_proofs(void** state) {
  (void)state;
  ClusterKey a = ClusterKey::FromKeys({kKeyA});
  ClusterKey b = ClusterKey::FromKeys({kKeyB});
  std::string cn = ClusterKey::NewNonce(), sn = ClusterKey::NewNonce();
  assert_int_equal(cn.size(), ClusterKey::kNonceBytes);
  assert_true(cn != sn);
  std::string proof = a.Prove(Role::kClient, "transfer", cn, sn);
  assert_int_equal(proof.size(), ClusterKey::kProofBytes);
  assert_int_equal(a.Check(proof, Role::kClient, "transfer", cn, sn), 0);
  // The wrong key, the other role, the other protocol, other nonces: each refused.
  assert_int_equal(b.Check(proof, Role::kClient, "transfer", cn, sn), -1);
  assert_int_equal(a.Check(proof, Role::kServer, "transfer", cn, sn), -1);
  assert_int_equal(a.Check(proof, Role::kClient, "master", cn, sn), -1);
  assert_int_equal(a.Check(proof, Role::kClient, "transfer", sn, cn), -1);
  std::string flipped = proof;
  flipped[7] ^= 1;
  assert_int_equal(a.Check(flipped, Role::kClient, "transfer", cn, sn), -1);
  assert_int_equal(a.Check(proof.substr(1), Role::kClient, "transfer", cn, sn), -1);
  assert_int_equal(a.Check(proof, Role::kClient, "transfer", cn.substr(1), sn), -1);
}

void test_rotation(void** state) {
  (void)state;
  // Mid-rotation: one side proves with the old key and also accepts the new, the other
  // proves with the new and accepts the old. Each checks the other's proof, and the
  // server answers with the key that checked.
  ClusterKey old_first = ClusterKey::FromKeys({kKeyA, kKeyB});
  ClusterKey new_first = ClusterKey::FromKeys({kKeyB, kKeyA});
  ClusterKey new_only = ClusterKey::FromKeys({kKeyB});
  std::string cn = ClusterKey::NewNonce(), sn = ClusterKey::NewNonce();
  std::string client_proof = old_first.Prove(Role::kClient, "master", cn, sn);
  int index = new_first.Check(client_proof, Role::kClient, "master", cn, sn);
  assert_int_equal(index, 1);
  std::string server_proof = new_first.ProveWith(index, Role::kServer, "master", cn, sn);
  assert_int_equal(old_first.Check(server_proof, Role::kServer, "master", cn, sn), 0);
  // After the rotation, a process still on the old key alone is refused.
  assert_int_equal(new_only.Check(client_proof, Role::kClient, "master", cn, sn), -1);
  assert_true(new_first.ProveWith(5, Role::kServer, "master", cn, sn).empty());
}

void test_loopback(void** state) {
  (void)state;
  sockaddr_in in{};
  in.sin_family = AF_INET;
  inet_pton(AF_INET, "127.3.4.5", &in.sin_addr);
  assert_true(IsLoopbackAddress(reinterpret_cast<sockaddr*>(&in)));
  inet_pton(AF_INET, "10.0.0.1", &in.sin_addr);
  assert_false(IsLoopbackAddress(reinterpret_cast<sockaddr*>(&in)));
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::1", &in6.sin6_addr);
  assert_true(IsLoopbackAddress(reinterpret_cast<sockaddr*>(&in6)));
  inet_pton(AF_INET6, "::ffff:127.0.0.1", &in6.sin6_addr);
  assert_true(IsLoopbackAddress(reinterpret_cast<sockaddr*>(&in6)));
  inet_pton(AF_INET6, "::ffff:192.168.1.1", &in6.sin6_addr);
  assert_false(IsLoopbackAddress(reinterpret_cast<sockaddr*>(&in6)));
  assert_false(IsLoopbackAddress(nullptr));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_key_file_policy),
      cmocka_unit_test(test_proofs),
      cmocka_unit_test(test_rotation),
      cmocka_unit_test(test_loopback),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
