#include "daemon/cluster/bad_replica_reporter.h"

#include <chrono>
#include <vector>

#include "common/base/log_throttle.h"
#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "daemon/master_link/master_client.h"
#include "daemon/cluster/membership.h"

namespace mooncake {

namespace {

LogThrottle g_report_log;

// What waiting_ knows a report by.
std::pair<std::string, int64_t> Identity(const rpc::BadReplica& bad) {
  return {bad.key, bad.reason == rpc::BadReplicaReason::NOT_HELD ? bad.segment_id
                                                                 : bad.replica_id};
}

}  // namespace

void BadReplicaReporter::Start() { thread_ = std::thread([this] { Run(); }); }

void BadReplicaReporter::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BadReplicaReporter::ReportMismatch(const std::string& key, int64_t replica_id, uint64_t size,
                                        uint32_t checksum) {
  rpc::BadReplica bad;
  bad.key = key;
  bad.reason = rpc::BadReplicaReason::CHECKSUM_MISMATCH;
  bad.replica_id = replica_id;
  bad.size = static_cast<int64_t>(size);
  bad.checksum = checksum;
  Queue(std::move(bad));
}

void BadReplicaReporter::ReportNotHeld(const DiskAddress& object, int64_t disk_segment_id) {
  rpc::BadReplica bad;
  bad.key = object.key;
  bad.reason = rpc::BadReplicaReason::NOT_HELD;
  bad.segment_id = disk_segment_id;
  bad.size = static_cast<int64_t>(object.value_size);
  bad.checksum = object.checksum;
  Queue(std::move(bad));
}

void BadReplicaReporter::Queue(rpc::BadReplica bad) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= kMaxQueued) {
      ++stats_.overflow;
      return;
    }
    if (!waiting_.insert(Identity(bad)).second) return;  // already on its way
    queue_.push_back(std::move(bad));
  }
  cv_.notify_one();
}

BadReplicaReporter::Stats BadReplicaReporter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void BadReplicaReporter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    std::vector<rpc::BadReplica> batch;
    while (!queue_.empty() && batch.size() < kMaxBatch) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    lock.unlock();
    bool sent = Send(batch);
    lock.lock();
    if (sent) {
      for (const rpc::BadReplica& bad : batch) waiting_.erase(Identity(bad));
      continue;
    }
    // Kept for the next try, ahead of what came since; still counted as waiting.
    for (size_t i = batch.size(); i-- > 0;) queue_.push_front(std::move(batch[i]));
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
  }
}

bool BadReplicaReporter::Send(const std::vector<rpc::BadReplica>& batch) {
  std::vector<ErrorCode> codes;
  ErrorCode call = master_->ReportBadReplicas(membership_->daemon_id(), batch, &codes);
  bool unknown = call == ErrorCode::CLIENT_NOT_FOUND ||
                 (call == ErrorCode::OK && !codes.empty() &&
                  codes[0] == ErrorCode::CLIENT_NOT_FOUND);
  if (unknown) {
    membership_->Reregister();  // a restarted master: it answers once we are known again
    call = ErrorCode::CLIENT_NOT_FOUND;
  }
  if (call != ErrorCode::OK) {
    if (g_report_log.Due()) {
      MC_LOG_WARN("could not report %zu unreadable replica(s) to the master (%s); retrying",
                  batch.size(), ErrorName(call));
    }
    return false;
  }
  uint64_t dropped = 0;
  for (ErrorCode code : codes) dropped += code == ErrorCode::OK;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.reported += batch.size();
    stats_.dropped += dropped;
  }
  if (g_report_log.Due()) {
    MC_LOG_WARN("reported %zu unreadable replica(s) to the master, e.g. '%.64s': %llu "
                "dropped, the rest changed since",
                batch.size(), std::string(tenant_key::UserKeyOf(batch[0].key)).c_str(),
                static_cast<unsigned long long>(dropped));
  }
  return true;
}

}  // namespace mooncake
