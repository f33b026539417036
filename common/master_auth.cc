#include "common/master_link/master_auth.h"

#include <exception>

namespace mooncake {

namespace {
const char kUnauthenticatedPrefix[] = "-1400 UNAUTHENTICATED: ";
const char kNotLeaderPrefix[] = "-1600 NOT_LEADER: ";
}  // namespace

std::string NotLeaderMessage(const std::string& why) { return kNotLeaderPrefix + why; }

bool IsNotLeaderMessage(const std::string& what) {
  return what.compare(0, sizeof(kNotLeaderPrefix) - 1, kNotLeaderPrefix) == 0;
}

ErrorCode RefusalCode(const std::string& what) {
  if (IsUnauthenticatedMessage(what)) return ErrorCode::UNAUTHENTICATED;
  if (IsNotLeaderMessage(what)) return ErrorCode::NOT_LEADER;
  return ErrorCode::OK;
}

std::string UnauthenticatedMessage(const std::string& why) {
  return kUnauthenticatedPrefix + why;
}

bool IsUnauthenticatedMessage(const std::string& what) {
  return what.compare(0, sizeof(kUnauthenticatedPrefix) - 1, kUnauthenticatedPrefix) == 0;
}

ErrorCode AuthenticateToMaster(rpc::MasterServiceClient* client, const ClusterKey* key,
                               std::string* error) {
  if (key == nullptr) return ErrorCode::OK;
  const std::string client_nonce = ClusterKey::NewNonce();
  rpc::AuthChallengeResult challenge;
  rpc::AuthenticateResult answer;
  try {
    client->AuthChallenge(challenge, client_nonce);
    if (challenge.code == 0) {
      client->Authenticate(answer, key->Prove(ClusterKey::Role::kClient, kMasterAuthContext,
                                              client_nonce, challenge.server_nonce));
    }
  } catch (const std::exception& e) {
    *error = e.what();
    return ErrorCode::RPC_FAIL;
  }
  const std::string ours = "this process's cluster key " + key->Fingerprint();
  if (challenge.code != 0) {
    // -600: the master admits us without a proof, so it has no key to prove.
    *error = "the master answered the handshake with " + std::to_string(challenge.code) + " " +
             ErrorName(challenge.code) +
             ": it cannot prove the cluster key (a master without one?); refusing it";
    return ErrorCode::UNAUTHENTICATED;
  }
  if (answer.code != 0) {
    *error = "the master refused " + ours + " (" + std::to_string(answer.code) + " " +
             ErrorName(answer.code) + "): it runs with another key";
    return ErrorCode::UNAUTHENTICATED;
  }
  if (key->Check(answer.server_proof, ClusterKey::Role::kServer, kMasterAuthContext,
                 client_nonce, challenge.server_nonce) < 0) {
    *error = "the master's proof does not check against " + ours +
             ": an impostor, or a master with another key; refusing it";
    return ErrorCode::UNAUTHENTICATED;
  }
  return ErrorCode::OK;
}

}  // namespace mooncake
