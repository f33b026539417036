// The master's Thrift server (master/main.cc): framed transport over TCP, served by
// epoll loops on a fixed set of I/O threads, with the handlers run on those threads.
//
// Why not Thrift's TNonblockingServer: it re-registers a connection's socket with epoll
// twice per call (libevent's event_del / event_add around each frame), allocates per
// call, and spent 12-19 us of CPU per call on this VM. This server keeps each socket
// registered once (level-triggered), reads a call into the connection's buffer and writes
// its reply from the connection's buffer (no allocation per call once they have grown),
// and runs the handler right there.
//
// Polling (spin_ns, the master's --spin_us): after activity a thread may poll its epoll
// set without blocking for a short, bounded, adaptive time (common/spin_wait.h's
// AdaptiveSpin: a thread whose polls keep missing stops polling; at most max_spinning
// threads at once) before it sleeps, so that a daemon's next call finds it awake instead
// of paying its wake-up (~15-30 us on a VM whose idle vCPUs halt). The master's default
// is the daemon's 200 us. It pays most with few I/O threads, since only the polling ones
// are awake: on a host the master shares with its daemon, --rpc_thread_num 1 serves every
// call awake, at the cost of the master's throughput for many busy clients
// (docs/master.md, "Serving calls").
//
// Connections: the acceptor (the thread in Serve) hands each new connection to the next
// I/O thread in turn; that thread asks the processor factory for the connection's
// processor (so AuthenticatedProcessorFactory sees a TSocket of the connection, as with
// TNonblockingServer) and runs all of its calls, one at a time, in order.
//
// Input policy (a peer may send anything):
//  - a frame is a 4-byte big-endian length and that many bytes; a length of 0 or above
//    max_frame_bytes closes the connection (logged, at most a line a second) before
//    anything is allocated for it. Below the limit the buffer grows with the bytes that
//    actually arrive (at most twice what was received), never to the length declared:
//    a 4-byte header alone costs nothing.
//  - what is inside a frame is the protocol's business (MakeRpcProtocolFactory: its
//    string and list limits); a call the processor cannot read, or that throws (the
//    lease fence of master/authenticated_processor.h), closes the connection with
//    nothing written, as TNonblockingServer did.
//  - a peer that closes or resets mid-frame: the connection is closed, its partial frame
//    dropped.
//  - a slow reader: the rest of a reply is written when the socket takes it (EPOLLOUT),
//    and the connection's next frames wait; other connections are served meanwhile.
//  - buffers above 1 MiB (a big reply, a big batch) are given back after the call.
//
// Thread roles: Listen, then Serve on one thread (it blocks until Stop); Stop from any
// thread once Listen has returned, once or more, before or during Serve (a Stop before
// Serve makes Serve return at once). A connection's state belongs to its I/O thread; the
// hand-off queue of new connections is the only state shared (under a mutex). Serve
// returns once every I/O thread has closed its connections; a call being handled when
// Stop comes finishes first.
#ifndef MOONCAKE_MASTER_RPC_SERVER_H_
#define MOONCAKE_MASTER_RPC_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <thrift/TProcessor.h>
#include <thrift/protocol/TProtocol.h>

#include "common/spin_wait.h"

namespace mooncake {

// TNonblockingServer's limit, which the master ran with before this server.
constexpr uint32_t kMaxRpcFrameBytes = 256u << 20;

struct RpcServerOptions {
  std::string address;  // to bind: an IP address or a host name; empty: every address
  int port = 0;         // 0: the kernel picks one (port() after Listen)
  size_t io_threads = 1;
  uint32_t max_frame_bytes = kMaxRpcFrameBytes;
  // How long an I/O thread polls for more work after some before it sleeps (the budget
  // of its AdaptiveSpin, common/spin_wait.h); 0: never.
  int64_t spin_ns = 0;
  // At most this many I/O threads poll at once (the others sleep at once): spinners that
  // outnumber the CPUs starve the threads doing the work.
  int max_spinning = 1;
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

 private:
  class IoThread;

  void AcceptAll();

  const std::shared_ptr<apache::thrift::TProcessorFactory> processors_;
  const std::shared_ptr<apache::thrift::protocol::TProtocolFactory> protocols_;
  const RpcServerOptions options_;
  int listen_fd_ = -1;
  int accept_epoll_ = -1;
  int stop_event_ = -1;  // eventfd: written by Stop, wakes the acceptor
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  SpinnerLimit spinners_;
  std::vector<std::unique_ptr<IoThread>> io_threads_;  // made by Listen
  size_t next_thread_ = 0;                             // acceptor's
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_RPC_SERVER_H_
