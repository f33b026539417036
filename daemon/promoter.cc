#include "daemon/ssd_tier/promoter.h"

#include <cstring>
#include <vector>

#include "common/base/logging.h"

namespace mooncake {

Promoter::Promoter(MasterClient* master, Membership* membership, ReplicaIO* io,
                   uint64_t max_bytes)
    : master_(master), membership_(membership), io_(io), max_bytes_(max_bytes) {
  thread_ = std::thread([this] { Run(); });
}

Promoter::~Promoter() { Stop(); }

void Promoter::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    for (const Item& item : queue_) {
      bytes_ -= item.size;
      keys_.erase(item.key);
    }
    queue_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Promoter::Offer(const std::string& key, const char* value, uint64_t size,
                     int64_t disk_replica_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || size > max_bytes_ - bytes_ || keys_.count(key) != 0) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    bytes_ += size;  // reserved before the copy: concurrent offers cannot overshoot
    keys_.insert(key);
  }
  Item item;
  item.key = key;
  item.size = size;
  item.disk_replica_id = disk_replica_id;
  item.value.reset(new (std::nothrow) char[size]);
  if (item.value != nullptr) std::memcpy(item.value.get(), value, size);
  std::lock_guard<std::mutex> lock(mu_);
  if (item.value == nullptr || stopping_) {
    bytes_ -= size;
    keys_.erase(key);
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  queue_.push_back(std::move(item));
  cv_.notify_one();
  return true;
}

void Promoter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Promote(item);
    lock.lock();
    bytes_ -= item.size;
    keys_.erase(item.key);
  }
}

void Promoter::Promote(const Item& item) {
  const int64_t writer = membership_->daemon_id();
  rpc::PutStartResult started;
  ErrorCode code = master_->PromoteStart(writer, item.key, item.disk_replica_id, &started);
  if (code != ErrorCode::OK) {
    declined_.fetch_add(1, std::memory_order_relaxed);
    MC_LOG_DEBUG("promotion of %s: the master declined: %s", item.key.c_str(), ErrorName(code));
    return;
  }
  // Reserved for a value of another size: the key was re-written since it was read.
  bool same_size = !started.replicas.empty();
  for (const rpc::ReplicaDescriptor& r : started.replicas) {
    same_size = same_size && r.size == static_cast<int64_t>(item.size);
  }
  std::vector<ReplicaTarget> targets;
  bool ok = same_size && io_->ResolveAll(started.replicas, item.size, started.master_epoch,
                                         &targets) == ErrorCode::OK;
  if (ok) {
    std::vector<ValueSlice> slices{{&targets, 0, item.value.get(), item.size}};
    io_->WriteAll(&slices, std::chrono::steady_clock::now() + kWriteBudget);
    ok = slices[0].result == ErrorCode::OK;
  }
  ErrorCode end = master_->PromoteEnd(writer, item.key, ok);
  if (ok && end == ErrorCode::OK) {
    promoted_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  failed_.fetch_add(1, std::memory_order_relaxed);
  MC_LOG_WARN("promotion of %s failed: %s", item.key.c_str(),
              !same_size ? "reserved for a value of another size (re-written meanwhile)"
              : !ok      ? "the memory replica could not be written"
                         : ErrorName(end));
}

Promoter::Stats Promoter::stats() const {
  Stats s;
  s.promoted = promoted_.load();
  s.declined = declined_.load();
  s.failed = failed_.load();
  s.dropped = dropped_.load();
  return s;
}

}  // namespace mooncake
