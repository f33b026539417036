// POOL_FENCE (docs/protocol.md, "Handshake"): which connections have which client pool
// mapped, and the fences waiting for earlier ones to let go.
//
// Why it exists: when libmc loses a connection while the daemon still runs its requests
// (a copy into a staging block, a transfer landing in the pool), the daemon goes on
// writing into that pool until those requests end. libmc must not hand the memory out
// again before then; only the daemon knows when it is. So libmc quarantines what the lost
// connection's requests used and, on its next connection (the same pool memfd), sends
// POOL_FENCE; the daemon answers it once every connection accepted before that one which
// had the same pool mapped has been torn down (its requests ended, its mapping gone).
//
// A pool is known by its memfd's (device, inode), which are the same on every connection
// it is passed on. A connection counts from its HELLO until its teardown unmapped the
// pool. A fence waits without a worker: it is kept here, with the Request that keeps its
// connection alive, and answered by the teardown that completes it.
//
// Thread-safe. Completions run on the thread calling Unmapped (a teardown: never the event
// loop), outside the lock: answering may end the fencing connection's last request and so
// run its teardown, which calls back in here.
#ifndef MOONCAKE_DAEMON_POOL_FENCES_H_
#define MOONCAKE_DAEMON_POOL_FENCES_H_

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "daemon/service/client_connection.h"

namespace mooncake {

class PoolFences {
 public:
  using PoolId = std::pair<uint64_t, uint64_t>;  // ClientConnection::pool_identity()

  // connection has pool mapped (its HELLO succeeded).
  void Mapped(PoolId pool, uint64_t connection);
  // connection's teardown unmapped its pool (a connection never Mapped is ignored); answers
  // the fences this was the last obstacle of.
  void Unmapped(PoolId pool, uint64_t connection);
  // A POOL_FENCE (request_id) of connection, whose pool is pool: true when it must wait
  // (request was moved in here, and Unmapped will answer it); false when no earlier
  // connection has the pool mapped (request untouched: the caller answers now).
  bool Wait(PoolId pool, uint64_t connection, uint64_t request_id,
            ClientConnection::Request* request);
  // Forgets every waiting fence without answering it (shutdown: their connections are
  // closed anyway), so that their Requests let their connections be torn down.
  void Abandon();

 private:
  struct Waiter {
    PoolId pool;
    uint64_t connection = 0;
    uint64_t request_id = 0;
    ClientConnection::Request request;
  };
  // An earlier connection than `connection` still has pool mapped. mu_ held.
  bool Blocked(const PoolId& pool, uint64_t connection) const;

  std::mutex mu_;
  std::map<PoolId, std::set<uint64_t>> mapped_;  // pool -> connections; guarded by mu_
  std::list<Waiter> waiters_;  // a list: a Request moves but is not assignable; guarded by mu_
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_POOL_FENCES_H_
