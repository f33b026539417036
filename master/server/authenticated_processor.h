// Who may use the master's Thrift service. Each connection gets its own processor, which
// answers the cluster key's handshake (AuthChallenge, Authenticate; the client side is
// common/master_link/master_auth.h) and, until the connection is admitted, refuses every other call:
// its arguments are skipped unread and the answer is a TApplicationException
// "-1400 UNAUTHENTICATED: ...". So a peer that has not proved the key learns nothing (no
// segment list, no replica locations, no stats) and changes nothing (no RemoveAll, no
// RegisterDaemon, MountSegment or UnmountSegment, no Snapshot). Refusals are logged with
// the peer's address, at most one line a second for the whole master.
//
// Admission:
//  - with a cluster key, once the peer's proof checks against one of its keys; the master
//    answers with its own proof made with that key, so during a rolling restart through
//    [old, new], [new, old], [new] every pair of processes still agrees. One failed step
//    (a proof that does not check, a handshake out of order or repeated) refuses the
//    connection for good: every later call, the handshake's too, is refused.
//  - without a key, a peer on this host whose socket belongs to the master's own user or
//    to root (common/auth/peer_owner.h, PeerIsThisUserOrRoot) is admitted at connect without a
//    handshake: both could read the master's memory anyway. Any other peer -- another
//    host, another local user, a container's namespace -- is refused for good, every call
//    answered -1400 with why (the uid) and what to do (run as the master's user, or use a
//    cluster key).
// The RPC server learns admission through RpcAdmission (master/server/rpc_server.h): until it,
// the connection has the small budget of a connection not admitted (a 4 KiB frame limit,
// a deadline for the handshake).
// The handshake on an admitted connection reaches RpcHandler, which answers -600.
//
// Roles (docs/ha.md, "Fencing"; master/ha/master_role.h), with --enable_ha only: on an
// admitted connection, a client call (a row of common/master_link/master_rpcs.h with access kLeader:
// anything but the handshake, GetRole and the replication calls) reaches the handler only
// while the master is LEADER; otherwise its
// arguments are skipped unread and the answer is a TApplicationException
// "-1600 NOT_LEADER: ..." (common/master_link/master_auth.h), whatever the call's result type. A call
// the handler ran as leader has its reply checked once more right before it is written
// (the processor's preWrite, after the handler returned): if the lease no longer holds
// (RoleMachine::LeaseHeld) the reply is dropped and the connection closed (the processor
// throws TTransportException, on which the server closes it), so nothing computed
// across a pause of the process is acknowledged after the lease ran out.
//
// Cost: an admitted connection pays one test of a flag per call before the generated
// dispatch, and with HA a few string compares, one atomic load and the lease check;
// a connection, one getpeername (and without a key, one getsockname and one
// NETLINK_SOCK_DIAG query for the owner of the peer's socket).
//
// Thread roles: the RPC server (master/server/rpc_server.h) asks the factory for a processor per
// connection on its acceptor thread, then runs all of the connection's calls on the I/O
// thread that serves it: the processor's state needs no lock. refused_calls() from any
// thread.
#ifndef MOONCAKE_MASTER_AUTHENTICATED_PROCESSOR_H_
#define MOONCAKE_MASTER_AUTHENTICATED_PROCESSOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <thrift/TProcessor.h>

#include "MasterService.h"
#include "common/auth/cluster_key.h"
#include "master/ha/master_role.h"
#include "master/server/rpc_server.h"

namespace mooncake {

// Where the server nonces come from: ClusterKey::NewNonce, or a fixed one in fuzzers.
using NonceSource = std::function<std::string()>;

class AuthenticatedProcessor : public rpc::MasterServiceProcessor, public RpcAdmission {
 public:
  struct Peer {
    std::string address;  // "ip:port", for the log
    // Without a key: its socket belongs to this process's user or to root, on this host
    // (else why_not says why not, for the refusals).
    bool this_user_or_root = false;
    std::string why_not;
  };

  // key: null when the master runs without one. role: null without HA (every call is
  // served); else outlives the processor. refused: counts the calls refused for want of
  // admission (may be null); outlives the processor.
  AuthenticatedProcessor(std::shared_ptr<rpc::MasterServiceIf> handler,
                         std::shared_ptr<const ClusterKey> key, Peer peer,
                         NonceSource new_nonce, RoleMachine* role = nullptr,
                         std::atomic<uint64_t>* refused = nullptr);

  bool admitted() const override { return stage_ == Stage::kAdmitted; }

 protected:
  bool dispatchCall(apache::thrift::protocol::TProtocol* in,
                    apache::thrift::protocol::TProtocol* out, const std::string& fname,
                    int32_t seqid, void* call_context) override;

 private:
  enum class Stage { kFresh, kChallenged, kAdmitted, kRefused };
  class ReplyFence;

  // An admitted call with HA on: refused, or dispatched (fenced when served as leader).
  bool DispatchWithRole(apache::thrift::protocol::TProtocol* in,
                        apache::thrift::protocol::TProtocol* out, const std::string& fname,
                        int32_t seqid, void* call_context);
  // Skips the call's arguments and answers -1600.
  void RefuseNotLeader(apache::thrift::protocol::TProtocol* in,
                       apache::thrift::protocol::TProtocol* out, const std::string& fname,
                       int32_t seqid);
  // Right before a reply is written: throws TTransportException when the call was served
  // as leader and the lease no longer holds.
  void CheckReplyMayLeave();

  // The calls of a connection not admitted (yet).
  bool DispatchUnadmitted(apache::thrift::protocol::TProtocol* in,
                          apache::thrift::protocol::TProtocol* out, const std::string& fname,
                          int32_t seqid);
  rpc::AuthChallengeResult Challenge(const std::string& client_nonce);
  rpc::AuthenticateResult Authenticate(const std::string& client_proof);
  // Why this connection's calls are refused now, for the refusal and the log.
  std::string RefusalReason() const;
  // Ends the handshake: every later call is refused.
  void RefuseForGood(const char* why);
  // One call refused -1400 (the handshake's own failures included): counted and logged.
  void NoteRefusal(const std::string& call, const std::string& why);

  const std::shared_ptr<const ClusterKey> key_;
  const Peer peer_;
  const NonceSource new_nonce_;
  RoleMachine* const role_;
  std::atomic<uint64_t>* const refused_;
  bool fenced_ = false;  // the call being dispatched was served as leader
  Stage stage_ = Stage::kFresh;
  std::string client_nonce_;  // kChallenged
  std::string server_nonce_;  // kChallenged
  std::string failure_;       // kRefused after a failed handshake: why
};

// What master/server/main.cc gives its RpcServer: an AuthenticatedProcessor for each
// connection, over the one handler.
class AuthenticatedProcessorFactory : public apache::thrift::TProcessorFactory {
 public:
  // role: as AuthenticatedProcessor's.
  AuthenticatedProcessorFactory(std::shared_ptr<rpc::MasterServiceIf> handler,
                                std::shared_ptr<const ClusterKey> key,
                                RoleMachine* role = nullptr)
      : handler_(std::move(handler)), key_(std::move(key)), role_(role) {}

  std::shared_ptr<apache::thrift::TProcessor> getProcessor(
      const apache::thrift::TConnectionInfo& connection) override;

  // Calls answered -1400 since the master started: refused for want of admission, and
  // failed steps of the handshake.
  uint64_t refused_calls() const { return refused_.load(std::memory_order_relaxed); }

 private:
  const std::shared_ptr<rpc::MasterServiceIf> handler_;
  const std::shared_ptr<const ClusterKey> key_;
  RoleMachine* const role_;
  std::atomic<uint64_t> refused_{0};
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_AUTHENTICATED_PROCESSOR_H_
