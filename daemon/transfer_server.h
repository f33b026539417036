// The transfer port: serves other daemons' one-sided READ and WRITE on the segments this
// daemon owns, READ_DISK of its disk replicas, their CONTROL requests, and the HELLO and
// AUTH that open a connection
// (daemon/transfer_protocol.h).
//
// Who is served. With a cluster key (Options::cluster_key), a connection is served only
// once its peer has proved the key: HELLO with a client nonce, answered with a server
// nonce, then AUTH with the client proof, answered with the server proof
// (common/cluster_key.h). Anything else first -- a READ, WRITE or CONTROL, a HELLO without
// a nonce, a wrong proof -- is refused with -1400 and the connection closed, before a byte
// of any segment is read or written and before any payload is read; from loopback too.
// Without a key, only peers on this host are admitted (PeerOnThisHost in
// common/host_address.h): any other is closed at accept, before a byte is read or sent.
// Refusals are counted and logged at most once a second, with the peer's address: a
// flood of them cannot fill the log.
//
// One thread per connection, blocking I/O: peers keep a few persistent connections each
// (daemon/tcp_transport.h), so connections are few and long-lived, and a blocking thread
// moves a multi-MiB payload between the socket and the segment in a handful of system
// calls with no copy in between.
//
// Connections. Each is admitted under per-peer caps and a cap on the port
// (daemon/transfer_connections.h): when the port is full, a fresh peer's connection takes
// the place of an idle one (never of one with a request in progress) instead of being
// refused. A peer names itself with HELLO as its first request; one that does not counts
// against its source address (possible without a key only). With a key, the connection
// is counted as the daemon HELLO named only once AUTH has proved the key: until then it
// is new, and the first to give way, so that claiming another daemon's name does not
// take that daemon's connections.
//
// Time. A new connection must deliver its first request header (and a HELLO its payload,
// and with a key the AUTH too) within handshake_timeout_ms, or it is closed: a silent
// connection holds a slot for that long at most. Between requests a connection may idle for idle_timeout_ms. Within a
// request, a peer that moves no byte for stall_timeout_ms is dropped
// (daemon/tcp_io.h: counted from the last byte, not per system call).
//
// Input is untrusted, from an authenticated peer too. Every header is checked before any
// payload is touched: a request that does not decode, names a segment this daemon does
// not own, or a range outside it is answered with an error code and logged; the
// connection survives a refused READ (no payload follows it) and a READ_DISK refused
// after its (bounded) payload was read, and is closed after anything else refused (its
// payload length cannot be trusted).
//
// Threads: the accept thread admits; each connection's thread serves it, its Opening
// its own. Counters are atomics.
//
// A segment is held (shared_ptr) for the whole of a request, so one unmounted meanwhile
// stays mapped until the request ends. A READ under the lease of a master other than the
// one the segments are mounted at now is refused: that master's leases are void, and the
// range may belong to another object already.
//
// Disk replicas (READ_DISK, daemon/transfer_protocol.h): served from this daemon's SSD
// tier (SetDiskTier) when the request names its LOCAL_DISK segment, under the same
// handshake, epoch check, timeouts and input rules as READ. At most
// Options::disk_read_concurrency of them read the SSD at once, each into a buffer of its
// own (daemon/disk_reads.h) that is then sent; one that finds them all busy waits up to
// half the stall timeout (so that its answer still reaches a peer waiting on the same
// timeout), then is answered -1300. A refused READ_DISK whose payload was read leaves the
// connection in step and open; one refused on its header alone closes it.
#ifndef MOONCAKE_DAEMON_TRANSFER_SERVER_H_
#define MOONCAKE_DAEMON_TRANSFER_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "common/cluster_key.h"
#include "common/log_throttle.h"
#include "daemon/disk_reads.h"
#include "daemon/epoch_gate.h"
#include "daemon/segment_memory.h"
#include "daemon/ssd_store.h"
#include "daemon/tcp_io.h"
#include "daemon/transfer_connections.h"
#include "daemon/transfer_protocol.h"
#include "daemon/transport.h"

namespace mooncake {

class TransferServer {
 public:
  // The segment with this id if this daemon owns it, else null.
  using SegmentLookup = std::function<std::shared_ptr<SegmentMemory>(int64_t)>;

  struct Options {
    int stall_timeout_ms = 5000;
    int handshake_timeout_ms = 2000;
    int idle_timeout_ms = 10 * 60 * 1000;
    TransferConnections::Limits limits;
    // The cluster's key: every peer must prove it. Null: peers on this host only.
    std::shared_ptr<const ClusterKey> cluster_key;
    // READ_DISKs reading the SSD at once (each holds a 4 MiB buffer while it does).
    size_t disk_read_concurrency = 8;
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
  // The SSD tier READ_DISK reads from: store, and the id of this daemon's LOCAL_DISK
  // segment the requests name. Any time (before it, READ_DISK finds no disk segment: -101);
  // store must outlive the server.
  void SetDiskTier(SsdStore* store, int64_t disk_segment_id) {
    disk_segment_id_.store(disk_segment_id);
    ssd_.store(store);
  }

  void Start();
  // Stops accepting, shuts every connection down and waits for their threads.
  void Stop();

  TransferConnections::Stats connection_stats() const { return connections_.stats(); }
  // READ_DISKs served (bytes sent) and refused, since Start.
  uint64_t disk_reads_served() const { return disk_reads_served_.load(); }
  uint64_t disk_reads_refused() const { return disk_reads_refused_.load(); }
  // Peers refused for want of the cluster key since Start: at accept (not on this host,
  // without a key) or by -1400 (no handshake, a wrong proof).
  uint64_t unauthenticated() const { return unauthenticated_.load(); }

 private:
  using Connection = TransferConnections::Connection;
  // Where a connection is in its opening, kept by its thread.
  struct Opening {
    enum Stage { kNew, kHelloed, kServing };  // kHelloed: with a key, AUTH is due
    Stage stage = kNew;
    std::chrono::steady_clock::time_point deadline;  // for every stage before kServing
    std::string daemon_name;                         // what HELLO said, until AUTH
    std::string client_nonce, server_nonce;
  };
  // A connection's thread: its requests until it closes, then its removal.
  void Serve(std::shared_ptr<Connection> c, std::string peer);
  // One request; false when the connection must be closed.
  bool ServeOne(Connection* c, const std::string& peer, Opening* opening);
  bool ServeHello(Connection* c, const std::string& peer, const transfer::RequestHeader& h,
                  const tcp_io::Bounds& bounds, Opening* opening);
  bool ServeAuth(Connection* c, const std::string& peer, const transfer::RequestHeader& h,
                 const tcp_io::Bounds& bounds, Opening* opening);
  bool ServeControl(Connection* c, const std::string& peer, const transfer::RequestHeader& h);
  bool ServeReadDisk(Connection* c, const std::string& peer, const transfer::RequestHeader& h);
  // Answers h with code and logs why; true when the connection is still in step (a READ,
  // or a request whose payload was read: payload_read).
  bool Refuse(int fd, const std::string& peer, const transfer::RequestHeader& h, ErrorCode code,
              const std::string& why, bool payload_read = false);
  // Answers h with -1400, counts and logs it (rate-limited); the connection must close.
  bool RefuseUnauthenticated(int fd, const std::string& peer, const transfer::RequestHeader& h,
                             const char* why);
  void AcceptLoop();
  // At most one line a second about connections taken or refused (a flood would fill the
  // log otherwise); the counts say how many since the start.
  void LogAdmission(const char* what, const std::string& peer);
  // Likewise, on a clock of its own, about peers refused for want of the key.
  void LogUnauthenticated(const std::string& what, const std::string& peer);

  const int listen_fd_;
  const SegmentLookup lookup_;
  const Options options_;
  std::map<int64_t, ControlHandler> control_;  // set before Start, read-only after
  EpochGate* gate_ = nullptr;                  // likewise; null: no check
  std::atomic<SsdStore*> ssd_{nullptr};        // null: no SSD tier
  std::atomic<int64_t> disk_segment_id_{0};
  DiskReadSlots disk_slots_;
  std::atomic<uint64_t> disk_reads_served_{0};
  std::atomic<uint64_t> disk_reads_refused_{0};

  TransferConnections connections_;
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  LogThrottle admission_log_;
  std::atomic<uint64_t> silent_closed_{0};  // closed for saying nothing in time
  LogThrottle unauthenticated_log_;
  std::atomic<uint64_t> unauthenticated_{0};
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TRANSFER_SERVER_H_
