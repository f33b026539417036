#include "master/log/log_tail.h"

#include "common/base/crc32c.h"

namespace mooncake {

void LogTail::Add(uint64_t seq, std::string_view payload) {
  auto shared = std::make_shared<const std::string>(payload);
  absl::MutexLock lock(&mu_);
  if (seq != base_ + entries_.size() + 1) {
    entries_.clear();
    bytes_ = 0;
    base_ = seq - 1;
  }
  bytes_ += shared->size();
  entries_.push_back({seq, std::move(shared)});
  while (bytes_ > max_bytes_ && entries_.size() > 1) {
    bytes_ -= entries_.front().payload->size();
    base_ = entries_.front().seq;
    entries_.pop_front();
  }
}

void LogTail::Reset(uint64_t last) {
  absl::MutexLock lock(&mu_);
  entries_.clear();
  bytes_ = 0;
  base_ = last;
}

LogTail::ReadResult LogTail::Read(uint64_t from_seq, uint64_t max_bytes,
                                  std::vector<Entry>* out) const {
  absl::MutexLock lock(&mu_);
  const uint64_t last = base_ + entries_.size();
  if (from_seq > last + 1) return ReadResult::kPastEnd;
  if (from_seq <= base_) return ReadResult::kGone;
  uint64_t bytes = 0;
  for (size_t i = from_seq - base_ - 1; i < entries_.size(); ++i) {
    const uint64_t size = entries_[i].payload->size();
    if (!out->empty() && bytes + size > max_bytes) break;
    bytes += size;
    out->push_back(entries_[i]);
  }
  return ReadResult::kOk;
}

bool LogTail::Crc(uint64_t seq, uint32_t* crc) const {
  std::shared_ptr<const std::string> payload;
  {
    absl::MutexLock lock(&mu_);
    if (seq <= base_ || seq > base_ + entries_.size()) return false;
    payload = entries_[seq - base_ - 1].payload;
  }
  *crc = Crc32c(payload->data(), payload->size());
  return true;
}

uint64_t LogTail::last() const {
  absl::MutexLock lock(&mu_);
  return base_ + entries_.size();
}

}  // namespace mooncake
