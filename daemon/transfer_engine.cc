#include "daemon/transfer/transfer_engine.h"

#include "common/base/metrics.h"
#include "daemon/transfer/daemon_metrics.h"

namespace mooncake {

bool ChooseTransport(const std::string& protocol, const std::vector<std::string>& devices_found,
                     TransportChoice* choice, std::string* message) {
  std::string devices;
  for (const std::string& d : devices_found) devices += (devices.empty() ? "" : ", ") + d;
  if (protocol == "tcp") {
    *choice = TransportChoice::kTcp;
    *message = "transport: tcp (--protocol tcp)";
    return true;
  }
  if (!devices_found.empty() && (protocol == "auto" || protocol == "rdma")) {
    *choice = TransportChoice::kRdma;
    *message = "transport: rdma on " + devices + ", tcp for peers without rdma";
    return true;
  }
  if (protocol == "auto") {
    *choice = TransportChoice::kTcp;
    *message = "transport: tcp (--protocol auto found no RDMA device)";
    return true;
  }
  *message = protocol == "rdma"
                 ? "--protocol rdma, but this host has no RDMA device (ibv_get_device_list "
                   "found none); use --protocol tcp or auto"
                 : "--protocol must be auto, tcp or rdma, not '" + protocol + "'";
  return false;
}

TransferEngine::TransferEngine(MasterClient* master, std::unique_ptr<TcpTransport> tcp,
                               std::unique_ptr<Transport> rdma)
    : directory_(master), tcp_(std::move(tcp)), rdma_(std::move(rdma)) {}

ErrorCode TransferEngine::RegisterMemory(char* base, uint64_t size, MemoryAccess access) {
  return rdma_ != nullptr ? rdma_->RegisterMemory(base, size, access) : ErrorCode::OK;
}

void TransferEngine::UnregisterMemory(char* base) {
  if (rdma_ != nullptr) rdma_->UnregisterMemory(base);
}

std::vector<rpc::TransportEndpoint> TransferEngine::DescribeSegment(char* base, uint64_t size) {
  std::vector<rpc::TransportEndpoint> out(1);
  tcp_->DescribeSegment(base, size, &out[0]);
  rpc::TransportEndpoint rdma;
  if (rdma_ != nullptr && rdma_->DescribeSegment(base, size, &rdma)) out.push_back(std::move(rdma));
  return out;
}

void TransferEngine::CountTransfers(const std::vector<TransferOp*>& ops, bool rdma,
                                    int64_t start_ns) {
  const double seconds = static_cast<double>(MonotonicNanos() - start_ns) / 1e9;
  for (const TransferOp* op : ops) {
    DaemonMetrics::Get().CountTransfer(op->kind, rdma, op->result == ErrorCode::OK, op->length,
                                       seconds);
  }
}

void TransferEngine::Execute(std::vector<TransferOp*>* ops,
                             std::chrono::steady_clock::time_point deadline) {
  std::vector<TransferOp*> over_tcp, over_rdma;
  for (TransferOp* op : *ops) {
    // A disk replica is read by its owner's CPU from its SSD: READ_DISK, over TCP.
    bool rdma = rdma_ != nullptr && op->disk == nullptr && op->remote->Endpoint("rdma") != nullptr;
    (rdma ? over_rdma : over_tcp).push_back(op);
  }
  if (!over_rdma.empty()) {
    const int64_t start_ns = MonotonicNanos();
    rdma_->Execute(&over_rdma, deadline);
    CountTransfers(over_rdma, true, start_ns);
    for (TransferOp* op : over_rdma) {
      if (op->result != ErrorCode::OK) over_tcp.push_back(op);  // once more, the slow way
    }
  }
  if (!over_tcp.empty()) {
    const int64_t start_ns = MonotonicNanos();
    tcp_->Execute(&over_tcp, deadline);
    CountTransfers(over_tcp, false, start_ns);
  }
  auto until = std::chrono::steady_clock::now() + kSuspectFor;
  for (TransferOp* op : over_tcp) {
    if (op->result == ErrorCode::OK) continue;
    std::lock_guard<std::mutex> lock(suspects_mu_);
    suspects_[op->remote->name] = until;
  }
}

std::vector<std::string> TransferEngine::Suspects() const {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(suspects_mu_);
  auto now = std::chrono::steady_clock::now();
  for (auto it = suspects_.begin(); it != suspects_.end();) {
    if (now < it->second) {
      out.push_back(it->first);
      ++it;
    } else {
      it = suspects_.erase(it);  // served its time
    }
  }
  return out;
}

bool TransferEngine::Suspect(const std::string& daemon) const {
  std::lock_guard<std::mutex> lock(suspects_mu_);
  if (suspects_.empty()) return false;  // the usual case: no lookup
  auto it = suspects_.find(daemon);
  if (it == suspects_.end()) return false;
  if (std::chrono::steady_clock::now() < it->second) return true;
  suspects_.erase(it);  // served its time
  return false;
}

}  // namespace mooncake
