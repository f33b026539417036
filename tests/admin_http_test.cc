// common/admin_http (AdminHttpServer) in process, over raw sockets where the client must
// be hostile: routing, the JSON error shapes, HEAD, query decoding, a NUL in the path, a
// 20 KiB header, a request trickled a byte per 100 ms (closed by the per-connection
// deadline while other requests are served meanwhile), and /log_level; the admin token's
// check on a server given tokens (schemes, wrong and truncated tokens, rotation, the
// routes' access kinds, on_refusal). The server without tokens admits this process's own
// uid, so its kAdmin routes (the default) answer these tests.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/admin/admin_http.h"
#include "common/auth/cluster_key.h"
#include "common/base/logging.h"
#include "tests/cmocka_cpp.h"
#include "tests/http_test_util.h"

using namespace mooncake;
namespace harness = mooncake::testing;
using Clock = std::chrono::steady_clock;
using namespace std::string_literals;

namespace {

// Reads until the peer closes or timeout_ms pass without data.
std::string ReadAll(int fd, int timeout_ms) {
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) break;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Sends request whole and returns everything the server answers before it closes.
std::string Exchange(int port, const std::string& request) {
  int fd = harness::ConnectLoopback(port);
  if (fd < 0) return "";
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string answer = ReadAll(fd, 3000);
  close(fd);
  return answer;
}

std::string Get(int port, const std::string& target, const std::string& method = "GET") {
  return Exchange(port, method + " " + target + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
}

int StatusOf(const std::string& response) {
  if (response.compare(0, 9, "HTTP/1.1 ") != 0) return -1;
  return std::atoi(response.c_str() + 9);
}

std::string BodyOf(const std::string& response) {
  size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

struct Server {
  AdminHttpServer http{"test"};
  int port = 0;
  // One that accepts the tokens of two keys (as a process mid-rotation).
  AdminHttpServer tokened{"tokened"};
  int tokened_port = 0;
  std::vector<std::string> tokens;
};

const ClusterKey& Keys() {
  static const ClusterKey keys = ClusterKey::FromKeys(
      {"3f1e2d4c5b6a79880716253443526170f0e1d2c3b4a59687", "9a8b7c6d5e4f30211203f4e5d6c7b8a9c0d1e2f3a4b5c6d7"});
  return keys;
}

int Setup(void** state) {
  auto* s = new Server;
  s->http.Handle("/a", [](const HttpRequest& request, HttpResponse* response) {
    response->content_type = "text/plain";
    response->body = "hello " + request.method;
  });
  s->http.Handle("/echo", [](const HttpRequest& request, HttpResponse* response) {
    response->content_type = "text/plain";
    response->body = request.Param("x", "(none)") + "|" + request.body;
    response->headers.push_back({"X-Echo", "yes"});
  });
  s->http.Handle("/bad", [](const HttpRequest&, HttpResponse* response) {
    SetHttpError(response, 400, -600, "a \"quoted\" reason");
  });
  RegisterLogLevelEndpoint(&s->http);
  s->tokens = Keys().AdminTokens();
  s->tokened.AcceptTokens(s->tokens);
  s->tokened.Handle("/secret", [](const HttpRequest& request, HttpResponse* response) {
    response->body = "secret " + request.method;
  });
  s->tokened.Handle(
      "/open",
      [](const HttpRequest& request, HttpResponse* response) {
        response->body = request.admin ? "open, admin" : "open";
      },
      AdminHttpServer::Access::kOpen);
  s->tokened.Handle(
      "/quiet", [](const HttpRequest&, HttpResponse* response) { response->body = "quiet"; },
      AdminHttpServer::Access::kAdmin,
      [](const HttpRequest&, HttpResponse* response) { response->body.clear(); });
  RegisterLogLevelEndpoint(&s->tokened);
  std::string error;
  if (!s->http.Start("127.0.0.1", 0, &error) || !s->tokened.Start("127.0.0.1", 0, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    delete s;
    return -1;
  }
  s->port = s->http.port();
  s->tokened_port = s->tokened.port();
  *state = s;
  return 0;
}

int Teardown(void** state) {
  delete static_cast<Server*>(*state);
  return 0;
}

void test_routing_and_error_shapes(void** state) {
  int port = static_cast<Server*>(*state)->port;
  std::string r = Get(port, "/a");
  assert_int_equal(StatusOf(r), 200);
  assert_string_equal(BodyOf(r).c_str(), "hello GET");

  r = Get(port, "/echo?x=a%20b&y=1");
  assert_int_equal(StatusOf(r), 200);
  assert_string_equal(BodyOf(r).c_str(), "a b|");
  assert_non_null(std::strstr(r.c_str(), "X-Echo: yes\r\n"));

  r = Get(port, "/nowhere");
  assert_int_equal(StatusOf(r), 404);
  assert_non_null(std::strstr(r.c_str(), "Content-Type: application/json"));
  assert_string_equal(
      BodyOf(r).c_str(),
      "{\"success\":false,\"error_code\":-600,\"error_message\":\"no such endpoint: /nowhere\"}\n");

  r = Get(port, "/bad");
  assert_int_equal(StatusOf(r), 400);
  assert_string_equal(
      BodyOf(r).c_str(),
      "{\"success\":false,\"error_code\":-600,\"error_message\":\"a \\\"quoted\\\" reason\"}\n");

  r = Exchange(port,
               "POST /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbody");
  assert_int_equal(StatusOf(r), 200);
  assert_string_equal(BodyOf(r).c_str(), "(none)|body");

  // Methods other than GET, HEAD and POST are refused before any handler.
  r = Get(port, "/a", "PUT");
  assert_true(StatusOf(r) == 405 || StatusOf(r) == 501);
}

void test_head_has_no_body(void** state) {
  int port = static_cast<Server*>(*state)->port;
  std::string r = Get(port, "/a", "HEAD");
  assert_int_equal(StatusOf(r), 200);
  assert_string_equal(BodyOf(r).c_str(), "");
}

void test_hostile_targets(void** state) {
  int port = static_cast<Server*>(*state)->port;
  // A NUL decoded inside the path: refused, not cut short to "/a".
  std::string r = Get(port, "/a%00b");
  assert_int_equal(StatusOf(r), 400);
  assert_non_null(std::strstr(r.c_str(), "\"error_code\":-600"));
  r = Get(port, "/echo?x=%zz");  // a malformed escape in the query
  assert_true(StatusOf(r) == 400 || StatusOf(r) == 200);
  // Garbage instead of a request line: a 400 or a closed connection, never a handler.
  r = Exchange(port, "\x01\x02\x03 nonsense\r\n\r\n");
  assert_true(r.empty() || StatusOf(r) == 400);
  // A 20 KiB header, past the 8 KiB limit: refused.
  r = Exchange(port, "GET /a HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(20 * 1024, 'h') +
                         "\r\nConnection: close\r\n\r\n");
  assert_true(StatusOf(r) != 200);
  assert_null(std::strstr(r.c_str(), "hello"));
  // And the server still serves.
  assert_int_equal(StatusOf(Get(port, "/a")), 200);
}

void test_trickled_request_is_closed_by_the_deadline(void** state) {
  int port = static_cast<Server*>(*state)->port;
  std::atomic<bool> closed{false};
  std::atomic<bool> answered{false};
  std::atomic<int64_t> closed_after_ms{-1};
  std::thread trickler([&] {
    int fd = harness::ConnectLoopback(port);
    if (fd < 0) return;
    const std::string request =
        "GET /a HTTP/1.1\r\nHost: t\r\nX-Slow: " + std::string(400, 's') + "\r\n\r\n";
    const auto start = Clock::now();
    for (char c : request) {
      if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) break;
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        char buf[256];
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n > 0) answered = true;
        break;  // closed (n <= 0) or, wrongly, answered
      }
      if (Clock::now() - start > std::chrono::seconds(20)) break;
    }
    closed_after_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start)
                          .count();
    closed = true;
    close(fd);
  });
  // Meanwhile other requests are answered while the trickled one is still open: a server
  // held up by it would answer none before closing it (counted by that order, not by how
  // long each took, which a loaded machine stretches; one may slip in as it closes).
  int served = 0;
  while (!closed.load()) {
    assert_int_equal(StatusOf(Get(port, "/a")), 200);
    served += !closed.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  trickler.join();
  assert_false(answered.load());
  assert_true(served >= 2);
  // Closed at the 5 s deadline (a 420-byte request at a byte per 100 ms would take 42 s).
  std::fprintf(stderr, "trickled connection closed after %lld ms, %d requests served meanwhile\n",
               static_cast<long long>(closed_after_ms.load()), served);
  assert_true(closed_after_ms.load() >= 4000);
  assert_true(closed_after_ms.load() < 15000);
}

void test_log_level(void** state) {
  int port = static_cast<Server*>(*state)->port;
  SetLogLevel(LogLevel::kInfo);
  std::string r = Get(port, "/log_level");
  assert_int_equal(StatusOf(r), 200);
  assert_string_equal(BodyOf(r).c_str(), "{\"level\":\"info\"}\n");
  r = Get(port, "/log_level?level=debug", "POST");
  assert_int_equal(StatusOf(r), 200);
  assert_string_equal(BodyOf(r).c_str(), "{\"level\":\"debug\"}\n");
  assert_true(GetLogLevel() == LogLevel::kDebug);
  r = Get(port, "/log_level?level=loud", "POST");
  assert_int_equal(StatusOf(r), 400);
  assert_true(GetLogLevel() == LogLevel::kDebug);
  r = Get(port, "/log_level?level=info", "POST");
  assert_int_equal(StatusOf(r), 200);
  assert_true(GetLogLevel() == LogLevel::kInfo);
}

// A request with extra header lines.
std::string With(int port, const std::string& method, const std::string& target,
                 const std::string& headers) {
  return Exchange(port, method + " " + target + " HTTP/1.1\r\nHost: t\r\n" + headers +
                            "Connection: close\r\n\r\n");
}

std::string HeaderOf(const std::string& response, const std::string& name) {
  size_t at = response.find("\r\n" + name + ": ");
  if (at == std::string::npos) return "";
  size_t start = at + name.size() + 4;
  return response.substr(start, response.find("\r\n", start) - start);
}

// Only the tokens given pass, each whole and exact; the scheme is case-insensitive.
void test_the_token_opens_admin_routes(void** state) {
  auto* s = static_cast<Server*>(*state);
  const int port = s->tokened_port;
  for (const std::string& token : s->tokens) {
    for (const std::string& header :
         {"Authorization: Bearer " + token + "\r\n", "authorization: bearer " + token + "\r\n",
          "Authorization: BEARER \t" + token + "  \r\n"}) {
      std::string r = With(port, "GET", "/secret", header);
      assert_int_equal(StatusOf(r), 200);
      assert_string_equal(BodyOf(r).c_str(), "secret GET");
    }
  }
  std::string upper = s->tokens[0];
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string flipped = s->tokens[0];
  flipped[17] = flipped[17] == '0' ? '1' : '0';
  for (const std::string& header :
       {std::string(), "Authorization: Bearer\r\n"s, "Authorization: Bearer \r\n"s,
        "Authorization: Basic " + s->tokens[0] + "\r\n",
        "Authorization: Bearer" + s->tokens[0] + "\r\n",
        "Authorization: Bearer " + s->tokens[0].substr(0, 63) + "\r\n",
        "Authorization: Bearer " + s->tokens[0] + s->tokens[1] + "\r\n",
        "Authorization: Bearer " + upper + "\r\n", "Authorization: Bearer " + flipped + "\r\n",
        "X-Authorization: Bearer " + s->tokens[0] + "\r\n"}) {
    std::string r = With(port, "GET", "/secret", header);
    assert_int_equal(StatusOf(r), 401);
    assert_string_equal(HeaderOf(r, "WWW-Authenticate").c_str(), "Bearer");
    assert_non_null(std::strstr(BodyOf(r).c_str(), "\"error_code\":-1400"));
    assert_null(std::strstr(r.c_str(), "secret GET"));
    // HEAD is refused alike, without a body.
    r = With(port, "HEAD", "/secret", header);
    assert_int_equal(StatusOf(r), 401);
    assert_string_equal(BodyOf(r).c_str(), "");
  }
  // An open route answers anyone, and knows an admin caller.
  assert_string_equal(BodyOf(With(port, "GET", "/open", "")).c_str(), "open");
  assert_string_equal(
      BodyOf(With(port, "GET", "/open", "Authorization: Bearer " + s->tokens[1] + "\r\n")).c_str(),
      "open, admin");
  // on_refusal shapes the refusal: /quiet's is empty.
  std::string quiet = With(port, "GET", "/quiet", "");
  assert_int_equal(StatusOf(quiet), 401);
  assert_string_equal(BodyOf(quiet).c_str(), "");
  // An unknown path is 404 to anyone.
  assert_int_equal(StatusOf(With(port, "GET", "/nowhere", "")), 404);
}

// /log_level: GET open, POST for an admin caller only, the level unchanged by a refusal.
void test_log_level_post_needs_the_token(void** state) {
  auto* s = static_cast<Server*>(*state);
  const int port = s->tokened_port;
  SetLogLevel(LogLevel::kInfo);
  assert_int_equal(StatusOf(With(port, "GET", "/log_level", "")), 200);
  std::string r = With(port, "POST", "/log_level?level=debug", "Content-Length: 0\r\n");
  assert_int_equal(StatusOf(r), 401);
  assert_true(GetLogLevel() == LogLevel::kInfo);
  r = With(port, "POST", "/log_level?level=error",
           "Content-Length: 0\r\nAuthorization: Bearer " + s->tokens[0] + "\r\n");
  assert_int_equal(StatusOf(r), 200);
  assert_true(GetLogLevel() == LogLevel::kError);
  SetLogLevel(LogLevel::kInfo);
}

// ClusterKey::AdminTokens: lowercase hex of HMAC-SHA256(key, "mooncake admin token v1"),
// one per key in order (a known answer, from openssl).
void test_token_derivation(void**) {
  ClusterKey key = ClusterKey::FromKeys({"0123456789abcdef0123456789abcdef"});
  const std::vector<std::string> tokens = key.AdminTokens();
  assert_int_equal(tokens.size(), 1);
  // printf 'mooncake admin token v1' | openssl dgst -sha256 -hmac 0123456789abcdef0123456789abcdef
  assert_string_equal(tokens[0].c_str(),
                      "7f5ad2bd75220195db8a480ebafd20efc7f343d5f5cb861ceda25a40b9686d43");
  assert_int_equal(Keys().AdminTokens().size(), 2);
  assert_true(Keys().AdminTokens()[0] != Keys().AdminTokens()[1]);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_routing_and_error_shapes),
      cmocka_unit_test(test_head_has_no_body),
      cmocka_unit_test(test_hostile_targets),
      cmocka_unit_test(test_trickled_request_is_closed_by_the_deadline),
      cmocka_unit_test(test_log_level),
      cmocka_unit_test(test_the_token_opens_admin_routes),
      cmocka_unit_test(test_log_level_post_needs_the_token),
      cmocka_unit_test(test_token_derivation),
  };
  return cmocka_run_group_tests(tests, Setup, Teardown);
}
