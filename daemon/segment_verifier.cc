#include "daemon/cluster/segment_verifier.h"

#include <algorithm>
#include <chrono>

#include "common/base/crc32c.h"
#include "common/base/logging.h"

namespace mooncake {

SegmentVerifier::SegmentVerifier(MasterClient* master, int64_t daemon_id, Finder find)
    : master_(master), daemon_id_(daemon_id), find_(std::move(find)) {
  thread_ = std::thread([this] { Loop(); });
}

SegmentVerifier::~SegmentVerifier() { Stop(); }

void SegmentVerifier::Enqueue(int64_t segment_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (std::find(queue_.begin(), queue_.end(), segment_id) == queue_.end()) {
    queue_.push_back(segment_id);
  }
  cv_.notify_all();
}

void SegmentVerifier::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SegmentVerifier::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    int64_t segment_id = queue_.front();
    queue_.pop_front();
    lock.unlock();
    bool done = Verify(segment_id);
    lock.lock();
    if (!done && !stop_) {
      // The master is away (a restart, a failover): the re-mount that follows queues the
      // segment again; until then, try again after a pause.
      cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
      if (std::find(queue_.begin(), queue_.end(), segment_id) == queue_.end()) {
        queue_.push_back(segment_id);
      }
    }
  }
}

bool SegmentVerifier::Verify(int64_t segment_id) {
  const auto started = std::chrono::steady_clock::now();
  int64_t checked = 0, bad = 0;
  int64_t cursor = 0;
  while (cursor >= 0) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return true;
    }
    std::shared_ptr<SegmentMemory> memory = find_(segment_id);
    if (memory == nullptr) return true;  // unmounted meanwhile: nothing left to vouch for
    rpc::UnverifiedPage page;
    ErrorCode code = master_->ListUnverified(daemon_id_, segment_id, cursor, kPageSize, &page);
    if (code == ErrorCode::CLIENT_NOT_FOUND || code == ErrorCode::SEGMENT_NOT_FOUND ||
        code == ErrorCode::ILLEGAL_CLIENT) {
      // Not (or no longer) mounted there: a re-mount queues it again.
      return true;
    }
    if (code != ErrorCode::OK) {
      MC_LOG_WARN("verifying segment %lld: listing its unverified replicas failed: %s",
                  static_cast<long long>(segment_id),
                  code == ErrorCode::RPC_FAIL ? MasterClient::LastError().c_str()
                                              : ErrorName(code));
      return false;
    }
    std::vector<rpc::VerifiedReplica> report;
    report.reserve(page.replicas.size());
    for (const rpc::UnverifiedReplica& r : page.replicas) {
      rpc::VerifiedReplica v;
      v.key = r.key;
      v.offset = r.offset;
      const bool inside = r.offset >= 0 && r.size > 0 &&
                          memory->Contains(static_cast<uint64_t>(r.offset),
                                           static_cast<uint64_t>(r.size));
      // Without a checksum there is nothing to check against: the master keeps it.
      v.ok = inside && (r.checksum < 0 ||
                        Crc32c(memory->base() + r.offset, static_cast<size_t>(r.size)) ==
                            static_cast<uint32_t>(r.checksum));
      bad += !v.ok;
      report.push_back(std::move(v));
    }
    checked += static_cast<int64_t>(report.size());
    if (!report.empty()) {
      std::vector<ErrorCode> codes;
      code = master_->ReportVerified(daemon_id_, segment_id, report, &codes);
      if (code != ErrorCode::OK) {
        MC_LOG_WARN("verifying segment %lld: the report failed: %s",
                    static_cast<long long>(segment_id),
                    code == ErrorCode::RPC_FAIL ? MasterClient::LastError().c_str()
                                                : ErrorName(code));
        return false;
      }
    }
    cursor = page.next_cursor;
  }
  if (checked > 0) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - started)
                  .count();
    MC_LOG_INFO("segment %lld verified: %lld replicas checked, %lld bad, in %lld ms",
                static_cast<long long>(segment_id), static_cast<long long>(checked),
                static_cast<long long>(bad), static_cast<long long>(ms));
  }
  return true;
}

}  // namespace mooncake
