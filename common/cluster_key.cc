#include "common/auth/cluster_key.h"

#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdio>

#include "common/base/little_endian.h"
#include "common/base/logging.h"
#include "common/base/secret_file.h"
#include "common/base/text.h"

namespace mooncake {

namespace {

// What the MAC covers: a label for the role, then each field behind its length, so no two
// different inputs encode alike.
std::string ProofInput(ClusterKey::Role role, const std::string& context,
                       const std::string& client_nonce, const std::string& server_nonce) {
  std::string in = role == ClusterKey::Role::kClient ? "mooncake client proof"
                                                     : "mooncake server proof";
  for (const std::string* field : {&context, &client_nonce, &server_nonce}) {
    AppendLittleEndian(&in, field->size(), 4);
    in.append(*field);
  }
  return in;
}

std::string Hmac(const std::string& key, const std::string& input) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac, &mac_length);
  return std::string(reinterpret_cast<const char*>(mac), mac_length);
}

}  // namespace

Result<ClusterKey> ClusterKey::Load(const std::string& path, std::string* error) {
  auto fail = [&](ErrorCode code, const std::string& why) {
    *error = "cluster key file " + path + ": " + why;
    return Result<ClusterKey>(code);
  };
  std::string text, why;
  ErrorCode read = ReadSecretFile(path, kMaxFileBytes, &text, &why);
  if (read != ErrorCode::OK) return fail(read, why);
  std::vector<std::string> keys;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = Trim(std::string_view(text).substr(start, end - start), " \t\r");
    start = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const std::string which = "key " + std::to_string(keys.size() + 1);
    if (line.size() < kMinKeyBytes) {
      return fail(ErrorCode::INVALID_PARAMS,
                  which + " is shorter than 32 characters (make one with: openssl rand -hex 32)");
    }
    const double bits = EstimatedSecretBits(line);
    if (bits < kMinSecretBits) {
      char estimate[16];
      std::snprintf(estimate, sizeof(estimate), "%.0f", bits);
      return fail(ErrorCode::INVALID_PARAMS,
                  which + " is too easy to guess: about " + estimate + " bits by its " +
                      "characters' spread, 128 needed (few different characters, a repeated "
                      "part or a sequence); make one with: openssl rand -hex 32");
    }
    keys.push_back(line);
  }
  if (keys.empty()) return fail(ErrorCode::INVALID_PARAMS, "holds no key");
  if (keys.size() > kMaxKeys) return fail(ErrorCode::INVALID_PARAMS, "more than 8 keys");
  return ClusterKey(std::move(keys));
}

ClusterKey ClusterKey::FromKeys(std::vector<std::string> keys) {
  return ClusterKey(std::move(keys));
}

std::string ClusterKey::NewNonce() {
  std::string nonce(kNonceBytes, '\0');
  size_t filled = 0;
  while (filled < nonce.size()) {
    ssize_t n = getrandom(&nonce[filled], nonce.size() - filled, 0);
    if (n > 0) filled += static_cast<size_t>(n);
    // EINTR retries; getrandom does not otherwise fail once the pool is initialised.
  }
  return nonce;
}

std::string ClusterKey::Prove(Role role, const std::string& context,
                              const std::string& client_nonce,
                              const std::string& server_nonce) const {
  return ProveWith(0, role, context, client_nonce, server_nonce);
}

std::string ClusterKey::ProveWith(size_t index, Role role, const std::string& context,
                                  const std::string& client_nonce,
                                  const std::string& server_nonce) const {
  if (index >= keys_.size()) return std::string();
  return Hmac(keys_[index], ProofInput(role, context, client_nonce, server_nonce));
}

int ClusterKey::Check(const std::string& proof, Role role, const std::string& context,
                      const std::string& client_nonce, const std::string& server_nonce) const {
  if (proof.size() != kProofBytes || client_nonce.size() != kNonceBytes ||
      server_nonce.size() != kNonceBytes) {
    return -1;
  }
  std::string input = ProofInput(role, context, client_nonce, server_nonce);
  int match = -1;
  for (size_t i = 0; i < keys_.size(); ++i) {
    // Every key is tried, so the time taken does not say which one matched.
    std::string expected = Hmac(keys_[i], input);
    if (CRYPTO_memcmp(expected.data(), proof.data(), kProofBytes) == 0 && match < 0) {
      match = static_cast<int>(i);
    }
  }
  return match;
}

std::string ClusterKey::Fingerprint() const {
  if (keys_.empty()) return "none";
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(keys_[0].data()), keys_[0].size(), digest);
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%02x%02x%02x%02x", digest[0], digest[1], digest[2],
                digest[3]);
  return std::string("sha256:") + hex;
}

std::vector<std::string> ClusterKey::AdminTokens() const {
  static const char kHex[] = "0123456789abcdef";
  std::vector<std::string> tokens;
  for (const std::string& key : keys_) {
    std::string mac = Hmac(key, kAdminTokenLabel);
    std::string hex;
    for (unsigned char c : mac) {
      hex += kHex[c >> 4];
      hex += kHex[c & 15];
    }
    tokens.push_back(std::move(hex));
  }
  return tokens;
}

bool LoadClusterKeyForProcess(const std::string& path, std::shared_ptr<const ClusterKey>* key) {
  key->reset();
  if (path.empty()) {
    MC_LOG_WARN("no --cluster_key_file: only peers on this host (loopback, or this host's own "
                "address) are admitted; give "
                "every master and daemon of a cluster the same key file to span hosts "
                "(docs/security.md)");
    return true;
  }
  std::string error;
  Result<ClusterKey> loaded = ClusterKey::Load(path, &error);
  if (!loaded.ok()) {
    MC_LOG_ERROR("%s", error.c_str());
    return false;
  }
  MC_LOG_INFO("cluster key %s from %s (%zu key%s accepted): every peer must prove it",
              loaded.value().Fingerprint().c_str(), path.c_str(), loaded.value().size(),
              loaded.value().size() == 1 ? "" : "s");
  *key = std::make_shared<const ClusterKey>(std::move(loaded.value()));
  return true;
}

bool IsLoopbackAddress(const sockaddr* addr) {
  if (addr == nullptr) return false;
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace mooncake
