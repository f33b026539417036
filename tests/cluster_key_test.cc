// common/cluster_key and common/secret_file: the key file's policy (what it may be, who may
// own it and its directories, what a key must carry) and the proofs of the handshake.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "common/auth/cluster_key.h"
#include "common/base/secret_file.h"
#include "tests/cmocka_cpp.h"
#include "tests/process_harness.h"

using namespace mooncake;
using Role = ClusterKey::Role;

namespace {

// openssl rand -hex 32, twice.
const std::string kKeyA = "77434285cb23946982bf35a061a697acefc54c9f8532fa5a09794073d026751b";
const std::string kKeyB = "d5f4771a5961fbbab2177c842f6baf3d47c7d886ac9e7ded18b7b9916c892ba1";
constexpr uid_t kNobody = 65534;

std::string WriteKeyFile(const std::string& dir, const std::string& text, mode_t mode) {
  std::string path = dir + "/key";
  std::ofstream(path, std::ios::trunc) << text;
  chmod(path.c_str(), mode);
  return path;
}

ErrorCode LoadCode(const std::string& path, std::string* error) {
  return ClusterKey::Load(path, error).code();
}

// Load refuses path with code, and the message holds needle.
void AssertRefused(const std::string& path, ErrorCode code, const char* needle) {
  std::string error;
  assert_int_equal(ToInt(LoadCode(path, &error)), ToInt(code));
  std::printf("refused: %s\n", error.c_str());
  assert_non_null(strstr(error.c_str(), needle));
  assert_non_null(strstr(error.c_str(), path.c_str()));  // names the file
}

void test_key_file_policy(void** state) {
  (void)state;
  std::string dir = testing::MakeTempDir("mc-key");
  std::string error;
  assert_int_equal(ToInt(LoadCode(dir + "/none", &error)), ToInt(ErrorCode::FILE_NOT_FOUND));
  assert_int_equal(ToInt(LoadCode(dir + "/no/such/dir/key", &error)),
                   ToInt(ErrorCode::FILE_NOT_FOUND));
  // Readable by the group: refused, and the message says how to fix it.
  std::string path = WriteKeyFile(dir, kKeyA + "\n", 0640);
  AssertRefused(path, ErrorCode::FILE_OPEN_FAIL, "chmod 0600");
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

// Not a regular file: refused without being opened, so a FIFO with no writer cannot hold
// the process at start (this test would hang, and CTest time it out, if Load waited).
void test_key_file_kinds(void** state) {
  (void)state;
  std::string dir = testing::MakeTempDir("mc-key-kinds");
  const std::string fifo = dir + "/fifo.key";
  assert_int_equal(mkfifo(fifo.c_str(), 0600), 0);
  AssertRefused(fifo, ErrorCode::FILE_OPEN_FAIL, "a FIFO");
  // A socket file (open(2) of one fails; it is refused by its kind first).
  const std::string sock = dir + "/sock.key";
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock.c_str());
  assert_int_equal(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  chmod(sock.c_str(), 0600);
  AssertRefused(sock, ErrorCode::FILE_OPEN_FAIL, "a socket");
  close(fd);
  AssertRefused("/dev/null", ErrorCode::FILE_OPEN_FAIL, "a device");
  // A symbolic link, even to a good key file: the file itself must be named.
  const std::string real = WriteKeyFile(dir, kKeyA + "\n", 0600);
  const std::string link = dir + "/link.key";
  assert_int_equal(symlink(real.c_str(), link.c_str()), 0);
  AssertRefused(link, ErrorCode::FILE_OPEN_FAIL, "a symbolic link");
  std::string error;
  assert_true(ClusterKey::Load(real, &error).ok());
  testing::RemoveTree(dir);
}

// Owned by someone else: whoever owns the file chooses the key. Root only (chown).
void test_key_file_owner(void** state) {
  (void)state;
  if (geteuid() != 0) {
    std::printf("skipped: chown to another user needs root\n");
    skip();
  }
  std::string dir = testing::MakeTempDir("mc-key-owner");
  std::string path = WriteKeyFile(dir, kKeyA + "\n", 0600);
  assert_int_equal(chown(path.c_str(), kNobody, kNobody), 0);
  AssertRefused(path, ErrorCode::FILE_OPEN_FAIL, "owned by uid 65534");
  assert_int_equal(chown(path.c_str(), 0, 0), 0);
  std::string error;
  assert_true(ClusterKey::Load(path, &error).ok());
  // Its directory owned by someone else, who could replace the file.
  assert_int_equal(chown(dir.c_str(), kNobody, kNobody), 0);
  AssertRefused(path, ErrorCode::FILE_OPEN_FAIL, "owned by uid 65534");
  // ... or a directory above it.
  assert_int_equal(chown(dir.c_str(), 0, 0), 0);
  assert_int_equal(mkdir((dir + "/inner").c_str(), 0700), 0);
  const std::string inner = WriteKeyFile(dir + "/inner", kKeyA + "\n", 0600);
  assert_true(ClusterKey::Load(inner, &error).ok());
  assert_int_equal(chown(dir.c_str(), kNobody, kNobody), 0);
  AssertRefused(inner, ErrorCode::FILE_OPEN_FAIL, "above it is owned by uid 65534");
  assert_int_equal(chown(dir.c_str(), 0, 0), 0);
  testing::RemoveTree(dir);
}

// A directory others may write: they could put their own file in the key's place.
void test_key_file_directory(void** state) {
  (void)state;
  std::string dir = testing::MakeTempDir("mc-key-dir");
  std::string path = WriteKeyFile(dir, kKeyA + "\n", 0600);
  std::string error;
  assert_true(ClusterKey::Load(path, &error).ok());  // mkdtemp's 0700, under sticky /tmp
  for (mode_t mode : {0777, 01777, 0770, 0730}) {
    assert_int_equal(chmod(dir.c_str(), mode), 0);
    AssertRefused(path, ErrorCode::FILE_OPEN_FAIL, "may be written by");
  }
  assert_int_equal(chmod(dir.c_str(), 0755), 0);
  assert_true(ClusterKey::Load(path, &error).ok());
  // Above the key's directory: others may write it only when it is sticky.
  assert_int_equal(mkdir((dir + "/inner").c_str(), 0700), 0);
  const std::string inner = WriteKeyFile(dir + "/inner", kKeyA + "\n", 0600);
  assert_int_equal(chmod(dir.c_str(), 0777), 0);
  AssertRefused(inner, ErrorCode::FILE_OPEN_FAIL, "above it may be written by anyone");
  assert_int_equal(chmod(dir.c_str(), 01777), 0);
  assert_true(ClusterKey::Load(inner, &error).ok());
  // A key directly in /tmp (1777): refused, sticky or not.
  assert_int_equal(chmod(dir.c_str(), 0700), 0);
  if (std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") == "/tmp") {
    char tmp_key[] = "/tmp/mc-key-in-tmp-XXXXXX";
    int fd = mkstemp(tmp_key);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, (kKeyA + "\n").data(), kKeyA.size() + 1),
                     static_cast<ssize_t>(kKeyA.size() + 1));
    close(fd);
    AssertRefused(tmp_key, ErrorCode::FILE_OPEN_FAIL, "sticky, but others may still");
    unlink(tmp_key);
  }
  testing::RemoveTree(dir);
}

// Keys that are easy to guess are refused, naming how to make a good one; generated ones
// always pass.
void test_key_strength(void** state) {
  (void)state;
  std::string alphabet;
  for (char c = 'a'; c <= 'z'; ++c) alphabet += c;
  for (char c = 'A'; c <= 'Z'; ++c) alphabet += c;
  for (char c = '0'; c <= '9'; ++c) alphabet += c;
  const std::string weak[] = {
      std::string(32, 'a'),
      std::string(64, 'k'),
      "abcabcabcabcabcabcabcabcabcabcabc",
      "0123456789012345678901234567890123456789",
      "0123456789abcdef0123456789abcdef",
      alphabet,
      kKeyA.substr(0, 16) + kKeyA.substr(0, 16) + kKeyA.substr(0, 16) + kKeyA.substr(0, 16),
      "passwordpasswordpasswordpassword",
      "mysecretclusterkeyforproduction!",
  };
  std::string dir = testing::MakeTempDir("mc-key-strength");
  for (const std::string& key : weak) {
    std::printf("%-66s %6.1f bits\n", key.c_str(), EstimatedSecretBits(key));
    assert_true(EstimatedSecretBits(key) < kMinSecretBits);
    AssertRefused(WriteKeyFile(dir, key + "\n", 0600), ErrorCode::INVALID_PARAMS,
                  "openssl rand -hex 32");
  }
  // Every key of a file is checked, not only the one a process proves with.
  AssertRefused(WriteKeyFile(dir, kKeyA + "\n" + weak[0] + "\n", 0600),
                ErrorCode::INVALID_PARAMS, "key 2 is too easy to guess");
  // openssl rand -hex 32 and -base64 32, many times over: never refused.
  double lowest = 1e9;
  for (int i = 0; i < 20000; ++i) {
    unsigned char bytes[32];
    assert_int_equal(RAND_bytes(bytes, sizeof(bytes)), 1);
    std::string hex;
    for (unsigned char b : bytes) {
      static const char kHex[] = "0123456789abcdef";
      hex += kHex[b >> 4];
      hex += kHex[b & 15];
    }
    unsigned char base64[64];
    int n = EVP_EncodeBlock(base64, bytes, sizeof(bytes));
    assert_int_equal(n, 44);
    for (const std::string& key : {hex, std::string(reinterpret_cast<char*>(base64), 44)}) {
      const double bits = EstimatedSecretBits(key);
      lowest = std::min(lowest, bits);
      if (bits < kMinSecretBits) fail_msg("generated key %s: %.1f bits", key.c_str(), bits);
    }
    if (i < 20) {  // and some through Load itself
      std::string error;
      assert_true(ClusterKey::Load(WriteKeyFile(dir, hex + "\n", 0600), &error).ok());
      assert_true(ClusterKey::Load(
          WriteKeyFile(dir, std::string(reinterpret_cast<char*>(base64), 44), 0600), &error)
                      .ok());
    }
  }
  std::printf("lowest estimate of 40000 generated keys: %.1f bits\n", lowest);
  // The harness's keys too.
  assert_true(EstimatedSecretBits(testing::RandomClusterKey()) >= kMinSecretBits);
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
      cmocka_unit_test(test_key_file_kinds),
      cmocka_unit_test(test_key_file_owner),
      cmocka_unit_test(test_key_file_directory),
      cmocka_unit_test(test_key_strength),
      cmocka_unit_test(test_proofs),
      cmocka_unit_test(test_rotation),
      cmocka_unit_test(test_loopback),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
