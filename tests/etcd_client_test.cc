// common/etcd_client against a real etcd (tests/etcd_process.h): reads and writes, the
// transactions an election is made of, leases, endpoint failover, and what it does with
// endpoints and answers that are not etcd's.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "common/etcd/etcd_client.h"
#include "tests/etcd_test_util.h"
#include "tests/process_harness.h"

using namespace mooncake;
using namespace mooncake::testing;

namespace {

// Values of any bytes round-trip (the gateway carries them base64); Get of an absent key
// is found=false; GetPrefix returns exactly the prefix's keys, in order.
void test_get_put_and_prefix(void**) {
  auto etcd = SuiteClient();
  const std::string binary("a\0b\xff\x01 z", 7);
  assert_int_equal(ErrorCode::OK, etcd->Put("/t/get/k", binary));
  EtcdClient::KeyValue kv;
  bool found = false;
  assert_int_equal(ErrorCode::OK, etcd->Get("/t/get/k", &kv, &found));
  assert_true(found);
  assert_true(kv.value == binary);
  assert_string_equal(kv.key.c_str(), "/t/get/k");
  assert_true(kv.create_revision > 0);
  assert_int_equal(kv.lease, 0);
  assert_int_equal(ErrorCode::OK, etcd->Put("/t/get/k", ""));  // an empty value is a value
  assert_int_equal(ErrorCode::OK, etcd->Get("/t/get/k", &kv, &found));
  assert_true(found);
  assert_true(kv.value.empty());
  assert_true(kv.mod_revision > kv.create_revision);

  assert_int_equal(ErrorCode::OK, etcd->Get("/t/get/absent", &kv, &found));
  assert_false(found);

  for (const char* key : {"/t/pre/b", "/t/pre/a", "/t/pre/c", "/t/pre", "/t/prf"}) {
    assert_int_equal(ErrorCode::OK, etcd->Put(key, key));
  }
  std::vector<EtcdClient::KeyValue> kvs;
  assert_int_equal(ErrorCode::OK, etcd->GetPrefix("/t/pre/", &kvs));
  assert_int_equal(kvs.size(), 3);
  assert_string_equal(kvs[0].key.c_str(), "/t/pre/a");
  assert_string_equal(kvs[1].value.c_str(), "/t/pre/b");
  assert_string_equal(kvs[2].key.c_str(), "/t/pre/c");
  assert_int_equal(ErrorCode::OK, etcd->GetPrefix("/t/none/", &kvs));
  assert_true(kvs.empty());
}

// Two clients on two threads create the same key at once, 20 times: exactly one wins
// each time, and both are told the same winner and revision.
void test_create_if_absent_race(void**) {
  auto a = SuiteClient(), b = SuiteClient();
  for (int round = 0; round < 20; ++round) {
    const std::string key = "/t/race/" + std::to_string(round);
    bool created[2] = {false, false};
    EtcdClient::KeyValue seen[2];
    ErrorCode rc[2];
    std::atomic<int> ready{0};
    auto run = [&](int i, EtcdClient* client) {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      rc[i] = client->CreateIfAbsent(key, i == 0 ? "a" : "b", 0, &created[i], &seen[i]);
    };
    std::thread ta(run, 0, a.get()), tb(run, 1, b.get());
    ta.join();
    tb.join();
    assert_int_equal(rc[0], ErrorCode::OK);
    assert_int_equal(rc[1], ErrorCode::OK);
    assert_true(created[0] != created[1]);
    const char* winner = created[0] ? "a" : "b";
    assert_string_equal(seen[0].value.c_str(), winner);
    assert_string_equal(seen[1].value.c_str(), winner);
    assert_int_equal(seen[0].create_revision, seen[1].create_revision);
  }
  // A key that exists is not overwritten by a create.
  bool created = true;
  EtcdClient::KeyValue kv;
  assert_int_equal(ErrorCode::OK, a->CreateIfAbsent("/t/race/0", "c", 0, &created, &kv));
  assert_false(created);
  assert_string_not_equal(kv.value.c_str(), "c");
}

// PutIfHeld writes only while the guard has the revision it had; DeleteIfHeld deletes
// only the key of that revision (a leader's key, not its successor's).
void test_put_and_delete_if_held(void**) {
  auto etcd = SuiteClient();
  bool created = false, done = false, found = false;
  EtcdClient::KeyValue guard, kv;
  assert_int_equal(ErrorCode::OK, etcd->CreateIfAbsent("/t/held/guard", "me", 0, &created, &guard));
  assert_true(created);
  assert_int_equal(ErrorCode::OK, etcd->PutIfHeld("/t/held/guard", guard.create_revision,
                                                  "/t/held/value", "1", &done));
  assert_true(done);
  // The guard deleted and created again (a new leader): the old revision holds nothing.
  assert_int_equal(ErrorCode::OK, etcd->DeleteIfHeld("/t/held/guard", guard.create_revision, &done));
  assert_true(done);
  EtcdClient::KeyValue next;
  assert_int_equal(ErrorCode::OK, etcd->CreateIfAbsent("/t/held/guard", "you", 0, &created, &next));
  assert_true(next.create_revision > guard.create_revision);
  assert_int_equal(ErrorCode::OK, etcd->PutIfHeld("/t/held/guard", guard.create_revision,
                                                  "/t/held/value", "2", &done));
  assert_false(done);
  assert_int_equal(ErrorCode::OK, etcd->Get("/t/held/value", &kv, &found));
  assert_string_equal(kv.value.c_str(), "1");
  assert_int_equal(ErrorCode::OK, etcd->DeleteIfHeld("/t/held/guard", guard.create_revision, &done));
  assert_false(done);
  assert_int_equal(ErrorCode::OK, etcd->Get("/t/held/guard", &kv, &found));
  assert_true(found);
  assert_string_equal(kv.value.c_str(), "you");
  // A guard that never existed holds nothing either.
  assert_int_equal(ErrorCode::OK, etcd->PutIfHeld("/t/held/none", 1, "/t/held/value", "3", &done));
  assert_false(done);
}

// A lease not renewed expires after its ttl (not long before) and takes its key; a
// renewal reports the ttl left, and a renewal after the expiry reports 0.
void test_lease_expires_with_its_key(void**) {
  auto etcd = SuiteClient();
  int64_t lease = 0, ttl = 0;
  assert_int_equal(ErrorCode::OK, etcd->GrantLease(2, &lease));
  bool created = false;
  EtcdClient::KeyValue kv;
  assert_int_equal(ErrorCode::OK, etcd->CreateIfAbsent("/t/lease/k", "v", lease, &created, &kv));
  assert_true(created);
  assert_int_equal(kv.lease, lease);
  auto start = std::chrono::steady_clock::now();
  assert_int_equal(ErrorCode::OK, etcd->KeepAlive(lease, &ttl));
  assert_int_equal(ttl, 2);
  bool found = true;
  assert_true(WaitFor([&] {
    return etcd->Get("/t/lease/k", &kv, &found) == ErrorCode::OK && !found;
  }, 8000));
  assert_true(MsSince(start) >= 1500);  // etcd counts the ttl from the renewal
  assert_int_equal(ErrorCode::OK, etcd->KeepAlive(lease, &ttl));
  assert_int_equal(ttl, 0);
}

// A revoked lease takes its key at once; renewing it reports 0; revoking it again is OK.
void test_keepalive_reports_a_revoked_lease(void**) {
  auto etcd = SuiteClient();
  int64_t lease = 0, ttl = -1;
  assert_int_equal(ErrorCode::OK, etcd->GrantLease(10, &lease));
  assert_int_equal(ErrorCode::OK, etcd->Put("/t/revoke/k", "v", lease));
  assert_int_equal(ErrorCode::OK, etcd->RevokeLease(lease));
  bool found = true;
  EtcdClient::KeyValue kv;
  assert_int_equal(ErrorCode::OK, etcd->Get("/t/revoke/k", &kv, &found));
  assert_false(found);
  assert_int_equal(ErrorCode::OK, etcd->KeepAlive(lease, &ttl));
  assert_int_equal(ttl, 0);
  assert_int_equal(ErrorCode::OK, etcd->RevokeLease(lease));
  // A put bound to a lease that does not exist is etcd's refusal: a clean error.
  assert_int_equal(ErrorCode::INTERNAL_ERROR, etcd->Put("/t/revoke/k", "v", lease));
}

// A dead first endpoint costs one connection refusal, and a silent one (it accepts, never
// answers) one timeout; after that the client starts with the one that answered. Which
// endpoints a call tried is read from the silent one's accept queue (the kernel completes
// every connection there, and nobody takes them but this test), not from how long the call
// took: on a loaded machine etcd's own answer may take as long as the timeout.
void test_endpoint_failover(void**) {
  int dead_port = FreeTcpPort();
  int silent_port = 0;
  int silent = ListenOnLoopback(&silent_port);  // connections queue in the backlog, unanswered
  assert_true(silent >= 0);
  assert_int_equal(fcntl(silent, F_SETFL, O_NONBLOCK), 0);
  // How many connections have reached the silent endpoint since the last call.
  auto connections_to_silent = [&] {
    int n = 0;
    for (int c; (c = accept(silent, nullptr, nullptr)) >= 0; ++n) close(c);
    return n;
  };
  const std::string dead = "127.0.0.1:" + std::to_string(dead_port);
  const std::string quiet = "127.0.0.1:" + std::to_string(silent_port);
  EtcdClient::KeyValue kv;
  bool found = false;

  auto client = Client(dead + "," + SuiteEtcd()->endpoint());
  assert_int_equal(ErrorCode::OK, client->Put("/t/failover", "x"));
  assert_int_equal(ErrorCode::OK, client->Get("/t/failover", &kv, &found));
  assert_true(found);

  constexpr int64_t kTimeoutMs = 2000;  // etcd answers well within it, even under load
  auto slow = Client("http://" + quiet + "," + SuiteEtcd()->endpoint(), kTimeoutMs);
  auto start = std::chrono::steady_clock::now();
  assert_int_equal(ErrorCode::OK, slow->Get("/t/failover", &kv, &found));
  assert_true(MsSince(start) >= kTimeoutMs * 3 / 4);  // it waited for the silent one first
  assert_int_equal(connections_to_silent(), 1);
  assert_int_equal(ErrorCode::OK, slow->Get("/t/failover", &kv, &found));
  assert_int_equal(ErrorCode::OK, slow->Put("/t/failover", "y"));
  assert_int_equal(connections_to_silent(), 0);  // and now starts with etcd

  assert_int_equal(ErrorCode::RPC_FAIL, Client(dead)->Get("/t/failover", &kv, &found));
  assert_int_equal(ErrorCode::RPC_TIMEOUT, Client(quiet, 200)->Get("/t/failover", &kv, &found));
  close(silent);
}

void test_malformed_endpoints(void**) {
  std::unique_ptr<EtcdClient> client;
  for (const char* bad : {"", ",", "127.0.0.1", "127.0.0.1:", ":2379", "h:0", "h:65536",
                          "h:99999999", "https://h:2379", "h:23x", "a b:1", "h:1,,h:2",
                          "[::1:2379", "h;rm:1", "ftp://h:1"}) {
    assert_int_equal(ErrorCode::INVALID_PARAMS, EtcdClient::Create(bad, 1000, &client));
  }
  assert_int_equal(ErrorCode::INVALID_PARAMS, EtcdClient::Create("h:1", 0, &client));
  for (const char* good : {"127.0.0.1:2379", "http://127.0.0.1:2379/", "localhost:1, [::1]:2",
                           "etcd-0.example.org:2379"}) {
    assert_int_equal(ErrorCode::OK, EtcdClient::Create(good, 1000, &client));
  }
}

// An HTTP server in process that answers every request with one canned answer.
class CannedServer {
 public:
  CannedServer() {
    fd_ = ListenOnLoopback(&port_);
    assert_true(fd_ >= 0);
    thread_ = std::thread([this] { Serve(); });
  }
  ~CannedServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  void Answer(const std::string& status, const std::string& body) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = "HTTP/1.1 " + status + "\r\nContent-Type: application/json\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  }
  void AnswerRaw(const std::string& bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = bytes;
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  void Serve() {
    while (!stop_) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string request;
      char buf[4096];
      ssize_t n;
      // The request's headers, then as many body bytes as they announce.
      size_t end = std::string::npos;
      while ((end = request.find("\r\n\r\n")) == std::string::npos &&
             (n = read(c, buf, sizeof(buf))) > 0) {
        request.append(buf, n);
      }
      size_t length = 0, at = request.find("Content-Length: ");
      if (at != std::string::npos) length = std::stoul(request.substr(at + 16));
      while (end != std::string::npos && request.size() < end + 4 + length &&
             (n = read(c, buf, sizeof(buf))) > 0) {
        request.append(buf, n);
      }
      std::string answer;
      {
        std::lock_guard<std::mutex> lock(mu_);
        answer = answer_;
      }
      size_t sent = 0;
      while (sent < answer.size()) {
        ssize_t w = write(c, answer.data() + sent, answer.size() - sent);
        if (w <= 0) break;
        sent += size_t(w);
      }
      close(c);
    }
  }

  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string answer_;
  std::thread thread_;
};

// Answers that are not etcd's are clean errors (INTERNAL_ERROR, or RPC_FAIL when the
// server says it is unavailable), never a crash nor a made-up result.
void test_garbage_answers(void**) {
  CannedServer server;
  // A generous timeout: every answer here is refused for what it says, never for being
  // late, and on a loaded machine the 17 MiB one below takes a while to arrive.
  auto client = Client(server.endpoint(), 30000);
  EtcdClient::KeyValue kv;
  bool found = false, created = false, done = false;
  int64_t id = 0, ttl = 0;
  std::vector<EtcdClient::KeyValue> kvs;
  struct Case {
    const char* status;
    const char* body;
  };
  const Case range_cases[] = {
      {"200 OK", "hello"},
      {"200 OK", ""},
      {"200 OK", "[1,2]"},
      {"200 OK", "{\"kvs\":\"x\"}"},
      {"200 OK", "{\"kvs\":[7]}"},
      {"200 OK", "{\"kvs\":[{\"key\":\"!!\"}]}"},
      {"200 OK", "{\"kvs\":[{\"value\":\"YQ==\"}]}"},
      {"200 OK", "{\"kvs\":[{\"key\":\"YQ==\",\"create_revision\":\"12abc\"}]}"},
      {"200 OK", "{\"kvs\":[{\"key\":\"YQ==\",\"create_revision\":\"99999999999999999999\"}]}"},
      {"200 OK", "{\"kvs\":[{\"key\":\"YQ==\",\"lease\":{}}]}"},
      {"200 OK", "{\"kvs\":[{\"key\":\"YQ=Q\"}]}"},
      {"200 OK", "{\"error\":\"no\"}"},
      {"404 Not Found", "<html>no</html>"},
      {"400 Bad Request", "{\"error\":\"bad\",\"code\":3}"},
  };
  for (const Case& c : range_cases) {
    server.Answer(c.status, c.body);
    assert_int_equal(ErrorCode::INTERNAL_ERROR, client->Get("/k", &kv, &found));
    assert_int_equal(ErrorCode::INTERNAL_ERROR, client->GetPrefix("/k", &kvs));
  }
  server.Answer("200 OK", "{\"kvs\":[{\"key\":\"YQ==\"}]}");  // a minimal real answer
  assert_int_equal(ErrorCode::OK, client->Get("/k", &kv, &found));
  assert_true(found);
  assert_string_equal(kv.key.c_str(), "a");
  assert_int_equal(kv.create_revision, 0);

  server.Answer("200 OK", "{\"succeeded\":\"yes\"}");
  assert_int_equal(ErrorCode::INTERNAL_ERROR, client->PutIfHeld("/g", 1, "/k", "v", &done));
  server.Answer("200 OK", "{\"succeeded\":true,\"responses\":[]}");
  assert_int_equal(ErrorCode::INTERNAL_ERROR, client->CreateIfAbsent("/k", "v", 0, &created, &kv));
  server.Answer("200 OK", "{\"succeeded\":true,\"responses\":[{\"response_range\":{}}]}");
  assert_int_equal(ErrorCode::INTERNAL_ERROR, client->CreateIfAbsent("/k", "v", 0, &created, &kv));
  server.Answer("200 OK", "{\"TTL\":\"2\"}");  // a grant without an ID
  assert_int_equal(ErrorCode::INTERNAL_ERROR, client->GrantLease(2, &id));
  server.Answer("200 OK", "{\"TTL\":\"2\"}");  // a keepalive without its result
  assert_int_equal(ErrorCode::INTERNAL_ERROR, client->KeepAlive(1, &ttl));
  server.Answer("200 OK", "{\"result\":{\"TTL\":true}}");
  assert_int_equal(ErrorCode::INTERNAL_ERROR, client->KeepAlive(1, &ttl));

  server.Answer("503 Service Unavailable", "{\"error\":\"no leader\"}");
  assert_int_equal(ErrorCode::RPC_FAIL, client->Get("/k", &kv, &found));
  server.AnswerRaw("");  // closes without a word
  assert_int_equal(ErrorCode::RPC_FAIL, client->Get("/k", &kv, &found));
  server.AnswerRaw("garbage\r\n\r\n");
  assert_true(client->Get("/k", &kv, &found) != ErrorCode::OK);
  // More than the client reads: refused, not buffered.
  server.Answer("200 OK", "{\"kvs\":[],\"pad\":\"" + std::string(17 << 20, 'x') + "\"}");
  assert_int_equal(ErrorCode::INTERNAL_ERROR, client->Get("/k", &kv, &found));
}

// The launcher's C interface (tests/etcd_process.h) does what the HA suites need: a
// paused etcd times out, a killed one refuses, a restarted one still has its keys.
void test_etcd_launcher(void**) {
  mc_etcd* e = mc_etcd_start(nullptr);
  assert_non_null(e);
  std::string endpoint = mc_etcd_endpoint(e);
  assert_string_equal(endpoint.c_str(),
                      ("127.0.0.1:" + std::to_string(mc_etcd_client_port(e))).c_str());
  assert_true(access(mc_etcd_log(e), R_OK) == 0);
  // Long enough for a loaded machine's etcd (a put waits for its disk), short enough for
  // the paused one's timeout below.
  auto client = Client(endpoint, 2000);
  EtcdClient::KeyValue kv;
  bool found = false;
  assert_int_equal(ErrorCode::OK, client->Put("/t/launcher", "kept"));
  assert_int_equal(mc_etcd_pause(e), 0);
  assert_int_equal(ErrorCode::RPC_TIMEOUT, client->Get("/t/launcher", &kv, &found));
  assert_int_equal(mc_etcd_resume(e), 0);
  assert_true(WaitFor([&] { return client->Get("/t/launcher", &kv, &found) == ErrorCode::OK; },
                      5000));
  assert_int_equal(mc_etcd_kill9(e), 0);
  assert_int_equal(ErrorCode::RPC_FAIL, client->Get("/t/launcher", &kv, &found));
  assert_int_equal(mc_etcd_kill9(e), -1);  // not running
  assert_int_equal(mc_etcd_restart(e), 0);
  assert_int_equal(ErrorCode::OK, client->Get("/t/launcher", &kv, &found));
  assert_true(found);
  assert_string_equal(kv.value.c_str(), "kept");
  assert_int_equal(mc_etcd_stop(e), 0);
  assert_int_equal(mc_etcd_restart(e), 0);
  assert_int_equal(ErrorCode::OK, client->Get("/t/launcher", &kv, &found));
  assert_true(found);
  mc_etcd_destroy(e);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_get_put_and_prefix),
      cmocka_unit_test(test_create_if_absent_race),
      cmocka_unit_test(test_put_and_delete_if_held),
      cmocka_unit_test(test_lease_expires_with_its_key),
      cmocka_unit_test(test_keepalive_reports_a_revoked_lease),
      cmocka_unit_test(test_endpoint_failover),
      cmocka_unit_test(test_malformed_endpoints),
      cmocka_unit_test(test_garbage_answers),
      cmocka_unit_test(test_etcd_launcher),
  };
  return cmocka_run_group_tests(tests, StartSuiteEtcd, StopSuiteEtcd);
}
