// The transfer port: serves other daemons' one-sided READ and WRITE on the segments this
// daemon owns, READ_DISK of its disk replicas, their CONTROL requests, and the HELLO and
// AUTH that open a connection
// (daemon/transfer/transfer_protocol.h).
//
// Who is served. With a cluster key (Options::cluster_key), a connection is served only
// once its peer has proved the key: HELLO with a client nonce, answered with a server
// nonce, then AUTH with the client proof, answered with the server proof
// (common/auth/cluster_key.h). Anything else first -- a READ, WRITE or CONTROL, a HELLO without
// a nonce, a wrong proof -- is refused with -1400 and the connection closed, before a byte
// of any segment is read or written and before any payload is read; from loopback too.
// Without a key, only peers of this daemon's own user (or root) on this host are admitted
// (PeerIsThisUserOrRoot in common/auth/peer_owner.h, which asks the kernel who owns the peer's
// socket): any other is closed at accept, before a byte is read or sent, so that another
// local user cannot read a segment through the port. Daemons of one host run as one user.
//
// The log before a connection is open. Everything a peer can cause at will before its
// connection is open -- a refusal at accept, a malformed header, HELLO or AUTH, a wrong
// proof, a connection closed at the handshake deadline or to make room, a newcomer
// refused -- is counted, and logged through one throttle (common/base/log_throttle.h): at most
// one line a second, naming the last such event and its peer, how many were not logged
// since the line before, and the running counts. A flood cannot fill the log. Refusals of
// requests on open connections (their peers proved the key) have a throttle of their own,
// so that a flood does not hide them.
//
// One thread per connection, blocking I/O: peers keep a few persistent connections each
// (daemon/transfer/tcp_transport.h), so connections are few and long-lived, and a blocking thread
// moves a multi-MiB payload between the socket and the segment in a handful of system
// calls with no copy in between.
//
// Connections. Each is admitted under per-peer caps, caps on the connections still
// opening (per source address and in all, well below the port's) and a cap on the port
// (daemon/transfer/transfer_connections.h): a connection not yet open gives way first, whatever it
// has sent and wherever its thread blocks, then an idle open one (never one with a
// request in progress), so a flood of connections that never open, from however many
// addresses, cannot keep a daemon that proves the key out. A peer names itself with HELLO
// as its first request; one that does not counts against its source address (possible
// without a key only). With a key, the connection is counted as the daemon HELLO named
// only once AUTH has proved the key, so that claiming another daemon's name does not take
// that daemon's connections.
//
// Time. A new connection must be open within handshake_timeout_ms (its first request
// header, a HELLO's payload, and with a key the AUTH too), or it is closed: its thread
// gives up at the deadline, and the accept thread shuts down any opening connection past
// it whatever its thread is doing, so a silent or half-sent opening holds a slot for that
// long at most. Between requests a connection may idle for idle_timeout_ms. Within a
// request, a peer that moves no byte for stall_timeout_ms is dropped
// (daemon/transfer/tcp_io.h: counted from the last byte, not per system call).
//
// Input is untrusted, from an authenticated peer too. Every header is checked before any
// payload is touched: a request that does not decode, names a segment this daemon does
// not own, or a range outside it is answered with an error code and logged (throttled,
// above); the connection survives a refused READ (no payload follows it) and a READ_DISK
// refused after its (bounded) payload was read, and is closed after anything else refused
// (its payload length cannot be trusted).
//
// Threads: the accept thread admits, and closes openings past their deadline; each
// connection's thread serves it, its Opening its own. Counters are atomics.
//
// A segment is held (shared_ptr) for the whole of a request, so one unmounted meanwhile
// stays mapped until the request ends. A READ under the lease of a master other than the
// one the segments are mounted at now is refused: that master's leases are void, and the
// range may belong to another object already.
//
// Disk replicas (READ_DISK, daemon/transfer/transfer_protocol.h): served from this daemon's SSD
// tier (SetDiskTier) when the request names its LOCAL_DISK segment, under the same
// handshake, epoch check, timeouts and input rules as READ. At most
// Options::disk_read_concurrency of them read the SSD at once, each into a buffer of its
// own (daemon/transfer/disk_reads.h) that is then sent; one that finds them all busy waits up to
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

#include "common/auth/cluster_key.h"
#include "common/base/log_throttle.h"
#include "daemon/transfer/disk_reads.h"
#include "daemon/base/epoch_gate.h"
#include "daemon/memory/segment_memory.h"
#include "daemon/ssd_store/ssd_store.h"
#include "daemon/transfer/tcp_io.h"
#include "daemon/transfer/transfer_connections.h"
#include "daemon/transfer/transfer_protocol.h"
#include "daemon/transfer/transport.h"

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
    // The cluster's key: every peer must prove it. Null: peers on this host, of this
    // process's user or root, only.
    std::shared_ptr<const ClusterKey> cluster_key;
    // READ_DISKs reading the SSD at once (each holds a 4 MiB buffer while it does).
    size_t disk_read_concurrency = 8;
    // Hears of a READ_DISK of a value the SSD does not hold (the object as the reader's
    // list named it, and the disk segment): the daemon reports it to the master
    // (daemon/cluster/bad_replica_reporter.h), since the reader only hears of a failed transfer.
    // Empty: nobody. Called on a connection's thread.
    std::function<void(const DiskAddress& object, int64_t disk_segment_id)> disk_miss;
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
  // Peers refused for want of the cluster key since Start: at accept (without a key: not
  // on this host, or of another user) or by -1400 (no handshake, a wrong proof).
  uint64_t unauthenticated() const { return unauthenticated_.load(); }
  // Connections refused or closed before they were open, since Start: the above, and
  // malformed openings, those closed at the handshake deadline or taken to make room.
  uint64_t refused_before_open() const { return refused_before_open_.load(); }

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
  // Answers h with code and logs why (through the throttle of c's stage); true when the
  // connection is still in step (a READ, or a request whose payload was read:
  // payload_read).
  bool Refuse(Connection* c, const std::string& peer, const transfer::RequestHeader& h,
              ErrorCode code, const std::string& why, bool payload_read = false);
  // Answers h with -1400, counts and logs it; the connection must close.
  bool RefuseUnauthenticated(int fd, const std::string& peer, const transfer::RequestHeader& h,
                             const char* why);
  void AcceptLoop();
  // Shuts down the openings past the handshake deadline; how long until the next one
  // will be (-1: none left), for the accept thread's poll.
  int CloseOverdueOpenings();
  // An event before a connection was open: counted, and logged through the one throttle
  // with the running counts (see "The log before a connection is open").
  // refusal: a connection refused or closed (counted in refused_before_open).
  void LogBeforeOpen(const std::string& what, bool refusal);

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
  LogThrottle before_open_log_;                   // everything before a connection is open
  LogThrottle request_log_;                       // refusals of requests on open connections
  std::atomic<uint64_t> refused_before_open_{0};
  std::atomic<uint64_t> unauthenticated_{0};
  std::atomic<uint64_t> overdue_{0};  // openings whose own thread saw the deadline pass
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TRANSFER_SERVER_H_
