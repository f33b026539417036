#include "master/server/authenticated_processor.h"

#include <sys/socket.h>
#include <unistd.h>

#include <thrift/TApplicationException.h>
#include <thrift/TProcessor.h>
#include <thrift/transport/TSocket.h>
#include <thrift/transport/TTransportException.h>

#include "common/auth/host_address.h"
#include "common/base/log_throttle.h"
#include "common/base/logging.h"
#include "common/master_link/master_auth.h"
#include "common/master_link/master_rpcs.h"
#include "common/auth/peer_owner.h"

namespace mooncake {

using apache::thrift::TApplicationException;
using apache::thrift::protocol::TProtocol;

namespace {

// One line a second at most, whoever is refused: a flood of refused calls must not fill
// the disk. The next line says how many were not logged.
LogThrottle g_refusal_log;

void LogRefusal(const std::string& peer, const std::string& call, const std::string& why) {
  uint64_t unlogged = 0;
  if (!g_refusal_log.Due(&unlogged)) return;
  MC_LOG_WARN("refused %s from %s: %s%s", call.c_str(), peer.c_str(), why.c_str(),
              unlogged == 0
                  ? ""
                  : (" (and " + std::to_string(unlogged) + " refusals not logged)").c_str());
}

LogThrottle g_not_leader_log;
LogThrottle g_fence_log;

// A reply as the generated processor writes one.
template <typename Result>
void WriteReply(TProtocol* out, const char* name, int32_t seqid, const Result& result) {
  out->writeMessageBegin(name, apache::thrift::protocol::T_REPLY, seqid);
  result.write(out);
  out->writeMessageEnd();
  out->getTransport()->writeEnd();
  out->getTransport()->flush();
}

}  // namespace

// The generated processor calls preWrite after the handler returned and before it writes
// the reply, outside the try that turns a handler's exception into a reply: a throw here
// leaves process(), and the server closes the connection with nothing written.
class AuthenticatedProcessor::ReplyFence : public apache::thrift::TProcessorEventHandler {
 public:
  explicit ReplyFence(AuthenticatedProcessor* processor) : processor_(processor) {}
  void preWrite(void*, const char*) override { processor_->CheckReplyMayLeave(); }

 private:
  AuthenticatedProcessor* const processor_;  // owns this
};

AuthenticatedProcessor::AuthenticatedProcessor(std::shared_ptr<rpc::MasterServiceIf> handler,
                                               std::shared_ptr<const ClusterKey> key,
                                               Peer peer, NonceSource new_nonce,
                                               RoleMachine* role,
                                               std::atomic<uint64_t>* refused)
    : MasterServiceProcessor(std::move(handler)),
      key_(std::move(key)),
      peer_(std::move(peer)),
      new_nonce_(std::move(new_nonce)),
      role_(role),
      refused_(refused) {
  if (key_ == nullptr) {
    stage_ = peer_.this_user_or_root ? Stage::kAdmitted : Stage::kRefused;
  }
  if (role_ != nullptr) setEventHandler(std::make_shared<ReplyFence>(this));
}

bool AuthenticatedProcessor::DispatchWithRole(TProtocol* in, TProtocol* out,
                                              const std::string& fname, int32_t seqid,
                                              void* call_context) {
  // Who may make the call: its row's access (common/master_link/master_rpcs.h).
  switch (AccessOf(fname)) {
    case RpcAccess::kHandshake:  // admitted already: the handler's -600
    case RpcAccess::kAnyRole:
      fenced_ = false;
      break;
    case RpcAccess::kReplication:  // the handler answers -1600 when not leading
      fenced_ = role_->Serving();
      break;
    case RpcAccess::kLeader:
      if (!role_->Serving()) {
        RefuseNotLeader(in, out, fname, seqid);
        return true;
      }
      fenced_ = true;
      break;
  }
  return MasterServiceProcessor::dispatchCall(in, out, fname, seqid, call_context);
}

void AuthenticatedProcessor::RefuseNotLeader(TProtocol* in, TProtocol* out,
                                             const std::string& fname, int32_t seqid) {
  in->skip(apache::thrift::protocol::T_STRUCT);
  in->readMessageEnd();
  in->getTransport()->readEnd();
  std::string leader = role_->leader();
  std::string why = std::string("this master is ") + RoleMachine::Name(role_->role()) +
                    (leader.empty() ? ", and no leader is known yet"
                                    : "; the leader is " + leader) +
                    " (term " + std::to_string(role_->term()) + ")";
  uint64_t unlogged = 0;
  if (g_not_leader_log.Due(&unlogged)) {
    MC_LOG_INFO("refused %s from %s: %s%s", fname.c_str(), peer_.address.c_str(), why.c_str(),
                unlogged == 0
                    ? ""
                    : (" (and " + std::to_string(unlogged) + " refusals not logged)").c_str());
  }
  TApplicationException refusal(TApplicationException::UNKNOWN, NotLeaderMessage(why));
  out->writeMessageBegin(fname, apache::thrift::protocol::T_EXCEPTION, seqid);
  refusal.write(out);
  out->writeMessageEnd();
  out->getTransport()->writeEnd();
  out->getTransport()->flush();
}

void AuthenticatedProcessor::CheckReplyMayLeave() {
  if (!fenced_ || role_->LeaseHeld()) return;
  uint64_t unlogged = 0;
  if (g_fence_log.Due(&unlogged)) {
    MC_LOG_WARN("fencing: a reply to %s not sent, its connection closed: this master's lease "
                "ran out while it was computed%s",
                peer_.address.c_str(),
                unlogged == 0 ? ""
                              : (" (and " + std::to_string(unlogged) + " more)").c_str());
  }
  throw apache::thrift::transport::TTransportException(
      apache::thrift::transport::TTransportException::INTERRUPTED,
      "the lease ran out before the reply could leave");
}

bool AuthenticatedProcessor::dispatchCall(TProtocol* in, TProtocol* out,
                                          const std::string& fname, int32_t seqid,
                                          void* call_context) {
  if (stage_ == Stage::kAdmitted) {
    if (role_ != nullptr) return DispatchWithRole(in, out, fname, seqid, call_context);
    return MasterServiceProcessor::dispatchCall(in, out, fname, seqid, call_context);
  }
  return DispatchUnadmitted(in, out, fname, seqid);
}

bool AuthenticatedProcessor::DispatchUnadmitted(TProtocol* in, TProtocol* out,
                                                const std::string& fname, int32_t seqid) {
  if (fname == "AuthChallenge") {
    rpc::MasterService_AuthChallenge_args args;
    args.read(in);
    in->readMessageEnd();
    in->getTransport()->readEnd();
    rpc::MasterService_AuthChallenge_result result;
    result.success = Challenge(args.client_nonce);
    result.__isset.success = true;
    WriteReply(out, "AuthChallenge", seqid, result);
    return true;
  }
  if (fname == "Authenticate") {
    rpc::MasterService_Authenticate_args args;
    args.read(in);
    in->readMessageEnd();
    in->getTransport()->readEnd();
    rpc::MasterService_Authenticate_result result;
    result.success = Authenticate(args.client_proof);
    result.__isset.success = true;
    WriteReply(out, "Authenticate", seqid, result);
    return true;
  }
  // Skipped, not decoded: no handler sees anything of it. The protocol's limits on
  // strings and lists (MakeRpcProtocolFactory) hold for skipping too.
  in->skip(apache::thrift::protocol::T_STRUCT);
  in->readMessageEnd();
  in->getTransport()->readEnd();
  const std::string why = RefusalReason();
  NoteRefusal(fname, why);
  TApplicationException refusal(TApplicationException::UNKNOWN, UnauthenticatedMessage(why));
  out->writeMessageBegin(fname, apache::thrift::protocol::T_EXCEPTION, seqid);
  refusal.write(out);
  out->writeMessageEnd();
  out->getTransport()->writeEnd();
  out->getTransport()->flush();
  return true;
}

rpc::AuthChallengeResult AuthenticatedProcessor::Challenge(const std::string& client_nonce) {
  rpc::AuthChallengeResult result;
  result.code = ToInt(ErrorCode::UNAUTHENTICATED);
  if (stage_ != Stage::kFresh) {
    RefuseForGood("AuthChallenge out of order");
    NoteRefusal("AuthChallenge", RefusalReason());
    return result;
  }
  if (client_nonce.size() != ClusterKey::kNonceBytes) {
    RefuseForGood("a client nonce that is not 32 bytes");
    NoteRefusal("AuthChallenge", RefusalReason());
    return result;
  }
  client_nonce_ = client_nonce;
  server_nonce_ = new_nonce_();
  stage_ = Stage::kChallenged;
  result.code = 0;
  result.server_nonce = server_nonce_;
  return result;
}

rpc::AuthenticateResult AuthenticatedProcessor::Authenticate(const std::string& client_proof) {
  rpc::AuthenticateResult result;
  result.code = ToInt(ErrorCode::UNAUTHENTICATED);
  if (stage_ != Stage::kChallenged) {
    RefuseForGood("Authenticate before AuthChallenge, or again");
    NoteRefusal("Authenticate", RefusalReason());
    return result;
  }
  int index = key_->Check(client_proof, ClusterKey::Role::kClient, kMasterAuthContext,
                          client_nonce_, server_nonce_);
  if (index < 0) {
    RefuseForGood("its proof does not check against the cluster key (it holds another key)");
    NoteRefusal("Authenticate", RefusalReason());
    return result;
  }
  stage_ = Stage::kAdmitted;
  result.code = 0;
  result.server_proof = key_->ProveWith(static_cast<size_t>(index), ClusterKey::Role::kServer,
                                        kMasterAuthContext, client_nonce_, server_nonce_);
  client_nonce_.clear();
  server_nonce_.clear();
  MC_LOG_DEBUG("admitted %s (key %d of the file)", peer_.address.c_str(), index + 1);
  return result;
}

std::string AuthenticatedProcessor::RefusalReason() const {
  if (key_ == nullptr) {
    return "this master has no cluster key and admits only peers on its own host running "
           "as its user (uid " + std::to_string(geteuid()) + ") or root, and " +
           peer_.why_not +
           ": run the client as the master's user, or give every process of the cluster "
           "the same --cluster_key_file (docs/security.md)";
  }
  if (stage_ == Stage::kRefused) return "the handshake failed on this connection: " + failure_;
  return "this connection has not proved the cluster key (AuthChallenge and Authenticate "
         "come first; docs/security.md)";
}

void AuthenticatedProcessor::NoteRefusal(const std::string& call, const std::string& why) {
  if (refused_ != nullptr) refused_->fetch_add(1, std::memory_order_relaxed);
  LogRefusal(peer_.address, call, why);
}

void AuthenticatedProcessor::RefuseForGood(const char* why) {
  stage_ = Stage::kRefused;
  failure_ = why;
  client_nonce_.clear();
  server_nonce_.clear();
}

std::shared_ptr<apache::thrift::TProcessor> AuthenticatedProcessorFactory::getProcessor(
    const apache::thrift::TConnectionInfo& connection) {
  AuthenticatedProcessor::Peer peer{"?", false, "its address is unknown"};
  auto socket =
      std::dynamic_pointer_cast<apache::thrift::transport::TSocket>(connection.transport);
  if (socket != nullptr) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    if (getpeername(socket->getSocketFD(), reinterpret_cast<sockaddr*>(&address), &length) ==
        0) {
      peer.address = FormatAddress(reinterpret_cast<const sockaddr*>(&address));
    }
    if (key_ == nullptr) {
      peer.this_user_or_root = PeerIsThisUserOrRoot(socket->getSocketFD(), &peer.why_not);
    }
  }
  return std::make_shared<AuthenticatedProcessor>(handler_, key_, std::move(peer),
                                                  ClusterKey::NewNonce, role_, &refused_);
}

}  // namespace mooncake
