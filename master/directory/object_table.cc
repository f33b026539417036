#include "master/directory/object_table.h"

#include <cstring>
#include <functional>
#include <new>
#include <utility>

namespace mooncake {

ObjectTable::~ObjectTable() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (tags_[i] >= kFirstTag) EraseSlot(i);
  }
}

uint64_t ObjectTable::Hash(std::string_view key) { return std::hash<std::string_view>{}(key); }

size_t ObjectTable::FindSlot(std::string_view key, uint64_t hash) const {
  if (slots_.empty()) return SIZE_MAX;
  const uint8_t tag = TagOf(hash);
  const size_t mask = slots_.size() - 1;
  for (size_t i = Home(hash);; i = (i + 1) & mask) {
    if (tags_[i] == kEmpty) return SIZE_MAX;
    if (tags_[i] == tag) {
      const Entry* e = slots_[i];
      if (e->key_len == key.size() && std::memcmp(e->key, key.data(), key.size()) == 0) return i;
    }
  }
}

ObjectMetadata* ObjectTable::Find(std::string_view key, uint64_t hash) {
  size_t i = FindSlot(key, hash);
  return i == SIZE_MAX ? nullptr : &slots_[i]->meta;
}

ObjectMetadata* ObjectTable::Insert(std::string_view key, uint64_t hash, ObjectMetadata meta) {
  // Keep at least a quarter of the slots empty so probes stay short and always end.
  if ((size_ + tombstones_ + 1) * 4 > slots_.size() * 3) {
    size_t capacity = slots_.empty() ? 8 : slots_.size();
    while ((size_ + 1) * 2 > capacity) capacity *= 2;  // live objects at most half
    Rehash(capacity);
  }
  void* block = ::operator new(offsetof(Entry, key) + key.size());
  Entry* e = static_cast<Entry*>(block);
  new (&e->meta) ObjectMetadata(std::move(meta));
  e->key_len = static_cast<uint16_t>(key.size());
  std::memcpy(e->key, key.data(), key.size());

  const size_t mask = slots_.size() - 1;
  size_t i = Home(hash);
  while (tags_[i] >= kFirstTag) i = (i + 1) & mask;
  if (tags_[i] == kTombstone) --tombstones_;
  tags_[i] = TagOf(hash);
  slots_[i] = e;
  ++size_;
  return &e->meta;
}

void ObjectTable::Erase(std::string_view key, uint64_t hash) {
  size_t i = FindSlot(key, hash);
  if (i != SIZE_MAX) EraseSlot(i);
}

void ObjectTable::EraseSlot(size_t i) {
  Entry* e = slots_[i];
  e->meta.~ObjectMetadata();
  ::operator delete(e);
  slots_[i] = nullptr;
  tags_[i] = kTombstone;
  ++tombstones_;
  --size_;
}

void ObjectTable::Rehash(size_t capacity) {
  std::vector<uint8_t> old_tags(capacity, kEmpty);
  std::vector<Entry*> old_slots(capacity, nullptr);
  old_tags.swap(tags_);
  old_slots.swap(slots_);
  tombstones_ = 0;
  ++layout_;
  const size_t mask = capacity - 1;
  for (size_t j = 0; j < old_slots.size(); ++j) {
    if (old_tags[j] < kFirstTag) continue;
    Entry* e = old_slots[j];
    uint64_t hash = Hash(std::string_view(e->key, e->key_len));
    size_t i = Home(hash);
    while (tags_[i] != kEmpty) i = (i + 1) & mask;
    tags_[i] = TagOf(hash);
    slots_[i] = e;
  }
}

}  // namespace mooncake
