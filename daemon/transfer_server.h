// The transfer port: serves other daemons' one-sided READ and WRITE on the segments this
// daemon owns, and their CONTROL requests (daemon/transfer_protocol.h).
//
// One thread per connection, blocking I/O: peers keep a few persistent connections each
// (daemon/tcp_transport.h), so connections are few and long-lived, and a blocking thread
// moves a multi-MiB payload between the socket and the segment in a handful of system
// calls with no copy in between. Connections past max_connections are refused at accept.
//
// Input is untrusted. Every header is checked before any payload is touched: a request
// that does not decode, names a segment this daemon does not own, or a range outside it
// is answered with an error code and logged; the connection survives a refused READ (no
// payload follows it) and is closed after anything else refused (its payload length
// cannot be trusted). A peer that stalls mid-request is dropped after stall_timeout_ms;
// an idle connection after idle_timeout_ms.
//
// A segment is held (shared_ptr) for the whole of a request, so one unmounted meanwhile
// stays mapped until the request ends. A READ under the lease of a master other than the
// one the segments are mounted at now is refused: that master's leases are void, and the
// range may belong to another object already.
#ifndef MOONCAKE_DAEMON_TRANSFER_SERVER_H_
#define MOONCAKE_DAEMON_TRANSFER_SERVER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "daemon/epoch_gate.h"
#include "daemon/segment_memory.h"
#include "daemon/transfer_protocol.h"
#include "daemon/transport.h"

namespace mooncake {

class TransferServer {
 public:
  // The segment with this id if this daemon owns it, else null.
  using SegmentLookup = std::function<std::shared_ptr<SegmentMemory>(int64_t)>;

  struct Options {
    int stall_timeout_ms = 5000;
    int idle_timeout_ms = 10 * 60 * 1000;
    size_t max_connections = 1024;
  };

  // listen_fd: a listening TCP socket, owned from now on.
  TransferServer(int listen_fd, SegmentLookup lookup, Options options);
  ~TransferServer();  // Stop()
  TransferServer(const TransferServer&) = delete;
  TransferServer& operator=(const TransferServer&) = delete;

  // Before Start: who answers CONTROL requests on channel.
  void SetControlHandler(transfer::ControlChannel channel, ControlHandler handler);
  // Before Start: the epoch of the master this daemon's segments are mounted at now, and
  // the gate writes pass (Membership::epoch_gate). A READ or WRITE carrying another epoch
  // is refused with -707.
  void SetEpochGate(EpochGate* gate) { gate_ = gate; }

  void Start();
  // Stops accepting, shuts every connection down and waits for their threads.
  void Stop();

 private:
  void AcceptLoop();
  void Serve(int fd, std::string peer);
  // One request; false when the connection must be closed.
  bool ServeOne(int fd, const std::string& peer);
  bool Refuse(int fd, const std::string& peer, const transfer::RequestHeader& h, ErrorCode code,
              const char* why);

  const int listen_fd_;
  const SegmentLookup lookup_;
  const Options options_;
  std::map<int64_t, ControlHandler> control_;  // set before Start, read-only after
  EpochGate* gate_ = nullptr;                  // likewise; null: no check

  std::thread accept_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<int> connections_;  // guarded by mu_; open connection sockets
  bool stopping_ = false;      // guarded by mu_
  bool started_ = false;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TRANSFER_SERVER_H_
