// The cluster key: a secret the master and every daemon of one cluster share, read from
// --cluster_key_file, with which each end of a connection proves to the other that it
// belongs (docs/security.md). Nothing here touches a socket: the transfer port and the
// master's Thrift service each carry the same four messages in their own framing.
//
// The handshake, mutual, by HMAC-SHA256 challenge and response:
//
//   client -> server   client nonce (32 random bytes)
//   server -> client   server nonce (32 random bytes)
//   client -> server   client proof = Prove(kClient, context, client nonce, server nonce)
//   server -> client   server proof = ProveWith(the key that checked, kServer, ...)
//                      or a refusal (-1400 UNAUTHENTICATED), and the connection ends
//
// The client then checks the server proof the same way, so a peer that does not hold the
// key can neither get in nor pose as the master or an owner daemon. Both nonces are fresh
// per connection, so a recorded handshake cannot be replayed; the role and the context
// (which protocol: "transfer", "master") are inside the MAC, so a proof taken from one
// side or one protocol is worthless on the other. What the key does not do: encrypt or
// sign the bytes that follow the handshake (see docs/security.md).
//
// Rotation: a file holds one or more keys, one per line. A process proves with the first
// and accepts any, and a server answers with the key the client used; so a rolling
// restart through [old, new], then [new, old], then [new] never has two processes that
// cannot talk.
//
// Input policy: Load reads the file as a secret file (common/base/secret_file.h: a regular file
// of this user or root, no group or other bits, in a directory no one else may write; a
// FIFO, socket or device is refused without waiting on it), and refuses one over
// kMaxFileBytes, with no key, more than kMaxKeys, a key shorter than kMinKeyBytes or one
// too easy to guess (EstimatedSecretBits under kMinSecretBits: "aaaa...", "abcabc...",
// "0123456789..."). Blank lines and lines starting with '#' are skipped; a line's
// surrounding blanks are not part of its key.
//
// Thread safety: a loaded ClusterKey is immutable; any thread may use it.
#ifndef MOONCAKE_COMMON_CLUSTER_KEY_H_
#define MOONCAKE_COMMON_CLUSTER_KEY_H_

#include <sys/socket.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/base/error_code.h"

namespace mooncake {

class ClusterKey {
 public:
  static constexpr size_t kNonceBytes = 32;
  static constexpr size_t kProofBytes = 32;  // HMAC-SHA256
  static constexpr size_t kMinKeyBytes = 32;
  static constexpr size_t kMaxKeys = 8;
  static constexpr size_t kMaxFileBytes = 64 * 1024;

  // Which side a proof is from.
  enum class Role { kClient, kServer };

  // The keys of path. On failure *error says why, naming the file and the fix:
  // FILE_NOT_FOUND, FILE_OPEN_FAIL (cannot be read, or others could read or replace it),
  // FILE_READ_FAIL or INVALID_PARAMS (what it holds).
  static Result<ClusterKey> Load(const std::string& path, std::string* error);
  // From keys in memory (tests, fuzzers), which Load's checks of the keys would pass.
  static ClusterKey FromKeys(std::vector<std::string> keys);

  ClusterKey() = default;

  // kNonceBytes from the kernel's random source.
  static std::string NewNonce();

  // The proof of role over (context, client_nonce, server_nonce) with the first key.
  std::string Prove(Role role, const std::string& context, const std::string& client_nonce,
                    const std::string& server_nonce) const;
  // The same with keys()[index].
  std::string ProveWith(size_t index, Role role, const std::string& context,
                        const std::string& client_nonce,
                        const std::string& server_nonce) const;
  // The index of the key proof was made with, or -1 (also for a proof of the wrong size or
  // nonces that are not kNonceBytes). Compares in constant time.
  int Check(const std::string& proof, Role role, const std::string& context,
            const std::string& client_nonce, const std::string& server_nonce) const;

  // A short name of the first key for logs ("sha256:1f2e3d4c"): which key a process runs
  // with, without revealing it.
  std::string Fingerprint() const;

  // The bearer tokens of the admin HTTP port (common/admin/admin_http.h), one per key in the
  // file's order: lowercase hex of HMAC-SHA256(key, kAdminTokenLabel). A client sends the
  // first; a server accepts any, so rotation works as for the handshake. The token says
  // nothing of the key it came from (HMAC is one-way), yet only a key holder can make one.
  static constexpr const char* kAdminTokenLabel = "mooncake admin token v1";
  std::vector<std::string> AdminTokens() const;

  size_t size() const { return keys_.size(); }

 private:
  explicit ClusterKey(std::vector<std::string> keys) : keys_(std::move(keys)) {}
  std::vector<std::string> keys_;
};

// At a process's start: the key of --cluster_key_file path into *key, or null when path
// is empty; logged either way (the key's fingerprint, or that only peers on this host will be
// admitted). False, after logging why, when the file cannot be used.
bool LoadClusterKeyForProcess(const std::string& path, std::shared_ptr<const ClusterKey>* key);

// True for an IPv4 127.0.0.0/8, IPv6 ::1 or IPv4-mapped loopback address: the peers a
// process without a cluster key admits.
bool IsLoopbackAddress(const sockaddr* addr);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_CLUSTER_KEY_H_
