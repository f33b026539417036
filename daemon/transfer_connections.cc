#include "daemon/transfer_connections.h"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

namespace mooncake {

namespace {

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

using Connection = TransferConnections::Connection;

std::shared_ptr<Connection> TransferConnections::Admit(int fd, const std::string& address,
                                                       bool* took) {
  *took = false;
  std::shared_ptr<Connection> c(new Connection(fd, address));
  c->waiting_since_ns_.store(NowNanos(), std::memory_order_relaxed);
  auto is_new_from = [](const Connection& o, const std::string& a) {
    return !o.settled_ && o.address_ == a;
  };
  auto any = [](const Connection&, const std::string&) { return true; };
  std::lock_guard<std::mutex> lock(mu_);
  // The group first: room made there is room on the port too.
  if (shutting_down_ || !MakeRoomLocked(is_new_from, address, limits_.new_per_address, took) ||
      !MakeRoomLocked(any, address, limits_.max_connections, took)) {
    ++stats_.refused;
    return nullptr;
  }
  open_[fd] = c;
  ++stats_.admitted;
  return c;
}

bool TransferConnections::Settle(Connection* c, const std::string& peer, bool* took) {
  *took = false;
  auto named = [](const Connection& o, const std::string& p) {
    return o.settled_ && o.peer_ == p;
  };
  auto unnamed_from = [](const Connection& o, const std::string& a) {
    return o.settled_ && o.peer_.empty() && o.address_ == a;
  };
  std::lock_guard<std::mutex> lock(mu_);
  // c itself is not settled yet, so it is in neither group.
  bool room = peer.empty() ? MakeRoomLocked(unnamed_from, c->address_, limits_.per_peer, took)
                           : MakeRoomLocked(named, peer, limits_.per_peer, took);
  if (!room) {
    ++stats_.refused;
    return false;
  }
  c->settled_ = true;
  c->peer_ = peer;
  return true;
}

bool TransferConnections::BeginRequest(Connection* c) {
  int waiting = Connection::kWaiting;
  return c->state_.compare_exchange_strong(waiting, Connection::kBusy, std::memory_order_acq_rel);
}

void TransferConnections::EndRequest(Connection* c) {
  c->waiting_since_ns_.store(NowNanos(), std::memory_order_relaxed);
  c->state_.store(Connection::kWaiting, std::memory_order_release);
}

void TransferConnections::Remove(const std::shared_ptr<Connection>& c) {
  std::lock_guard<std::mutex> lock(mu_);
  open_.erase(c->fd_);
  close(c->fd_);
  removed_.notify_all();
}

bool TransferConnections::Reclaim() {
  std::lock_guard<std::mutex> lock(mu_);
  return TakeOneLocked([](const Connection&, const std::string&) { return true; }, "");
}

void TransferConnections::Shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  shutting_down_ = true;
  for (const auto& entry : open_) shutdown(entry.first, SHUT_RDWR);
  removed_.wait(lock, [this] { return open_.empty(); });
}

TransferConnections::Stats TransferConnections::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats out = stats_;
  out.open = open_.size();
  for (const auto& entry : open_) {
    if (entry.second->state_.load(std::memory_order_acquire) == Connection::kBusy) ++out.busy;
  }
  return out;
}

bool TransferConnections::MakeRoomLocked(Filter filter, const std::string& key, size_t cap,
                                         bool* took) {
  for (;;) {
    size_t members = 0;
    for (const auto& entry : open_) {
      const Connection& o = *entry.second;
      if (o.state_.load(std::memory_order_acquire) != Connection::kTaken && filter(o, key)) {
        ++members;
      }
    }
    if (members < cap) return true;
    if (!TakeOneLocked(filter, key)) return false;
    *took = true;
  }
}

bool TransferConnections::TakeOneLocked(Filter filter, const std::string& key) {
  for (;;) {
    Connection* chosen = nullptr;
    for (const auto& entry : open_) {
      Connection* o = entry.second.get();
      if (o->state_.load(std::memory_order_acquire) != Connection::kWaiting || !filter(*o, key)) {
        continue;
      }
      // A connection that has said nothing yet gives way first, then the longest idle.
      if (chosen == nullptr || (!o->settled_ && chosen->settled_) ||
          (o->settled_ == chosen->settled_ &&
           o->waiting_since_ns_.load(std::memory_order_relaxed) <
               chosen->waiting_since_ns_.load(std::memory_order_relaxed))) {
        chosen = o;
      }
    }
    if (chosen == nullptr) return false;
    int waiting = Connection::kWaiting;
    if (chosen->state_.compare_exchange_strong(waiting, Connection::kTaken,
                                               std::memory_order_acq_rel)) {
      // Its thread wakes up to end of stream and removes it.
      shutdown(chosen->fd_, SHUT_RDWR);
      ++stats_.taken;
      return true;
    }
    // It began a request just now: it is busy, look again.
  }
}

}  // namespace mooncake
