// The objects of one metadata shard: an open-addressing hash table (linear probing) whose
// slots point at one heap block per object holding its metadata and its key together.
//
// Why not std::unordered_map<std::string, ObjectMetadata>: that costs a node, a separate
// heap block for any key longer than 15 bytes, and a bucket array — about 290 bytes per
// single-replica object with 64-byte keys, against a budget of 250. Here an object costs
// one block (metadata + key) plus about 12 bytes of slot and tag arrays, and a lookup
// touches the tag array, then one block.
//
// Not thread-safe: the shard's mutex guards it.
#ifndef MOONCAKE_MASTER_OBJECT_TABLE_H_
#define MOONCAKE_MASTER_OBJECT_TABLE_H_

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "master/directory/object_metadata.h"

namespace mooncake {

class ObjectTable {
 public:
  ObjectTable() = default;
  ~ObjectTable();
  ObjectTable(const ObjectTable&) = delete;
  ObjectTable& operator=(const ObjectTable&) = delete;

  // The hash every caller passes in (MasterService also picks the shard with it; the
  // table uses other bits of it).
  static uint64_t Hash(std::string_view key);

  ObjectMetadata* Find(std::string_view key, uint64_t hash);
  // The key must be absent. Returns the stored metadata.
  ObjectMetadata* Insert(std::string_view key, uint64_t hash, ObjectMetadata meta);
  // No-op when absent.
  void Erase(std::string_view key, uint64_t hash);
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Calls visit(key, meta) for every object; an object for which it returns true is
  // erased right after the call. Erasing moves nothing, so the walk sees each object once.
  template <typename Visit>
  void ForEach(Visit visit) {
    size_t cursor = 0;
    Walk(&cursor, slots_.size(), visit);
  }

  // ForEach in slices, so that the caller can let go of the shard's lock between them:
  // visits the objects in the next max_slots slots from *cursor (0 to start), advances
  // *cursor past them, and returns true once the walk has reached the end. The cursor stays
  // meaningful across slices as long as layout() does not change: erasing moves nothing,
  // an object inserted meanwhile lands in a slot either side of it. A Rehash (an insert that
  // found too few empty slots) moves every object and changes layout(): the walk must then
  // start over.
  template <typename Visit>
  bool Walk(size_t* cursor, size_t max_slots, Visit visit) {
    const size_t end = std::min(slots_.size(), *cursor + max_slots);
    for (size_t i = *cursor; i < end; ++i) {
      if (tags_[i] < kFirstTag) continue;
      Entry* e = slots_[i];
      if (visit(std::string_view(e->key, e->key_len), e->meta)) EraseSlot(i);
    }
    *cursor = end;
    return end == slots_.size();
  }
  // Changes whenever the objects move to other slots.
  uint64_t layout() const { return layout_; }
  // Slots a Walk goes over (what a sample of a window of them is out of).
  size_t slot_count() const { return slots_.size(); }

 private:
  struct Entry {
    ObjectMetadata meta;
    uint16_t key_len;
    char key[1];  // key_len bytes follow, allocated with the entry
  };
  static constexpr uint8_t kEmpty = 0;
  static constexpr uint8_t kTombstone = 1;
  static constexpr uint8_t kFirstTag = 2;

  static uint8_t TagOf(uint64_t hash) { return static_cast<uint8_t>(kFirstTag + (hash >> 57)); }
  // Slot index from bits the shard choice (hash % 1024) did not use.
  size_t Home(uint64_t hash) const { return static_cast<size_t>(hash >> 10) & (slots_.size() - 1); }
  // The slot holding key, or SIZE_MAX.
  size_t FindSlot(std::string_view key, uint64_t hash) const;
  void EraseSlot(size_t i);
  void Rehash(size_t capacity);

  std::vector<uint8_t> tags_;   // per slot: kEmpty, kTombstone, or a tag of the hash
  std::vector<Entry*> slots_;   // power-of-two size
  size_t size_ = 0;
  size_t tombstones_ = 0;
  uint64_t layout_ = 0;  // Rehash count
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_OBJECT_TABLE_H_
