// The cluster key's handshake on a Thrift connection to the master (AuthChallenge and
// Authenticate in common/master_link/master.thrift; the four messages are those of
// common/auth/cluster_key.h, with the context "master"), as every client runs it: daemons
// (daemon/master_link/master_client.h), tests, benchmarks and tools, first thing on each connection.
// The master's side is master/server/authenticated_processor.h.
//
// Thread safety: the functions keep no state; a client connection is used by one thread.
#ifndef MOONCAKE_COMMON_MASTER_AUTH_H_
#define MOONCAKE_COMMON_MASTER_AUTH_H_

#include <string>

#include "MasterService.h"
#include "common/auth/cluster_key.h"
#include "common/base/error_code.h"

namespace mooncake {

// What every proof of this protocol covers besides the nonces (ClusterKey::Prove).
inline const std::string kMasterAuthContext = "master";

// The message of the TApplicationException a master answers any other call with on a
// connection it has not admitted: "-1400 UNAUTHENTICATED: <why>", the code first so that
// a client (and a person reading a log) tells it from a broken connection.
std::string UnauthenticatedMessage(const std::string& why);
bool IsUnauthenticatedMessage(const std::string& what);

// The same for a master that is not the leader (docs/ha.md, "Fencing"): a standby or a
// deposed leader refuses every call but GetRole and the replication calls with
// "-1600 NOT_LEADER: <why, and the leader when it knows one>", whatever the call's result
// type (a list or the stats have no code to carry it). MasterClient-style callers turn it
// into NOT_LEADER with RefusalCode and look for the leader again.
std::string NotLeaderMessage(const std::string& why);
bool IsNotLeaderMessage(const std::string& what);
// The code of a whole-call refusal's message (UNAUTHENTICATED, NOT_LEADER), or OK when
// what is not one (a broken connection, a server error).
ErrorCode RefusalCode(const std::string& what);

// Runs the handshake on client, a connection just opened, before any other call. key
// null: nothing is sent (a master without a key admits a peer on its own host as it is;
// one with a key answers the first call with the refusal above).
// OK once the master accepted our proof and proved the key itself. UNAUTHENTICATED when
// either side failed, *error saying which: the master refused our proof (it holds
// another key), or it could not prove the key (an impostor, a master with another key or
// with none): refuse that master. RPC_FAIL when the connection broke (*error: why).
ErrorCode AuthenticateToMaster(rpc::MasterServiceClient* client, const ClusterKey* key,
                               std::string* error);

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_MASTER_AUTH_H_
