// A raw peer of a daemon's transfer port (daemon/transfer/transfer_protocol.h), for the in-process
// and real-daemon tests that speak to it byte by byte: one request out, one reply in.
// Every call is bounded by kRawPeerBounds (a silent owner fails the test, never hangs it).
#ifndef MOONCAKE_TESTS_TRANSFER_TEST_UTIL_H_
#define MOONCAKE_TESTS_TRANSFER_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "daemon/transfer/tcp_io.h"
#include "daemon/transfer/transfer_protocol.h"

namespace mooncake {
namespace testing {

// What ReplyCode says when the owner closed the connection instead of answering.
constexpr int32_t kClosed = 1;
inline const tcp_io::Bounds kRawPeerBounds{5000};

// A TCP connection from source (an IPv4 address of this host, any of 127/8 say; "" lets
// the kernel choose) to ip:port, configured with kRawPeerBounds' stall timeout; -1 with
// errno when it cannot be made.
int ConnectFrom(const std::string& source, const std::string& ip, int port);

// A request header for op (any number: tests send unknown ones too) with payload behind
// it; false when the owner had closed the connection already.
bool SendRequest(int fd, uint16_t op, int64_t segment, uint64_t offset, uint64_t length,
                 const std::string& payload = "");
inline bool SendRequest(int fd, transfer::Op op, int64_t segment, uint64_t offset,
                        uint64_t length, const std::string& payload = "") {
  return SendRequest(fd, static_cast<uint16_t>(op), segment, offset, length, payload);
}

// The reply's code, its payload read (into *payload when given) so the connection stays
// in step; kClosed when the owner closed first (a reset, not silence). Fails the test on
// a reply that does not decode or a refusal that carries bytes.
int32_t ReplyCode(int fd, std::string* payload = nullptr);

// Reads until the owner closes fd (5 s at most, else the test fails): how many bytes came
// first.
size_t BytesUntilClosed(int fd);

// Polls the log at path (10 s at most) until a line contains needle and also; true once
// one does (then printed).
bool AwaitLogLine(const std::string& path, const char* needle, const char* also);

}  // namespace testing
}  // namespace mooncake

#endif  // MOONCAKE_TESTS_TRANSFER_TEST_UTIL_H_
