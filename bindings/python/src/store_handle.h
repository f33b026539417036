// The C-level objects behind one MooncakeDistributedStore: a handle of the C ABI, the
// memory borrowed from its pool, and the binding's record of caller buffers.
//
// Nothing here touches Python, so all of it can run with the GIL released.
#ifndef MOONCAKE_STORE_PY_STORE_HANDLE_H_
#define MOONCAKE_STORE_PY_STORE_HANDLE_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "mooncake_store.h"

namespace mooncake_py {

// One mooncake_store_t of the C ABI, owned: created here, destroyed with the last reference.
// Destroying the handle unmaps its pool, so every object that points into the pool (an
// alloc() memoryview, a BufferHandle) holds a shared_ptr to its StoreHandle: the handle
// lives until the last of them is gone, even after the store object itself.
class StoreHandle {
 public:
  StoreHandle() : store_(mooncake_store_create()) {
    if (store_ == nullptr) throw std::bad_alloc();
  }
  ~StoreHandle() { mooncake_store_destroy(store_); }
  StoreHandle(const StoreHandle&) = delete;
  StoreHandle& operator=(const StoreHandle&) = delete;

  mooncake_store_t get() const { return store_; }

  // Set (with the GIL held) once connect/setup succeeded: the handle then owns a pool of
  // pool_size bytes that stays mapped after close() and is only replaced by a later connect
  // with another size. See MooncakeDistributedStore::HandleForConnect.
  bool connected_once = false;
  uint64_t pool_size = 0;

 private:
  mooncake_store_t store_;
};

// Address ranges the binding knows to be valid caller memory: buffers registered through
// register_buffer() and live alloc() blocks. The C ABI validates registered ranges itself
// but cannot be asked about them; get_into_ranges() writes at caller-given offsets and
// needs the capacity behind a bare address to refuse writing past a buffer's end, as
// Mooncake does. Registered ranges are also replayed onto a fresh handle (see
// HandleForConnect). Thread-safe.
class RangeRegistry {
 public:
  enum Kind { kRegistered, kPoolBlock };

  void Add(Kind kind, uintptr_t start, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    Map(kind)[start] = size;
  }
  void Remove(Kind kind, uintptr_t start) {
    std::lock_guard<std::mutex> lock(mu_);
    Map(kind).erase(start);
  }
  // Bytes from addr to the end of the known range that contains it; 0 when none does.
  size_t CapacityAt(uintptr_t addr) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = 0;
    for (auto* map : {&registered_, &pool_blocks_}) {
      auto it = map->upper_bound(addr);
      if (it == map->begin()) continue;
      --it;
      if (addr < it->first + it->second) best = std::max(best, it->first + it->second - addr);
    }
    return best;
  }
  std::vector<std::pair<uintptr_t, size_t>> Registered() {
    std::lock_guard<std::mutex> lock(mu_);
    return {registered_.begin(), registered_.end()};
  }

 private:
  std::map<uintptr_t, size_t>& Map(Kind kind) {
    return kind == kRegistered ? registered_ : pool_blocks_;
  }
  std::mutex mu_;
  std::map<uintptr_t, size_t> registered_;
  std::map<uintptr_t, size_t> pool_blocks_;
};

// A block of a handle's pool (mooncake_store_alloc), returned to the pool on destruction.
// Puts from and gets into pool memory are zero-copy: the daemon reads and writes it directly.
class PoolBlock {
 public:
  // nullptr when the pool has no free block of that size (or the handle has no pool).
  static std::unique_ptr<PoolBlock> Alloc(std::shared_ptr<StoreHandle> handle, size_t size,
                                          std::shared_ptr<RangeRegistry> registry = nullptr) {
    void* p = mooncake_store_alloc(handle->get(), size);
    if (p == nullptr) return nullptr;
    if (registry) registry->Add(RangeRegistry::kPoolBlock, reinterpret_cast<uintptr_t>(p), size);
    return std::unique_ptr<PoolBlock>(
        new PoolBlock(std::move(handle), std::move(registry), static_cast<char*>(p), size));
  }
  ~PoolBlock() {
    if (registry_) registry_->Remove(RangeRegistry::kPoolBlock, reinterpret_cast<uintptr_t>(data_));
    mooncake_store_free(handle_->get(), data_);
  }
  PoolBlock(const PoolBlock&) = delete;
  PoolBlock& operator=(const PoolBlock&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  PoolBlock(std::shared_ptr<StoreHandle> handle, std::shared_ptr<RangeRegistry> registry,
            char* data, size_t size)
      : handle_(std::move(handle)), registry_(std::move(registry)), data_(data), size_(size) {}
  std::shared_ptr<StoreHandle> handle_;
  std::shared_ptr<RangeRegistry> registry_;
  char* data_;
  size_t size_;
};

// Scratch memory for a value: a pool block when one is free (the daemon then copies
// straight into it), else the heap (the C library stages the copy through the pool in
// chunks, so values larger than the pool still work).
class Scratch {
 public:
  Scratch() = default;
  Scratch(const std::shared_ptr<StoreHandle>& handle, size_t size) {
    pool_ = PoolBlock::Alloc(handle, size);
    if (pool_) {
      data_ = pool_->data();
    } else {
      heap_.reset(new char[size]);  // no value-initialisation: the get overwrites it
      data_ = heap_.get();
    }
    size_ = size;
  }
  char* data() const { return data_; }
  size_t size() const { return size_; }
  bool in_pool() const { return pool_ != nullptr; }

 private:
  std::unique_ptr<PoolBlock> pool_;
  std::unique_ptr<char[]> heap_;
  char* data_ = nullptr;
  size_t size_ = 0;
};

// Why the binding itself refused a call before the library could say it: the store the
// call was on (the one whose handle() this thread took last) and why. Per thread, as the
// library's messages are (mooncake_store_errmsg); last_error() shows it first.
struct BindingRefusal {
  const void* store = nullptr;
  std::string why;
};
inline thread_local BindingRefusal t_binding_refusal;
inline thread_local const void* t_calling_store = nullptr;

// A key as the C ABI sees it. The ABI takes NUL-terminated keys, so a key with a NUL in it
// cannot be expressed; it is replaced by "", which every call rejects with -600, and the
// binding notes the real reason for last_error().
inline const char* CKey(const std::string& key) {
  size_t nul = key.find('\0');
  if (nul == std::string::npos) return key.c_str();
  t_binding_refusal = {t_calling_store, "key holds a NUL byte (at byte " + std::to_string(nul) +
                                            "): the C ABI takes keys as C strings"};
  return "";
}

// The entries of a batch call as the C ABI takes them, and where each came from.
struct CBatch {
  std::vector<const char*> keys;
  std::vector<void*> buffers;
  std::vector<size_t> sizes, where;
  void Add(const char* key, void* buffer, size_t size, size_t from) {
    keys.push_back(key);
    buffers.push_back(buffer);
    sizes.push_back(size);
    where.push_back(from);
  }
};

// How often a read whose value grew between get_size and get_into (an upsert in between:
// -600, buffer too small) is tried again before giving up with -600.
constexpr int kReadAttempts = 8;

// The buffer for the attempt-th read of a value whose largest size seen so far is
// largest. A retry means an upsert grew the value between get_size and get_into; under a
// busy writer that happens again and again, so a retry reads into room for the largest
// size seen, eight times more per attempt (get_into reports the bytes it read: a larger
// buffer is harmless, and an unused one is never touched).
inline size_t ReadCapacity(int64_t largest, int attempt) {
  uint64_t capacity = static_cast<uint64_t>(largest) << std::min(3 * attempt, 32);
  return static_cast<size_t>(std::min<uint64_t>(capacity, MOONCAKE_STORE_MAX_VALUE_SIZE));
}

// A value read whole: the bytes and how many of them are valid, or the failure code.
struct Value {
  int64_t result = MOONCAKE_STORE_OBJECT_NOT_FOUND;  // bytes read (> 0) or a negative code
  Scratch memory;
  bool ok() const { return result > 0; }
};

// Reads whole values for keys, with the GIL released. Sizes come from get_size (one
// request per key: the ABI has no batch form), the reads from one batch_get_into. A value
// that grew between the two (an upsert) answers -600 and is read again into a larger
// buffer, a bounded number of times.
inline std::vector<Value> ReadWhole(const std::shared_ptr<StoreHandle>& handle,
                                    const std::vector<std::string>& keys) {
  std::vector<Value> values(keys.size());
  std::vector<size_t> pending(keys.size());
  std::vector<int64_t> largest(keys.size(), 0);
  for (size_t i = 0; i < keys.size(); ++i) pending[i] = i;
  for (int attempt = 0; attempt < kReadAttempts && !pending.empty(); ++attempt) {
    CBatch batch;
    for (size_t i : pending) {
      int64_t size = mooncake_store_get_size(handle->get(), CKey(keys[i]));
      if (size <= 0) {
        values[i].result = size == 0 ? int64_t{MOONCAKE_STORE_OBJECT_NOT_FOUND} : size;
        continue;
      }
      largest[i] = std::max(largest[i], size);
      size_t capacity = ReadCapacity(largest[i], attempt);
      values[i].memory = Scratch(handle, capacity);
      batch.Add(CKey(keys[i]), values[i].memory.data(), capacity, i);
    }
    pending.clear();
    if (batch.where.empty()) break;
    std::vector<int64_t> results(batch.where.size());
    int rc = mooncake_store_batch_get_into(handle->get(), batch.keys.data(),
                                           batch.buffers.data(), batch.sizes.data(),
                                           batch.where.size(), results.data());
    for (size_t j = 0; j < batch.where.size(); ++j) {
      Value& v = values[batch.where[j]];
      v.result = rc != 0 ? rc : results[j];
      if (v.result == MOONCAKE_STORE_INVALID_PARAMS && rc == 0) pending.push_back(batch.where[j]);
      if (!v.ok()) v.memory = Scratch();
    }
  }
  return values;
}

}  // namespace mooncake_py

#endif  // MOONCAKE_STORE_PY_STORE_HANDLE_H_
