#include "daemon/transfer/segment_directory.h"

#include <thread>
#include <vector>

#include "common/base/error_code.h"
#include "common/base/logging.h"

namespace mooncake {

std::shared_ptr<const RemoteSegment> SegmentDirectory::Lookup(int64_t segment_id) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  auto it = segments_.find(segment_id);
  return it == segments_.end() ? nullptr : it->second;
}

std::shared_ptr<const RemoteSegment> SegmentDirectory::Find(int64_t segment_id) {
  std::shared_ptr<const RemoteSegment> found = Lookup(segment_id);
  if (found != nullptr) return found;
  std::lock_guard<std::mutex> lock(refresh_mu_);
  found = Lookup(segment_id);  // fetched by whoever held refresh_mu_ before us
  if (found != nullptr) return found;
  // A fetch just now may have missed a segment mounted right after it: wait out the
  // interval rather than fail the transfer (unknown segments are rare: the master lists
  // only mounted ones).
  std::this_thread::sleep_until(last_refresh_ + kMinRefreshInterval);
  last_refresh_ = std::chrono::steady_clock::now();
  std::vector<rpc::SegmentInfo> all;
  ErrorCode code = master_->GetAllSegments(&all);
  if (code != ErrorCode::OK) {
    MC_LOG_WARN("segment directory: cannot fetch the segments: %s", ErrorName(code));
    return nullptr;
  }
  Map fresh;
  for (rpc::SegmentInfo& info : all) {
    auto s = std::make_shared<RemoteSegment>();
    s->segment_id = info.segment_id;
    s->name = std::move(info.name);
    s->base = static_cast<uint64_t>(info.base);
    s->size = static_cast<uint64_t>(info.size);
    s->endpoints = std::move(info.endpoints);
    // An SSD tier: size is its capacity, base 0; only READ_DISK addresses it.
    s->disk = info.kind == rpc::ReplicaKind::LOCAL_DISK;
    fresh.emplace(s->segment_id, std::move(s));
  }
  {
    std::unique_lock<std::shared_mutex> write(mu_);
    segments_.swap(fresh);
  }
  return Lookup(segment_id);
}

}  // namespace mooncake
