#include "daemon/transfer/transfer_connections.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>

namespace mooncake {

using Connection = TransferConnections::Connection;

int64_t TransferConnections::NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TransferConnections::Limits TransferConnections::ForPort(size_t max_connections,
                                                         size_t per_peer) {
  Limits limits;
  limits.max_connections = std::max<size_t>(1, max_connections);
  limits.per_peer = std::max<size_t>(1, per_peer);
  const size_t floor = std::min<size_t>(limits.max_connections, 4);
  limits.new_per_address = std::max(floor, limits.max_connections / 8);
  limits.new_total = std::max(floor, limits.max_connections / 4);
  return limits;
}

std::shared_ptr<Connection> TransferConnections::Admit(int fd, const std::string& address,
                                                       bool* took) {
  *took = false;
  std::shared_ptr<Connection> c(new Connection(fd, address, NowNanos()));
  auto opening_from = [](const Connection& o, const std::string& a) {
    return !o.settled_ && o.address_ == a;
  };
  auto opening = [](const Connection& o, const std::string&) { return !o.settled_; };
  auto any = [](const Connection&, const std::string&) { return true; };
  std::lock_guard<std::mutex> lock(mu_);
  // The narrowest group first: room made there is room in the wider ones too.
  if (shutting_down_ ||
      !MakeRoomLocked(opening_from, address, limits_.new_per_address, took) ||
      !MakeRoomLocked(opening, address, limits_.new_total, took) ||
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
  // Taken while it was opening: it is closing, and must not take anyone's place.
  if (c->state_.load(std::memory_order_acquire) == Connection::kTaken) return false;
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
  // Not over kTaken: a connection taken mid-request stays taken.
  int busy = Connection::kBusy;
  c->state_.compare_exchange_strong(busy, Connection::kWaiting, std::memory_order_acq_rel);
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

int64_t TransferConnections::CloseOpeningsBefore(int64_t cutoff_ns, size_t* closed) {
  *closed = 0;
  int64_t oldest = INT64_MAX;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& entry : open_) {
    Connection* o = entry.second.get();
    if (o->settled_ || o->state_.load(std::memory_order_acquire) == Connection::kTaken) continue;
    if (o->admitted_ns_ < cutoff_ns && TakeLocked(o)) {
      ++*closed;
      ++stats_.overdue;
    } else if (o->state_.load(std::memory_order_acquire) != Connection::kTaken) {
      oldest = std::min(oldest, o->admitted_ns_);
    }
  }
  return oldest;
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
    int state = entry.second->state_.load(std::memory_order_acquire);
    if (state == Connection::kBusy) ++out.busy;
    if (state != Connection::kTaken && !entry.second->settled_) ++out.opening;
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
  // Opening connections per source address, across the whole port: the address holding
  // the most gives way first.
  std::map<std::string, size_t> opening_from;
  for (const auto& entry : open_) {
    const Connection& o = *entry.second;
    if (!o.settled_ && o.state_.load(std::memory_order_acquire) != Connection::kTaken) {
      ++opening_from[o.address_];
    }
  }
  for (;;) {
    Connection* chosen = nullptr;
    size_t chosen_crowd = 0;
    for (const auto& entry : open_) {
      Connection* o = entry.second.get();
      int state = o->state_.load(std::memory_order_acquire);
      // An opening connection may be taken whatever it is doing; an open one only while
      // it waits between requests.
      if (state == Connection::kTaken || (o->settled_ && state != Connection::kWaiting) ||
          !filter(*o, key)) {
        continue;
      }
      size_t crowd = o->settled_ ? 0 : opening_from[o->address_];
      bool better;
      if (chosen == nullptr) {
        better = true;
      } else if (o->settled_ != chosen->settled_) {
        better = !o->settled_;  // opening ones first
      } else if (!o->settled_) {
        better = crowd > chosen_crowd ||
                 (crowd == chosen_crowd && o->admitted_ns_ < chosen->admitted_ns_);
      } else {
        better = o->waiting_since_ns_.load(std::memory_order_relaxed) <
                 chosen->waiting_since_ns_.load(std::memory_order_relaxed);
      }
      if (better) {
        chosen = o;
        chosen_crowd = crowd;
      }
    }
    if (chosen == nullptr) return false;
    if (TakeLocked(chosen)) {
      ++stats_.taken;
      return true;
    }
    // An open one began a request just now: it is busy, look again.
  }
}

bool TransferConnections::TakeLocked(Connection* c) {
  int state = c->state_.load(std::memory_order_acquire);
  for (;;) {
    if (state == Connection::kTaken || (c->settled_ && state != Connection::kWaiting)) {
      return false;
    }
    if (c->state_.compare_exchange_weak(state, Connection::kTaken, std::memory_order_acq_rel)) {
      break;
    }
  }
  // Its thread wakes up, wherever it blocks on the socket, to end of stream or an error,
  // and removes it.
  shutdown(c->fd_, SHUT_RDWR);
  return true;
}

}  // namespace mooncake
