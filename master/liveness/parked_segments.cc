#include "master/liveness/parked_segments.h"

#include <algorithm>

namespace mooncake {

void ParkedSegments::Park(const rpc::SegmentInfo& info, std::vector<Object> objects,
                          int64_t deadline_ms) {
  absl::MutexLock lock(&mu_);
  Set& set = sets_[info.segment_id];
  // A set parked before under this id (claimed, then dropped again) keeps its objects not
  // settled yet; their ranges went with the segment.
  std::vector<Entry> kept;
  for (Entry& e : set.entries) {
    if (!e.live) continue;
    e.node = kNoNode;
    kept.push_back(std::move(e));
  }
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    it = it->second.first == info.segment_id ? by_key_.erase(it) : std::next(it);
  }
  set.info = info;
  set.deadline_ms = deadline_ms;
  set.slot = kUnclaimed;
  set.entries = std::move(kept);
  for (Object& o : objects) set.entries.push_back(Entry{std::move(o), kNoNode, true});
  count_.fetch_add(static_cast<int64_t>(set.entries.size() - set.live));
  set.live = set.entries.size();
  for (size_t i = 0; i < set.entries.size(); ++i) {
    by_key_.emplace(set.entries[i].object.key, std::make_pair(info.segment_id, i));
  }
  if (set.entries.empty()) sets_.erase(info.segment_id);
}

bool ParkedSegments::Claim(const rpc::SegmentInfo& info, Segment& segment, int64_t deadline_ms,
                           int64_t* expired) {
  absl::MutexLock lock(&mu_);
  auto it = sets_.find(info.segment_id);
  if (it == sets_.end()) return false;
  Set& set = it->second;
  const rpc::SegmentInfo& was = set.info;
  const bool same = was.daemon_id == info.daemon_id && was.name == info.name &&
                    was.base == info.base && was.size == info.size &&
                    was.incarnation == info.incarnation && set.slot == kUnclaimed;
  if (!same) {
    size_t discarded = 0;
    EraseSet(it->first, nullptr, &discarded);  // nothing reserved: unclaimed, or in a slot gone
    *expired += static_cast<int64_t>(discarded);
    return false;
  }
  // In address order: each reservation is then O(1) (OffsetAllocator::AllocateAt).
  std::vector<size_t> order(set.entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return set.entries[a].object.offset < set.entries[b].object.offset;
  });
  for (size_t i : order) {
    Entry& e = set.entries[i];
    if (!e.live) continue;
    if (!segment.Reserve(e.object.offset, e.object.size, &e.node)) {
      e.node = kNoNode;
      Settle(it->first, set, i, nullptr);
      ++*expired;
    }
  }
  set.slot = segment.slot();
  set.deadline_ms = deadline_ms;
  if (set.live == 0) sets_.erase(it);
  return true;
}

int64_t ParkedSegments::Page(int64_t segment_id, uint32_t slot, int64_t from, size_t max,
                             std::vector<rpc::UnverifiedReplica>* out) const {
  absl::MutexLock lock(&mu_);
  auto it = sets_.find(segment_id);
  if (it == sets_.end() || it->second.slot != slot || from < 0) return -1;
  const std::vector<Entry>& entries = it->second.entries;
  size_t i = static_cast<size_t>(from);
  for (; i < entries.size() && out->size() < max; ++i) {
    const Entry& e = entries[i];
    if (!e.live) continue;
    rpc::UnverifiedReplica r;
    r.key = e.object.key;
    r.offset = static_cast<int64_t>(e.object.offset);
    r.size = static_cast<int64_t>(e.object.size);
    r.checksum = e.object.checksum;
    out->push_back(std::move(r));
  }
  return i < entries.size() ? static_cast<int64_t>(i) : -1;
}

bool ParkedSegments::Take(int64_t segment_id, uint32_t slot, const std::string& key,
                          uint64_t offset, Object* out, uint32_t* node) {
  absl::MutexLock lock(&mu_);
  auto range = by_key_.equal_range(key);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second.first != segment_id) continue;
    auto set = sets_.find(segment_id);
    if (set == sets_.end() || set->second.slot != slot) return false;
    Entry& e = set->second.entries[it->second.second];
    if (!e.live || e.object.offset != offset) continue;
    *out = e.object;
    *node = e.node;
    e.node = kNoNode;  // the caller owns the range now
    Settle(segment_id, set->second, it->second.second, nullptr);
    if (set->second.live == 0) sets_.erase(set);
    return true;
  }
  return false;
}

size_t ParkedSegments::Discard(const std::string& key, std::vector<Range>* to_free) {
  if (empty()) return 0;
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<int64_t, size_t>> found;
  auto range = by_key_.equal_range(key);
  for (auto it = range.first; it != range.second; ++it) found.push_back(it->second);
  size_t n = 0;
  for (const auto& [id, i] : found) {
    auto set = sets_.find(id);
    if (set == sets_.end() || !set->second.entries[i].live) continue;
    Settle(id, set->second, i, to_free);
    ++n;
    if (set->second.live == 0) sets_.erase(set);
  }
  return n;
}

std::vector<std::string> ParkedSegments::Keys(
    const std::function<bool(const std::string&)>& match) const {
  std::vector<std::string> keys;
  if (empty()) return keys;
  absl::MutexLock lock(&mu_);
  for (const auto& [key, where] : by_key_) {
    if (match(key)) keys.push_back(key);
  }
  return keys;
}

size_t ParkedSegments::DiscardSegment(int64_t segment_id, std::vector<Range>* to_free) {
  if (empty()) return 0;
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  if (sets_.count(segment_id) > 0) EraseSet(segment_id, to_free, &n);
  return n;
}

size_t ParkedSegments::Expire(int64_t now_ms, std::vector<Range>* to_free) {
  if (empty()) return 0;
  absl::MutexLock lock(&mu_);
  std::vector<int64_t> due;
  for (const auto& [id, set] : sets_) {
    if (set.deadline_ms <= now_ms) due.push_back(id);
  }
  size_t n = 0;
  for (int64_t id : due) EraseSet(id, to_free, &n);
  return n;
}

void ParkedSegments::Clear() {
  absl::MutexLock lock(&mu_);
  sets_.clear();
  by_key_.clear();
  count_ = 0;
}

void ParkedSegments::Settle(int64_t id, Set& set, size_t i, std::vector<Range>* to_free) {
  Entry& e = set.entries[i];
  if (!e.live) return;
  if (e.node != kNoNode && to_free != nullptr && set.slot != kUnclaimed) {
    to_free->push_back({set.slot, e.node});
  }
  e.node = kNoNode;
  e.live = false;
  --set.live;
  count_.fetch_sub(1);
  auto range = by_key_.equal_range(e.object.key);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second.first == id && it->second.second == i) {
      by_key_.erase(it);
      break;
    }
  }
}

void ParkedSegments::EraseSet(int64_t id, std::vector<Range>* to_free, size_t* discarded) {
  auto it = sets_.find(id);
  if (it == sets_.end()) return;
  Set& set = it->second;
  for (size_t i = 0; i < set.entries.size(); ++i) {
    if (!set.entries[i].live) continue;
    Settle(id, set, i, to_free);
    ++*discarded;
  }
  sets_.erase(it);
}

}  // namespace mooncake
