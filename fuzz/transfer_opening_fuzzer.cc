// The transfer port before a connection is open (daemon/transfer/transfer_server.h,
// daemon/transfer/transfer_connections.h): a real TransferServer with a cluster key, in this
// process on loopback, over a segment of known bytes, fed what peers without the key send
// (HELLO, AUTH, a request before AUTH, anything). The fuzzer cannot prove the key, so
// every connection must end refused or closed.
//
// Input: sections (fuzz/fuzz_util.h), each the bytes one connection sends, one connection
// after the other (at most kMaxConnections). Tag bit 0 clear: the harness then
// half-closes (the peer has said all it will); set: it leaves the connection open and
// silent, and the server must close it by the handshake deadline (kHandshakeMs here).
// Either way the harness reads all the server answers until it closes.
//
// Invariants:
//  - every reply decodes; the only one that may be OK is the first, to a connection that
//    opened with a HELLO header, and it carries the 32-byte server nonce; every other is
//    -1400 UNAUTHENTICATED or -600 INVALID_PARAMS with no byte, and none follows it (the
//    server closes); a reply is cut short only by a reset (the server closing with input
//    unread);
//  - the server closes every connection, one left open within the handshake deadline
//    (with a margin for a loaded machine);
//  - no byte of the segment changes;
//  - every refusal seen was counted (refused_before_open), and no connection more than
//    once;
//  - once the harness has closed them, the server removes every connection: no thread is
//    stuck and no slot held.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "common/auth/cluster_key.h"
#include "common/base/error_code.h"
#include "daemon/memory/segment_memory.h"
#include "daemon/transfer/transfer_protocol.h"
#include "daemon/transfer/transfer_server.h"
#include "fuzz/fuzz_util.h"

namespace {

using namespace mooncake;
using Clock = std::chrono::steady_clock;

constexpr int64_t kSegmentId = 7;
constexpr uint64_t kSegmentSize = 64 << 10;
constexpr int kHandshakeMs = 10;
constexpr size_t kMaxConnections = 8;
// How long the server may take beyond what it promises, on a machine busy with other work.
constexpr int kSlackMs = 10000;

struct Port {
  std::shared_ptr<SegmentMemory> segment;
  std::string bytes;  // what the segment holds, for ever
  sockaddr_in address{};
  std::unique_ptr<TransferServer> server;
};

Port& TheServer() {
  static Port* port = [] {
    auto* p = new Port;
    std::string error;
    p->segment = SegmentMemory::Create(kSegmentSize, &error);
    FUZZ_CHECK(p->segment != nullptr, "no segment: %s", error.c_str());
    for (uint64_t i = 0; i < kSegmentSize; ++i) p->bytes.push_back(static_cast<char>(i * 131 + 7));
    std::memcpy(p->segment->base(), p->bytes.data(), kSegmentSize);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    p->address.sin_family = AF_INET;
    p->address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(p->address);
    FUZZ_CHECK(fd >= 0 &&
                   bind(fd, reinterpret_cast<sockaddr*>(&p->address), sizeof(p->address)) == 0 &&
                   listen(fd, 64) == 0 &&
                   getsockname(fd, reinterpret_cast<sockaddr*>(&p->address), &length) == 0,
               "cannot listen on loopback: %s", std::strerror(errno));
    TransferServer::Options options;
    options.handshake_timeout_ms = kHandshakeMs;
    options.stall_timeout_ms = 320;  // slices of 10 ms: how late a blocked read sees the deadline
    options.cluster_key = std::make_shared<const ClusterKey>(ClusterKey::FromKeys(
        {"6f1c0b3e9a7d2f45c8e1b6a09d3f7e2c4b5a6d7e8f901a2b3c4d5e6f7a8b9c0d"}));
    std::shared_ptr<SegmentMemory> segment = p->segment;
    p->server.reset(new TransferServer(
        fd, [segment](int64_t id) { return id == kSegmentId ? segment : nullptr; }, options));
    p->server->Start();
    return p;
  }();
  return *port;
}

// Reads from fd until the server closes it (or until_ms passes: an invariant broken).
// *reset: it ended with a reset rather than an orderly close.
std::string ReadUntilClosed(int fd, int until_ms, bool* reset) {
  std::string got;
  *reset = false;
  const auto deadline = Clock::now() + std::chrono::milliseconds(until_ms);
  for (;;) {
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    pollfd p{fd, POLLIN, 0};
    int ready = left > 0 ? poll(&p, 1, left) : 0;
    if (ready < 0 && errno == EINTR) continue;  // libFuzzer's timer
    FUZZ_CHECK(ready == 1, "the server neither answered nor closed the connection within %d ms",
               until_ms);
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      got.append(buf, static_cast<size_t>(n));
      FUZZ_CHECK(got.size() <= 4 * transfer::kReplyHeaderSize + transfer::kNonceBytes,
                 "the server sent %zu bytes to a peer without the key", got.size());
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    *reset = n < 0;
    FUZZ_CHECK(n == 0 || errno == ECONNRESET, "recv: %s", std::strerror(errno));
    return got;
  }
}

// The replies of one connection, against the rules above; how many were refusals.
size_t CheckReplies(const std::string& sent, const std::string& got, bool reset) {
  transfer::RequestHeader first;
  const bool opened_with_hello =
      sent.size() >= transfer::kRequestHeaderSize && transfer::DecodeRequest(sent.data(), &first) &&
      first.op == static_cast<uint16_t>(transfer::Op::kHello);
  size_t pos = 0, replies = 0, refusals = 0;
  while (pos < got.size()) {
    if (got.size() - pos < transfer::kReplyHeaderSize) {
      FUZZ_CHECK(reset, "a reply header cut short by an orderly close");
      break;
    }
    transfer::ReplyHeader r;
    FUZZ_CHECK(transfer::DecodeReply(got.data() + pos, &r), "a reply that does not decode");
    FUZZ_CHECK(refusals == 0, "a reply after a refusal");
    if (r.code == ErrorCode::OK) {
      FUZZ_CHECK(replies == 0 && opened_with_hello && r.length == transfer::kNonceBytes,
                 "reply %zu OK with %llu bytes (opened with a HELLO: %d)", replies,
                 static_cast<unsigned long long>(r.length), opened_with_hello);
    } else {
      FUZZ_CHECK((r.code == ErrorCode::UNAUTHENTICATED || r.code == ErrorCode::INVALID_PARAMS) &&
                     r.length == 0,
                 "reply %zu: code %d with %llu bytes", replies, ToInt(r.code),
                 static_cast<unsigned long long>(r.length));
      ++refusals;
    }
    pos += transfer::kReplyHeaderSize;
    if (got.size() - pos < r.length) {
      FUZZ_CHECK(reset, "a reply's payload cut short by an orderly close");
      break;
    }
    pos += r.length;
    ++replies;
  }
  return refusals;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mooncake::fuzz::QuietLogs();
  TheServer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Port& port = TheServer();
  const uint64_t counted_before = port.server->refused_before_open();
  size_t connections = 0, refusals = 0;
  for (const fuzz::Section& section : fuzz::SplitSections(data, size)) {
    if (connections == kMaxConnections) break;
    ++connections;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    FUZZ_CHECK(fd >= 0 && connect(fd, reinterpret_cast<const sockaddr*>(&port.address),
                                  sizeof(port.address)) == 0,
               "cannot connect: %s", std::strerror(errno));
    const std::string sent(section.bytes);
    for (size_t off = 0; off < sent.size();) {
      ssize_t n = send(fd, sent.data() + off, sent.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // closed already (a refusal, or the deadline): read what came
      off += static_cast<size_t>(n);
    }
    const bool left_open = (section.tag & 1) != 0;
    if (!left_open) shutdown(fd, SHUT_WR);
    bool reset = false;
    std::string got = ReadUntilClosed(fd, (left_open ? kHandshakeMs : 0) + kSlackMs, &reset);
    close(fd);
    refusals += CheckReplies(sent, got, reset);
  }
  // Every connection removed once closed: no thread stuck, no slot held.
  for (auto until = Clock::now() + std::chrono::milliseconds(kSlackMs);;) {
    TransferConnections::Stats s = port.server->connection_stats();
    if (s.open == 0) break;
    FUZZ_CHECK(Clock::now() < until, "%zu connections still open %d ms after their peers left",
               s.open, kSlackMs);
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  const uint64_t counted = port.server->refused_before_open() - counted_before;
  FUZZ_CHECK(counted >= refusals && counted <= connections,
             "%llu refusals counted for %zu seen on %zu connections",
             static_cast<unsigned long long>(counted), refusals, connections);
  FUZZ_CHECK(std::memcmp(port.segment->base(), port.bytes.data(), kSegmentSize) == 0,
             "a peer without the key changed the segment");
  return 0;
}
