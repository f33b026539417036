#include "daemon/service/pool_fences.h"

#include "common/uds/uds_ops.h"

namespace mooncake {

bool PoolFences::Blocked(const PoolId& pool, uint64_t connection) const {
  auto it = mapped_.find(pool);
  return it != mapped_.end() && !it->second.empty() && *it->second.begin() < connection;
}

void PoolFences::Mapped(PoolId pool, uint64_t connection) {
  std::lock_guard<std::mutex> lock(mu_);
  mapped_[pool].insert(connection);
}

void PoolFences::Unmapped(PoolId pool, uint64_t connection) {
  std::list<Waiter> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = mapped_.find(pool);
    if (it == mapped_.end() || it->second.erase(connection) == 0) return;
    if (it->second.empty()) mapped_.erase(it);
    for (auto w = waiters_.begin(); w != waiters_.end();) {
      auto next = std::next(w);
      if (w->pool == pool && !Blocked(pool, w->connection)) ready.splice(ready.end(), waiters_, w);
      w = next;
    }
  }
  for (Waiter& w : ready) {
    ClientConnection* client = w.request.connection();
    uds::ReplyFrame reply(w.request_id, ErrorCode::OK, uds::NoReply());
    if (!client->closed()) client->Send(&reply);
  }
  // ready's Requests end here, outside the lock.
}

bool PoolFences::Wait(PoolId pool, uint64_t connection, uint64_t request_id,
                      ClientConnection::Request* request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!Blocked(pool, connection)) return false;
  waiters_.push_back(Waiter{pool, connection, request_id, std::move(*request)});
  return true;
}

void PoolFences::Abandon() {
  std::list<Waiter> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped.swap(waiters_);
  }
}

}  // namespace mooncake
