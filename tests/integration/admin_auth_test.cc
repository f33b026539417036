// Attack 1 of issue 32 against real processes: who may call what on the admin HTTP ports
// (common/admin/admin_http.h, docs/security.md "The admin HTTP port").
//
// A master and a daemon with the cluster key and a separate --admin_token_file: every
// endpoint that names keys, tenants, segments or addresses answers 401 (-1400, and
// "WWW-Authenticate: Bearer") without a token, with a wrong one and with another scheme,
// and serves the token of either file; /health, /role, /metrics and GET /log_level stay
// open, and an open /metrics names no key, tenant or segment address (an admin's adds
// them); POST /log_level without the token changes nothing. Refusals are logged at most
// once a second. Connections are capped per address and in all, the oldest giving way, so
// a flood of idle connections leaves the port serving.
//
// Without any key: the same endpoints answer this process's uid and 403 (-1401) a peer of
// another uid (a child that became uid 65534: needs root, skipped otherwise).
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/admin/admin_http.h"
#include "include/mooncake_store.h"
#include "tests/harness/cluster.h"
#include "tests/harness/cmocka_cpp.h"
#include "tests/harness/http_test_util.h"
#include "tests/harness/process_harness.h"

namespace harness = mooncake::testing;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uid_t kNobody = 65534;
// What the tests put, to look for where it must not be.
const char kProbeKey[] = "admin-leak-probe-key-7f3a";
const char kTenant[] = "admin-leak-probe-tenant";
const char kTenantKey[] = "admin-leak-probe-tenant-key";

struct Cluster {
  mc_cluster* cluster = nullptr;
  std::string key_dir;           // holds the admin token file
  std::string admin_token_file;  // --admin_token_file of the master and the daemon
  int master_port = 0;           // admin HTTP
  int daemon_port = 0;           // admin HTTP
  std::string segment;           // the daemon's name: its segment's, an address
};

Cluster* g_keyed = nullptr;
Cluster* g_keyless = nullptr;

int CountLines(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.find(needle) != std::string::npos;
  return n;
}

bool Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return true;
  std::fprintf(stderr, "expected \"%s\" in: %.400s\n", part.c_str(), text.c_str());
  return false;
}

void PutProbes(const char* socket) {
  for (const char* tenant : {"", kTenant}) {
    mooncake_store_t s = mooncake_store_create();
    assert_non_null(s);
    if (tenant[0] != '\0') assert_int_equal(mooncake_store_set_tenant(s, tenant), 0);
    assert_int_equal(mooncake_store_connect(s, socket, 1 << 20), 0);
    const char* key = tenant[0] != '\0' ? kTenantKey : kProbeKey;
    assert_int_equal(mooncake_store_put(s, key, "value", 5, nullptr), 0);
    mooncake_store_destroy(s);
  }
}

// Starts a master and a daemon, with the harness's key and an admin token file of their
// own (keyed), or with no key and no token file.
Cluster* Start(bool keyed) {
  auto* c = new Cluster;
  std::vector<const char*> master_flags, daemon_flags;
  if (keyed) {
    c->key_dir = harness::MakeTempDir("mc-admin-token-");
    c->admin_token_file = c->key_dir + "/admin.token";
    // And a key nobody runs with, for a wrong token.
    if (!harness::WriteClusterKeyFile(c->admin_token_file, {harness::RandomClusterKey()}) ||
        !harness::WriteClusterKeyFile(c->key_dir + "/other.key", {harness::RandomClusterKey()})) {
      return nullptr;
    }
    for (auto* flags : {&master_flags, &daemon_flags}) {
      flags->push_back("--admin_token_file");
      flags->push_back(c->admin_token_file.c_str());
    }
  } else {
    for (auto* flags : {&master_flags, &daemon_flags}) {
      flags->push_back("--cluster_key_file");
      flags->push_back("");
    }
  }
  master_flags.push_back(nullptr);
  daemon_flags.push_back(nullptr);
  mc_cluster_options o = {};
  o.daemons = 1;
  o.segment_size = 64ull << 20;
  o.master_flags = master_flags.data();
  o.daemon_flags = daemon_flags.data();
  c->cluster = mc_cluster_start_with(&o);
  if (c->cluster == nullptr) return nullptr;
  c->master_port = harness::AdminPortFromLog(mc_cluster_master_log(c->cluster), "master");
  c->daemon_port = harness::AdminPortFromLog(mc_cluster_log_at(c->cluster, 0), "daemon");
  c->segment = mc_cluster_name_at(c->cluster, 0);
  if (c->master_port <= 0 || c->daemon_port <= 0) return nullptr;
  PutProbes(mc_cluster_socket_at(c->cluster, 0));
  return c;
}

void Stop(Cluster* c) {
  if (c == nullptr) return;
  mc_cluster_stop(c->cluster);
  if (!c->key_dir.empty()) harness::RemoveTree(c->key_dir);
  delete c;
}

int Setup(void**) {
  g_keyed = Start(true);
  g_keyless = g_keyed != nullptr ? Start(false) : nullptr;
  return g_keyless != nullptr ? 0 : -1;
}

int Teardown(void**) {
  Stop(g_keyed);
  Stop(g_keyless);
  return 0;
}

harness::HttpAnswer Ask(int port, const std::string& method, const std::string& target,
                        const std::string& authorization, const std::string& body = "") {
  std::vector<std::string> headers;
  if (!authorization.empty()) headers.push_back(authorization);
  return harness::HttpRequestLoopback(port, method, target, headers, body, 10000);
}

struct Endpoint {
  const char* method;
  std::string target;
  std::string body;
  int served;          // the status an admin caller gets
  std::string shows;   // what an admin caller's answer holds ("": not checked)
};

// Every route of master/server/master_admin.cc that is not open.
std::vector<Endpoint> MasterProtected(const Cluster& c) {
  const std::string probe = kProbeKey;
  return {
      {"GET", "/metrics/summary", "", 200, "tenants: "},
      {"GET", "/get_all_segments", "", 200, c.segment},
      {"HEAD", "/get_all_segments", "", 200, ""},
      {"GET", "/get_segments_detail", "", 200, c.segment},
      {"GET", "/query_key?key=" + probe, "", 200, probe},
      {"GET", "/batch_query_keys?keys=" + probe, "", 200, probe},
      {"POST", "/batch_query_keys", "{\"keys\":[\"" + probe + "\"]}", 200, probe},
      {"GET", "/get_all_keys", "", 200, probe},
      {"GET", std::string("/get_all_keys?format=json&tenant=") + kTenant, "", 200, kTenantKey},
      {"GET", "/stats", "", 200, kTenant},
      {"GET", "/snapshot", "", 200, "\"enabled\""},
      {"GET", "/api/v1/segments/status?segment=" + harness::UrlEncode(c.segment), "", 200,
       "\"status_name\""},
      {"GET", "/api/v1/drain_jobs/query?job_id=1-1", "", 404, ""},
      {"POST", "/api/v1/drain_jobs/cancel?job_id=1-1", "", 404, ""},
      {"POST", "/api/v1/drain_jobs", "{\"segments\":[\"no-such-segment\"]}", 404, ""},
      {"POST", "/log_level?level=info", "", 200, "\"level\""},
  };
}

void ExpectRefused(const harness::HttpAnswer& a, int status, int code) {
  assert_int_equal(a.status, status);
  if (status == 401) assert_string_equal(a.Header("WWW-Authenticate").c_str(), "Bearer");
  assert_true(Contains(a.body, "\"error_code\":" + std::to_string(code)));
  assert_true(Contains(a.body, "\"success\":false"));
}

// Each protected endpoint: 401 without a token, with a wrong one, with another scheme; the
// token of the cluster key and of --admin_token_file are served.
void test_master_endpoints_need_the_token(void**) {
  const Cluster& c = *g_keyed;
  const std::string key = harness::AdminAuthorization();
  const std::string own = harness::AdminAuthorization(c.admin_token_file);
  const std::string token = key.substr(key.rfind(' ') + 1);
  const std::vector<std::string> wrong = {
      "",  // no header at all
      harness::AdminAuthorization(c.key_dir + "/other.key"),
      "Authorization: Bearer " + std::string(64, '0'),
      "Authorization: Bearer " + token.substr(0, 63),
      "Authorization: Bearer " + token + "0",
      "Authorization: Basic " + token,
      "Authorization: Bearer",
  };
  for (const Endpoint& e : MasterProtected(c)) {
    std::fprintf(stderr, "%s %s\n", e.method, e.target.c_str());
    for (const std::string& bad : wrong) {
      harness::HttpAnswer a = Ask(c.master_port, e.method, e.target, bad, e.body);
      if (std::strcmp(e.method, "HEAD") == 0) {
        assert_int_equal(a.status, 401);
        continue;
      }
      // /get_all_segments too (SGLang's probe): a segment is mounted, so its refusal has a
      // body, which names nothing.
      ExpectRefused(a, 401, MOONCAKE_STORE_UNAUTHENTICATED);
      for (const std::string& secret :
           {std::string(kProbeKey), std::string(kTenant), std::string(kTenantKey), c.segment}) {
        assert_true(a.body.find(secret) == std::string::npos);
      }
    }
    for (const std::string& good : {key, own}) {
      harness::HttpAnswer a = Ask(c.master_port, e.method, e.target, good, e.body);
      if (a.status != e.served) std::fprintf(stderr, "answer: %s\n", a.body.c_str());
      assert_int_equal(a.status, e.served);
      if (!e.shows.empty()) assert_true(Contains(a.body, e.shows));
    }
  }
}

// Open to anyone: /health, /role, GET /log_level, and /metrics, which then names no key,
// tenant or segment address; an admin's /metrics adds the series that name them.
void test_master_open_endpoints_name_nothing(void**) {
  const Cluster& c = *g_keyed;
  for (const char* target : {"/health", "/role", "/log_level"}) {
    assert_int_equal(Ask(c.master_port, "GET", target, "").status, 200);
  }
  harness::HttpAnswer open = Ask(c.master_port, "GET", "/metrics", "");
  assert_int_equal(open.status, 200);
  assert_true(Contains(open.body, "\nmaster_keys 2\n"));
  assert_true(Contains(open.body, "\nmaster_segments 1\n"));
  for (const std::string& secret :
       {std::string(kProbeKey), std::string(kTenant), std::string(kTenantKey), c.segment,
        std::string("tenant_id="), std::string("segment=")}) {
    if (open.body.find(secret) != std::string::npos) {
      fail_msg("the open /metrics names %s", secret.c_str());
    }
  }
  harness::HttpAnswer admin = Ask(c.master_port, "GET", "/metrics", harness::AdminAuthorization());
  assert_int_equal(admin.status, 200);
  assert_true(Contains(admin.body, "segment_allocated_bytes{segment=\"" + c.segment + "\""));
  assert_true(Contains(admin.body, std::string("master_tenant_keys{tenant_id=\"") + kTenant +
                                       "\"} 1\n"));
  assert_true(admin.body.find(kProbeKey) == std::string::npos);  // keys: never
  // The daemon's /metrics is aggregate: the same for everyone, and names nothing.
  harness::HttpAnswer daemon = Ask(c.daemon_port, "GET", "/metrics", "");
  assert_int_equal(daemon.status, 200);
  assert_true(Contains(daemon.body, "mooncake_daemon_requests_total{op=\"put\",result=\"ok\"} 2"));
  for (const std::string& secret : {std::string(kProbeKey), std::string(kTenant), c.segment}) {
    assert_true(daemon.body.find(secret) == std::string::npos);
  }
  assert_int_equal(Ask(c.daemon_port, "GET", "/health", "").status, 200);
}

// POST /log_level without the token changes nothing, on the master and the daemon; the
// tokens of both files change it.
void test_log_level_needs_the_token(void**) {
  const Cluster& c = *g_keyed;
  for (int port : {c.master_port, c.daemon_port}) {
    ExpectRefused(Ask(port, "POST", "/log_level?level=debug", ""), 401,
                  MOONCAKE_STORE_UNAUTHENTICATED);
    ExpectRefused(Ask(port, "POST", "/log_level?level=debug",
                      "Authorization: Bearer " + std::string(64, 'a')),
                  401, MOONCAKE_STORE_UNAUTHENTICATED);
    assert_true(Contains(Ask(port, "GET", "/log_level", "").body, "\"level\":\"info\""));
    for (const std::string& good :
         {harness::AdminAuthorization(), harness::AdminAuthorization(c.admin_token_file)}) {
      harness::HttpAnswer set = Ask(port, "POST", "/log_level?level=warning", good);
      assert_int_equal(set.status, 200);
      assert_true(Contains(set.body, "\"level\":\"warning\""));
      assert_true(Contains(Ask(port, "GET", "/log_level", "").body, "\"level\":\"warning\""));
      assert_int_equal(Ask(port, "POST", "/log_level?level=info", good).status, 200);
    }
  }
}

// A flood of refusals writes a line a second at most; the next line counts those it left out.
void test_refusals_are_logged_at_most_once_a_second(void**) {
  const Cluster& c = *g_keyed;
  const std::string log = mc_cluster_master_log(c.cluster);
  const int before = CountLines(log, "admin HTTP refused");
  const int counted_before = CountLines(log, "refusals not logged)");
  const auto start = Clock::now();
  for (int i = 0; i < 300; ++i) {
    assert_int_equal(Ask(c.master_port, "GET", "/get_all_keys", "").status, 401);
  }
  // Once a second has passed, a refusal is logged again, saying how many were not.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (CountLines(log, "refusals not logged)") == counted_before && Clock::now() < deadline) {
    assert_int_equal(Ask(c.master_port, "GET", "/stats", "").status, 401);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const int lines = CountLines(log, "admin HTTP refused") - before;
  std::fprintf(stderr, "%d refusal lines in %.1f s\n", lines, seconds);
  assert_true(CountLines(log, "refusals not logged)") > counted_before);
  assert_true(lines >= 1);
  assert_true(lines <= static_cast<int>(seconds) + 2);
  // Each line names the peer and why.
  std::ifstream in(log);
  int named = 0;
  for (std::string line; std::getline(in, line);) {
    named += line.find("admin HTTP refused GET /") != std::string::npos &&
             line.find(" from 127.0.0.1:") != std::string::npos &&
             line.find("(401): no admin token") != std::string::npos;
  }
  assert_true(named > 0);
}

// A connection from source address ip (127.0.0.0/8) to 127.0.0.1:port, or -1.
int ConnectFrom(const char* ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, ip, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

int OpenDescriptors(int pid) {
  DIR* dir = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (dir == nullptr) return -1;
  int n = 0;
  while (readdir(dir) != nullptr) ++n;
  closedir(dir);
  return n - 2;
}

// Idle connections from one address and from many: each address keeps at most its share,
// the port at most its total, and a client arriving meanwhile is served.
void test_idle_connections_cannot_fill_the_port(void**) {
  const Cluster& c = *g_keyed;
  using mooncake::AdminHttpServer;
  const int pid = mc_cluster_master_pid(c.cluster);
  const int baseline = OpenDescriptors(pid);
  const std::string log = mc_cluster_master_log(c.cluster);
  std::vector<int> held;
  // One address, three times its share, then twenty addresses with their share each.
  for (size_t i = 0; i < 3 * AdminHttpServer::kMaxConnectionsPerAddress; ++i) {
    held.push_back(ConnectFrom("127.0.0.2", c.master_port));
  }
  for (int a = 0; a < 20; ++a) {
    const std::string ip = "127.0.1." + std::to_string(a + 1);
    for (size_t i = 0; i < AdminHttpServer::kMaxConnectionsPerAddress; ++i) {
      held.push_back(ConnectFrom(ip.c_str(), c.master_port));
    }
  }
  for (int fd : held) assert_true(fd >= 0);
  // A client arriving now is served, by a port that closed the oldest to make room.
  harness::HttpAnswer health = Ask(c.master_port, "GET", "/health", "");
  assert_int_equal(health.status, 200);
  // The first to give way is logged (later ones a line a second).
  assert_true(CountLines(log, "closed the oldest from 127.0.0.2") > 0);
  assert_int_equal(Ask(c.master_port, "GET", "/stats", harness::AdminAuthorization()).status, 200);
  // The master holds at most the port's total (those given way are closed on its next
  // turn: polled, never slept on).
  const int bound = baseline + static_cast<int>(AdminHttpServer::kMaxConnections) + 8;
  int open = OpenDescriptors(pid);
  for (auto deadline = Clock::now() + std::chrono::seconds(20);
       open > bound && Clock::now() < deadline; open = OpenDescriptors(pid)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "%zu connections held: the master has %d descriptors (%d before)\n",
               held.size(), open, baseline);
  assert_true(open <= bound);
  for (int fd : held) close(fd);
}

// method target asked of 127.0.0.1:port by a child that became uid 65534: the answer's
// status and body. Skips without root.
harness::HttpAnswer AsNobody(int port, const char* method, const std::string& target) {
  if (geteuid() != 0) {
    std::fprintf(stderr, "skipped: needs root to connect as uid %u\n", kNobody);
    skip();
  }
  int out[2];
  assert_int_equal(pipe(out), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    close(out[0]);
    if (setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(2);
    harness::HttpAnswer a = Ask(port, method, target, "");
    std::string reply = std::to_string(a.status) + "\n" + a.body;
    (void)!write(out[1], reply.data(), reply.size());
    _exit(0);
  }
  close(out[1]);
  std::string reply;
  char buf[4096];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof(buf))) > 0) reply.append(buf, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  harness::HttpAnswer a;
  a.status = std::atoi(reply.c_str());
  a.body = reply.substr(reply.find('\n') + 1);
  return a;
}

// Without a key: this uid is served, another uid gets 403 with how to get in; the open
// endpoints answer it, with no per-segment series.
void test_without_a_key_only_this_uid(void**) {
  const Cluster& c = *g_keyless;
  for (const Endpoint& e : MasterProtected(c)) {
    harness::HttpAnswer a = Ask(c.master_port, e.method, e.target, "", e.body);
    assert_int_equal(a.status, e.served);
  }
  for (const char* target : {"/get_all_keys", "/get_segments_detail", "/stats"}) {
    harness::HttpAnswer a = AsNobody(c.master_port, "GET", target);
    assert_int_equal(a.status, 403);
    assert_true(Contains(a.body, "\"error_code\":-1401"));
    assert_true(Contains(a.body, "uid 65534"));
    assert_true(Contains(a.body, "--admin_token_file"));
    assert_true(a.body.find(kProbeKey) == std::string::npos);
  }
  for (int port : {c.master_port, c.daemon_port}) {
    assert_int_equal(AsNobody(port, "POST", "/log_level?level=debug").status, 403);
    assert_true(Contains(Ask(port, "GET", "/log_level", "").body, "\"level\":\"info\""));
    assert_int_equal(AsNobody(port, "GET", "/health").status, 200);
    assert_int_equal(Ask(port, "POST", "/log_level?level=info", "").status, 200);
  }
  harness::HttpAnswer metrics = AsNobody(c.master_port, "GET", "/metrics");
  assert_int_equal(metrics.status, 200);
  assert_true(metrics.body.find(c.segment) == std::string::npos);
  assert_true(metrics.body.find(kTenant) == std::string::npos);
  assert_true(Contains(Ask(c.master_port, "GET", "/metrics", "").body,
                       "segment_allocated_bytes{segment=\"" + c.segment + "\""));
  assert_true(CountLines(mc_cluster_master_log(c.cluster), "admin HTTP refused") > 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_master_endpoints_need_the_token),
      cmocka_unit_test(test_master_open_endpoints_name_nothing),
      cmocka_unit_test(test_log_level_needs_the_token),
      cmocka_unit_test(test_refusals_are_logged_at_most_once_a_second),
      cmocka_unit_test(test_idle_connections_cannot_fill_the_port),
      cmocka_unit_test(test_without_a_key_only_this_uid),
  };
  return cmocka_run_group_tests(tests, Setup, Teardown);
}
