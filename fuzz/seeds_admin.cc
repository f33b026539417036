// Seeds of the admin HTTP harness (fuzz/admin_http_fuzzer.cc): [mode byte][what a client
// sends], mode bit 0 the server without tokens, bit 1 the harness's valid token put after
// the first line. Requests as curl, Prometheus and mooncake-cli send them, to each route,
// with and without the token, pipelined, and the shapes evhttp refuses.
#include <string>

#include "fuzz/seeds.h"

namespace mooncake {
namespace fuzz {

namespace {

std::string Get(const std::string& target, const std::string& extra = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1:9003\r\nUser-Agent: curl/7.88.1\r\n" +
         extra + "Accept: */*\r\n\r\n";
}

std::string Post(const std::string& target, const std::string& body) {
  return "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace

Seeds AdminHttpSeeds() {
  Seeds seeds;
  auto add = [&seeds](const std::string& name, char mode, const std::string& bytes) {
    seeds.emplace_back("seed-" + name, std::string(1, mode) + bytes);
  };
  const char kTokens = 0, kNone = 1, kTokened = 2;
  add("open", kTokens, Get("/open"));
  add("admin-refused", kTokens, Get("/admin?x=1"));
  add("admin-token", kTokened, Get("/admin?x=1"));
  add("admin-no-key", kNone, Get("/admin"));
  add("admin-wrong-token", kTokens,
      Get("/admin", "Authorization: Bearer " + std::string(64, 'f') + "\r\n"));
  add("admin-basic", kTokens, Get("/admin", "Authorization: Basic dXNlcjpwYXNz\r\n"));
  add("read-get", kTokens, Get("/read"));
  add("read-post-refused", kTokens, Post("/read?level=debug", ""));
  add("read-post-token", kTokened, Post("/read?level=debug", ""));
  add("quiet-refused", kTokens, Get("/quiet"));
  add("head-refused", kTokens, "HEAD /admin HTTP/1.1\r\nHost: a\r\n\r\n");
  add("post-body-token", kTokened, Post("/admin", "{\"keys\":[\"a\",\"b\"]}"));
  add("pipelined", kTokened,
      Get("/admin") + Get("/open") + Post("/read", "x") + Get("/quiet") + Get("/nowhere"));
  add("http10-close", kNone, "GET /admin HTTP/1.0\r\nConnection: close\r\n\r\n");
  add("chunked", kTokened,
      "POST /admin HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n");
  add("bad-target", kTokens, "GET /%00admin HTTP/1.1\r\n\r\n");
  add("bad-method", kTokens, "BREW /admin HTTP/1.1\r\n\r\n");
  add("prometheus", kNone,
      "GET /open HTTP/1.1\r\nHost: 127.0.0.1:9003\r\nUser-Agent: Prometheus/2.42.0\r\n"
      "Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n"
      "Accept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n");
  return seeds;
}

}  // namespace fuzz
}  // namespace mooncake
