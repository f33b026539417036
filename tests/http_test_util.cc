#include "tests/http_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <cstdio>
#include <thread>

#include "common/auth/cluster_key.h"
#include "tests/process_harness.h"

namespace mooncake {
namespace testing {

namespace {

constexpr size_t kMaxAnswerBytes = 64u << 20;

// The value of header name (case-insensitive) in the header block, or "".
std::string HeaderValue(const std::string& headers, const std::string& name) {
  std::istringstream lines(headers);
  std::string line;
  while (std::getline(lines, line)) {
    size_t colon = line.find(':');
    if (colon != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < colon && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(line[i])) ==
             std::tolower(static_cast<unsigned char>(name[i]));
    }
    if (!same) continue;
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == ' ')) value.pop_back();
    size_t start = value.find_first_not_of(' ');
    return start == std::string::npos ? "" : value.substr(start);
  }
  return "";
}

}  // namespace

int ConnectLoopback(int port, int timeout_ms) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (timeout_ms > 0) {
    timeval timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string HttpAnswer::Header(const std::string& name) const { return HeaderValue(headers, name); }

HttpAnswer HttpGetLoopback(int port, const std::string& target, int timeout_ms) {
  return HttpRequestLoopback(port, "GET", target, {}, "", timeout_ms);
}

HttpAnswer HttpRequestLoopback(int port, const std::string& method, const std::string& target,
                               const std::vector<std::string>& headers, const std::string& body,
                               int timeout_ms) {
  HttpAnswer answer;
  int fd = ConnectLoopback(port, timeout_ms);
  std::string raw;
  if (fd >= 0) {
    std::string request = method + " " + target +
                          " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    for (const std::string& header : headers) request += header + "\r\n";
    if (!body.empty() || method == "POST") {
      request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    }
    request += "\r\n" + body;
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[16384];
      ssize_t n;
      while (raw.size() < kMaxAnswerBytes && (n = read(fd, buf, sizeof(buf))) > 0) {
        raw.append(buf, static_cast<size_t>(n));
      }
    }
    close(fd);
  }
  size_t end = raw.find("\r\n\r\n");
  if (raw.compare(0, 5, "HTTP/") != 0 || end == std::string::npos) return answer;
  size_t space = raw.find(' ');
  if (space == std::string::npos || space > end) return answer;
  answer.status = std::atoi(raw.c_str() + space + 1);
  answer.headers = raw.substr(0, end + 2);
  answer.content_type = HeaderValue(answer.headers, "Content-Type");
  answer.body = raw.substr(end + 4);
  return answer;
}

std::string AdminAuthorization(const std::string& key_file) {
  std::string error;
  Result<ClusterKey> key = ClusterKey::Load(key_file.empty() ? ClusterKeyFile() : key_file, &error);
  if (!key.ok()) {
    std::fprintf(stderr, "AdminAuthorization: %s\n", error.c_str());
    return "";
  }
  return "Authorization: Bearer " + key.value().AdminTokens().front();
}

std::string UrlEncode(const std::string& text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : text) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  return out;
}

int AdminPortFromLog(const std::string& log_path, const std::string& component,
                     int timeout_ms) {
  const std::string needle = component + ": admin HTTP listening on ";
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  do {
    std::ifstream log(log_path);
    std::string line;
    while (std::getline(log, line)) {
      size_t at = line.find(needle);
      if (at == std::string::npos) continue;
      // "A:P": the port follows the last colon (A may be an IPv6 address).
      size_t colon = line.rfind(':');
      if (colon == std::string::npos || colon < at + needle.size()) continue;
      int port = std::atoi(line.c_str() + colon + 1);
      if (port > 0 && port < 65536) return port;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  return -1;
}

}  // namespace testing
}  // namespace mooncake
