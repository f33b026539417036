// master/authenticated_processor: the handshake's state machine and the refusal of every
// other call, driven in process through the generated client and the server's protocol
// over a real MasterService and RpcHandler.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <thrift/TApplicationException.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>

#include "common/auth/cluster_key.h"
#include "common/base/logging.h"
#include "common/master_link/master_auth.h"
#include "master/server/authenticated_processor.h"
#include "master/server/rpc_handler.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/master_service_fixture.h"
#include "tests/harness/rpc_pipe.h"

namespace {

using apache::thrift::TApplicationException;
using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TMemoryBuffer;
using mooncake::AuthenticatedProcessor;
using mooncake::ClusterKey;
using mooncake::kMasterAuthContext;

// openssl rand -hex 32, twice: keys ClusterKey::Load would take.
const std::string kKeyA = "b39eaf2d215a7338c1e01c620d2253c2289f71aa212a789ecfc51255b19b9ae4";
const std::string kKeyB = "59ce16e81f624fa34252c29efed16caf248625997377b07e9cf9af9eeca9bef2";
const std::string kServerNonce(ClusterKey::kNonceBytes, 's');
const std::string kClientNonce(ClusterKey::kNonceBytes, 'c');

// One connection: a client whose calls go into the processor and whose replies come back,
// over the protocol the master serves with.
struct Connection : mooncake::testing::RpcPipe {
  MasterService service{Options()};
  AuthenticatedProcessor processor;

  // this_user_or_root: without a key, what PeerIsThisUserOrRoot said of the peer.
  Connection(std::vector<std::string> keys, bool this_user_or_root)
      : processor(std::make_shared<mooncake::RpcHandler>(&service),
                  keys.empty() ? nullptr
                               : std::make_shared<const ClusterKey>(
                                     ClusterKey::FromKeys(std::move(keys))),
                  {"10.9.8.7:4321", this_user_or_root,
                   this_user_or_root ? "" : "its socket belongs to uid 65534, neither ..."},
                  [] { return kServerNonce; }) {}

  // Runs the call the client just sent.
  void Serve() { assert_true(processor.process(in, out, nullptr)); }

  rpc::AuthChallengeResult Challenge(const std::string& nonce = kClientNonce) {
    client.send_AuthChallenge(nonce);
    Serve();
    rpc::AuthChallengeResult r;
    client.recv_AuthChallenge(r);
    return r;
  }
  rpc::AuthenticateResult Prove(const std::string& proof) {
    client.send_Authenticate(proof);
    Serve();
    rpc::AuthenticateResult r;
    client.recv_Authenticate(r);
    return r;
  }
  // The whole handshake as common/master_link/master_auth.cc runs it, with the client's key.
  rpc::AuthenticateResult Handshake(const ClusterKey& key) {
    rpc::AuthChallengeResult c = Challenge();
    assert_int_equal(c.code, 0);
    assert_true(c.server_nonce == kServerNonce);
    return Prove(key.Prove(ClusterKey::Role::kClient, kMasterAuthContext, kClientNonce,
                           c.server_nonce));
  }

  // RegisterDaemon through the processor: its code, or -1400 when it was refused (with
  // the refusal's message checked).
  int Register(int64_t daemon) {
    client.send_RegisterDaemon(daemon, Name(daemon));
    Serve();
    try {
      return client.recv_RegisterDaemon();
    } catch (const TApplicationException& e) {
      assert_true(mooncake::IsUnauthenticatedMessage(e.what()));
      return ToInt(ErrorCode::UNAUTHENTICATED);
    }
  }
};

constexpr int kRefused = static_cast<int>(ErrorCode::UNAUTHENTICATED);

bool ChecksAsServerProof(const std::string& key, const std::string& proof) {
  return ClusterKey::FromKeys({key}).Check(proof, ClusterKey::Role::kServer, kMasterAuthContext,
                                           kClientNonce, kServerNonce) == 0;
}

void test_calls_before_the_handshake_are_refused_and_change_nothing(void**) {
  Connection c({kKeyA}, /*this_user_or_root=*/true);  // with a key, who it is proves nothing
  assert_int_equal(c.Register(1), kRefused);
  rpc::MasterStats stats = c.service.GetStats();
  assert_int_equal(stats.daemons, 0);
  // The arguments were skipped whole: the next call on the connection reads fine.
  assert_int_equal(c.Handshake(ClusterKey::FromKeys({kKeyA})).code, 0);
  assert_int_equal(c.Register(1), 0);
  assert_int_equal(c.service.GetStats().daemons, 1);
}

void test_a_proof_that_checks_admits_and_the_master_proves_back(void**) {
  Connection c({kKeyA}, false);
  rpc::AuthenticateResult r = c.Handshake(ClusterKey::FromKeys({kKeyA}));
  assert_int_equal(r.code, 0);
  assert_true(c.processor.admitted());
  assert_true(ChecksAsServerProof(kKeyA, r.server_proof));
  // A second handshake on an admitted connection reaches the handler: -600, nothing else.
  assert_int_equal(c.Challenge().code, kBadParams);
  assert_true(c.processor.admitted());
}

void test_rotation_the_master_answers_with_the_key_that_checked(void**) {
  // A master on [A, B] and a client that already moved to [B]: the master proves with B.
  Connection c({kKeyA, kKeyB}, false);
  rpc::AuthenticateResult r = c.Handshake(ClusterKey::FromKeys({kKeyB, kKeyA}));
  assert_int_equal(r.code, 0);
  assert_true(ChecksAsServerProof(kKeyB, r.server_proof));
  assert_false(ChecksAsServerProof(kKeyA, r.server_proof));
}

void test_a_wrong_proof_refuses_the_connection_for_good(void**) {
  Connection c({kKeyA}, false);
  rpc::AuthenticateResult r = c.Handshake(ClusterKey::FromKeys({kKeyB}));
  assert_int_equal(r.code, kRefused);
  assert_true(r.server_proof.empty());  // nothing a prober could learn from
  assert_false(c.processor.admitted());
  // No second try on this connection, not even with the right key.
  assert_int_equal(c.Challenge().code, kRefused);
  assert_int_equal(c.Prove(ClusterKey::FromKeys({kKeyA}).Prove(
                               ClusterKey::Role::kClient, kMasterAuthContext, kClientNonce,
                               kServerNonce))
                       .code,
                   kRefused);
  assert_int_equal(c.Register(1), kRefused);
  assert_int_equal(c.service.GetStats().daemons, 0);
}

void test_handshake_out_of_order_is_refused(void**) {
  const ClusterKey a = ClusterKey::FromKeys({kKeyA});
  {  // Authenticate first: there is no challenge it could answer.
    Connection c({kKeyA}, false);
    assert_int_equal(
        c.Prove(a.Prove(ClusterKey::Role::kClient, kMasterAuthContext, kClientNonce,
                        kServerNonce))
            .code,
        kRefused);
    assert_int_equal(c.Challenge().code, kRefused);
  }
  {  // A client nonce that is not 32 bytes.
    Connection c({kKeyA}, false);
    assert_int_equal(c.Challenge("short").code, kRefused);
    assert_false(c.processor.admitted());
  }
  {  // A server's proof replayed as a client's (the role is inside the MAC).
    Connection c({kKeyA}, false);
    assert_int_equal(c.Challenge().code, 0);
    assert_int_equal(c.Prove(a.Prove(ClusterKey::Role::kServer, kMasterAuthContext,
                                     kClientNonce, kServerNonce))
                         .code,
                     kRefused);
  }
}

void test_without_a_key_only_this_user_or_root_is_admitted(void**) {
  Connection local({}, /*this_user_or_root=*/true);
  assert_true(local.processor.admitted());
  assert_int_equal(local.Register(1), 0);
  assert_int_equal(local.Challenge().code, kBadParams);  // no key to prove: -600

  Connection other({}, /*this_user_or_root=*/false);
  assert_false(other.processor.admitted());
  assert_int_equal(other.Register(1), kRefused);
  assert_int_equal(other.Challenge().code, kRefused);
  assert_int_equal(other.service.GetStats().daemons, 0);
  // The refusal names who was refused and what to do.
  other.client.send_GetAllSegments();
  other.Serve();
  std::vector<rpc::SegmentInfo> segments;
  try {
    other.client.recv_GetAllSegments(segments);
    fail_msg("GetAllSegments was answered");
  } catch (const TApplicationException& e) {
    assert_true(mooncake::IsUnauthenticatedMessage(e.what()));
    assert_non_null(std::strstr(e.what(), "uid 65534"));
    assert_non_null(std::strstr(e.what(), "run the client as the master's user"));
    assert_non_null(std::strstr(e.what(), "--cluster_key_file"));
  }
}

void test_refusal_reads_nothing_of_a_huge_call(void**) {
  // A refused call is skipped under the same limits as a decoded one: a string declared
  // longer than kMaxRpcStringBytes throws (the server closes the connection) instead of
  // allocating it.
  Connection c({kKeyA}, false);
  c.in->writeMessageBegin("PutStart", apache::thrift::protocol::T_CALL, 1);
  c.in->writeStructBegin("args");
  c.in->writeFieldBegin("key", apache::thrift::protocol::T_STRING, 2);
  c.in->writeI32(1500 << 20);
  bool threw = false;
  try {
    c.processor.process(c.in, c.out, nullptr);
  } catch (const std::exception&) {
    threw = true;
  }
  assert_true(threw);
  assert_int_equal(c.service.GetStats().objects, 0);
}

}  // namespace

int main() {
  mooncake::SetLogLevel(mooncake::LogLevel::kError);  // refusals log warnings by design
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calls_before_the_handshake_are_refused_and_change_nothing),
      cmocka_unit_test(test_a_proof_that_checks_admits_and_the_master_proves_back),
      cmocka_unit_test(test_rotation_the_master_answers_with_the_key_that_checked),
      cmocka_unit_test(test_a_wrong_proof_refuses_the_connection_for_good),
      cmocka_unit_test(test_handshake_out_of_order_is_refused),
      cmocka_unit_test(test_without_a_key_only_this_user_or_root_is_admitted),
      cmocka_unit_test(test_refusal_reads_nothing_of_a_huge_call),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
