#include "tests/transfer_test_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/base/error_code.h"
#include "tests/cmocka_cpp.h"

namespace mooncake {
namespace testing {

using Clock = std::chrono::steady_clock;

int ConnectFrom(const std::string& source, const std::string& ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  tcp_io::Configure(fd, kRawPeerBounds.stall_timeout_ms);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (!source.empty()) {
    assert_int_equal(inet_pton(AF_INET, source.c_str(), &addr.sin_addr), 1);
    assert_int_equal(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  assert_int_equal(inet_pton(AF_INET, ip.c_str(), &addr.sin_addr), 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

bool SendRequest(int fd, uint16_t op, int64_t segment, uint64_t offset, uint64_t length,
                 const std::string& payload) {
  transfer::RequestHeader h;
  h.op = op;
  h.request_id = 99;
  h.segment_id = segment;
  h.offset = offset;
  h.length = length;
  char head[transfer::kRequestHeaderSize];
  transfer::EncodeRequest(h, head);
  return tcp_io::Send(fd, head, sizeof(head), payload.data(), payload.size(), kRawPeerBounds);
}

int32_t ReplyCode(int fd, std::string* payload) {
  char head[transfer::kReplyHeaderSize];
  if (!tcp_io::Recv(fd, head, sizeof(head), kRawPeerBounds)) {
    assert_true(errno == ECONNRESET);  // closed, not silent
    return kClosed;
  }
  transfer::ReplyHeader r;
  assert_true(transfer::DecodeReply(head, &r));
  if (r.code != ErrorCode::OK) assert_int_equal(r.length, 0);  // a refusal carries nothing
  std::string bytes(r.length, '\0');
  assert_true(tcp_io::Recv(fd, &bytes[0], bytes.size(), kRawPeerBounds));
  if (payload != nullptr) *payload = std::move(bytes);
  return ToInt(r.code);
}

size_t BytesUntilClosed(int fd) {
  size_t bytes = 0;
  for (auto until = Clock::now() + std::chrono::seconds(5);;) {
    pollfd p{fd, POLLIN, 0};
    assert_int_equal(poll(&p, 1, 1000), 1);
    char buf[4096];
    ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) return bytes;
    if (r > 0) bytes += static_cast<size_t>(r);
    assert_true(Clock::now() < until);
  }
}

bool AwaitLogLine(const std::string& path, const char* needle, const char* also) {
  for (auto until = Clock::now() + std::chrono::seconds(10); Clock::now() < until;) {
    std::FILE* f = std::fopen(path.c_str(), "r");
    char line[8192];
    while (f != nullptr && std::fgets(line, sizeof(line), f) != nullptr) {
      if (std::strstr(line, needle) != nullptr && std::strstr(line, also) != nullptr) {
        std::fclose(f);
        print_message("%s", line);
        return true;
      }
    }
    if (f != nullptr) std::fclose(f);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace testing
}  // namespace mooncake
