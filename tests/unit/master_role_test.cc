// The master's roles in process (master/ha/master_role.h, master/server/authenticated_processor.h,
// MasterService::TakeOver): a standby refuses every client call with -1600 and answers
// GetRole; a leader whose lease runs out while a handler runs closes the connection instead
// of replying (the master's real RPC server and a client over 127.0.0.1); a takeover draws a
// new epoch and leaves every segment detached until its daemon re-mounts it.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <thrift/TApplicationException.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSocket.h>
#include <thrift/transport/TTransportException.h>

#include "common/base/logging.h"
#include "common/master_link/master_auth.h"
#include "common/master_link/rpc_logging.h"
#include "master/server/authenticated_processor.h"
#include "master/ha/master_role.h"
#include "master/server/rpc_handler.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/in_process_rpc_server.h"
#include "tests/harness/master_service_fixture.h"
#include "tests/harness/rpc_pipe.h"

namespace {

using apache::thrift::TApplicationException;
using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TMemoryBuffer;
using mooncake::AuthenticatedProcessor;
using mooncake::RoleMachine;

constexpr int kNotLeader = static_cast<int>(ErrorCode::NOT_LEADER);

std::unique_ptr<RoleMachine> NewStandby(std::atomic<int>* deposed = nullptr) {
  return RoleMachine::Standby("127.0.0.1:7001", [] { return uint64_t{42}; }, [deposed] {
    if (deposed != nullptr) deposed->fetch_add(1);
  });
}

// One connection from this host to a master without a key, in memory: the client's calls
// go into the processor and its replies come back.
struct Connection : mooncake::testing::RpcPipe {
  MasterService service{Options()};
  std::unique_ptr<RoleMachine> role;
  std::unique_ptr<AuthenticatedProcessor> processor;

  explicit Connection(std::unique_ptr<RoleMachine> r) : role(std::move(r)) {
    processor = std::make_unique<AuthenticatedProcessor>(
        std::make_shared<mooncake::RpcHandler>(&service, nullptr, nullptr, role.get()), nullptr,
        AuthenticatedProcessor::Peer{"127.0.0.1:5555", true, ""}, [] { return std::string(); },
        role.get());
  }

  void Serve() { assert_true(processor->process(in, out, nullptr)); }

  // Runs a call (send + recv in fn's two halves): its code, or -1600 when the call was
  // refused whole as NOT_LEADER (the refusal's message checked).
  template <typename Send, typename Recv>
  int Call(Send send, Recv recv) {
    send();
    Serve();
    try {
      return recv();
    } catch (const TApplicationException& e) {
      assert_true(mooncake::IsNotLeaderMessage(e.what()));
      assert_int_equal(ToInt(mooncake::RefusalCode(e.what())), kNotLeader);
      return kNotLeader;
    }
  }

  rpc::RoleResult Role() {
    client.send_GetRole();
    Serve();
    rpc::RoleResult r;
    client.recv_GetRole(r);
    return r;
  }
};

void test_a_standby_refuses_every_client_call_and_answers_get_role(void**) {
  Connection c(NewStandby());
  c.role->SawLeader("127.0.0.1:7000", 17);
  rpc::ReplicateConfig config = Cfg();
  assert_int_equal(c.Call([&] { c.client.send_RegisterDaemon(1, Name(1)); },
                          [&] { return c.client.recv_RegisterDaemon(); }),
                   kNotLeader);
  assert_int_equal(c.Call([&] { c.client.send_PutStart(1, "k", 100, config); },
                          [&] {
                            rpc::PutStartResult r;
                            c.client.recv_PutStart(r);
                            return r.code;
                          }),
                   kNotLeader);
  assert_int_equal(c.Call([&] { c.client.send_GetReplicaList("k", 0); },
                          [&] {
                            rpc::ReplicaListResult r;
                            c.client.recv_GetReplicaList(r);
                            return r.code;
                          }),
                   kNotLeader);
  // Results with no code of their own are refused the same way.
  assert_int_equal(c.Call([&] { c.client.send_GetAllSegments(); },
                          [&] {
                            std::vector<rpc::SegmentInfo> r;
                            c.client.recv_GetAllSegments(r);
                            return 0;
                          }),
                   kNotLeader);
  assert_int_equal(c.Call([&] { c.client.send_BatchExistKey({"a", "b"}); },
                          [&] {
                            std::vector<int32_t> r;
                            c.client.recv_BatchExistKey(r);
                            return 0;
                          }),
                   kNotLeader);
  // No handler ran: the service never heard of the daemon.
  assert_int_equal(c.service.GetStats().daemons, 0);
  // The arguments were skipped whole: the connection still reads the next call fine.
  rpc::RoleResult role = c.Role();
  assert_int_equal(role.code, 0);
  assert_int_equal(role.role, rpc::MasterRole::STANDBY);
  assert_int_equal(role.term, 17);
  assert_string_equal(role.leader.c_str(), "127.0.0.1:7000");
  assert_int_equal(role.applied_seq, 42);
}

void test_an_elected_standby_serves_and_a_deposed_one_refuses_again(void**) {
  std::atomic<int> deposed{0};
  Connection c(NewStandby(&deposed));
  c.role->BecomeLeader(23, [] { return true; });
  assert_int_equal(c.Call([&] { c.client.send_RegisterDaemon(1, Name(1)); },
                          [&] { return c.client.recv_RegisterDaemon(); }),
                   0);
  rpc::RoleResult role = c.Role();
  assert_int_equal(role.role, rpc::MasterRole::LEADER);
  assert_int_equal(role.term, 23);
  assert_string_equal(role.leader.c_str(), "127.0.0.1:7001");

  assert_true(c.role->Depose("test"));
  assert_false(c.role->Depose("again"));  // once
  assert_int_equal(deposed.load(), 1);
  assert_int_equal(c.Call([&] { c.client.send_Heartbeat(1); },
                          [&] {
                            rpc::HeartbeatResult r;
                            c.client.recv_Heartbeat(r);
                            return r.code;
                          }),
                   kNotLeader);
  assert_int_equal(c.Role().role, rpc::MasterRole::DEPOSED);
  // A deposed master is not elected again in process.
  c.role->BecomeLeader(24, [] { return true; });
  assert_int_equal(c.Role().role, rpc::MasterRole::DEPOSED);
}

void test_without_ha_the_master_leads_term_zero(void**) {
  std::unique_ptr<RoleMachine> solo = RoleMachine::Solo([] { return uint64_t{0}; });
  assert_true(solo->Serving());
  assert_true(solo->LeaseHeld());
  assert_int_equal(solo->term(), 0);
}

// ---- a real server: the lease runs out while a handler runs ----

// ExistKey's handler lets the lease run out while it runs (what a SIGSTOP between the
// handler and its reply does).
class PausingHandler : public mooncake::RpcHandler {
 public:
  PausingHandler(MasterService* service, RoleMachine* role, std::atomic<bool>* lease)
      : RpcHandler(service, nullptr, nullptr, role), lease_(lease) {}
  int32_t ExistKey(const std::string& key) override {
    int32_t found = RpcHandler::ExistKey(key);
    if (key == "pause") lease_->store(false);
    return found;
  }

 private:
  std::atomic<bool>* const lease_;
};

// A leader's handler behind the master's RPC server.
struct Server {
  MasterService service{Options()};
  std::atomic<bool> lease{true};
  std::atomic<int> deposed{0};
  std::unique_ptr<RoleMachine> role = NewStandby(&deposed);
  std::unique_ptr<mooncake::testing::InProcessRpcServer> server;

  Server() {
    role->BecomeLeader(5, [this] { return lease.load(); });
    auto handler = std::make_shared<PausingHandler>(&service, role.get(), &lease);
    server = std::make_unique<mooncake::testing::InProcessRpcServer>(
        std::make_shared<mooncake::AuthenticatedProcessorFactory>(handler, nullptr, role.get()));
  }

  struct Client {
    std::shared_ptr<apache::thrift::transport::TSocket> socket;
    std::shared_ptr<apache::thrift::transport::TFramedTransport> transport;
    std::unique_ptr<rpc::MasterServiceClient> rpc;
  };
  Client Connect() {
    Client c;
    c.socket = std::make_shared<apache::thrift::transport::TSocket>("127.0.0.1",
                                                                    server->port());
    c.socket->setRecvTimeout(5000);
    c.transport = std::make_shared<apache::thrift::transport::TFramedTransport>(c.socket);
    c.transport->open();
    c.rpc = std::make_unique<rpc::MasterServiceClient>(
        std::make_shared<TBinaryProtocol>(c.transport));
    return c;
  }
};

void test_a_lease_lost_mid_handler_closes_the_connection_instead_of_replying(void**) {
  Server s;
  Server::Client c = s.Connect();
  assert_int_equal(c.rpc->ExistKey("k"), 0);  // served while the lease holds
  bool closed = false;
  try {
    c.rpc->ExistKey("pause");
  } catch (const apache::thrift::transport::TTransportException& e) {
    closed = true;  // the server closed it: no reply at all (not a timeout)
    assert_int_not_equal(e.getType(), apache::thrift::transport::TTransportException::TIMED_OUT);
  }
  assert_true(closed);
  assert_int_equal(static_cast<int>(s.role->role()), static_cast<int>(RoleMachine::Role::kDeposed));
  assert_int_equal(s.deposed.load(), 1);
  // A new connection hears -1600 for client calls and DEPOSED from GetRole.
  Server::Client again = s.Connect();
  bool refused = false;
  try {
    again.rpc->ExistKey("k");
  } catch (const TApplicationException& e) {
    refused = mooncake::IsNotLeaderMessage(e.what());
  }
  assert_true(refused);
  rpc::RoleResult role;
  again.rpc->GetRole(role);
  assert_int_equal(role.role, rpc::MasterRole::DEPOSED);
  assert_int_equal(role.term, 5);
}

// ---- takeover ----

void test_takeover_draws_a_new_epoch_and_detaches_every_segment(void**) {
  MasterService s(Options());
  AddDaemon(s, 1);
  std::vector<rpc::ReplicaDescriptor> first = Put(s, 1, "a", 4096, On(1));
  int64_t epoch = s.GetStats().master_epoch;
  assert_int_equal(s.GetStats().pending_segments, 0);

  MasterService::RestoreCounts counts = s.TakeOver();
  assert_int_equal(counts.objects, 1);
  assert_int_equal(counts.segments, 1);
  rpc::MasterStats stats = s.GetStats();
  assert_int_not_equal(stats.master_epoch, epoch);
  assert_int_equal(stats.pending_segments, 1);
  // Detached: its object is not listed until the daemon re-mounts, and nothing is placed.
  assert_int_equal(s.GetReplicaList("a").code, kNotReady);
  assert_true(s.GetAllSegments().empty());
  // The daemon hears "unknown" (its heartbeat's epoch is new too) and comes back.
  rpc::HeartbeatResult beat = s.Heartbeat(1);
  assert_int_equal(beat.master_epoch, stats.master_epoch);
  assert_int_equal(ToInt(s.RegisterDaemon(1, Name(1))), 0);
  Mount(s, 1, 11, kMiB);
  assert_int_equal(s.GetStats().pending_segments, 0);
  rpc::ReplicaListResult read = s.GetReplicaList("a");
  assert_int_equal(read.code, 0);
  // The rebuilt allocator holds the object's range: a new put lands elsewhere.
  std::vector<rpc::ReplicaDescriptor> second = Put(s, 1, "b", 4096, On(1));
  assert_int_not_equal(second[0].offset, first[0].offset);
  // For one lease, a change's reply says some cache it cannot name may hold the object.
  mooncake::CacheHolderSet holders;
  assert_int_equal(ToInt(s.Remove("a", true, &holders)), 0);
  std::vector<rpc::CacheHolder> described = s.DescribeHolders(holders, 0, false);
  assert_int_equal(described.size(), 1);
  assert_true(described[0].address.empty());
}

}  // namespace

int main(void) {
  mooncake::SetLogLevel(mooncake::LogLevel::kError);  // refusals and fencing log by design
  mooncake::RouteThriftOutputToDebugLog();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_standby_refuses_every_client_call_and_answers_get_role),
      cmocka_unit_test(test_an_elected_standby_serves_and_a_deposed_one_refuses_again),
      cmocka_unit_test(test_without_ha_the_master_leads_term_zero),
      cmocka_unit_test(test_a_lease_lost_mid_handler_closes_the_connection_instead_of_replying),
      cmocka_unit_test(test_takeover_draws_a_new_epoch_and_detaches_every_segment),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
