#include "master/directory/segment_registry.h"

#include <algorithm>
#include <mutex>
#include <random>
#include <unordered_set>

#include "absl/container/inlined_vector.h"

namespace mooncake {

SegmentRegistry::SegmentRegistry(AllocationStrategy strategy, uint64_t alignment,
                                 uint64_t placement_seed)
    : strategy_(strategy), alignment_(alignment), placement_seed_(placement_seed) {}

ErrorCode SegmentRegistry::Mount(const rpc::SegmentInfo& info, bool taker_has_name,
                                 MountOutcome* outcome,
                                 const std::function<void(Segment&)>& prepare) {
  *outcome = MountOutcome::kNew;
  const bool disk = info.kind == rpc::ReplicaKind::LOCAL_DISK;
  if (info.size <= 0 || info.name.empty()) return ErrorCode::INVALID_PARAMS;
  if (!disk && info.kind != rpc::ReplicaKind::MEMORY) return ErrorCode::INVALID_PARAMS;
  if (disk && info.lent_by_client) return ErrorCode::INVALID_PARAMS;
  absl::MutexLock lock(&mu_);
  auto it = slot_by_id_.find(info.segment_id);
  auto own_disk = disk ? disk_by_daemon_.find(info.daemon_id) : disk_by_daemon_.end();
  if (it == slot_by_id_.end()) {
    if (own_disk != disk_by_daemon_.end()) return ErrorCode::SEGMENT_ALREADY_EXISTS;
    if (info.lender != 0 && !NameFree(info)) return ErrorCode::SEGMENT_ALREADY_EXISTS;
    uint32_t slot = static_cast<uint32_t>(slots_.size());
    auto segment = std::make_shared<Segment>(slot, info, alignment_);
    if (prepare) prepare(*segment);
    slots_.push_back(std::move(segment));
    slot_by_id_[info.segment_id] = slot;
    lent_ += info.lent_by_client;
    if (disk) disk_by_daemon_[info.daemon_id] = slot;
    return ErrorCode::OK;
  }
  std::shared_ptr<Segment>& known = slots_[it->second];
  const rpc::SegmentInfo& was = known->info();
  // The incarnation is the proof: ids and names are listed to anyone, it never is.
  bool same_owner = was.daemon_id == info.daemon_id;
  bool same = was.kind == info.kind && was.name == info.name &&
              was.incarnation == info.incarnation;
  if (disk) {
    // The restarted daemon (a new id under the old one's name) takes its SSD back.
    bool taken_over = !same_owner && !known->attached() && taker_has_name &&
                      (own_disk == disk_by_daemon_.end() || own_disk->second == it->second);
    same = same && (same_owner || taken_over);
  } else {
    same = same && same_owner && was.base == info.base && was.size == info.size;
  }
  if (!same) return ErrorCode::SEGMENT_ALREADY_EXISTS;
  *outcome = MountOutcome::kAgain;
  if (known->attached()) return ErrorCode::OK;
  if (was.endpoints != info.endpoints || was.lent_by_client != info.lent_by_client ||
      !same_owner || was.size != info.size || was.lender != info.lender) {
    // Nobody allocates in a detached segment or frees outside this lock, so the ranges
    // move over whole. The daemon knows best whose memory it is.
    lent_ += static_cast<size_t>(info.lent_by_client) - static_cast<size_t>(was.lent_by_client);
    if (disk) {
      disk_by_daemon_.erase(was.daemon_id);
      disk_by_daemon_[info.daemon_id] = it->second;
    }
    known = std::make_shared<Segment>(known->slot(), info, *known);
  }
  known->Attach(NextRound());
  detached_.fetch_sub(1);
  *outcome = MountOutcome::kReattached;
  return ErrorCode::OK;
}

bool SegmentRegistry::NameFree(const rpc::SegmentInfo& info) const {
  for (const auto& s : slots_) {
    if (!s || s->info().name != info.name || s->leaving()) continue;
    if (s->info().daemon_id != info.daemon_id || s->info().lender != info.lender) return false;
  }
  return true;
}

void SegmentRegistry::Restore(const rpc::SegmentInfo& info) {
  absl::WriterMutexLock lock(&mu_);
  auto it = slot_by_id_.find(info.segment_id);
  if (it != slot_by_id_.end()) {
    if (slots_[it->second]->attached()) detached_.fetch_add(1);
    lent_ += static_cast<size_t>(info.lent_by_client) -
             static_cast<size_t>(slots_[it->second]->lent());
    const rpc::SegmentInfo& was = slots_[it->second]->info();
    if (was.kind == rpc::ReplicaKind::LOCAL_DISK) disk_by_daemon_.erase(was.daemon_id);
    if (info.kind == rpc::ReplicaKind::LOCAL_DISK) disk_by_daemon_[info.daemon_id] = it->second;
    slots_[it->second] = std::make_shared<Segment>(it->second, info, alignment_, false);
    return;
  }
  uint32_t slot = static_cast<uint32_t>(slots_.size());
  slots_.push_back(std::make_shared<Segment>(slot, info, alignment_, /*attached=*/false));
  slot_by_id_[info.segment_id] = slot;
  detached_.fetch_add(1);
  lent_ += info.lent_by_client;
  if (info.kind == rpc::ReplicaKind::LOCAL_DISK) disk_by_daemon_[info.daemon_id] = slot;
}

uint32_t SegmentRegistry::NextRound() {
  uint32_t round = next_round_.fetch_add(1, std::memory_order_relaxed);
  // 0 is a restored replica's: never a round's (a wrap takes 2^32 rounds).
  return round != 0 ? round : next_round_.fetch_add(1, std::memory_order_relaxed);
}

bool SegmentRegistry::SlotOf(int64_t segment_id, uint32_t* slot) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = slot_by_id_.find(segment_id);
  if (it == slot_by_id_.end()) return false;
  *slot = it->second;
  return true;
}

ErrorCode SegmentRegistry::BeginUnmount(int64_t daemon_id, int64_t segment_id,
                                        std::shared_ptr<Segment>* out) {
  absl::ReaderMutexLock lock(&mu_);
  auto it = slot_by_id_.find(segment_id);
  if (it == slot_by_id_.end()) return ErrorCode::SEGMENT_NOT_FOUND;
  const std::shared_ptr<Segment>& segment = slots_[it->second];
  if (segment->info().daemon_id != daemon_id) return ErrorCode::ILLEGAL_CLIENT;
  segment->StopAllocating();
  *out = segment;
  return ErrorCode::OK;
}

void SegmentRegistry::Erase(uint32_t slot) {
  absl::WriterMutexLock lock(&mu_);
  if (slot >= slots_.size() || !slots_[slot]) return;
  if (!slots_[slot]->attached()) detached_.fetch_sub(1);
  lent_ -= slots_[slot]->lent();
  auto disk = disk_by_daemon_.find(slots_[slot]->info().daemon_id);
  if (disk != disk_by_daemon_.end() && disk->second == slot) disk_by_daemon_.erase(disk);
  slot_by_id_.erase(slots_[slot]->info().segment_id);
  slots_[slot].reset();
}

std::vector<std::shared_ptr<Segment>> SegmentRegistry::Detach(int64_t daemon_id,
                                                             int64_t deadline_ms) {
  absl::WriterMutexLock lock(&mu_);
  std::vector<std::shared_ptr<Segment>> out;
  for (const auto& s : slots_) {
    if (!s || s->info().daemon_id != daemon_id || !s->attached()) continue;
    s->Detach(deadline_ms);
    detached_.fetch_add(1);
    out.push_back(s);
  }
  return out;
}

std::vector<std::shared_ptr<Segment>> SegmentRegistry::DetachedPast(int64_t now_ms) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::shared_ptr<Segment>> out;
  for (const auto& s : slots_) {
    if (s && !s->attached() && s->detach_deadline_ms() < now_ms) out.push_back(s);
  }
  return out;
}

void SegmentRegistry::PostponeDetached(int64_t lost_ms) {
  absl::WriterMutexLock lock(&mu_);
  for (const auto& s : slots_) {
    if (s && !s->attached()) s->set_detach_deadline_ms(s->detach_deadline_ms() + lost_ms);
  }
}

void SegmentRegistry::DetachSegment(const std::shared_ptr<Segment>& segment,
                                    int64_t deadline_ms) {
  absl::WriterMutexLock lock(&mu_);
  if (!segment->attached()) {
    segment->set_detach_deadline_ms(std::max(segment->detach_deadline_ms(), deadline_ms));
    return;
  }
  segment->Detach(deadline_ms);
  detached_.fetch_add(1);
}

std::shared_ptr<Segment> SegmentRegistry::DiskSegmentOf(int64_t daemon_id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = disk_by_daemon_.find(daemon_id);
  return it != disk_by_daemon_.end() ? slots_[it->second] : nullptr;
}

std::vector<std::shared_ptr<Segment>> SegmentRegistry::SegmentsOf(int64_t daemon_id) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::shared_ptr<Segment>> out;
  for (const auto& s : slots_) {
    if (s && s->info().daemon_id == daemon_id) out.push_back(s);
  }
  return out;
}

std::shared_ptr<Segment> SegmentRegistry::Get(uint32_t slot) const {
  absl::ReaderMutexLock lock(&mu_);
  return slot < slots_.size() ? slots_[slot] : nullptr;
}

void SegmentRegistry::Free(uint32_t slot, uint32_t node) const {
  absl::ReaderMutexLock lock(&mu_);
  if (slot < slots_.size() && slots_[slot]) slots_[slot]->Free(node);
}

std::vector<std::shared_ptr<Segment>> SegmentRegistry::CandidateOrder(
    const std::vector<std::string>& preferred, const std::vector<std::string>& avoided,
    int64_t local_daemon) const {
  std::vector<std::shared_ptr<Segment>> live;
  for (const auto& s : slots_) {
    if (s && !s->disk()) live.push_back(s);
  }
  if (strategy_ != AllocationStrategy::kFreeRatioFirst && placement_seed_ != 0) {
    // The n-th order from (seed, n) alone: no generator shared between the threads that
    // allocate at once (each call seeds its own), and reproducible for a given sequence.
    const uint64_t n = orders_drawn_.fetch_add(1, std::memory_order_relaxed);
    std::seed_seq seq{static_cast<uint32_t>(placement_seed_),
                      static_cast<uint32_t>(placement_seed_ >> 32), static_cast<uint32_t>(n),
                      static_cast<uint32_t>(n >> 32)};
    std::mt19937_64 rng(seq);
    std::shuffle(live.begin(), live.end(), rng);
  } else if (strategy_ != AllocationStrategy::kFreeRatioFirst) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::shuffle(live.begin(), live.end(), rng);
  } else {
    std::vector<std::pair<double, std::shared_ptr<Segment>>> ranked;
    for (auto& s : live) ranked.emplace_back(s->free_ratio(), s);
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t i = 0; i < live.size(); ++i) live[i] = ranked[i].second;
  }
  if (preferred.empty() && avoided.empty() && local_daemon == 0) {
    // The common put, which names no daemon: lent memory last, and no copies (the hot path).
    if (lent_ > 0) {
      std::stable_partition(live.begin(), live.end(),
                            [](const std::shared_ptr<Segment>& s) { return !s->lent(); });
    }
    return live;
  }
  // The tiers of the placement policy (segment_registry.h); the strategy's order holds
  // within each. A name both preferred and avoided is preferred: the caller's wish wins.
  std::vector<std::shared_ptr<Segment>> ordered;
  ordered.reserve(live.size());
  std::unordered_set<const Segment*> taken;
  for (const std::string& name : preferred) {
    for (int lent = 0; lent < 2; ++lent) {
      for (const auto& s : live) {
        if (s->info().name == name && s->lent() == (lent == 1) && taken.insert(s.get()).second) {
          ordered.push_back(s);
        }
      }
    }
  }
  for (int lent = 0; lent < 2 && local_daemon != 0; ++lent) {
    for (const auto& s : live) {
      if (s->info().daemon_id == local_daemon && s->lent() == (lent == 1) &&
          taken.insert(s.get()).second) {
        ordered.push_back(s);
      }
    }
  }
  // Avoided names are daemons' (those a writer failed to reach): memory lent at such a
  // daemon under its clients' names is on the same host, and avoided with it.
  std::unordered_set<std::string> avoid(avoided.begin(), avoided.end());
  std::unordered_set<int64_t> avoid_daemons;
  for (const auto& s : live) {
    if (s->info().lender == 0 && avoid.count(s->info().name) != 0) {
      avoid_daemons.insert(s->info().daemon_id);
    }
  }
  for (int tier = 0; tier < 4; ++tier) {
    bool avoided_tier = tier >= 2, lent_tier = tier % 2 == 1;
    for (const auto& s : live) {
      if (s->lent() != lent_tier || taken.count(s.get()) != 0) continue;
      bool is_avoided = avoid.count(s->info().name) != 0 ||
                        avoid_daemons.count(s->info().daemon_id) != 0;
      if (is_avoided == avoided_tier) ordered.push_back(s);
    }
  }
  return ordered;
}

std::vector<Placement> SegmentRegistry::Allocate(uint64_t size, size_t replica_num,
                                                 const std::vector<std::string>& preferred,
                                                 const std::vector<std::string>& avoided,
                                                 int64_t local_daemon) {
  std::vector<Placement> out;
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::shared_ptr<Segment>> order = CandidateOrder(preferred, avoided, local_daemon);
  std::vector<bool> used(order.size(), false);
  // The daemons and names holding a replica: as many as replica_num, a handful at most.
  absl::InlinedVector<int64_t, 4> daemons;
  absl::InlinedVector<const std::string*, 4> names;
  // Pass 0 spreads over distinct daemons; pass 1 fills up with segments of other names on
  // daemons that already hold a replica (memory lent there by other clients); pass 2 with
  // any segment left. Names come before segments because a name is what a copy, a move and
  // a clear address, and a client's segments all carry its one name.
  for (int pass = 0; pass < 3 && out.size() < replica_num; ++pass) {
    for (size_t i = 0; i < order.size() && out.size() < replica_num; ++i) {
      if (used[i]) continue;
      int64_t daemon = order[i]->info().daemon_id;
      const std::string& name = order[i]->info().name;
      if (pass == 0 && std::find(daemons.begin(), daemons.end(), daemon) != daemons.end()) {
        continue;
      }
      if (pass < 2 && std::find_if(names.begin(), names.end(), [&](const std::string* n) {
                        return *n == name;
                      }) != names.end()) {
        continue;
      }
      Placement p;
      if (order[i]->Allocate(size, &p.offset, &p.node)) {
        p.segment = order[i];
        out.push_back(std::move(p));
        used[i] = true;
        daemons.push_back(daemon);
        names.push_back(&name);
      }
    }
  }
  return out;
}

std::vector<rpc::SegmentInfo> SegmentRegistry::List() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<rpc::SegmentInfo> out;
  for (const auto& s : slots_) {
    if (!s || !s->attached()) continue;
    out.push_back(s->info());
    out.back().used = static_cast<int64_t>(s->used());
    out.back().incarnation = 0;
  }
  return out;
}

std::vector<std::shared_ptr<Segment>> SegmentRegistry::All() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::shared_ptr<Segment>> out;
  for (const auto& s : slots_) {
    if (s) out.push_back(s);
  }
  return out;
}

void SegmentRegistry::Clear() {
  absl::WriterMutexLock lock(&mu_);
  slots_.clear();
  slot_by_id_.clear();
  detached_ = 0;
  lent_ = 0;
  disk_by_daemon_.clear();
}

size_t SegmentRegistry::count() const {
  absl::ReaderMutexLock lock(&mu_);
  return slot_by_id_.size() - disk_by_daemon_.size();
}

void SegmentRegistry::DiskFigures(size_t* count, uint64_t* capacity) const {
  absl::ReaderMutexLock lock(&mu_);
  *count = disk_by_daemon_.size();
  *capacity = 0;
  for (const auto& [daemon, slot] : disk_by_daemon_) {
    *capacity += static_cast<uint64_t>(slots_[slot]->info().size);
  }
}

uint64_t SegmentRegistry::capacity() const {
  absl::ReaderMutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& s : slots_) total += s ? s->capacity() : 0;
  return total;
}

void SegmentRegistry::Usage(uint64_t* used, uint64_t* capacity) const {
  absl::ReaderMutexLock lock(&mu_);
  *used = *capacity = 0;
  for (const auto& s : slots_) {
    if (!s) continue;
    *used += s->used();
    *capacity += s->capacity();
  }
}

uint64_t SegmentRegistry::used() const {
  absl::ReaderMutexLock lock(&mu_);
  uint64_t total = 0;
  for (const auto& s : slots_) total += s ? s->used() : 0;
  return total;
}

}  // namespace mooncake
