#include "libmc/client_name.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

namespace mooncake {
namespace client {

namespace {

constexpr int kDefaultMinPort = 12300;
constexpr int kDefaultMaxPort = 14300;
constexpr int kAttempts = 20;  // Mooncake's AutoPortBinder tries as often
constexpr size_t kMaxNameBytes = 255;

// A port environment variable, or fallback when it is unset or not a port.
int PortFromEnv(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  return (*end == '\0' && v >= 1 && v <= 65535) ? static_cast<int>(v) : fallback;
}

bool ValidPort(const std::string& digits) {
  if (digits.empty() || digits.size() > 5) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  long v = std::strtol(digits.c_str(), nullptr, 10);
  return v >= 1 && v <= 65535;
}

// The port of a name HasPort accepted.
std::string PortOf(const std::string& host) {
  return host.substr(host.rfind(':') + 1);
}

}  // namespace

ClientName::~ClientName() {
  if (held_fd_ >= 0) close(held_fd_);
}

ClientName::ClientName(ClientName&& other) noexcept
    : name_(std::move(other.name_)), held_fd_(other.held_fd_) {
  other.held_fd_ = -1;
}

ClientName& ClientName::operator=(ClientName&& other) noexcept {
  if (this != &other) {
    if (held_fd_ >= 0) close(held_fd_);
    name_ = std::move(other.name_);
    held_fd_ = other.held_fd_;
    other.held_fd_ = -1;
  }
  return *this;
}

bool ClientName::HasPort(const std::string& host) {
  if (!host.empty() && host[0] == '[') {
    size_t close = host.find(']');
    return close != std::string::npos && close + 1 < host.size() && host[close + 1] == ':';
  }
  return host.rfind(':') != std::string::npos;
}

ErrorCode ClientName::Make(const std::string& local_hostname, ClientName* out,
                           std::string* why) {
  *out = ClientName();
  if (local_hostname.empty()) return ErrorCode::OK;
  if (local_hostname.size() > kMaxNameBytes) {
    *why = "local_hostname of " + std::to_string(local_hostname.size()) +
           " bytes: at most " + std::to_string(kMaxNameBytes);
    return ErrorCode::INVALID_PARAMS;
  }
  for (unsigned char c : local_hostname) {
    if (c < 0x21 || c > 0x7e) {
      *why = "local_hostname \"" + local_hostname +
             "\" has a blank or a non-printable character: name a host (and a port)";
      return ErrorCode::INVALID_PARAMS;
    }
  }
  if (HasPort(local_hostname)) {
    if (!ValidPort(PortOf(local_hostname))) {
      *why = "local_hostname \"" + local_hostname + "\": its port is not 1..65535";
      return ErrorCode::INVALID_PARAMS;
    }
    out->name_ = local_hostname;
    return ErrorCode::OK;
  }
  int low = PortFromEnv("MC_STORE_CLIENT_MIN_PORT", kDefaultMinPort);
  int high = PortFromEnv("MC_STORE_CLIENT_MAX_PORT", kDefaultMaxPort);
  if (low > high) {
    low = kDefaultMinPort;
    high = kDefaultMaxPort;
  }
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_int_distribution<int> pick(low, high);
  int last_errno = 0;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    int port = pick(rng);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    sockaddr_in addr;
    std::memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      out->name_ = local_hostname + ":" + std::to_string(port);
      out->held_fd_ = fd;
      return ErrorCode::OK;
    }
    last_errno = errno;
    close(fd);
  }
  *why = "local_hostname \"" + local_hostname + "\" has no port, and none of " +
         std::to_string(kAttempts) + " ports tried in " + std::to_string(low) + ".." +
         std::to_string(high) + " (MC_STORE_CLIENT_MIN_PORT, MC_STORE_CLIENT_MAX_PORT) could be " +
         "held (" + std::strerror(last_errno) + "): name one (\"host:port\")";
  return ErrorCode::INTERNAL_ERROR;
}

}  // namespace client
}  // namespace mooncake
