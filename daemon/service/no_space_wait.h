// How a put the master answered "no space" (-200) waits for eviction to make some: the
// master evicts on every attempt (its rounds, its upkeep, leases and exist leases running
// out), and the put asks again after a pause, until --put_no_space_wait has passed since
// its first answer. Only then, or once its client is gone, does -200 reach the
// application (docs/daemon.md, "Puts under memory pressure").
//
// Why here and not in the master: the master's handlers run on Thrift I/O threads, each
// serving many daemons' connections, so a put waiting there would hold up their reads and
// heartbeats too; here it holds one worker, for one put.
//
// One per put (or batch), on the worker running it; not thread-safe.
#ifndef MOONCAKE_DAEMON_NO_SPACE_WAIT_H_
#define MOONCAKE_DAEMON_NO_SPACE_WAIT_H_

#include <chrono>
#include <cstdint>

namespace mooncake {

class ClientConnection;

class NoSpaceWait {
 public:
  // The first pause, doubled after each attempt up to kMaxPause: the master pauses its
  // put-triggered rounds for 10 ms after one that found too little, and its upkeep evicts
  // every 100 ms.
  static constexpr std::chrono::milliseconds kFirstPause{5};
  static constexpr std::chrono::milliseconds kMaxPause{50};

  // budget_ms from the first Next() (0: never wait).
  explicit NoSpaceWait(int64_t budget_ms) : budget_(budget_ms) {}

  // Sleeps until the next attempt (the last one at the deadline) and returns true; false
  // (at once) when the budget is spent, or client (when given) has closed: answer -200.
  bool Next(const ClientConnection* client);

 private:
  const std::chrono::milliseconds budget_;
  bool started_ = false;                              // Next() was called
  std::chrono::steady_clock::time_point deadline_{};  // set by the first Next()
  std::chrono::milliseconds pause_ = kFirstPause;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_NO_SPACE_WAIT_H_
