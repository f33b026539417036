// How the RDMA transport runs the ops of one Execute on one connection: every op becomes
// signaled RDMA WRITE or READ work requests of at most max_wr_bytes each, as many kept in
// flight as the queue allows, and the batch ends when every request has completed or the
// deadline has passed.
//
// Once a completion fails the queue pair is in the error state: the requests behind it are
// flushed, nothing more is posted, and every op not wholly completed fails with -800.
// At the deadline the requests still in flight are abandoned with their ops. Either way
// the connection must be torn down, which Run tells the caller.
#ifndef MOONCAKE_DAEMON_RDMA_BATCH_H_
#define MOONCAKE_DAEMON_RDMA_BATCH_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/transfer/transport.h"

struct ibv_send_wr;
struct ibv_wc;

namespace mooncake {

// The verbs a batch needs of a queue pair: RdmaQueuePair implements them over a device,
// tests over plain memory.
class RdmaSendQueue {
 public:
  virtual ~RdmaSendQueue() = default;
  // ibv_post_send: 0, or an errno with *bad at the first request not posted.
  virtual int PostSend(ibv_send_wr* wr, ibv_send_wr** bad) = 0;
  // Up to max completions into wc: how many (> 0); 0 when deadline passed first; -1 when
  // the completion queue failed.
  virtual int WaitCompletions(ibv_wc* wc, int max,
                              std::chrono::steady_clock::time_point deadline) = 0;
  // Work requests that may be in flight at once.
  virtual int max_outstanding() const = 0;
};

// One op with its keys resolved.
struct RdmaWork {
  TransferOp* op = nullptr;  // op->result is set by RunRdmaBatch
  uint32_t lkey = 0;         // of the registration holding op->local
  uint64_t remote_addr = 0;  // of op->remote_offset in the peer's address space
  uint32_t rkey = 0;
};

// Runs works on queue and sets each op's result: 0, or -800 (TRANSFER_FAIL). Ops of
// length 0 succeed without a request. False when the queue pair must not be used again.
// peer names the connection in log lines.
bool RunRdmaBatch(RdmaSendQueue* queue, const std::vector<RdmaWork>& works,
                  uint32_t max_wr_bytes, std::chrono::steady_clock::time_point deadline,
                  const std::string& peer);

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_RDMA_BATCH_H_
