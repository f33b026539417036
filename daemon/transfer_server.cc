#include "daemon/transfer_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "common/error_code.h"
#include "common/logging.h"
#include "daemon/tcp_io.h"

namespace mooncake {

using transfer::Op;
using transfer::ReplyHeader;
using transfer::RequestHeader;

namespace {

std::string PeerName(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    port = ntohs(in6->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

bool SendReply(int fd, uint64_t request_id, ErrorCode code, const char* data, uint64_t length) {
  ReplyHeader reply;
  reply.code = code;
  reply.request_id = request_id;
  reply.length = length;
  char head[transfer::kReplyHeaderSize];
  transfer::EncodeReply(reply, head);
  return tcp_io::Send(fd, head, sizeof(head), data, length);
}

}  // namespace

TransferServer::TransferServer(int listen_fd, SegmentLookup lookup, Options options)
    : listen_fd_(listen_fd), lookup_(std::move(lookup)), options_(options) {}

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
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_ || !started_) {
    stopping_ = true;
    return;
  }
  stopping_ = true;
  shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  for (int fd : connections_) shutdown(fd, SHUT_RDWR);
  cv_.wait(lock, [this] { return connections_.empty(); });
  lock.unlock();
  accept_thread_.join();
}

void TransferServer::AcceptLoop() {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      MC_LOG_WARN("transfer port: accept: %s", std::strerror(errno));
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: back off instead of spinning on the pending connection.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      continue;
    }
    std::string peer = PeerName(addr);
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || connections_.size() >= options_.max_connections) {
      if (!stopping_) {
        MC_LOG_WARN("transfer port: refusing %s: %zu connections open already", peer.c_str(),
                    connections_.size());
      }
      close(fd);
      continue;
    }
    connections_.insert(fd);
    std::thread([this, fd, peer] { Serve(fd, peer); }).detach();
  }
}

void TransferServer::Serve(int fd, std::string peer) {
  tcp_io::Configure(fd, options_.stall_timeout_ms);
  MC_LOG_DEBUG("transfer port: %s connected", peer.c_str());
  for (;;) {
    // Between requests the connection may idle (it is pooled); within one, it may not.
    pollfd p{fd, POLLIN, 0};
    int ready = poll(&p, 1, options_.idle_timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0 || !ServeOne(fd, peer)) break;
  }
  MC_LOG_DEBUG("transfer port: %s disconnected", peer.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  connections_.erase(fd);
  close(fd);
  cv_.notify_all();
}

bool TransferServer::Refuse(int fd, const std::string& peer, const RequestHeader& h,
                            ErrorCode code, const char* why) {
  MC_LOG_WARN("transfer port: refused %s from %s: segment %lld offset %llu length %llu: %s",
              h.op == static_cast<uint16_t>(Op::kWrite)   ? "WRITE"
              : h.op == static_cast<uint16_t>(Op::kRead)  ? "READ"
              : h.op == static_cast<uint16_t>(Op::kControl) ? "CONTROL"
                                                          : "request",
              peer.c_str(), static_cast<long long>(h.segment_id),
              static_cast<unsigned long long>(h.offset), static_cast<unsigned long long>(h.length),
              why);
  bool sent = SendReply(fd, h.request_id, code, nullptr, 0);
  // Only a READ carries no payload, so only after one is the stream still in step.
  return sent && h.op == static_cast<uint16_t>(Op::kRead) && h.magic == transfer::kRequestMagic &&
         h.version == transfer::kVersion;
}

bool TransferServer::ServeOne(int fd, const std::string& peer) {
  char head[transfer::kRequestHeaderSize];
  if (!tcp_io::Recv(fd, head, sizeof(head))) return false;  // gone, or a truncated header
  RequestHeader h;
  if (!transfer::DecodeRequest(head, &h)) {
    h.op = 0;  // whatever it claimed, nothing after it can be trusted
    return Refuse(fd, peer, h, ErrorCode::INVALID_PARAMS,
                  "malformed header (magic, version or op)");
  }
  if (h.op == static_cast<uint16_t>(Op::kControl)) {
    auto handler = control_.find(h.segment_id);
    if (h.length > transfer::kMaxControlPayload) {
      return Refuse(fd, peer, h, ErrorCode::INVALID_PARAMS, "control payload too long");
    }
    std::string request(h.length, '\0');
    if (!tcp_io::Recv(fd, &request[0], request.size())) return false;
    if (handler == control_.end()) {
      Refuse(fd, peer, h, ErrorCode::INVALID_PARAMS, "no handler for this control channel");
      return true;  // the payload was read: still in step
    }
    std::string reply;
    ErrorCode code = handler->second(request, &reply);
    return SendReply(fd, h.request_id, code, reply.data(),
                     code == ErrorCode::OK ? reply.size() : 0);
  }

  std::shared_ptr<SegmentMemory> segment = lookup_(h.segment_id);
  if (segment == nullptr) {
    return Refuse(fd, peer, h, ErrorCode::SEGMENT_NOT_FOUND, "no such segment here");
  }
  if (!segment->Contains(h.offset, h.length) || h.length == 0) {
    return Refuse(fd, peer, h, ErrorCode::INVALID_PARAMS, "range outside the segment");
  }
  char* bytes = segment->base() + h.offset;
  if (h.op == static_cast<uint16_t>(Op::kRead)) {
    if (gate_ != nullptr && !gate_->Accepts(h.master_epoch)) {
      return Refuse(fd, peer, h, ErrorCode::LEASE_EXPIRED,
                    "read lease from another master (restarted?)");
    }
    return SendReply(fd, h.request_id, ErrorCode::OK, bytes, h.length);
  }
  EpochGate::Write admitted(gate_, h.master_epoch);
  if (!admitted.admitted()) {
    return Refuse(fd, peer, h, ErrorCode::LEASE_EXPIRED,
                  "reservation from another master (restarted?)");
  }
  // WRITE: straight into the segment. A peer that stalls or vanishes half-way leaves a
  // partly written range, which is harmless: the put it belongs to is revoked.
  if (!tcp_io::Recv(fd, bytes, h.length)) {
    MC_LOG_WARN("transfer port: WRITE from %s to segment %lld broke off: %s", peer.c_str(),
                static_cast<long long>(h.segment_id), std::strerror(errno));
    return false;
  }
  return SendReply(fd, h.request_id, ErrorCode::OK, nullptr, 0);
}

}  // namespace mooncake
