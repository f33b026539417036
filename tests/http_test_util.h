// Small HTTP helpers for the tests that talk to admin endpoints and to a real Prometheus
// server on 127.0.0.1: one GET over a fresh connection (HTTP/1.0, the answer read until the
// server closes), URL-encoding of a query parameter, and the admin port a master or daemon
// logged when it started. Tests only: no keep-alive, no chunked bodies, no redirects.
#ifndef MOONCAKE_TESTS_HTTP_TEST_UTIL_H_
#define MOONCAKE_TESTS_HTTP_TEST_UTIL_H_

#include <string>
#include <vector>

namespace mooncake {
namespace testing {

struct HttpAnswer {
  int status = -1;          // the status line's code; -1 when nothing usable came back
  std::string content_type; // the Content-Type header's value, as sent
  std::string body;
  std::string headers;      // the header block as sent, status line included

  // The value of header name (case-insensitive), "" when absent.
  std::string Header(const std::string& name) const;
};

// A TCP connection to 127.0.0.1:port (a blocking socket), or -1. timeout_ms > 0 bounds
// the connect and every later send and receive on it.
int ConnectLoopback(int port, int timeout_ms = 0);

// GET target ("/path?query") from 127.0.0.1:port, giving up after timeout_ms (connect,
// send and every read). The body is capped at 64 MiB.
HttpAnswer HttpGetLoopback(int port, const std::string& target, int timeout_ms = 5000);

// Any method, with further header lines ("Name: value") and a body.
HttpAnswer HttpRequestLoopback(int port, const std::string& method, const std::string& target,
                               const std::vector<std::string>& headers,
                               const std::string& body = "", int timeout_ms = 5000);

// "Authorization: Bearer <token>": the admin token of the key file at key_file
// (ClusterKeyFile() when ""), which the admin HTTP of a process with that key accepts
// (common/admin/admin_http.h). "" when the file cannot be loaded.
std::string AdminAuthorization(const std::string& key_file = "");

// text with every byte but [A-Za-z0-9-_.~] percent-encoded (for query values: PromQL has
// braces, quotes and spaces).
std::string UrlEncode(const std::string& text);

// The port of "<component>: admin HTTP listening on A:P" (common/admin/admin_http.cc) in the log
// at log_path, polled for timeout_ms: the process logs it once it has bound the port. -1
// when no such line appears in time.
int AdminPortFromLog(const std::string& log_path, const std::string& component,
                     int timeout_ms = 10000);

}  // namespace testing
}  // namespace mooncake

#endif  // MOONCAKE_TESTS_HTTP_TEST_UTIL_H_
