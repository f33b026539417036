#include "daemon/transfer/tcp_transport.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/base/crc32c.h"
#include "common/base/error_code.h"
#include "common/base/logging.h"
#include "common/base/units.h"
#include "daemon/transfer/tcp_io.h"

namespace mooncake {

using Clock = std::chrono::steady_clock;
using transfer::Op;

namespace {

int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left.count(), INT32_MAX)));
}

// What a send or receive that failed says, with errno as it left it.
ErrorCode Broken(bool* stalled, std::string* error) {
  *stalled = errno == ETIMEDOUT;
  *error = *stalled ? "no progress within the transfer timeout (or the deadline passed)"
                    : std::strerror(errno);
  return ErrorCode::TRANSFER_FAIL;
}

// Waits for a count of pieces to end.
class Latch {
 public:
  explicit Latch(size_t count) : count_(count) {}
  void CountDown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--count_ == 0) cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return count_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t count_;
};

}  // namespace

struct TcpTransport::Peer {
  explicit Peer(std::string a) : address(std::move(a)) {}
  const std::string address;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> idle;  // guarded by mu
  size_t open = 0;        // guarded by mu; idle and busy
};

TcpTransport::TcpTransport(Options options)
    : options_(std::move(options)), workers_(std::max<size_t>(1, options_.threads)) {}

TcpTransport::~TcpTransport() {
  workers_.Stop();
  std::lock_guard<std::mutex> lock(peers_mu_);
  for (auto& p : peers_) {
    for (int fd : p.second->idle) close(fd);
  }
}

bool TcpTransport::DescribeSegment(char*, uint64_t, rpc::TransportEndpoint* out) {
  out->protocol = "tcp";
  out->address = options_.address;
  out->descriptor.clear();
  return true;
}

size_t TcpTransport::open_connections() const {
  std::lock_guard<std::mutex> lock(peers_mu_);
  size_t n = 0;
  for (const auto& p : peers_) {
    std::lock_guard<std::mutex> peer_lock(p.second->mu);
    n += p.second->open;
  }
  return n;
}

TcpTransport::Peer* TcpTransport::PeerFor(const std::string& address) {
  std::lock_guard<std::mutex> lock(peers_mu_);
  std::unique_ptr<Peer>& p = peers_[address];
  if (p == nullptr) p.reset(new Peer(address));
  return p.get();
}

int TcpTransport::Acquire(Peer* peer, Clock::time_point deadline, bool* reused,
                          std::string* error) {
  {
    std::unique_lock<std::mutex> lock(peer->mu);
    bool ready = peer->cv.wait_until(lock, deadline, [&] {
      return !peer->idle.empty() || peer->open < options_.max_connections_per_peer;
    });
    if (!ready) {
      *error = "all " + std::to_string(peer->open) + " connections busy until the deadline";
      return -1;
    }
    if (!peer->idle.empty()) {
      int fd = peer->idle.back();
      peer->idle.pop_back();
      *reused = true;
      return fd;
    }
    ++peer->open;  // a slot for the connection made below
  }
  *reused = false;
  // Connecting and saying HELLO together take at most connect_timeout_ms.
  Clock::time_point until =
      std::min(deadline, Clock::now() + std::chrono::milliseconds(options_.connect_timeout_ms));
  int fd = -1;
  for (int attempt = 0; attempt < kOpeningAttempts && fd < 0; ++attempt) {
    fd = tcp_io::Connect(peer->address, std::max(MillisLeft(until), 1),
                         options_.stall_timeout_ms, error);
    if (fd < 0) break;
    bool broken = false;
    if (!Hello(fd, until, &broken, error)) {
      close(fd);
      fd = -1;
      // Closed unanswered: the owner took this opening to make room (a flood of them on
      // its port) or refused it at accept. Another connection is admitted the same way.
      if (!broken || Clock::now() >= until) break;
    }
  }
  if (fd < 0) Release(peer, -1, false);
  return fd;
}

bool TcpTransport::OpeningRequest(int fd, Op op, const std::string& payload,
                                  size_t reply_length, std::string* reply,
                                  Clock::time_point deadline, bool* broken, std::string* error) {
  const char* name = op == Op::kHello ? "HELLO" : "AUTH";
  transfer::RequestHeader h;
  h.op = static_cast<uint16_t>(op);
  h.request_id = next_request_id_.fetch_add(1, std::memory_order_relaxed);
  h.length = payload.size();
  char head[transfer::kRequestHeaderSize];
  transfer::EncodeRequest(h, head);
  char reply_head[transfer::kReplyHeaderSize];
  tcp_io::Bounds bounds{options_.stall_timeout_ms, deadline};
  transfer::ReplyHeader r;
  if (!tcp_io::Send(fd, head, sizeof(head), payload.data(), payload.size(), bounds) ||
      !tcp_io::Recv(fd, reply_head, sizeof(reply_head), bounds)) {
    *broken = errno == ECONNRESET || errno == EPIPE;
    *error = std::string(name) + " unanswered: " +
             (errno == ETIMEDOUT ? "no answer within the connect timeout" : std::strerror(errno));
    return false;
  }
  if (!transfer::DecodeReply(reply_head, &r) || r.request_id != h.request_id) {
    *error = std::string(name) + " answered out of step";
    return false;
  }
  if (r.code != ErrorCode::OK) {
    *error = std::string(name) + " refused by the owner: " + ErrorName(r.code);
    if (r.code == ErrorCode::UNAUTHENTICATED) {
      *error += options_.cluster_key != nullptr
                    ? " (it holds another cluster key, or none: compare the fingerprints "
                      "both log at start)"
                    : " (it requires a cluster key: give this daemon its --cluster_key_file)";
    }
    return false;
  }
  if (r.length != reply_length) {
    *error = std::string(name) + " answered with " + std::to_string(r.length) +
             " bytes, not " + std::to_string(reply_length) +
             (op == Op::kHello && reply_length > 0
                  ? ": the owner runs without a cluster key and cannot prove it"
                  : "");
    return false;
  }
  reply->assign(reply_length, '\0');
  if (reply_length > 0 && !tcp_io::Recv(fd, &(*reply)[0], reply_length, bounds)) {
    *error = std::string(name) + " answer cut short";
    return false;
  }
  return true;
}

bool TcpTransport::Hello(int fd, Clock::time_point deadline, bool* broken, std::string* error) {
  const ClusterKey* key = options_.cluster_key.get();
  transfer::Hello hello;
  hello.daemon_name = options_.address;
  if (key != nullptr) hello.client_nonce = ClusterKey::NewNonce();
  std::string server_nonce;
  if (!OpeningRequest(fd, Op::kHello, transfer::EncodeHello(hello),
                      key != nullptr ? transfer::kNonceBytes : 0, &server_nonce, deadline,
                      broken, error)) {
    return false;
  }
  if (key == nullptr) return true;
  const std::string& client_nonce = hello.client_nonce;
  std::string proof = key->Prove(ClusterKey::Role::kClient, transfer::kAuthContext, client_nonce,
                                 server_nonce);
  std::string answer;
  if (!OpeningRequest(fd, Op::kAuth, proof, transfer::kProofBytes, &answer, deadline, broken,
                      error)) {
    return false;
  }
  // An owner that cannot prove the key is not one of ours: nothing is sent to it, and
  // nothing it would send is read.
  if (key->Check(answer, ClusterKey::Role::kServer, transfer::kAuthContext, client_nonce,
                 server_nonce) < 0) {
    *error = "the owner's proof of the cluster key is wrong (an impostor, or another key)";
    return false;
  }
  return true;
}

void TcpTransport::Release(Peer* peer, int fd, bool keep) {
  std::lock_guard<std::mutex> lock(peer->mu);
  if (keep) {
    peer->idle.push_back(fd);
  } else {
    if (fd >= 0) close(fd);
    --peer->open;
  }
  peer->cv.notify_one();
}

ErrorCode TcpTransport::RunOn(int fd, const Exchange& x, Clock::time_point deadline,
                              bool* in_step, bool* stalled, std::string* error) {
  const tcp_io::Bounds bounds{options_.stall_timeout_ms, deadline};
  *in_step = false;
  *stalled = false;
  transfer::RequestHeader h;
  h.op = x.op;
  h.request_id = next_request_id_.fetch_add(1, std::memory_order_relaxed);
  h.segment_id = x.segment_id;
  h.offset = x.offset;
  h.length = x.op == static_cast<uint16_t>(Op::kRead) ? x.expect : x.payload_length;
  const bool reads = x.op == static_cast<uint16_t>(Op::kRead) ||
                     x.op == static_cast<uint16_t>(Op::kReadDisk);
  h.master_epoch = x.master_epoch;
  char head[transfer::kRequestHeaderSize];
  transfer::EncodeRequest(h, head);
  char reply_head[transfer::kReplyHeaderSize];
  transfer::ReplyHeader reply;
  if (!tcp_io::Send(fd, head, sizeof(head), x.payload, x.payload_length, bounds) ||
      !tcp_io::Recv(fd, reply_head, sizeof(reply_head), bounds)) {
    return Broken(stalled, error);
  }
  if (!transfer::DecodeReply(reply_head, &reply) || reply.request_id != h.request_id) {
    *error = "reply out of step (bad magic or request id)";
    return ErrorCode::TRANSFER_FAIL;
  }
  if (reply.code != ErrorCode::OK) {
    // The owner refused (unknown segment, range outside it). It closes the connection
    // after a refused WRITE or CONTROL, whose payload it did not read; after a READ_DISK
    // it read the payload of (a well-formed one, as ours are) it keeps it.
    *in_step = reads && reply.length == 0;
    *error = std::string("refused by the owner: ") + ErrorName(reply.code);
    return reply.code;
  }
  bool ok = true;
  if (reads) {
    if (reply.length != x.expect) {
      *error = "reply of " + std::to_string(reply.length) + " bytes, asked for " +
               std::to_string(x.expect);
      return ErrorCode::TRANSFER_FAIL;
    }
    ok = tcp_io::Recv(fd, x.into, x.expect, bounds);
  } else if (x.op == static_cast<uint16_t>(Op::kControl)) {
    if (reply.length > transfer::kMaxControlPayload) {
      *error = "control reply too long";
      return ErrorCode::TRANSFER_FAIL;
    }
    x.control_reply->assign(reply.length, '\0');
    ok = tcp_io::Recv(fd, &(*x.control_reply)[0], reply.length, bounds);
  } else if (reply.length != 0) {
    *error = "WRITE reply with a payload";
    return ErrorCode::TRANSFER_FAIL;
  }
  if (!ok) return Broken(stalled, error);
  *in_step = true;
  return ErrorCode::OK;
}

ErrorCode TcpTransport::Run(Peer* peer, const Exchange& x, Clock::time_point deadline,
                            std::string* error) {
  for (int attempt = 0;; ++attempt) {
    if (Clock::now() >= deadline) {
      *error = "deadline passed before the transfer started";
      return ErrorCode::TRANSFER_FAIL;
    }
    bool reused = false;
    int fd = Acquire(peer, deadline, &reused, error);
    if (fd < 0) return ErrorCode::TRANSFER_FAIL;
    bool in_step = false;
    bool stalled = false;
    ErrorCode code = RunOn(fd, x, deadline, &in_step, &stalled, error);
    Release(peer, fd, in_step);
    // A peer that stalled is frozen or gone, not restarted: another try would only stall
    // as long again.
    if (code != ErrorCode::TRANSFER_FAIL || !reused || stalled || attempt > 0) return code;
    // A pooled connection broke: the peer restarted or died, and its other idle
    // connections are as stale. Drop them and try once on a fresh connection.
    std::vector<int> stale;
    {
      std::lock_guard<std::mutex> lock(peer->mu);
      stale.swap(peer->idle);
      peer->open -= stale.size();
    }
    for (int s : stale) close(s);
  }
}

ErrorCode TcpTransport::RunPiece(const Piece& piece, Clock::time_point deadline,
                                 uint32_t* crc) {
  TransferOp* op = piece.op;
  char* bytes = op->local + piece.skip;
  // A WRITE's source is read here into the cache that sendmsg then copies from; a READ's
  // bytes are summed just after they landed.
  if (op->want_crc && op->kind == TransferKind::kWrite) *crc = Crc32c(bytes, piece.length);
  const rpc::TransportEndpoint* tcp = op->remote->Endpoint("tcp");
  std::string error;
  ErrorCode code = ErrorCode::TRANSFER_FAIL;
  if (tcp == nullptr) {
    error = "the segment publishes no tcp endpoint";
  } else {
    Exchange x;
    x.segment_id = op->remote->segment_id;
    x.offset = op->remote_offset + piece.skip;
    x.master_epoch = op->master_epoch;
    std::string disk_read;  // READ_DISK's payload
    if (op->disk != nullptr) {
      transfer::DiskRead r;
      r.value_offset = x.offset;
      r.length = piece.length;
      r.value_size = op->disk->value_size;
      r.checksum = op->disk->checksum;
      r.key = op->disk->key;
      disk_read = transfer::EncodeDiskRead(r);
      x.op = static_cast<uint16_t>(Op::kReadDisk);
      x.offset = 0;
      x.payload = disk_read.data();
      x.payload_length = disk_read.size();
      x.into = op->local + piece.skip;
      x.expect = piece.length;
    } else if (op->kind == TransferKind::kRead) {
      x.op = static_cast<uint16_t>(Op::kRead);
      x.into = op->local + piece.skip;
      x.expect = piece.length;
    } else {
      x.op = static_cast<uint16_t>(Op::kWrite);
      x.payload = op->local + piece.skip;
      x.payload_length = piece.length;
    }
    code = Run(PeerFor(tcp->address), x, deadline, &error);
  }
  if (code == ErrorCode::OK) {
    if (op->want_crc && op->kind == TransferKind::kRead) *crc = Crc32c(bytes, piece.length);
    return ErrorCode::OK;
  }
  const char* what = op->disk != nullptr                ? "READ_DISK"
                     : op->kind == TransferKind::kRead ? "READ"
                                                       : "WRITE";
  MC_LOG_WARN("transfer: %s of %s at %llu in segment %lld on %s failed: %s", what,
              FormatSize(piece.length).c_str(),
              static_cast<unsigned long long>(op->remote_offset + piece.skip),
              static_cast<long long>(op->remote->segment_id), op->remote->name.c_str(),
              error.c_str());
  // Whatever the owner said, to the caller this replica could not be moved.
  return ErrorCode::TRANSFER_FAIL;
}

void TcpTransport::Execute(std::vector<TransferOp*>* ops, Clock::time_point deadline) {
  std::vector<Piece> pieces;
  for (TransferOp* op : *ops) {
    op->result = ErrorCode::OK;
    op->has_crc = false;
    uint64_t n = 1;
    if (options_.streams > 1 && op->length >= 2 * options_.stripe_min_bytes) {
      n = std::min<uint64_t>(static_cast<uint64_t>(options_.streams),
                             op->length / options_.stripe_min_bytes);
    }
    // Pieces on 64 KiB boundaries, the last one taking the rest; of a disk replica at most
    // what one READ_DISK reads.
    uint64_t step = ((op->length / n) + 65535) & ~uint64_t{65535};
    if (op->disk != nullptr) step = std::min<uint64_t>(step, transfer::kMaxDiskRead);
    for (uint64_t skip = 0; skip < op->length; skip += step) {
      pieces.push_back(Piece{op, skip, std::min(step, op->length - skip)});
    }
  }
  if (pieces.empty()) return;
  std::vector<ErrorCode> results(pieces.size(), ErrorCode::OK);
  std::vector<uint32_t> crcs(pieces.size(), 0);
  Latch done(pieces.size() - 1);
  for (size_t i = 1; i < pieces.size(); ++i) {
    workers_.Submit([this, &pieces, &results, &crcs, i, deadline, &done] {
      results[i] = RunPiece(pieces[i], deadline, &crcs[i]);
      done.CountDown();
    });
  }
  results[0] = RunPiece(pieces[0], deadline, &crcs[0]);
  done.Wait();
  // An op's pieces are adjacent and in order: its CRC is theirs, combined.
  for (size_t i = 0; i < pieces.size(); ++i) {
    TransferOp* op = pieces[i].op;
    if (results[i] != ErrorCode::OK) op->result = results[i];
    if (!op->want_crc) continue;
    op->crc = pieces[i].skip == 0 ? crcs[i] : Crc32cCombine(op->crc, crcs[i], pieces[i].length);
  }
  for (TransferOp* op : *ops) op->has_crc = op->want_crc && op->result == ErrorCode::OK;
}

ErrorCode TcpTransport::CallControl(const std::string& address,
                                    transfer::ControlChannel channel, const std::string& request,
                                    std::string* reply, Clock::time_point deadline) {
  Exchange x;
  x.op = static_cast<uint16_t>(Op::kControl);
  x.segment_id = static_cast<int64_t>(channel);
  x.payload = request.data();
  x.payload_length = request.size();
  x.control_reply = reply;
  std::string error;
  ErrorCode code = Run(PeerFor(address), x, deadline, &error);
  if (code != ErrorCode::OK) {
    MC_LOG_WARN("transfer: control call to %s failed: %s", address.c_str(), error.c_str());
  }
  return code;
}

}  // namespace mooncake
