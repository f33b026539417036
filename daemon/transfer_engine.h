// The transfer engine: the daemon's one door to other daemons' memory. It knows every
// segment's endpoints (daemon/transfer/segment_directory.h) and owns the transports: TCP always,
// RDMA when --protocol chose it. Each transfer goes over RDMA when this daemon and the
// owner both publish an RDMA endpoint, else over TCP; an RDMA transfer that fails is
// tried once more over TCP before it counts as failed. A read of a disk replica (another
// daemon's SSD tier) always goes over TCP (READ_DISK): its owner reads the SSD itself.
//
// A peer a transfer just failed against is suspect for kSuspectFor: readers try other
// replicas first, so a lost host costs one failed attempt, not one per object (on a real
// network a dead host means a connect timeout, not a quick refusal), and puts ask the
// master to place replicas elsewhere.
//
// Every transfer is counted (daemon/transfer/daemon_metrics.h): by kind, transport and result,
// with its bytes and the time of the batch it ran in; an RDMA transfer tried again over
// TCP counts once for each.
#ifndef MOONCAKE_DAEMON_TRANSFER_ENGINE_H_
#define MOONCAKE_DAEMON_TRANSFER_ENGINE_H_

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/transfer/segment_directory.h"
#include "daemon/transfer/tcp_transport.h"
#include "daemon/transfer/transport.h"

namespace mooncake {

enum class TransportChoice { kTcp, kRdma };

// Applies --protocol (auto, tcp or rdma) to the RDMA devices found on this host: false with
// *message when the choice cannot be honoured (rdma without a device); otherwise *message
// says what was chosen and why, for the start-up log.
bool ChooseTransport(const std::string& protocol, const std::vector<std::string>& devices_found,
                     TransportChoice* choice, std::string* message);

class TransferEngine {
 public:
  static constexpr std::chrono::seconds kSuspectFor{5};

  // rdma: null unless RDMA was chosen and opened.
  TransferEngine(MasterClient* master, std::unique_ptr<TcpTransport> tcp,
                 std::unique_ptr<Transport> rdma);

  TcpTransport* tcp() const { return tcp_.get(); }
  Transport* rdma() const { return rdma_.get(); }
  // "rdma" when RDMA is in use, else "tcp".
  const char* protocol() const { return rdma_ != nullptr ? "rdma" : "tcp"; }

  // Another daemon's segment, or null when the master does not know it.
  std::shared_ptr<const RemoteSegment> FindSegment(int64_t segment_id) {
    return directory_.Find(segment_id);
  }

  // Memory of this daemon that transfers touch: its segments (kPeers) and the
  // applications' pools (kLocalOnly).
  ErrorCode RegisterMemory(char* base, uint64_t size, MemoryAccess access);
  void UnregisterMemory(char* base);
  // The endpoints a segment of this daemon is published with.
  std::vector<rpc::TransportEndpoint> DescribeSegment(char* base, uint64_t size);

  // Runs the ops in parallel; each one's result is set. Ops past deadline fail with -800.
  void Execute(std::vector<TransferOp*>* ops, std::chrono::steady_clock::time_point deadline);

  // True while a transfer to this daemon ("host:port") failed less than kSuspectFor ago.
  bool Suspect(const std::string& daemon) const;
  // Every such daemon: puts ask the master to place replicas there last.
  std::vector<std::string> Suspects() const;

 private:
  // Counts ops, run over RDMA or TCP in one batch since start_ns (DaemonMetrics).
  static void CountTransfers(const std::vector<TransferOp*>& ops, bool rdma, int64_t start_ns);

  mutable std::mutex suspects_mu_;
  mutable std::map<std::string, std::chrono::steady_clock::time_point> suspects_;  // name -> until

  SegmentDirectory directory_;
  std::unique_ptr<TcpTransport> tcp_;
  std::unique_ptr<Transport> rdma_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TRANSFER_ENGINE_H_
