#include "master/authenticated_processor.h"

#include <sys/socket.h>


#include <thrift/TApplicationException.h>
#include <thrift/transport/TSocket.h>

#include "common/host_address.h"
#include "common/log_throttle.h"
#include "common/logging.h"
#include "common/master_auth.h"

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

AuthenticatedProcessor::AuthenticatedProcessor(std::shared_ptr<rpc::MasterServiceIf> handler,
                                               std::shared_ptr<const ClusterKey> key,
                                               Peer peer, NonceSource new_nonce)
    : MasterServiceProcessor(std::move(handler)),
      key_(std::move(key)),
      peer_(std::move(peer)),
      new_nonce_(std::move(new_nonce)) {
  if (key_ == nullptr) {
    stage_ = peer_.on_this_host ? Stage::kAdmitted : Stage::kRefused;
  }
}

bool AuthenticatedProcessor::dispatchCall(TProtocol* in, TProtocol* out,
                                          const std::string& fname, int32_t seqid,
                                          void* call_context) {
  if (stage_ == Stage::kAdmitted) {
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
  LogRefusal(peer_.address, fname, why);
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
    LogRefusal(peer_.address, "AuthChallenge", RefusalReason());
    return result;
  }
  if (client_nonce.size() != ClusterKey::kNonceBytes) {
    RefuseForGood("a client nonce that is not 32 bytes");
    LogRefusal(peer_.address, "AuthChallenge", RefusalReason());
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
    LogRefusal(peer_.address, "Authenticate", RefusalReason());
    return result;
  }
  int index = key_->Check(client_proof, ClusterKey::Role::kClient, kMasterAuthContext,
                          client_nonce_, server_nonce_);
  if (index < 0) {
    RefuseForGood("its proof does not check against the cluster key (it holds another key)");
    LogRefusal(peer_.address, "Authenticate", RefusalReason());
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
    return "this master has no cluster key and admits only peers on its own host "
           "(docs/security.md)";
  }
  if (stage_ == Stage::kRefused) return "the handshake failed on this connection: " + failure_;
  return "this connection has not proved the cluster key (AuthChallenge and Authenticate "
         "come first; docs/security.md)";
}

void AuthenticatedProcessor::RefuseForGood(const char* why) {
  stage_ = Stage::kRefused;
  failure_ = why;
  client_nonce_.clear();
  server_nonce_.clear();
}

std::shared_ptr<apache::thrift::TProcessor> AuthenticatedProcessorFactory::getProcessor(
    const apache::thrift::TConnectionInfo& connection) {
  AuthenticatedProcessor::Peer peer{"?", false};
  auto socket =
      std::dynamic_pointer_cast<apache::thrift::transport::TSocket>(connection.transport);
  if (socket != nullptr) {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    if (getpeername(socket->getSocketFD(), reinterpret_cast<sockaddr*>(&address), &length) ==
        0) {
      peer.address = FormatAddress(reinterpret_cast<const sockaddr*>(&address));
    }
    if (key_ == nullptr) peer.on_this_host = PeerOnThisHost(socket->getSocketFD());
  }
  return std::make_shared<AuthenticatedProcessor>(handler_, key_, std::move(peer),
                                                  ClusterKey::NewNonce);
}

}  // namespace mooncake
