// One reliable-connected queue pair with a completion queue of its own (so that whoever
// holds the connection polls only its own completions) and a completion channel to sleep
// on when a transfer takes longer than a short spin.
//
// Life: Create() gives a queue pair in RESET with a random initial packet sequence number;
// its local() endpoint goes to the peer; Connect() with the peer's endpoint moves it
// INIT -> RTR -> RTS. The peer's side is created the same way and never posts: one-sided
// operations need its queue pair only as the target.
//
// Not thread-safe: one holder at a time.
#ifndef MOONCAKE_DAEMON_RDMA_QUEUE_PAIR_H_
#define MOONCAKE_DAEMON_RDMA_QUEUE_PAIR_H_

#include <chrono>
#include <memory>
#include <string>

#include "daemon/transfer/rdma_batch.h"
#include "daemon/transfer/rdma_device.h"
#include "daemon/transfer/rdma_endpoint.h"

struct ibv_comp_channel;
struct ibv_cq;
struct ibv_qp;

namespace mooncake {

class RdmaQueuePair : public RdmaSendQueue {
 public:
  // nullptr with *error when the device refuses a channel, CQ or QP. The device must
  // outlive the queue pair.
  static std::unique_ptr<RdmaQueuePair> Create(const RdmaDevice* device, int max_send_wr,
                                               std::string* error);
  ~RdmaQueuePair() override;
  RdmaQueuePair(const RdmaQueuePair&) = delete;
  RdmaQueuePair& operator=(const RdmaQueuePair&) = delete;

  // This side, for the peer (instance left 0 for the caller to fill in).
  RdmaQpEndpoint local() const;
  // INIT -> RTR -> RTS towards remote; false with *error naming the failed step.
  bool Connect(const RdmaQpEndpoint& remote, std::string* error);

  int PostSend(ibv_send_wr* wr, ibv_send_wr** bad) override;
  int WaitCompletions(ibv_wc* wc, int max,
                      std::chrono::steady_clock::time_point deadline) override;
  int max_outstanding() const override { return max_send_wr_; }

 private:
  explicit RdmaQueuePair(const RdmaDevice* device) : device_(device) {}
  const RdmaDevice* device_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  int max_send_wr_ = 0;
  uint32_t psn_ = 0;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_RDMA_QUEUE_PAIR_H_
