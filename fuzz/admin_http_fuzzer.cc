// The admin HTTP request path (common/admin/admin_http.h) as the master and the daemon run it: the
// input is what a client writes on one connection to a real AdminHttpServer over loopback
// (evhttp's parser, the connection budget, the admin-token check, the routing), then it
// shuts its side down and reads every answer until the server closes.
//
// Input: [mode byte][bytes sent]. Mode bit 0 picks the server: one that accepts the admin
// tokens of kKey (as a process with a cluster key), or one with none (as a process without a
// key: this uid is admitted). Bit 1 puts "Authorization: Bearer <kKey's token>" after the
// first line of what is sent, so that the admitted paths are reached without the fuzzer
// having to guess 64 hex digits (the seeds and the dictionary carry the rest).
//
// Routes: /open (kOpen), /admin (kAdmin), /read (kOpenToRead), /quiet (kAdmin, whose
// refusal's body its on_refusal empties), as the master's /metrics, /stats, /log_level and
// /get_all_segments are.
//
// Invariants:
//  - a kAdmin handler, and /read's for a method other than GET or HEAD, runs only with
//    request.admin set;
//  - on the server with tokens, request.admin is set only when the token's bytes are among
//    those sent: no other bytes open an admin route;
//  - the server without tokens answers no 401 (this uid is admitted), and the one with
//    tokens no 403;
//  - every 401 carries "WWW-Authenticate: Bearer", and every 401 or 403 but /quiet's a JSON
//    error body;
//  - the server answers the next client (each input starts by asking /open).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "common/admin/admin_http.h"
#include "common/auth/cluster_key.h"
#include "fuzz/fuzz_util.h"

namespace {

using namespace mooncake;

const char kKey[] = "admin-http-fuzzer-key-5b8e9f0c2d4a6e1b3c7d9f2a4b6c8e0f";

struct Harness {
  std::unique_ptr<AdminHttpServer> servers[2];  // [0]: tokens, [1]: none
  int ports[2] = {0, 0};
  std::string token;
  std::atomic<bool> admin_seen{false};  // some handler saw request.admin this input
};

Harness* g = nullptr;

void Route(AdminHttpServer* server) {
  server->Handle(
      "/open",
      [](const HttpRequest& request, HttpResponse* response) {
        if (request.admin) g->admin_seen = true;
        response->body = "open";
      },
      AdminHttpServer::Access::kOpen);
  server->Handle("/admin", [](const HttpRequest& request, HttpResponse* response) {
    FUZZ_CHECK(request.admin, "the admin route ran for %s %s without an admin caller",
               request.method.c_str(), request.path.c_str());
    g->admin_seen = true;
    response->body = "admin " + request.body;
  });
  server->Handle(
      "/read",
      [](const HttpRequest& request, HttpResponse* response) {
        const bool reads = request.method == "GET" || request.method == "HEAD";
        FUZZ_CHECK(reads || request.admin, "%s /read ran without an admin caller",
                   request.method.c_str());
        if (request.admin) g->admin_seen = true;
        response->body = "read";
      },
      AdminHttpServer::Access::kOpenToRead);
  server->Handle(
      "/quiet",
      [](const HttpRequest& request, HttpResponse* response) {
        FUZZ_CHECK(request.admin, "/quiet ran without an admin caller");
        g->admin_seen = true;
        response->body = "quiet";
      },
      AdminHttpServer::Access::kAdmin,
      [](const HttpRequest&, HttpResponse* response) { response->body.clear(); });
}

int ConnectLoopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads until the server closes (or a generous guard passes: the server's own deadline is
// kTimeoutSeconds).
std::string ReadAll(int fd) {
  std::string out;
  char buf[8192];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, (AdminHttpServer::kTimeoutSeconds + 5) * 1000) <= 0) break;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// One answer to "GET /open" on fd, read to the end of its body ("open"): the connection is
// admitted (and, without tokens, its owner known) before the input's bytes are sent. ""
// once it is, else what went wrong.
std::string Prime(int fd) {
  if (!SendAll(fd, "GET /open HTTP/1.1\r\nHost: f\r\n\r\n")) {
    return std::string("send: ") + std::strerror(errno);
  }
  std::string got;
  char buf[1024];
  while (got.find("\r\n\r\nopen") == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return "no answer in 10 s; got \"" + got + "\"";
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return std::string("closed: ") + (n < 0 ? std::strerror(errno) : "EOF") +
                       "; got \"" + got + "\"";
    got.append(buf, static_cast<size_t>(n));
  }
  return got.compare(0, 12, "HTTP/1.1 200") == 0 ? "" : "answered \"" + got + "\"";
}

// Every answer's status line and headers in what the server wrote: checks the refusals.
void CheckAnswers(const std::string& out, bool with_tokens) {
  for (size_t at = out.find("HTTP/1.1 "); at != std::string::npos;
       at = out.find("HTTP/1.1 ", at + 1)) {
    const int status = std::atoi(out.c_str() + at + 9);
    const size_t end = out.find("\r\n\r\n", at);
    if (end == std::string::npos) break;
    const std::string head = out.substr(at, end - at);
    if (status == 401) {
      FUZZ_CHECK(with_tokens, "the server without tokens answered 401");
      FUZZ_CHECK(head.find("\r\nWWW-Authenticate: Bearer") != std::string::npos,
                 "a 401 without WWW-Authenticate: %s", head.c_str());
    }
    if (status == 403) FUZZ_CHECK(!with_tokens, "the server with tokens answered 403");
    if (status == 401 || status == 403) {
      // No body: /quiet's, or an answer to HEAD (whose Content-Length is GET's).
      const std::string body = out.substr(end + 4, 20);
      const size_t length = head.find("\r\nContent-Length: ");
      const bool none = body.empty() || body.compare(0, 9, "HTTP/1.1 ") == 0 ||
                        (length != std::string::npos && std::atoi(head.c_str() + length + 18) == 0);
      FUZZ_CHECK(none || body == "{\"success\":false,\"er",
                 "a refusal whose body is not the JSON error: %.200s", out.c_str() + at);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  g = new Harness;
  ClusterKey key = ClusterKey::FromKeys({kKey});
  g->token = key.AdminTokens().front();
  for (int i = 0; i < 2; ++i) {
    g->servers[i] = std::make_unique<AdminHttpServer>("fuzz");
    if (i == 0) g->servers[i]->AcceptTokens(key.AdminTokens());
    Route(g->servers[i].get());
    std::string error;
    FUZZ_CHECK(g->servers[i]->Start("127.0.0.1", 0, &error), "cannot serve: %s", error.c_str());
    g->ports[i] = g->servers[i]->port();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const bool with_tokens = (mode & 1) == 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((mode & 2) != 0) {
    size_t line = bytes.find("\r\n");
    if (line != std::string::npos) {
      bytes.insert(line + 2, "Authorization: Bearer " + g->token + "\r\n");
    }
  }
  // A machine busy with other work may starve the server's thread past a connection's
  // deadline: a few tries, so that only a server that stopped answering fails here.
  int fd = -1;
  std::string primed = "not tried";
  for (int attempt = 0; attempt < 3 && !primed.empty(); ++attempt) {
    if (fd >= 0) close(fd);
    fd = ConnectLoopback(g->ports[with_tokens ? 0 : 1]);
    FUZZ_CHECK(fd >= 0, "cannot connect to the admin HTTP server");
    primed = Prime(fd);
  }
  FUZZ_CHECK(primed.empty(), "the admin HTTP server does not answer GET /open: %s", primed.c_str());
  g->admin_seen = false;
  SendAll(fd, bytes);  // it may close first: a refusal of what it read so far
  shutdown(fd, SHUT_WR);
  const std::string out = ReadAll(fd);
  close(fd);
  CheckAnswers(out, with_tokens);
  if (with_tokens && g->admin_seen.load()) {
    FUZZ_CHECK(bytes.find(g->token) != std::string::npos,
               "an admin caller without the token's bytes in what was sent");
  }
  return 0;
}
