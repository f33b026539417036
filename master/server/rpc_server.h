// The master's Thrift server (master/server/main.cc): framed transport over TCP, served by
// epoll loops on a fixed set of I/O threads, with the handlers run on those threads.
//
// Why not Thrift's TNonblockingServer: it re-registers a connection's socket with epoll
// twice per call (libevent's event_del / event_add around each frame) and allocates per
// call, which cost the master several times a hot handler's own CPU (docs/master.md,
// "Serving calls"). This server keeps each socket registered once (level-triggered), reads
// a call into the connection's buffer and writes its reply from the connection's buffer
// (no allocation per call once they have grown), and runs the handler right there.
//
// Polling (spin_ns, the master's --spin_us): after activity a thread may poll its epoll
// set without blocking for a short, bounded, adaptive time (common/base/spin_wait.h's
// AdaptiveSpin: a thread whose polls keep missing stops polling; at most max_spinning
// threads at once) before it sleeps, so that a daemon's next call finds it awake instead
// of paying its wake-up (dear where idle CPUs halt: common/base/spin_wait.h). The master's
// default is the daemon's 200 us. It pays most with few I/O threads, since only the
// polling ones are awake: on a host the master shares with its daemon, --rpc_thread_num 1
// serves every call awake, at the cost of the master's throughput for many busy clients
// (docs/master.md, "Serving calls").
//
// Connections: the acceptor (the thread in Serve) asks the processor factory for each new
// connection's processor (so AuthenticatedProcessorFactory sees a TSocket of the
// connection, as with TNonblockingServer, and can admit a peer at connect), enters it in
// the budgets (master/server/rpc_connections.h) and hands it to the next I/O thread in turn,
// which runs all of its calls, one at a time, in order.
//
// Admission (RpcAdmission, which the processor may implement; one that does not is
// admitted at connect): the server knows nothing of keys, only whether the processor says
// its connection's peer has proved who it is. Until then the connection lives on a small
// fixed budget, so that a peer that cannot prove anything costs the master next to
// nothing:
//  - a frame over unadmitted_max_frame_bytes (the handshake's calls take under a hundred
//    bytes) closes it before more than that is read;
//  - it is closed handshake_timeout_ms after its accept, whatever it sent;
//  - at most max_unadmitted such connections, max_unadmitted_per_source of one address:
//    the oldest gives way to a new one (RpcConnections).
// Once admitted: the full frame limit, at most max_admitted connections (past it the one
// idle the longest is closed, so an authenticated caller always gets in), and a
// connection silent for idle_timeout_ms (no call read, no reply written) is closed; a
// daemon's pool notices a closed connection before it uses it and opens another.
// Out of descriptors at accept, the oldest connection not admitted (else the admitted one
// idle the longest) is closed to make one. Every closure the server decides is counted by
// reason (closed()) and logged at most once a second (one line for connections not
// admitted, one for admitted ones; each line counts those it passed over).
//
// Input policy (a peer may send anything):
//  - a frame is a 4-byte big-endian length and that many bytes; a length of 0 or above
//    the connection's limit (max_frame_bytes; unadmitted_max_frame_bytes before admission)
//    closes the connection before anything is allocated for it. Below the limit the
//    buffer grows with the bytes that actually arrive (at most twice what was received),
//    never to the length declared: a 4-byte header alone costs nothing.
//  - what is inside a frame is the protocol's business (MakeRpcProtocolFactory: its
//    string and list limits); a message that is no call, a call the processor cannot
//    read, or one that throws (the lease fence of master/server/authenticated_processor.h),
//    closes the connection with nothing written, as TNonblockingServer did.
//  - a peer that closes or resets mid-frame: the connection is closed, its partial frame
//    dropped.
//  - a slow reader: the rest of a reply is written when the socket takes it (EPOLLOUT),
//    and the connection's next frames wait; other connections are served meanwhile.
//  - buffers above 1 MiB (a big reply, a big batch) are given back after the call.
//
// Thread roles: Listen, then Serve on one thread (it blocks until Stop); Stop from any
// thread once Listen has returned, once or more, before or during Serve (a Stop before
// Serve makes Serve return at once). A connection's state belongs to its I/O thread once
// handed over; shared are each thread's queues of connections to adopt and to close
// (under its mutex), the budgets (RpcConnections, their own mutex) and the counters
// (atomic). Serve returns once every I/O thread has closed its connections; a call being
// handled when Stop comes finishes first. The counts and closed() from any thread.
#ifndef MOONCAKE_MASTER_RPC_SERVER_H_
#define MOONCAKE_MASTER_RPC_SERVER_H_

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <thrift/TProcessor.h>
#include <thrift/protocol/TProtocol.h>

#include "common/base/spin_wait.h"
#include "master/server/rpc_connections.h"

namespace mooncake {

// The largest frame accepted: TNonblockingServer's limit, so that no call Thrift's own
// server would take is refused here.
constexpr uint32_t kMaxRpcFrameBytes = 256u << 20;
// Before admission. The handshake's calls are 64 and 65 bytes (a 32-byte nonce or proof
// in a call message; tests/unit/master_rpc_server_test.cc measures them), and a refused call
// is answered whatever it was as long as it fits.
constexpr uint32_t kMaxUnadmittedFrameBytes = 4096;

// What a processor may tell the server about its connection (AuthenticatedProcessor
// does). Asked on the thread that runs the connection's calls, after each call until it
// says yes.
class RpcAdmission {
 public:
  virtual ~RpcAdmission() = default;
  // True once the peer has proved who it is (or needed not to): the connection leaves the
  // budget of connections not admitted for good.
  virtual bool admitted() const = 0;
};

struct RpcServerOptions {
  std::string address;  // to bind: an IP address or a host name; empty: every address
  int port = 0;         // 0: the kernel picks one (port() after Listen)
  size_t io_threads = 1;
  uint32_t max_frame_bytes = kMaxRpcFrameBytes;
  // How long an I/O thread polls for more work after some before it sleeps (the budget
  // of its AdaptiveSpin, common/base/spin_wait.h); 0: never.
  int64_t spin_ns = 0;
  // At most this many I/O threads poll at once (the others sleep at once): spinners that
  // outnumber the CPUs starve the threads doing the work.
  int max_spinning = 1;
  // Before admission (RpcAdmission): the frame limit, and how long a connection may take
  // to be admitted.
  uint32_t unadmitted_max_frame_bytes = kMaxUnadmittedFrameBytes;
  int64_t handshake_timeout_ms = 5000;
  // The budgets of connections not admitted and admitted (RpcConnections::Split makes
  // them from one total).
  RpcConnections::Limits limits;
  // An admitted connection silent this long is closed; 0: never.
  int64_t idle_timeout_ms = 300000;
};

class RpcServer {
 public:
  RpcServer(std::shared_ptr<apache::thrift::TProcessorFactory> processors,
            std::shared_ptr<apache::thrift::protocol::TProtocolFactory> protocols,
            RpcServerOptions options);
  ~RpcServer();  // after Serve returned, or without Serve
  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  // Binds and listens; false with *error when it cannot (the address, the port taken).
  bool Listen(std::string* error);
  // The bound port, after Listen.
  int port() const { return port_; }
  // Serves until Stop. Needs a successful Listen.
  void Serve();
  void Stop();

  // Connections open now, admitted or not (a closing one counts in neither).
  size_t admitted_connections() const { return connections_.admitted(); }
  size_t unadmitted_connections() const { return connections_.unadmitted(); }
  // Connections the server closed for this reason since it started.
  uint64_t closed(RpcClosure why) const {
    return closed_[static_cast<size_t>(why)].load(std::memory_order_relaxed);
  }

 private:
  class IoThread;
  struct Connection;

  void AcceptAll();
  // The acceptor: fd, accepted from address, becomes a connection of an I/O thread.
  void Adopt(int fd, const sockaddr_storage& address);
  // Out of descriptors: closes one connection to make room (RpcConnections::PickAny).
  void FreeDescriptor();
  // Any thread: the victims are counted, logged and handed to their threads to close.
  void CloseVictims(const std::vector<RpcConnections::Victim>& victims);
  // Any thread: one closure the server decided, counted and logged (throttled).
  void Closed(RpcClosure why, const std::string& peer, bool admitted,
              const std::string& detail);
  // How often an I/O thread looks for connections past their deadline.
  int64_t SweepIntervalMs() const;

  const std::shared_ptr<apache::thrift::TProcessorFactory> processors_;
  const std::shared_ptr<apache::thrift::protocol::TProtocolFactory> protocols_;
  const RpcServerOptions options_;
  int listen_fd_ = -1;
  int accept_epoll_ = -1;
  int stop_event_ = -1;  // eventfd: written by Stop, wakes the acceptor
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  SpinnerLimit spinners_;
  RpcConnections connections_;
  std::atomic<uint64_t> closed_[static_cast<size_t>(RpcClosure::kCount)] = {};
  std::vector<std::unique_ptr<IoThread>> io_threads_;  // made by Listen
  size_t next_thread_ = 0;                             // acceptor's
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_RPC_SERVER_H_
