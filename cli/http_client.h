// GET requests to the master's and the daemon's admin HTTP, by libcurl, with the admin
// token (common/admin/admin_http.h) when one is set.
//
// Each Get is one connection with a connect timeout of 3 s and a total timeout of 30 s (an
// admin endpoint walks the master in slices and answers in well under that). Answers are
// capped at kMaxBodyBytes, so a wrong URL pointing at something that streams cannot make
// the CLI grow without bound. One thread uses an HttpClient.
#ifndef MOONCAKE_CLI_HTTP_CLIENT_H_
#define MOONCAKE_CLI_HTTP_CLIENT_H_

#include <map>
#include <string>

namespace mooncake {
namespace cli {

struct HttpResponse {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lowercased
};

class HttpClient {
 public:
  static constexpr size_t kMaxBodyBytes = 256u << 20;

  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends "Authorization: Bearer <token>" with every later request ("": none).
  void SetBearer(const std::string& token) { bearer_ = token; }

  // GETs url. false when no answer came (refused, timed out, not HTTP, too large), with
  // *error saying why (libcurl's words, without the URL); true with any status otherwise.
  bool Get(const std::string& url, HttpResponse* out, std::string* error);

  // text percent-encoded for a query string.
  std::string Escape(const std::string& text);

 private:
  void* curl_;  // CURL*
  std::string bearer_;
};

}  // namespace cli
}  // namespace mooncake

#endif  // MOONCAKE_CLI_HTTP_CLIENT_H_
