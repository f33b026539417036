#include "master/server/rpc_connections.h"

#include <algorithm>

namespace mooncake {

const char* RpcClosureName(RpcClosure why) {
  switch (why) {
    case RpcClosure::kFrameBeforeAdmission: return "frame_before_admission";
    case RpcClosure::kFrameLimit: return "frame_limit";
    case RpcClosure::kHandshakeTimeout: return "handshake_timeout";
    case RpcClosure::kSourceCap: return "source_cap";
    case RpcClosure::kUnadmittedCap: return "unadmitted_cap";
    case RpcClosure::kAdmittedCap: return "connection_cap";
    case RpcClosure::kIdle: return "idle";
    case RpcClosure::kDescriptors: return "descriptors";
    case RpcClosure::kCount: break;
  }
  return "unknown";
}

RpcConnections::Limits RpcConnections::Split(size_t total) {
  Limits limits;
  limits.max_unadmitted = std::clamp<size_t>(total / 4, 1, 256);
  limits.max_unadmitted_per_source =
      std::clamp<size_t>(limits.max_unadmitted / 8, std::min<size_t>(limits.max_unadmitted, 4), 32);
  limits.max_admitted = std::max<size_t>(1, total - std::min(total, limits.max_unadmitted));
  return limits;
}

size_t RpcConnections::WithinDescriptors(uint64_t descriptor_limit, uint64_t wanted) {
  // An unlimited (or absurd) limit still needs a number: the kernel's default nr_open.
  const uint64_t limit = std::min<uint64_t>(descriptor_limit, uint64_t{1} << 20);
  uint64_t room = limit - std::min(limit, std::max<uint64_t>(64, limit / 4));
  if (wanted != 0) room = std::min(room, wanted);
  return static_cast<size_t>(std::max<uint64_t>(8, room));
}

RpcConnections::RpcConnections(Limits limits) : limits_(limits) {}

RpcConnections::~RpcConnections() = default;

RpcConnections::Entry* RpcConnections::Add(const std::string& source, const std::string& peer,
                                           size_t owner, bool admitted, int64_t now_ns,
                                           std::vector<Victim>* victims) {
  auto owned = std::make_unique<Entry>();
  Entry* entry = owned.get();
  entry->owner = owner;
  entry->source = source;
  entry->peer = peer;
  entry->accepted_ns = now_ns;
  entry->last_active_ns.store(now_ns, std::memory_order_relaxed);
  entry->admitted = admitted;
  absl::MutexLock lock(&mu_);
  entry->id = next_id_++;
  entries_.emplace(entry->id, std::move(owned));
  if (admitted) {
    admitted_set_.insert(entry);
    admitted_count_.fetch_add(1, std::memory_order_relaxed);
  } else {
    entry->in_unadmitted = unadmitted_.insert(unadmitted_.end(), entry);
    ++unadmitted_by_source_[source];
    unadmitted_count_.fetch_add(1, std::memory_order_relaxed);
  }
  Enforce(entry, victims);
  return entry;
}

void RpcConnections::Admit(Entry* entry, int64_t now_ns, std::vector<Victim>* victims) {
  Touch(entry, now_ns);
  absl::MutexLock lock(&mu_);
  if (entry->admitted || entry->closing) return;
  unadmitted_.erase(entry->in_unadmitted);
  auto source = unadmitted_by_source_.find(entry->source);
  if (--source->second == 0) unadmitted_by_source_.erase(source);
  unadmitted_count_.fetch_sub(1, std::memory_order_relaxed);
  entry->admitted = true;
  admitted_set_.insert(entry);
  admitted_count_.fetch_add(1, std::memory_order_relaxed);
  Enforce(entry, victims);
}

void RpcConnections::Remove(Entry* entry) {
  absl::MutexLock lock(&mu_);
  if (!entry->closing) Close(entry, RpcClosure::kCount);
  entries_.erase(entry->id);
}

bool RpcConnections::PickAny(RpcClosure why, Victim* victim) {
  absl::MutexLock lock(&mu_);
  Entry* entry = !unadmitted_.empty() ? unadmitted_.front() : LongestIdle(nullptr);
  if (entry == nullptr) return false;
  *victim = Close(entry, why);
  return true;
}

RpcConnections::Victim RpcConnections::Close(Entry* entry, RpcClosure why) {
  entry->closing = true;
  if (entry->admitted) {
    admitted_set_.erase(entry);
    admitted_count_.fetch_sub(1, std::memory_order_relaxed);
  } else {
    unadmitted_.erase(entry->in_unadmitted);
    auto source = unadmitted_by_source_.find(entry->source);
    if (--source->second == 0) unadmitted_by_source_.erase(source);
    unadmitted_count_.fetch_sub(1, std::memory_order_relaxed);
  }
  Victim victim;
  victim.id = entry->id;
  victim.owner = entry->owner;
  victim.peer = entry->peer;
  victim.admitted = entry->admitted;
  victim.why = why;
  return victim;
}

RpcConnections::Entry* RpcConnections::LongestIdle(const Entry* spared) const {
  Entry* longest = nullptr;
  int64_t oldest = 0;
  for (Entry* e : admitted_set_) {
    if (e == spared) continue;
    const int64_t active = e->last_active_ns.load(std::memory_order_relaxed);
    if (longest == nullptr || active < oldest) {
      longest = e;
      oldest = active;
    }
  }
  return longest;
}

void RpcConnections::Enforce(Entry* spared, std::vector<Victim>* victims) {
  if (spared->admitted) {
    while (admitted_set_.size() > limits_.max_admitted) {
      Entry* longest = LongestIdle(spared);
      if (longest == nullptr) break;
      victims->push_back(Close(longest, RpcClosure::kAdmittedCap));
    }
    return;
  }
  // Of its source first: a flooding source displaces its own connections.
  auto same = unadmitted_by_source_.find(spared->source);
  while (same != unadmitted_by_source_.end() &&
         same->second > limits_.max_unadmitted_per_source) {
    Entry* oldest = nullptr;
    for (Entry* e : unadmitted_) {
      if (e != spared && e->source == spared->source) {
        oldest = e;
        break;
      }
    }
    if (oldest == nullptr) break;
    victims->push_back(Close(oldest, RpcClosure::kSourceCap));
    same = unadmitted_by_source_.find(spared->source);
  }
  while (unadmitted_.size() > limits_.max_unadmitted && unadmitted_.front() != spared) {
    victims->push_back(Close(unadmitted_.front(), RpcClosure::kUnadmittedCap));
  }
}

}  // namespace mooncake
