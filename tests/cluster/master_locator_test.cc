// Finding and following the master leader (common/master_link/master_locator.h) and the daemon's
// master client's rules on top of it (daemon/master_link/master_client.h, docs/ha.md "Daemons"),
// against a real etcd (tests/harness/etcd_process.h) and masters in process whose roles the test
// sets (master/ha/master_role.h behind the real processor and a real Thrift server on
// 127.0.0.1), so that a "leader" can be deposed, or answer late, at a chosen moment:
//  - --master parsing: host:port and etcd://host:port[,...]; malformed forms refused;
//  - the locator reads the leader key (address and term = its create_revision), notices a
//    change by its own polling (callback, once per change), takes an absent key or a
//    malformed value as "no leader", keeps the last leader while etcd does not answer,
//    and re-reads when told of a higher term;
//  - the term rule: a reply that arrives on a connection of a lower term than the daemon
//    knows is not taken; the call runs again on the new leader (and its answer is the one
//    returned);
//  - NOT_LEADER (-1600) from a leader deposed since the connection opened makes the client
//    re-resolve and run the call on the next leader; a standby named by a stale key is
//    never used; a fixed master's -1600 is passed on;
//  - a call that may have run (its connection closed without a reply) runs again only
//    when repeating it is safe: an ExistKey does, a Remove does not (the next leader's
//    object survives).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>


#include "common/etcd/etcd_client.h"
#include "common/etcd/leader_watch.h"
#include "common/master_link/master_locator.h"
#include "common/master_link/rpc_logging.h"
#include "daemon/master_link/master_client.h"
#include "master/server/authenticated_processor.h"
#include "master/ha/master_role.h"
#include "master/server/rpc_handler.h"
#include "tests/harness/etcd_test_util.h"
#include "tests/harness/in_process_rpc_server.h"
#include "tests/harness/master_service_fixture.h"

namespace {

namespace testing = mooncake::testing;
using mooncake::EtcdClient;
using mooncake::MasterAddress;
using mooncake::MasterClient;
using mooncake::MasterClientOptions;
using mooncake::MasterLeader;
using mooncake::MasterLocator;
using mooncake::RoleMachine;
using testing::SuiteEtcd;
using testing::WaitFor;

int g_cluster = 0;  // each test its own cluster id, so that no key of another one is seen

std::string NextCluster() { return "locator-" + std::to_string(++g_cluster); }

// Points the leader key of cluster at value as a new election does (the old key deleted,
// a new one created): returns the new term (its create_revision).
int64_t Elect(const std::string& cluster, const std::string& value) {
  std::unique_ptr<EtcdClient> etcd = testing::SuiteClient();
  const std::string key = mooncake::LeaderKey(cluster);
  EtcdClient::KeyValue kv;
  bool found = false;
  assert_int_equal(ErrorCode::OK, etcd->Get(key, &kv, &found));
  if (found) {
    bool done = false;
    assert_int_equal(ErrorCode::OK, etcd->DeleteIfHeld(key, kv.create_revision, &done));
    assert_true(done);
  }
  assert_int_equal(ErrorCode::OK, etcd->Put(key, value));
  assert_int_equal(ErrorCode::OK, etcd->Get(key, &kv, &found));
  assert_true(found);
  return kv.create_revision;
}

std::unique_ptr<MasterLocator> Locate(const std::string& cluster, int64_t poll_ms = 100) {
  std::unique_ptr<MasterLocator> locator;
  // A generous etcd timeout: a loaded machine must not turn a slow read into "no leader".
  assert_int_equal(ErrorCode::OK, MasterLocator::ViaEtcd(SuiteEtcd()->endpoint(), cluster, 2000,
                                                         poll_ms, &locator));
  return locator;
}

// A master in process with a role the test sets: the real handler, processor (NOT_LEADER
// refusals, the reply-time lease check) and a Thrift server on 127.0.0.1. Hooks let a
// test hold ExistKey inside the handler, or lose the lease while Remove runs.
class HookedHandler : public mooncake::RpcHandler {
 public:
  HookedHandler(MasterService* service, RoleMachine* role)
      : RpcHandler(service, nullptr, nullptr, role) {}
  int32_t ExistKey(const std::string& key) override {
    if (on_exist) on_exist(key);
    return RpcHandler::ExistKey(key);
  }
  void Remove(rpc::ChangeResult& out, const std::string& key, bool force,
              int64_t caller) override {
    RpcHandler::Remove(out, key, force, caller);
    if (after_remove) after_remove();
  }
  std::function<void(const std::string&)> on_exist;
  std::function<void()> after_remove;
};

struct InProcessMaster {
  MasterService service{Options()};
  std::atomic<bool> lease{true};
  std::unique_ptr<RoleMachine> role;
  std::shared_ptr<HookedHandler> handler;
  std::unique_ptr<mooncake::testing::InProcessRpcServer> server;

  InProcessMaster() {
    role = RoleMachine::Standby("127.0.0.1:0", [] { return uint64_t{0}; }, [] {});
    handler = std::make_shared<HookedHandler>(&service, role.get());
    server = std::make_unique<mooncake::testing::InProcessRpcServer>(
        std::make_shared<mooncake::AuthenticatedProcessorFactory>(handler, nullptr, role.get()));
  }
  std::string name() const { return "127.0.0.1:" + std::to_string(server->port()); }
  int port() const { return server->port(); }
  // Elected in cluster: the key names it, and it leads under the key's term.
  int64_t Lead(const std::string& cluster) {
    int64_t term = Elect(cluster, name());
    role->BecomeLeader(term, [this] { return lease.load(); });
    return term;
  }
  // Holds an object of its own, so a test can tell which master answered.
  void HoldObject(const std::string& key) {
    AddDaemon(service, 1);
    Put(service, 1, key, 1024);
  }
};

MasterClientOptions ClientOptions(int failover_wait_ms = 5000) {
  MasterClientOptions o;
  o.connect_timeout_ms = 1000;
  o.rpc_timeout_ms = 5000;
  o.failover_wait_ms = failover_wait_ms;
  return o;
}

// ---- --master ----

void test_parse_master_address(void**) {
  MasterAddress a;
  std::string error;
  assert_true(mooncake::ParseMasterAddress("10.1.2.3:50051", &a, &error));
  assert_string_equal(a.host.c_str(), "10.1.2.3");
  assert_int_equal(a.port, 50051);
  assert_false(a.via_etcd());
  assert_true(mooncake::ParseMasterAddress("etcd://127.0.0.1:2379,e2:2379", &a, &error));
  assert_true(a.via_etcd());
  assert_string_equal(a.etcd_endpoints.c_str(), "127.0.0.1:2379,e2:2379");
  assert_int_equal(a.port, 0);
  for (const char* bad : {"host", "host:", ":5", "host:0", "host:65536", "host:5x", "etcd://",
                          "etcd://host", "etcd://a:1,", "etcd://a:1,b", "etcd://:2379"}) {
    error.clear();
    assert_false(mooncake::ParseMasterAddress(bad, &a, &error));
    assert_false(error.empty());
  }
}

// ---- the locator ----

void test_locator_reads_and_follows_the_key(void**) {
  const std::string cluster = NextCluster();
  int64_t t1 = Elect(cluster, "127.0.0.1:7001");
  std::unique_ptr<MasterLocator> locator = Locate(cluster);
  assert_true(locator->via_etcd());
  MasterLeader now = locator->Current();
  assert_string_equal(now.name().c_str(), "127.0.0.1:7001");
  assert_int_equal(now.term, t1);
  assert_int_equal(locator->highest_term(), t1);

  std::mutex mu;
  std::vector<MasterLeader> seen;
  locator->SetChangeCallback([&](const MasterLeader& l) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(l);
  });
  locator->StartWatch();
  auto seen_count = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return seen.size();
  };
  // The latest change reported is to port (0: no leader) in term.
  auto last_is = [&](int port, int64_t term) {
    std::lock_guard<std::mutex> lock(mu);
    return !seen.empty() && seen.back().port == port && (port == 0 || seen.back().term == term);
  };
  // Elect replaces the key by a delete and a put: a poll between the two sees no leader,
  // which is a change of its own. So the test waits for each final state, and checks
  // that no change was reported twice in a row.
  auto no_repeats = [&] {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 1; i < seen.size(); ++i) {
      if (seen[i].port == seen[i - 1].port && seen[i].term == seen[i - 1].term) return false;
    }
    return true;
  };
  // A new election, noticed without anyone asking: by the poll.
  int64_t t2 = Elect(cluster, "127.0.0.1:7002");
  assert_true(t2 > t1);
  assert_true(WaitFor([&] { return last_is(7002, t2); }, 3000));
  assert_int_equal(locator->Current().port, 7002);
  assert_int_equal(locator->Current().term, t2);
  assert_int_equal(locator->highest_term(), t2);
  // Absent: no leader (an election under way).
  std::unique_ptr<EtcdClient> etcd = testing::SuiteClient();
  bool done = false;
  assert_int_equal(ErrorCode::OK, etcd->DeleteIfHeld(mooncake::LeaderKey(cluster), t2, &done));
  assert_true(done);
  assert_true(WaitFor([&] { return last_is(0, 0); }, 3000));
  assert_false(locator->Current().known());
  // A value that is not host:port names nobody.
  const size_t before = seen_count();
  Elect(cluster, "not an address");
  assert_false(locator->Refresh().known());  // the value read, not waited for
  assert_false(locator->Current().known());
  assert_int_equal(seen_count(), before);  // unknown -> unknown is no change
  // Each change reported once, whoever read it (the poll or Refresh).
  int64_t t4 = Elect(cluster, "127.0.0.1:7004");
  MasterLeader refreshed = locator->Refresh();
  assert_int_equal(refreshed.port, 7004);
  assert_int_equal(refreshed.term, t4);
  // A few polls of the same value: a non-event (no second report), watched for a while.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  assert_true(last_is(7004, t4));
  assert_true(no_repeats());
}

void test_locator_keeps_the_leader_while_etcd_is_silent_and_rereads_on_a_higher_term(void**) {
  const std::string cluster = NextCluster();
  int64_t t1 = Elect(cluster, "127.0.0.1:7101");
  std::unique_ptr<MasterLocator> locator = Locate(cluster);
  locator->StartWatch();
  assert_true(SuiteEtcd()->Pause());
  MasterLeader during = locator->Refresh();  // times out (2 s): the last leader stands
  SuiteEtcd()->Resume();
  assert_int_equal(during.port, 7101);
  assert_int_equal(during.term, t1);
  // A master says it leads under a term above the key we read: the key is re-read at
  // once, not at the next poll.
  std::unique_ptr<MasterLocator> slow = Locate(cluster);  // not watched: reads when asked
  int64_t t2 = Elect(cluster, "127.0.0.1:7102");
  assert_int_equal(slow->Current().port, 7101);  // not polled since
  slow->ObserveTerm(t2);
  assert_int_equal(slow->highest_term(), t2);
  assert_int_equal(slow->Current().port, 7102);
  // A fixed master never changes, and a term it reports is kept.
  std::unique_ptr<MasterLocator> fixed = MasterLocator::Fixed("10.0.0.9", 50051);
  assert_false(fixed->via_etcd());
  fixed->ObserveTerm(9);
  assert_int_equal(fixed->highest_term(), 9);
  assert_string_equal(fixed->Refresh().name().c_str(), "10.0.0.9:50051");
}

// ---- the master client ----

void test_a_reply_from_a_lower_term_is_not_taken(void**) {
  const std::string cluster = NextCluster();
  InProcessMaster a, b;
  a.HoldObject("only-on-a");  // a says it exists, b that it does not
  a.Lead(cluster);
  MasterClient client(ClientOptions(), Locate(cluster));
  assert_true(client.ExistKey("only-on-a").value());  // served by a

  // a's handler holds the next ExistKey until b has been elected and the client has seen it.
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  a.handler->on_exist = [&](const std::string&) {
    std::unique_lock<std::mutex> lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  };
  mooncake::Result<bool> answer = ErrorCode::INTERNAL_ERROR;
  std::thread call([&] { answer = client.ExistKey("only-on-a"); });
  {
    std::unique_lock<std::mutex> lock(mu);
    assert_true(cv.wait_for(lock, std::chrono::seconds(5), [&] { return entered; }));
  }
  int64_t t2 = b.Lead(cluster);
  assert_true(WaitFor([&] { return client.leader().term == t2; }, 3000));
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;  // a, which still thinks it leads, now answers "exists"
  }
  cv.notify_all();
  call.join();
  // Its reply was dropped; the call ran again on b, whose answer is the one returned.
  assert_true(answer.ok());
  assert_false(answer.value());
  a.handler->on_exist = nullptr;
  assert_false(client.ExistKey("only-on-a").value());
  assert_int_equal(client.leader().port, b.port());
}

void test_not_leader_sends_the_call_to_the_next_leader(void**) {
  const std::string cluster = NextCluster();
  InProcessMaster a, b, standby;
  b.HoldObject("only-on-b");
  a.Lead(cluster);
  MasterClient client(ClientOptions(), Locate(cluster, 60 * 1000));  // no help from polls
  assert_false(client.ExistKey("only-on-b").value());  // a's answer; its connection stays
  // a is deposed while the connection is open; b is elected a little later. The call,
  // refused with -1600 on the open connection, re-reads the key until b leads.
  assert_true(a.role->Depose("test"));
  std::thread elect([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    b.Lead(cluster);
  });
  mooncake::Result<bool> answer = client.ExistKey("only-on-b");
  elect.join();
  assert_true(answer.ok());
  assert_true(answer.value());
  assert_int_equal(client.leader().port, b.port());

  // A standby that a stale key names is never used: the call waits for a leader, and
  // fails when none comes within the wait.
  Elect(cluster, standby.name());
  MasterClient waiting(ClientOptions(600), Locate(cluster));
  auto start = std::chrono::steady_clock::now();
  assert_int_equal(ToInt(waiting.ExistKey("only-on-b").code()), ToInt(ErrorCode::RPC_FAIL));
  assert_true(testing::MsSince(start) >= 500);
  assert_non_null(std::strstr(MasterClient::LastError().c_str(), "not the leader"));

  // A fixed master's -1600 is passed on as it is: there is nobody else to ask.
  MasterClientOptions fixed = ClientOptions();
  fixed.host = "127.0.0.1";
  fixed.port = b.port();
  MasterClient direct(fixed);
  assert_true(direct.ExistKey("only-on-b").value());
  assert_true(b.role->Depose("test"));
  assert_int_equal(ToInt(direct.ExistKey("only-on-b").code()), ToInt(ErrorCode::NOT_LEADER));
}

void test_a_call_that_may_have_run_is_repeated_only_when_safe(void**) {
  const std::string cluster = NextCluster();
  InProcessMaster a, b;
  b.HoldObject("kept");
  a.HoldObject("kept");
  a.Lead(cluster);
  MasterClient client(ClientOptions(), Locate(cluster));
  assert_true(client.ExistKey("kept").value());
  // a loses its lease while Remove runs: it removes, but the reply never leaves (the
  // connection is closed). b is elected meanwhile. The remove is not sent again: b's
  // object survives, and the caller hears RPC_FAIL (unknown outcome).
  a.handler->after_remove = [&] {
    a.lease = false;
    Elect(cluster, b.name());
  };
  mooncake::StaleCaches stale;
  assert_int_equal(ToInt(client.Remove("kept", false, 0, &stale)), ToInt(ErrorCode::RPC_FAIL));
  assert_int_equal(a.service.ExistKey("kept"), 0);  // a removed it
  assert_int_equal(b.service.ExistKey("kept"), 1);  // b never heard of the call
  // An ExistKey in the same plight runs again: c, elected now, loses its lease while the
  // handler runs, and b is elected meanwhile.
  InProcessMaster c;
  c.Lead(cluster);
  assert_true(WaitFor([&] { return client.leader().port == c.port(); }, 3000));
  c.handler->on_exist = [&](const std::string&) {
    c.lease = false;  // its reply will not leave
    b.Lead(cluster);
  };
  mooncake::Result<bool> answer = client.ExistKey("kept");
  assert_true(answer.ok());
  assert_true(answer.value());  // b's answer (c, which does not hold it, said no)
  assert_int_equal(client.leader().port, b.port());
}

}  // namespace

int main() {
  mooncake::RouteThriftOutputToDebugLog();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_master_address),
      cmocka_unit_test(test_locator_reads_and_follows_the_key),
      cmocka_unit_test(test_locator_keeps_the_leader_while_etcd_is_silent_and_rereads_on_a_higher_term),
      cmocka_unit_test(test_a_reply_from_a_lower_term_is_not_taken),
      cmocka_unit_test(test_not_leader_sends_the_call_to_the_next_leader),
      cmocka_unit_test(test_a_call_that_may_have_run_is_repeated_only_when_safe),
  };
  return cmocka_run_group_tests(tests, testing::StartSuiteEtcd, testing::StopSuiteEtcd);
}
