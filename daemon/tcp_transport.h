// The TCP transport: one-sided READ and WRITE against other daemons' transfer ports
// (daemon/transfer/transfer_server.h), and the CONTROL calls the RDMA transport bootstraps with.
//
// Connections. Each peer has a pool of persistent connections, opened on demand up to
// max_connections_per_peer and kept idle between transfers, so transfers never pay a
// handshake and a busy daemon never runs out of ports (no TIME_WAIT churn). A new
// connection opens with HELLO naming this daemon (options.address), so the owner counts it
// against this daemon's share of its port (daemon/transfer/transfer_connections.h), and, with a
// cluster key, runs the handshake (daemon/transfer/transfer_protocol.h): HELLO with a client
// nonce, AUTH with this daemon's proof, and the owner's proof checked before the
// connection carries a request. An owner that refuses, or cannot prove the key itself, is
// never sent a byte of a transfer nor believed: the transfer fails (-800) with a log line
// naming the owner and why, within the connect timeout. An opening the owner closes
// without answering -- what a port flooded with connections that never open does to an
// opening it takes to make room (daemon/transfer/transfer_connections.h) -- is tried again on a
// fresh connection, up to kOpeningAttempts in all, within the same connect timeout. Connections are pooled, so the
// handshake's extra round trip and two HMACs are paid once per connection, not per
// transfer. The owner may
// close an idle one to make room for another peer, which the retry below absorbs. A request
// owns its connection from header to reply. A transfer that fails on a pooled connection
// (the peer restarted since) drops every idle connection to that peer and is retried once
// on a fresh one: reads and writes of a range are idempotent. One that stalled is not
// retried: the peer is frozen or gone, and a retry would only stall as long again.
//
// Striping. An op of at least 2 x stripe_min_bytes is cut into up to `streams` pieces, each
// on its own connection, run in parallel (by the caller and a few worker threads); so are
// the ops of one Execute, e.g. the replicas of a put. A read of a disk replica (op.disk)
// goes as READ_DISK requests of at most transfer::kMaxDiskRead bytes each (more pieces
// when the value is bigger), all in parallel as well; the owner bounds how many it serves
// at once.
//
// Copies. A WRITE goes out with one sendmsg of header and payload straight from the
// caller's memory; a READ's payload is received straight into it. An op that wants a
// checksum gets it computed per piece, on the piece's thread, while its bytes are in cache.
//
// Time. connect_timeout_ms bounds a connect and its HELLO (and AUTH); stall_timeout_ms any send or
// receive that makes no progress, counted from the last byte moved (daemon/transfer/tcp_io.h); and
// no transfer runs past its deadline. A dead or frozen peer fails a transfer within the
// stall timeout, as the owner drops a peer that stalls mid-request within the same time
// (both are --transfer_timeout).
#ifndef MOONCAKE_DAEMON_TCP_TRANSPORT_H_
#define MOONCAKE_DAEMON_TCP_TRANSPORT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/auth/cluster_key.h"
#include "daemon/transfer/transport.h"
#include "daemon/base/worker_threads.h"

namespace mooncake {

class TcpTransport : public Transport, public ControlCaller {
 public:
  struct Options {
    std::string address;  // this daemon's transfer port, "host:port", as published; its
                          // name in HELLO
    int streams = 2;
    uint64_t stripe_min_bytes = 512ull << 10;
    int connect_timeout_ms = 2000;
    int stall_timeout_ms = 5000;
    size_t max_connections_per_peer = 64;
    size_t threads = 8;  // run the pieces beyond the caller's own
    // The cluster's key, proved to every owner and checked of it; null: no handshake
    // (owners on this host only admit such a peer).
    std::shared_ptr<const ClusterKey> cluster_key;
  };

  explicit TcpTransport(Options options);
  ~TcpTransport() override;

  const char* protocol() const override { return "tcp"; }
  ErrorCode RegisterMemory(char*, uint64_t, MemoryAccess) override {
    return ErrorCode::OK;  // nothing to pin
  }
  void UnregisterMemory(char*) override {}
  bool DescribeSegment(char* base, uint64_t size, rpc::TransportEndpoint* out) override;
  void Execute(std::vector<TransferOp*>* ops,
               std::chrono::steady_clock::time_point deadline) override;

  ErrorCode CallControl(const std::string& address, transfer::ControlChannel channel,
                        const std::string& request, std::string* reply,
                        std::chrono::steady_clock::time_point deadline) override;

  // Connections open now (idle or busy), over every peer; for tests and stats.
  size_t open_connections() const;

 private:
  struct Peer;
  // A contiguous part of one op, moved over one connection.
  struct Piece {
    TransferOp* op;
    uint64_t skip;  // bytes of the op before this piece
    uint64_t length;
  };
  // What one request on a connection sends and receives.
  struct Exchange {
    uint16_t op = 0;
    int64_t segment_id = 0;
    uint64_t offset = 0;
    int64_t master_epoch = 0;       // READ, WRITE, READ_DISK
    const char* payload = nullptr;  // WRITE, CONTROL, READ_DISK
    uint64_t payload_length = 0;
    char* into = nullptr;  // READ, READ_DISK: exactly expect bytes land here
    uint64_t expect = 0;
    std::string* control_reply = nullptr;  // CONTROL
  };

  Peer* PeerFor(const std::string& address);
  // A connection to peer (idle or new), or -1 with *error. *reused: it was idle.
  int Acquire(Peer* peer, std::chrono::steady_clock::time_point deadline, bool* reused,
              std::string* error);
  // New connections opened for one Acquire when the owner closes them unanswered.
  static constexpr int kOpeningAttempts = 3;
  // Says HELLO on a new connection, and with a key completes the handshake; false with
  // *error when the owner does not answer OK by then, or cannot prove the key; *broken
  // when it closed the connection without answering.
  bool Hello(int fd, std::chrono::steady_clock::time_point deadline, bool* broken,
             std::string* error);
  // One request of the opening (HELLO, AUTH) and its reply, whose payload must be exactly
  // reply_length bytes (into *reply); false with *error (*broken as for Hello).
  bool OpeningRequest(int fd, transfer::Op op, const std::string& payload, size_t reply_length,
                      std::string* reply, std::chrono::steady_clock::time_point deadline,
                      bool* broken, std::string* error);
  void Release(Peer* peer, int fd, bool keep);
  // Runs x on a pooled connection, retried once on a fresh one when the pooled one broke.
  // OK, the peer's refusal code, or TRANSFER_FAIL with *error.
  ErrorCode Run(Peer* peer, const Exchange& x, std::chrono::steady_clock::time_point deadline,
                std::string* error);
  // One attempt on fd: OK, the peer's code (*in_step: the connection may be reused), or
  // TRANSFER_FAIL (*stalled: because the stall timeout or the deadline passed, rather than
  // the connection breaking).
  ErrorCode RunOn(int fd, const Exchange& x, std::chrono::steady_clock::time_point deadline,
                  bool* in_step, bool* stalled, std::string* error);
  // OK, or TRANSFER_FAIL (logged). *crc: the piece's CRC32C, when its op wants one.
  ErrorCode RunPiece(const Piece& piece, std::chrono::steady_clock::time_point deadline,
                     uint32_t* crc);

  const Options options_;
  std::atomic<uint64_t> next_request_id_{1};
  mutable std::mutex peers_mu_;
  std::map<std::string, std::unique_ptr<Peer>> peers_;  // guarded by peers_mu_; never erased
  WorkerThreads workers_;  // run the pieces beyond the caller's own
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TCP_TRANSPORT_H_
