// The master's RPC server (master/server/rpc_server.h) before and after admission, end to end: a
// real RpcServer on 127.0.0.1 (one I/O thread, the master's protocol) with the master's
// processors (AuthenticatedProcessor holding kFuzzClusterKey, server nonce
// kFuzzServerNonce, over a fresh MasterService per input), fed through real TCP
// connections. master_rpc_fuzzer drives the processor and the handlers in memory; this
// one what sits in front of them: framing, the frame limits before and after admission,
// admission reaching the server, closures and the budgets' bookkeeping.
//
// Input: sections (fuzz/fuzz_util.h), by tag & 3:
//   0  bytes the current connection sends (one write);
//   1  the current connection is done: it shuts its sending side, reads every reply until
//      the master closes it, and is checked (below); a new one becomes current;
//   2  bytes[0] % 8 silent connections from 127.0.0.<2 + bytes[1] % 4>, held open to the
//      end: the budgets of connections not admitted at work (12 at most, so that the
//      current connection, from 127.0.0.1, is never the one to give way);
//   3  the handshake a member sends (AuthChallenge, Authenticate with a proof that
//      checks), over a client nonce made of the section's bytes.
// At the end the current connection is done as with 1, and the held ones close.
//
// Invariants, for each connection done: what it sent (S) cut into frames, what came back
// (R) read to the master's close --
//  - R is whole frames, each one message: the reply to S's next frame (same name and
//    seqid), T_REPLY or T_EXCEPTION;
//  - until an Authenticate answered 0, every reply to any other call is the refusal
//    ("-1400 UNAUTHENTICATED: ..."), and no handshake call is answered otherwise than by
//    its own result;
//  - a frame of 0 bytes, or over 4096 before admission (256 MiB after), is answered with
//    nothing: the master closes the connection there and counts one frame_before_admission
//    (frame_limit) closure, and no such closure is counted otherwise;
//  - every other whole frame is answered, but one that is not a call message the protocol
//    can read (the processor throws or returns false: the connection closes with nothing
//    written) and, once admitted, one whose arguments the generated dispatch refuses;
// and after the input: the master's count of connections, admitted and not, comes back to
// 0 (none forgotten in its budgets), with no handshake-deadline, total-cap, admitted-cap
// or idle closure (the input stays within those budgets).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <thrift/TApplicationException.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>

#include "MasterService.h"
#include "common/auth/cluster_key.h"
#include "common/master_link/master_auth.h"
#include "common/master_link/rpc_logging.h"
#include "fuzz/fuzz_util.h"
#include "fuzz/master_state.h"
#include "master/server/authenticated_processor.h"
#include "master/service/master_service.h"
#include "master/server/rpc_handler.h"
#include "master/server/rpc_server.h"

namespace {

using namespace mooncake;
using apache::thrift::TApplicationException;
using apache::thrift::protocol::TMessageType;
using apache::thrift::protocol::TProtocol;
using apache::thrift::transport::TMemoryBuffer;

constexpr int kMaxHeld = 12;
constexpr int kWaitMs = 10000;

const ClusterKey& FuzzKey() {
  static const ClusterKey key = ClusterKey::FromKeys({fuzz::kFuzzClusterKey});
  return key;
}

// Every connection's processor, over the handler of the input being run.
class Processors : public apache::thrift::TProcessorFactory {
 public:
  std::shared_ptr<apache::thrift::TProcessor> getProcessor(
      const apache::thrift::TConnectionInfo&) override {
    std::lock_guard<std::mutex> lock(mu_);
    return std::make_shared<AuthenticatedProcessor>(
        handler_, std::make_shared<const ClusterKey>(FuzzKey()),
        AuthenticatedProcessor::Peer{"fuzz:1", false, "it holds no key"},
        [] { return fuzz::kFuzzServerNonce; });
  }
  void Serve(std::shared_ptr<RpcHandler> handler) {
    std::lock_guard<std::mutex> lock(mu_);
    handler_ = std::move(handler);
  }

 private:
  std::mutex mu_;
  std::shared_ptr<RpcHandler> handler_;
};

std::shared_ptr<Processors> g_processors;
RpcServer* g_server = nullptr;

uint64_t Closed(RpcClosure why) { return g_server->closed(why); }

int Connect(const char* source) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  FUZZ_CHECK(fd >= 0, "socket: %s", strerror(errno));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  FUZZ_CHECK(bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) == 0, "bind %s: %s",
             source, strerror(errno));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(g_server->port()));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  FUZZ_CHECK(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0, "connect: %s",
             strerror(errno));
  return fd;
}

std::string Framed(const std::string& message) {
  const uint32_t n = static_cast<uint32_t>(message.size());
  return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                     static_cast<char>(n >> 8), static_cast<char>(n)} +
         message;
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data() + at);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// A member's handshake, as common/master_link/master_auth.cc sends it.
std::string Handshake(std::string_view seed) {
  std::string nonce(seed.substr(0, ClusterKey::kNonceBytes));
  nonce.resize(ClusterKey::kNonceBytes, '\0');
  auto buffer = std::make_shared<TMemoryBuffer>();
  rpc::MasterServiceClient client(MakeRpcProtocolFactory()->getProtocol(buffer));
  client.send_AuthChallenge(nonce);
  std::string bytes = Framed(buffer->getBufferAsString());
  buffer->resetBuffer();
  client.send_Authenticate(FuzzKey().Prove(ClusterKey::Role::kClient, kMasterAuthContext,
                                           nonce, fuzz::kFuzzServerNonce));
  return bytes + Framed(buffer->getBufferAsString());
}

// Sends everything, then shuts the sending side and reads until the master closes.
std::string Exchange(int fd, const std::string& sent) {
  size_t at = 0;
  std::string got;
  char buf[16384];
  bool shut = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  for (;;) {
    if (!shut && at == sent.size()) {
      shutdown(fd, SHUT_WR);
      shut = true;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (shut ? 0 : POLLOUT)), 0};
    FUZZ_CHECK(std::chrono::steady_clock::now() < deadline,
               "the master neither answered nor closed within %d ms (%zu of %zu bytes sent)",
               kWaitMs, at, sent.size());
    if (poll(&p, 1, 100) <= 0) continue;
    if (p.revents & POLLOUT) {
      const ssize_t n = send(fd, sent.data() + at, sent.size() - at, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        at += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        at = sent.size();  // the master closed: what is left goes nowhere
      }
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) {
        got.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        return got;
      }
    }
  }
}

struct Message {
  bool ok = false;  // a message the protocol reads whole
  std::string name;
  int type = 0;  // the TMessageType's value: the wire may carry any byte
  int32_t seqid = 0;
};

// Reads a message's head: its type as the int the wire carried (a TMessageType of 255
// would be undefined behaviour to look at).
void ReadHead(TProtocol* in, Message* m) {
  TMessageType type;
  in->readMessageBegin(m->name, type, m->seqid);
  std::underlying_type_t<TMessageType> value;
  std::memcpy(&value, &type, sizeof(value));
  m->type = static_cast<int>(value);
}

// What the server's protocol makes of one frame: the message's head, its body skipped.
Message Read(const std::string& frame) {
  Message m;
  try {
    auto buffer = std::make_shared<TMemoryBuffer>(
        reinterpret_cast<uint8_t*>(const_cast<char*>(frame.data())),
        static_cast<uint32_t>(frame.size()));
    std::shared_ptr<TProtocol> in = MakeRpcProtocolFactory()->getProtocol(buffer);
    ReadHead(in.get(), &m);
    in->skip(apache::thrift::protocol::T_STRUCT);
    in->readMessageEnd();
    m.ok = true;
  } catch (const std::exception&) {
  }
  return m;
}

// A reply's result code (AuthChallenge, Authenticate) or exception text.
struct Reply {
  Message head;
  int32_t code = 0;
  std::string exception;
};

Reply ReadReply(const std::string& frame) {
  Reply r;
  auto buffer = std::make_shared<TMemoryBuffer>(
      reinterpret_cast<uint8_t*>(const_cast<char*>(frame.data())),
      static_cast<uint32_t>(frame.size()));
  std::shared_ptr<TProtocol> in = MakeRpcProtocolFactory()->getProtocol(buffer);
  try {
    ReadHead(in.get(), &r.head);
    if (r.head.type == apache::thrift::protocol::T_EXCEPTION) {
      TApplicationException e;
      e.read(in.get());
      r.exception = e.what();
    } else if (r.head.name == "AuthChallenge") {
      rpc::MasterService_AuthChallenge_presult result;
      rpc::AuthChallengeResult success;
      result.success = &success;
      result.read(in.get());
      r.code = success.code;
    } else if (r.head.name == "Authenticate") {
      rpc::MasterService_Authenticate_presult result;
      rpc::AuthenticateResult success;
      result.success = &success;
      result.read(in.get());
      r.code = success.code;
    } else {
      in->skip(apache::thrift::protocol::T_STRUCT);
    }
    in->readMessageEnd();
    r.head.ok = buffer->available_read() == 0;
  } catch (const std::exception&) {
  }
  return r;
}

// The checks of one connection done (the header's).
void Check(const std::string& sent, const std::string& got, uint64_t frame_closures_before,
           uint64_t limit_closures_before) {
  size_t s = 0;
  size_t r = 0;
  bool admitted = false;
  bool closed_for_size = false;
  bool limit_closure = false;
  while (sent.size() - s >= 4) {
    const uint32_t bytes = BigEndian32(sent, s);
    const uint32_t limit = admitted ? kMaxRpcFrameBytes : kMaxUnadmittedFrameBytes;
    if (bytes == 0 || bytes > limit) {
      closed_for_size = true;
      limit_closure = admitted;
      break;
    }
    if (sent.size() - s - 4 < bytes) break;  // cut: the master waits, then sees the end
    const std::string frame = sent.substr(s + 4, bytes);
    s += 4 + bytes;
    const Message call = Read(frame);
    const bool answerable = call.ok && (call.type == apache::thrift::protocol::T_CALL ||
                                        call.type == apache::thrift::protocol::T_ONEWAY);
    if (got.size() - r < 4) {
      FUZZ_CHECK(r == got.size(), "%zu stray bytes at the end of the replies", got.size() - r);
      FUZZ_CHECK(!answerable || admitted,
                 "%s (seqid %d) before admission: the connection closed without a reply",
                 call.name.c_str(), call.seqid);
      break;
    }
    const uint32_t reply_bytes = BigEndian32(got, r);
    FUZZ_CHECK(reply_bytes > 0 && got.size() - r - 4 >= reply_bytes,
               "a reply frame of %u bytes, %zu left", reply_bytes, got.size() - r - 4);
    const Reply reply = ReadReply(got.substr(r + 4, reply_bytes));
    r += 4 + reply_bytes;
    FUZZ_CHECK(answerable, "a reply to a frame that is no call");
    FUZZ_CHECK(reply.head.ok && reply.head.name == call.name && reply.head.seqid == call.seqid,
               "reply \"%s\" (seqid %d) to call \"%s\" (seqid %d)", reply.head.name.c_str(),
               reply.head.seqid, call.name.c_str(), call.seqid);
    const bool handshake = call.name == "AuthChallenge" || call.name == "Authenticate";
    if (!admitted && !handshake) {
      FUZZ_CHECK(reply.head.type == apache::thrift::protocol::T_EXCEPTION &&
                     IsUnauthenticatedMessage(reply.exception),
                 "%s before admission was answered, not refused", call.name.c_str());
    } else if (!admitted) {
      FUZZ_CHECK(reply.head.type == apache::thrift::protocol::T_REPLY,
                 "%s answered an exception before admission: %s", call.name.c_str(),
                 reply.exception.c_str());
      if (call.name == "Authenticate" && reply.code == 0) admitted = true;
    }
  }
  if (closed_for_size) {
    FUZZ_CHECK(r == got.size(), "a reply after a frame over the limit");
  }
  const uint64_t frame_closures = Closed(RpcClosure::kFrameBeforeAdmission) - frame_closures_before;
  const uint64_t limit_closures = Closed(RpcClosure::kFrameLimit) - limit_closures_before;
  FUZZ_CHECK(frame_closures == (closed_for_size && !limit_closure ? 1u : 0u) &&
                 limit_closures == (closed_for_size && limit_closure ? 1u : 0u),
             "%llu frame_before_admission and %llu frame_limit closures counted; expected a "
             "size closure: %d (admitted: %d)",
             static_cast<unsigned long long>(frame_closures),
             static_cast<unsigned long long>(limit_closures), closed_for_size, limit_closure);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::QuietLogs();
  RouteThriftOutputToDebugLog();
  g_processors = std::make_shared<Processors>();
  RpcServerOptions options;
  options.address = "127.0.0.1";
  options.io_threads = 1;
  options.limits = RpcConnections::Split(64);
  options.handshake_timeout_ms = 600000;  // never within an input: deterministic
  options.idle_timeout_ms = 0;
  // Never destroyed: it serves until the process exits.
  g_server = new RpcServer(g_processors, MakeRpcProtocolFactory(), options);
  std::string error;
  FUZZ_CHECK(g_server->Listen(&error), "cannot listen: %s", error.c_str());
  std::thread([] { g_server->Serve(); }).detach();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  MasterService service{MasterOptions()};
  g_processors->Serve(std::make_shared<RpcHandler>(&service));
  const uint64_t deadline_closures = Closed(RpcClosure::kHandshakeTimeout);
  const uint64_t cap_closures =
      Closed(RpcClosure::kUnadmittedCap) + Closed(RpcClosure::kAdmittedCap);
  std::vector<int> held;
  int current = Connect("127.0.0.1");
  std::string sent;
  auto done = [&] {
    const uint64_t frames = Closed(RpcClosure::kFrameBeforeAdmission);
    const uint64_t limits = Closed(RpcClosure::kFrameLimit);
    const std::string got = Exchange(current, sent);
    close(current);
    Check(sent, got, frames, limits);
    sent.clear();
  };
  for (const fuzz::Section& section : fuzz::SplitSections(data, size)) {
    switch (section.tag & 3) {
      case 0:
        sent.append(section.bytes);
        break;
      case 1:
        done();
        current = Connect("127.0.0.1");
        break;
      case 2: {
        const auto byte = [&](size_t i) {
          return i < section.bytes.size() ? static_cast<uint8_t>(section.bytes[i]) : 0;
        };
        const int count = section.bytes.empty() ? 1 : byte(0) % 8;
        const int address = 2 + byte(1) % 4;
        const std::string source = "127.0.0." + std::to_string(address);
        for (int i = 0; i < count && static_cast<int>(held.size()) < kMaxHeld; ++i) {
          held.push_back(Connect(source.c_str()));
        }
        break;
      }
      case 3:
        sent += Handshake(section.bytes);
        break;
    }
  }
  done();
  for (int fd : held) close(fd);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  while (g_server->admitted_connections() + g_server->unadmitted_connections() > 0) {
    FUZZ_CHECK(std::chrono::steady_clock::now() < deadline,
               "%zu admitted and %zu other connections left after every peer closed",
               g_server->admitted_connections(), g_server->unadmitted_connections());
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  FUZZ_CHECK(Closed(RpcClosure::kHandshakeTimeout) == deadline_closures &&
                 Closed(RpcClosure::kUnadmittedCap) + Closed(RpcClosure::kAdmittedCap) ==
                     cap_closures,
             "a deadline or cap closure within the budgets");
  // Nothing of this input's service is in use now: every connection is gone.
  g_processors->Serve(nullptr);
  return 0;
}
