#include "daemon/transfer/transfer_server.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "common/auth/cluster_key.h"
#include "common/base/error_code.h"
#include "common/auth/host_address.h"
#include "common/base/logging.h"
#include "common/auth/peer_owner.h"

namespace mooncake {

using Clock = std::chrono::steady_clock;
using transfer::Op;
using transfer::ReplyHeader;
using transfer::RequestHeader;

static_assert(transfer::kNonceBytes == ClusterKey::kNonceBytes, "HELLO carries the key's nonce");
static_assert(transfer::kProofBytes == ClusterKey::kProofBytes, "AUTH carries the key's proof");

namespace {

const char* OpName(uint16_t op) {
  switch (op) {
    case static_cast<uint16_t>(Op::kWrite):
      return "WRITE";
    case static_cast<uint16_t>(Op::kRead):
      return "READ";
    case static_cast<uint16_t>(Op::kControl):
      return "CONTROL";
    case static_cast<uint16_t>(Op::kReadDisk):
      return "READ_DISK";
    case static_cast<uint16_t>(Op::kHello):
      return "HELLO";
    case static_cast<uint16_t>(Op::kAuth):
      return "AUTH";
    default:
      return "request";
  }
}

// Who a connection is, for the log (not on the path of a request served).
std::string Who(const TransferConnections::Connection& c, const std::string& peer) {
  return c.peer().empty() ? peer : c.peer() + " at " + peer;
}

int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left.count(), INT32_MAX)));
}

bool SendReply(int fd, uint64_t request_id, ErrorCode code, const char* data, uint64_t length,
               const tcp_io::Bounds& bounds) {
  ReplyHeader reply;
  reply.code = code;
  reply.request_id = request_id;
  reply.length = length;
  char head[transfer::kReplyHeaderSize];
  transfer::EncodeReply(reply, head);
  return tcp_io::Send(fd, head, sizeof(head), data, length, bounds);
}

}  // namespace

TransferServer::TransferServer(int listen_fd, SegmentLookup lookup, Options options)
    : listen_fd_(listen_fd),
      lookup_(std::move(lookup)),
      options_(options),
      disk_slots_(options.disk_read_concurrency),
      connections_(options.limits) {}

TransferServer::~TransferServer() {
  Stop();
  close(listen_fd_);
}

void TransferServer::SetControlHandler(transfer::ControlChannel channel, ControlHandler handler) {
  control_[static_cast<int64_t>(channel)] = std::move(handler);
}

void TransferServer::Start() {
  started_ = true;
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

void TransferServer::Stop() {
  if (stopping_.exchange(true) || !started_) return;
  shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  accept_thread_.join();            // admits no more
  connections_.Shutdown();          // and waits for every connection's thread
}

void TransferServer::LogBeforeOpen(const std::string& what, bool refusal) {
  uint64_t refused = refusal ? refused_before_open_.fetch_add(1) + 1 : refused_before_open_.load();
  uint64_t passed_over = 0;
  if (!before_open_log_.Due(&passed_over)) return;
  TransferConnections::Stats s = connections_.stats();
  MC_LOG_WARN("transfer port: %s -- %llu such events not logged since the line before (at "
              "most one line a second); so far %llu connections refused before they were "
              "open, %llu of them for want of the cluster key or of this daemon's user; %llu "
              "closed to make room, %llu closed at the handshake deadline; %zu open, %zu of "
              "them opening",
              what.c_str(), static_cast<unsigned long long>(passed_over),
              static_cast<unsigned long long>(refused),
              static_cast<unsigned long long>(unauthenticated_.load()),
              static_cast<unsigned long long>(s.taken),
              static_cast<unsigned long long>(s.overdue + overdue_.load()), s.open, s.opening);
}

int TransferServer::CloseOverdueOpenings() {
  const int64_t handshake_ns = static_cast<int64_t>(options_.handshake_timeout_ms) * 1000000;
  const int64_t now = TransferConnections::NowNanos();
  size_t closed = 0;
  int64_t oldest = connections_.CloseOpeningsBefore(now - handshake_ns, &closed);
  if (closed > 0) {
    LogBeforeOpen("closed " + std::to_string(closed) + " connection(s) not open within the "
                  "handshake deadline (" + std::to_string(options_.handshake_timeout_ms) +
                  " ms)",
                  false);
  }
  if (oldest == INT64_MAX) return -1;
  // Just past its deadline, so that the next sweep finds it due.
  return static_cast<int>(std::max<int64_t>(0, oldest + handshake_ns - now) / 1000000 + 1);
}

void TransferServer::AcceptLoop() {
  for (;;) {
    // Wait for a connection, or for the oldest opening one's deadline: the thread of a
    // connection may be anywhere (in a read, a send, an HMAC), and the deadline must hold
    // whatever it does.
    pollfd listening{listen_fd_, POLLIN, 0};
    int ready = poll(&listening, 1, CloseOverdueOpenings());
    if (stopping_) return;
    if (ready <= 0) continue;  // a deadline due, or EINTR
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN) continue;
      if (stopping_) return;
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: free one by closing a waiting connection, so that the
        // pending peer is served; back off instead of spinning when there is none.
        bool freed = connections_.Reclaim();
        LogBeforeOpen(freed ? "out of descriptors: closed a connection for a pending peer"
                            : "out of descriptors, and every connection busy: cannot accept",
                      false);
        std::this_thread::sleep_for(std::chrono::milliseconds(freed ? 1 : 100));
        continue;
      }
      LogBeforeOpen(std::string("accept: ") + std::strerror(errno), false);
      continue;
    }
    const std::string ip = FormatIp(reinterpret_cast<const sockaddr*>(&addr));
    const std::string peer = FormatAddress(reinterpret_cast<const sockaddr*>(&addr));
    std::string why;
    if (options_.cluster_key == nullptr && !PeerIsThisUserOrRoot(fd, &why)) {
      close(fd);  // not a byte read or sent
      unauthenticated_.fetch_add(1);
      LogBeforeOpen("refused " + peer + ", closed at accept: " + why +
                        " (without --cluster_key_file only peers of this daemon's user or "
                        "root on this host are admitted)",
                    true);
      continue;
    }
    bool took = false;
    std::shared_ptr<Connection> c = connections_.Admit(fd, ip, &took);
    if (c == nullptr) {
      close(fd);
      if (stopping_) return;
      LogBeforeOpen("refused " + peer + ", closed at accept: every connection in its way busy",
                    true);
      continue;
    }
    if (took) LogBeforeOpen("admitted " + peer + " in the place of another connection", false);
    try {
      std::thread([this, c, peer] { Serve(c, peer); }).detach();
    } catch (const std::system_error& e) {
      connections_.Remove(c);
      LogBeforeOpen("refused " + peer + ": no thread for it: " + e.what(), true);
    }
  }
}

void TransferServer::Serve(std::shared_ptr<Connection> c, std::string peer) {
  const int fd = c->fd();
  tcp_io::Configure(fd, options_.stall_timeout_ms);
  Opening opening;
  opening.deadline = Clock::now() + std::chrono::milliseconds(options_.handshake_timeout_ms);
  for (;;) {
    // Between requests the connection may idle (it is pooled); before it is open, only
    // as long as the handshake may take.
    bool opening_up = opening.stage != Opening::kServing;
    pollfd p{fd, POLLIN, 0};
    int ready = poll(&p, 1, opening_up ? MillisLeft(opening.deadline) : options_.idle_timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0 && opening_up) {
      overdue_.fetch_add(1);
      LogBeforeOpen("closed " + peer + ": not open within the handshake deadline", false);
    }
    if (ready <= 0 || !ServeOne(c.get(), peer, &opening)) break;
  }
  if (opening.stage == Opening::kServing) {
    MC_LOG_DEBUG("transfer port: %s disconnected", Who(*c, peer).c_str());
  }
  connections_.Remove(c);  // the last thing this thread does with the server
}

bool TransferServer::Refuse(Connection* c, const std::string& peer, const RequestHeader& h,
                            ErrorCode code, const std::string& why, bool payload_read) {
  char what[320];
  if (h.op == 0) {  // a header that did not decode: its fields mean nothing
    std::snprintf(what, sizeof(what), "refused a request from %s: ", peer.c_str());
  } else {
    std::snprintf(what, sizeof(what),
                  "refused %s from %s: segment %lld offset %llu length %llu: ", OpName(h.op),
                  peer.c_str(), static_cast<long long>(h.segment_id),
                  static_cast<unsigned long long>(h.offset),
                  static_cast<unsigned long long>(h.length));
  }
  if (!c->settled()) {
    LogBeforeOpen(what + why, true);
  } else {
    uint64_t passed_over = 0;
    if (request_log_.Due(&passed_over)) {
      MC_LOG_WARN("transfer port: %s%s -- %llu such events not logged since the line before "
                  "(at most one line a second)",
                  what, why.c_str(), static_cast<unsigned long long>(passed_over));
    }
  }
  bool sent = SendReply(c->fd(), h.request_id, code, nullptr, 0,
                        tcp_io::Bounds{options_.stall_timeout_ms});
  // Only a READ carries no payload, so only after one (or after a payload read in full) is
  // the stream still in step.
  return sent && (h.op == static_cast<uint16_t>(Op::kRead) || payload_read) &&
         h.magic == transfer::kRequestMagic && h.version == transfer::kVersion;
}

bool TransferServer::RefuseUnauthenticated(int fd, const std::string& peer,
                                           const RequestHeader& h, const char* why) {
  unauthenticated_.fetch_add(1);
  LogBeforeOpen("refused " + peer + ": " + OpName(h.op) +
                    " answered -1400 UNAUTHENTICATED, connection closed: " + why,
                true);
  SendReply(fd, h.request_id, ErrorCode::UNAUTHENTICATED, nullptr, 0,
            tcp_io::Bounds{options_.stall_timeout_ms, Clock::now() + std::chrono::seconds(1)});
  return false;
}

bool TransferServer::ServeOne(Connection* c, const std::string& peer, Opening* opening) {
  const int fd = c->fd();
  tcp_io::Bounds bounds{options_.stall_timeout_ms};
  const bool first = opening->stage == Opening::kNew;
  if (opening->stage != Opening::kServing) bounds.deadline = opening->deadline;
  char head[transfer::kRequestHeaderSize];
  if (!tcp_io::Recv(fd, head, sizeof(head), bounds)) {
    if (opening->stage != Opening::kServing && errno == ETIMEDOUT) {
      overdue_.fetch_add(1);
      LogBeforeOpen("closed " + peer + ": not open within the handshake deadline (a request "
                    "header cut short)",
                    false);
    }
    return false;  // gone, taken, or a truncated header
  }
  RequestHeader h;
  if (!transfer::DecodeRequest(head, &h)) {
    h.op = 0;  // whatever it claimed, nothing after it can be trusted
    return Refuse(c, peer, h, ErrorCode::INVALID_PARAMS,
                  "malformed header (magic, version or op)");
  }
  // From here on a request is in progress: once the connection is open, it is not taken
  // to make room (before, it may be, whatever it is doing).
  if (!TransferConnections::BeginRequest(c)) return false;  // it was, just before
  struct EndRequest {
    Connection* c;
    ~EndRequest() { TransferConnections::EndRequest(c); }
  } end_request{c};

  if (h.op == static_cast<uint16_t>(Op::kHello)) {
    if (!first) {
      Refuse(c, Who(*c, peer), h, ErrorCode::INVALID_PARAMS, "HELLO after the first request");
      return false;
    }
    return ServeHello(c, peer, h, bounds, opening);  // still within the handshake deadline
  }
  if (h.op == static_cast<uint16_t>(Op::kAuth)) return ServeAuth(c, peer, h, bounds, opening);
  if (opening->stage != Opening::kServing) {
    if (options_.cluster_key != nullptr) {
      // Not a byte of any segment, and no payload read: the connection closes.
      return RefuseUnauthenticated(fd, peer, h,
                                   opening->stage == Opening::kNew
                                       ? "sent before the cluster-key handshake (HELLO, AUTH)"
                                       : "sent before AUTH");
    }
    // Without a key, a peer admitted at accept may skip HELLO: it counts against its
    // address.
    bool took = false;
    if (!connections_.Settle(c, "", &took)) {
      if (!c->taken()) {
        Refuse(c, Who(*c, peer), h, ErrorCode::TOO_MANY_CONNECTIONS,
               "every connection of this address that did not say HELLO is busy");
      }
      return false;
    }
    if (took) LogBeforeOpen("closed a waiting unnamed connection to serve " + peer, false);
    opening->stage = Opening::kServing;
  }
  bounds.deadline = Clock::time_point::max();  // only the opening had to be quick
  if (h.op == static_cast<uint16_t>(Op::kControl)) return ServeControl(c, peer, h);
  if (h.op == static_cast<uint16_t>(Op::kReadDisk)) return ServeReadDisk(c, peer, h);

  std::shared_ptr<SegmentMemory> segment = lookup_(h.segment_id);
  if (segment == nullptr) {
    return Refuse(c, Who(*c, peer), h, ErrorCode::SEGMENT_NOT_FOUND, "no such segment here");
  }
  if (!segment->Contains(h.offset, h.length) || h.length == 0) {
    return Refuse(c, Who(*c, peer), h, ErrorCode::INVALID_PARAMS, "range outside the segment");
  }
  char* bytes = segment->base() + h.offset;
  if (h.op == static_cast<uint16_t>(Op::kRead)) {
    if (gate_ != nullptr && !gate_->Accepts(h.master_epoch)) {
      return Refuse(c, Who(*c, peer), h, ErrorCode::LEASE_EXPIRED,
                    "read lease from another master (restarted?)");
    }
    return SendReply(fd, h.request_id, ErrorCode::OK, bytes, h.length, bounds);
  }
  EpochGate::Write admitted(gate_, h.master_epoch);
  if (!admitted.admitted()) {
    return Refuse(c, Who(*c, peer), h, ErrorCode::LEASE_EXPIRED,
                  "reservation from another master (restarted?)");
  }
  // WRITE: straight into the segment. A peer that stalls or vanishes half-way leaves a
  // partly written range, which is harmless: the put it belongs to is revoked.
  if (!tcp_io::Recv(fd, bytes, h.length, bounds)) {
    int err = errno;
    uint64_t passed_over = 0;
    if (request_log_.Due(&passed_over)) {
      MC_LOG_WARN("transfer port: WRITE from %s to segment %lld broke off: %s -- %llu such "
                  "events not logged since the line before (at most one line a second)",
                  Who(*c, peer).c_str(), static_cast<long long>(h.segment_id),
                  err == ETIMEDOUT ? "no byte within the transfer timeout" : std::strerror(err),
                  static_cast<unsigned long long>(passed_over));
    }
    return false;
  }
  return SendReply(fd, h.request_id, ErrorCode::OK, nullptr, 0, bounds);
}

bool TransferServer::ServeHello(Connection* c, const std::string& peer, const RequestHeader& h,
                                const tcp_io::Bounds& bounds, Opening* opening) {
  const int fd = c->fd();
  if (h.segment_id != 0 || h.offset != 0 || h.master_epoch != 0) {
    return Refuse(c, peer, h, ErrorCode::INVALID_PARAMS, "HELLO with fields it does not use set");
  }
  if (h.length == 0 || h.length > transfer::kMaxHelloPayload) {
    return Refuse(c, peer, h, ErrorCode::INVALID_PARAMS, "HELLO payload empty or too long");
  }
  std::string payload(h.length, '\0');
  if (!tcp_io::Recv(fd, &payload[0], payload.size(), bounds)) return false;
  transfer::Hello hello;
  const char* why = "";
  if (!transfer::DecodeHello(payload.data(), payload.size(), &hello, &why)) {
    Refuse(c, peer, h, ErrorCode::INVALID_PARAMS, why);
    return false;
  }
  const std::string who = hello.daemon_name + " at " + peer;
  if (options_.cluster_key != nullptr) {
    if (hello.client_nonce.empty()) {
      return RefuseUnauthenticated(fd, who, h,
                                   "HELLO without a client nonce: the peer holds no cluster key "
                                   "(give every daemon the same --cluster_key_file)");
    }
    // Not counted as that daemon's yet: AUTH has to prove it is one of ours.
    opening->stage = Opening::kHelloed;
    opening->daemon_name = hello.daemon_name;
    opening->client_nonce = hello.client_nonce;
    opening->server_nonce = ClusterKey::NewNonce();
    return SendReply(fd, h.request_id, ErrorCode::OK, opening->server_nonce.data(),
                     opening->server_nonce.size(), bounds);
  }
  if (!hello.client_nonce.empty()) {
    return RefuseUnauthenticated(fd, who, h,
                                 "the peer offers a cluster-key handshake, but this daemon has "
                                 "no --cluster_key_file");
  }
  bool took = false;
  if (!connections_.Settle(c, hello.daemon_name, &took)) {
    if (!c->taken()) {
      Refuse(c, who, h, ErrorCode::TOO_MANY_CONNECTIONS,
             "this daemon's connections are all busy (--transfer_connections)");
    }
    return false;
  }
  if (took) LogBeforeOpen("closed a waiting connection of the same daemon for " + who, false);
  opening->stage = Opening::kServing;
  MC_LOG_DEBUG("transfer port: %s is %s", peer.c_str(), hello.daemon_name.c_str());
  return SendReply(fd, h.request_id, ErrorCode::OK, nullptr, 0, bounds);
}

bool TransferServer::ServeAuth(Connection* c, const std::string& peer, const RequestHeader& h,
                               const tcp_io::Bounds& bounds, Opening* opening) {
  const int fd = c->fd();
  if (options_.cluster_key == nullptr || opening->stage != Opening::kHelloed) {
    return RefuseUnauthenticated(fd, Who(*c, peer), h,
                                 options_.cluster_key == nullptr
                                     ? "this daemon has no --cluster_key_file"
                                     : "AUTH where none is due (not right after a HELLO)");
  }
  const std::string who = opening->daemon_name + " at " + peer;
  if (h.segment_id != 0 || h.offset != 0 || h.master_epoch != 0) {
    Refuse(c, who, h, ErrorCode::INVALID_PARAMS, "AUTH with fields it does not use set");
    return false;
  }
  if (h.length != transfer::kProofBytes) {
    return RefuseUnauthenticated(fd, who, h, "a proof that is not 32 bytes");
  }
  std::string proof(transfer::kProofBytes, '\0');
  if (!tcp_io::Recv(fd, &proof[0], proof.size(), bounds)) return false;
  int key = options_.cluster_key->Check(proof, ClusterKey::Role::kClient, transfer::kAuthContext,
                                        opening->client_nonce, opening->server_nonce);
  if (key < 0) {
    return RefuseUnauthenticated(fd, who, h,
                                 "wrong proof of the cluster key (a peer with another key, or "
                                 "none)");
  }
  bool took = false;
  if (!connections_.Settle(c, opening->daemon_name, &took)) {
    if (!c->taken()) {
      Refuse(c, who, h, ErrorCode::TOO_MANY_CONNECTIONS,
             "this daemon's connections are all busy (--transfer_connections)");
    }
    return false;
  }
  if (took) LogBeforeOpen("closed a waiting connection of the same daemon for " + who, false);
  opening->stage = Opening::kServing;
  std::string answer =
      options_.cluster_key->ProveWith(static_cast<size_t>(key), ClusterKey::Role::kServer,
                                      transfer::kAuthContext, opening->client_nonce,
                                      opening->server_nonce);
  MC_LOG_DEBUG("transfer port: %s is %s, authenticated", peer.c_str(),
               opening->daemon_name.c_str());
  return SendReply(fd, h.request_id, ErrorCode::OK, answer.data(), answer.size(), bounds);
}

bool TransferServer::ServeControl(Connection* c, const std::string& peer, const RequestHeader& h) {
  const int fd = c->fd();
  if (h.offset != 0 || h.master_epoch != 0) {
    return Refuse(c, Who(*c, peer), h, ErrorCode::INVALID_PARAMS,
                  "CONTROL with fields it does not use set");
  }
  if (h.length > transfer::kMaxControlPayload) {
    return Refuse(c, Who(*c, peer), h, ErrorCode::INVALID_PARAMS, "control payload too long");
  }
  tcp_io::Bounds bounds{options_.stall_timeout_ms};
  std::string request(h.length, '\0');
  if (!tcp_io::Recv(fd, &request[0], request.size(), bounds)) return false;
  auto handler = control_.find(h.segment_id);
  if (handler == control_.end()) {
    Refuse(c, Who(*c, peer), h, ErrorCode::INVALID_PARAMS, "no handler for this control channel");
    return true;  // the payload was read: still in step
  }
  std::string reply;
  ErrorCode code = handler->second(request, &reply);
  return SendReply(fd, h.request_id, code, reply.data(), code == ErrorCode::OK ? reply.size() : 0,
                   bounds);
}

bool TransferServer::ServeReadDisk(Connection* c, const std::string& peer, const RequestHeader& h) {
  const int fd = c->fd();
  const tcp_io::Bounds bounds{options_.stall_timeout_ms};
  disk_reads_refused_.fetch_add(1);  // until it is served
  // The header first: its payload length decides how much is read.
  if (h.offset != 0) {
    return Refuse(c, Who(*c, peer), h, ErrorCode::INVALID_PARAMS,
                  "READ_DISK with an offset (it goes in the payload)");
  }
  if (h.length <= transfer::kDiskReadFixedBytes ||
      h.length > transfer::kDiskReadFixedBytes + transfer::kMaxDiskKey) {
    return Refuse(c, Who(*c, peer), h, ErrorCode::INVALID_PARAMS,
                  "READ_DISK payload length out of bounds (32 bytes + a key of 1.." +
                      std::to_string(transfer::kMaxDiskKey) + " bytes)");
  }
  char payload[transfer::kDiskReadFixedBytes + transfer::kMaxDiskKey];
  if (!tcp_io::Recv(fd, payload, h.length, bounds)) return false;
  // From here on the stream is in step whatever is refused.
  auto refuse = [&](ErrorCode code, const std::string& why) {
    return Refuse(c, Who(*c, peer), h, code, why, /*payload_read=*/true);
  };
  transfer::DiskRead read;
  const char* why = "";
  if (!transfer::DecodeDiskRead(payload, h.length, &read, &why)) {
    return refuse(ErrorCode::INVALID_PARAMS, why);
  }
  SsdStore* store = ssd_.load();
  if (store == nullptr || h.segment_id != disk_segment_id_.load()) {
    if (lookup_(h.segment_id) != nullptr) {
      return refuse(ErrorCode::INVALID_PARAMS, "READ_DISK of a memory segment");
    }
    return refuse(ErrorCode::SEGMENT_NOT_FOUND, "no such disk segment here");
  }
  if (gate_ != nullptr && !gate_->Accepts(h.master_epoch)) {
    return refuse(ErrorCode::LEASE_EXPIRED, "read lease from another master (restarted?)");
  }
  DiskReadSlots::Slot slot = disk_slots_.Acquire(
      Clock::now() + std::chrono::milliseconds(options_.stall_timeout_ms / 2));
  if (slot.buffer() == nullptr) {
    return refuse(ErrorCode::RESOURCE_LIMIT_EXCEEDED,
                  "every disk read busy (" + std::to_string(disk_slots_.slots()) + " at once)");
  }
  DiskAddress object{read.key, read.value_size, read.checksum};
  ErrorCode code = ReadDiskReplica(store, object, read.value_offset, slot.buffer(), read.length);
  if (code == ErrorCode::OBJECT_NOT_FOUND && options_.disk_miss) {
    options_.disk_miss(object, h.segment_id);
  }
  if (code != ErrorCode::OK) {
    return refuse(code, code == ErrorCode::OBJECT_NOT_FOUND
                            ? "no such value on the SSD"
                            : code == ErrorCode::CHECKSUM_MISMATCH
                                  ? "the SSD copy is corrupt (dropped)"
                                  : std::string("the SSD read failed: ") + ErrorName(code));
  }
  disk_reads_refused_.fetch_sub(1);
  disk_reads_served_.fetch_add(1);
  return SendReply(fd, h.request_id, ErrorCode::OK, slot.buffer(), read.length, bounds);
}


}  // namespace mooncake
