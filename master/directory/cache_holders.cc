#include "master/directory/cache_holders.h"

#include <algorithm>

namespace mooncake {

// ---- CacheHolderSet ------------------------------------------------------------------

void CacheHolderSet::AddTo(Holder* h, int64_t until_ms, int32_t key_index) {
  h->until_ms = std::max(h->until_ms, until_ms);
  // Keys come in ascending index order (a batch is walked in order), so this keeps the
  // list sorted and free of repeats without a search.
  if (key_index >= 0 && (h->keys.empty() || h->keys.back() < key_index)) {
    h->keys.push_back(key_index);
  }
}

void CacheHolderSet::Add(int64_t daemon, int64_t until_ms, int32_t key_index) {
  changed_ = true;
  AddTo(&daemons_[daemon], until_ms, key_index);
}

void CacheHolderSet::AddEveryone(int64_t until_ms, int32_t key_index) {
  changed_ = true;
  AddTo(&everyone_, until_ms, key_index);
}

void CacheHolderSet::Merge(const Holder& h, Holder* into) {
  into->until_ms = std::max(into->until_ms, h.until_ms);
  std::vector<int32_t> keys;
  keys.reserve(into->keys.size() + h.keys.size());
  std::set_union(into->keys.begin(), into->keys.end(), h.keys.begin(), h.keys.end(),
                 std::back_inserter(keys));
  into->keys.swap(keys);
}

// ---- CacheHolderTable ----------------------------------------------------------------

void CacheHolderTable::DropExpired(Map::iterator it, int64_t now_ms) {
  Records& records = it->second;
  size_t before = records.size();
  records.erase(std::remove_if(records.begin(), records.end(),
                               [now_ms](const Record& r) { return r.until_ms <= now_ms; }),
                records.end());
  records_ -= before - records.size();
  if (records.empty()) by_object_.erase(it);
}

bool CacheHolderTable::Grant(const ObjectMetadata* object, int64_t daemon, int64_t until_ms,
                             int64_t now_ms) {
  // One probe in the usual case (a first read of the object since its last change, by a
  // batch as much as by single reads): the slot is made on the way.
  auto [it, inserted] = by_object_.try_emplace(object);
  if (!inserted) {
    for (Record& r : it->second) {
      if (r.daemon == daemon) {
        r.until_ms = std::max(r.until_ms, until_ms);
        return true;
      }
    }
    if (it->second.size() >= kMaxPerObject) {
      // Full of live readers, or of expired ones a prune has not reached yet.
      DropExpired(it, now_ms);
      it = by_object_.find(object);
      if (it != by_object_.end() && it->second.size() >= kMaxPerObject) return false;
    }
  }
  if (records_ >= max_records_) {
    if (inserted) by_object_.erase(it);  // no slot without a record
    return false;
  }
  if (it == by_object_.end()) it = by_object_.try_emplace(object).first;
  it->second.push_back({daemon, until_ms});
  ++records_;
  return true;
}

void CacheHolderTable::Take(const ObjectMetadata* object, int64_t now_ms, int32_t key_index,
                            CacheHolderSet* out) {
  out->NoteChange();
  auto it = by_object_.find(object);
  if (it == by_object_.end()) return;
  for (const Record& r : it->second) {
    if (r.until_ms > now_ms) out->Add(r.daemon, r.until_ms, key_index);
  }
  records_ -= it->second.size();
  by_object_.erase(it);
}

void CacheHolderTable::Forget(const ObjectMetadata* object) {
  if (by_object_.empty()) return;
  auto it = by_object_.find(object);
  if (it == by_object_.end()) return;
  records_ -= it->second.size();
  by_object_.erase(it);
}

void CacheHolderTable::Prune(int64_t now_ms) {
  for (auto it = by_object_.begin(); it != by_object_.end();) DropExpired(it++, now_ms);
}

void CacheHolderTable::Clear() {
  by_object_.clear();
  records_ = 0;
}

}  // namespace mooncake
