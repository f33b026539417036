// common/admin_http (AdminHttpServer) in process, over raw sockets where the client must
// be hostile: routing, the JSON error shapes, HEAD, query decoding, a NUL in the path, a
// 20 KiB header, a request trickled a byte per 100 ms (closed by the per-connection
// deadline while other requests are served meanwhile), and /log_level.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "common/admin_http.h"
#include "common/logging.h"
#include "tests/cmocka_cpp.h"
#include "tests/http_test_util.h"

using namespace mooncake;
namespace harness = mooncake::testing;
using Clock = std::chrono::steady_clock;

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
};

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
  std::string error;
  if (!s->http.Start("127.0.0.1", 0, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    delete s;
    return -1;
  }
  s->port = s->http.port();
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

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_routing_and_error_shapes),
      cmocka_unit_test(test_head_has_no_body),
      cmocka_unit_test(test_hostile_targets),
      cmocka_unit_test(test_trickled_request_is_closed_by_the_deadline),
      cmocka_unit_test(test_log_level),
  };
  return cmocka_run_group_tests(tests, Setup, Teardown);
}
