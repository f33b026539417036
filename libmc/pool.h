// The client pool: one sealed memfd per handle, mapped here and (after the handshake) in
// mooncaked. Bytes of an object move between the pool and the daemon's segments; the Unix
// socket only carries pool offsets.
//
// The pool also hands out its memory: to the application (mooncake_store_alloc, zero copy)
// and to the library itself (staging blocks through which other memory is copied). One
// OffsetAllocator behind one mutex serves both; every block is 64-byte aligned.
//
// Thread-safe. The memfd stays open and mapped for the pool's whole life, so pointers into
// it survive a daemon restart: the connection hands the same fd to the new daemon.
#ifndef MOONCAKE_LIBMC_POOL_H_
#define MOONCAKE_LIBMC_POOL_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/base/error_code.h"
#include "common/base/offset_allocator.h"

namespace mooncake {
namespace client {

class Pool;

// A block of pool memory owned by the library while it stages a transfer. Freed by its
// destructor; hold it in a shared_ptr so a request that outlives its caller (a timeout)
// keeps the memory reserved until the daemon answers.
class PoolBlock {
 public:
  ~PoolBlock();
  PoolBlock(const PoolBlock&) = delete;
  PoolBlock& operator=(const PoolBlock&) = delete;

  char* data() const { return data_; }
  uint64_t offset() const { return offset_; }
  uint64_t size() const { return size_; }

 private:
  friend class Pool;
  PoolBlock(std::shared_ptr<Pool> pool, char* data, uint64_t offset, uint64_t size,
            uint32_t node)
      : pool_(std::move(pool)), data_(data), offset_(offset), size_(size), node_(node) {}
  std::shared_ptr<Pool> pool_;  // keeps the mapping alive while the block exists
  char* data_;
  uint64_t offset_;
  uint64_t size_;  // usable bytes (what was asked for, not the aligned length)
  uint32_t node_;
};

class Pool : public std::enable_shared_from_this<Pool> {
 public:
  static constexpr uint64_t kAlignment = 64;

  // Creates a pool of size bytes: memfd_create("mooncake-pool"), ftruncate, seal
  // F_SEAL_SHRINK|F_SEAL_GROW (mooncaked refuses unsealed fds), mmap MAP_SHARED.
  // OK, or INVALID_PARAMS for size 0 / too large, INTERNAL_ERROR when a system call
  // fails; then *why (when given) says why.
  static ErrorCode Create(uint64_t size, std::shared_ptr<Pool>* out, std::string* why = nullptr);
  ~Pool();  // unmaps and closes the memfd
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  char* base() const { return base_; }

  // The application's allocations (mooncake_store_alloc / _free). nullptr when full or
  // size is 0. Free ignores pointers it did not hand out (or already freed).
  void* Allocate(uint64_t size);
  void Free(void* ptr);

  // Keeps every application allocation live now from going back to the allocator while
  // the token lives: one freed meanwhile is given back when its last pin is gone. For
  // memory the daemon may still write although the call that named it has returned (a
  // lost connection, a timed-out request: see PoolQuarantine).
  std::shared_ptr<void> PinAllocations();

  // When [ptr, ptr + length) lies wholly inside the pool, stores its offset and returns
  // true. length 0 counts as inside when ptr does.
  bool Contains(const void* ptr, uint64_t length, uint64_t* offset) const;

  // A staging block of between min_size and max_size bytes (as large as is free now, up
  // to max_size), or nullptr at once when not even min_size is free.
  std::shared_ptr<PoolBlock> TryStage(uint64_t min_size, uint64_t max_size);

  // A staging block of between min_size and max_size bytes (as large as is free now, up
  // to max_size). When not even min_size is free, waits until deadline for other staged
  // transfers to give memory back; returns nullptr at the deadline, or at once when no
  // staged transfer is running (then only the application's allocations fill the pool
  // and waiting would not help). Never call it while holding another staging block whose
  // release depends on this thread: that could deadlock with a peer doing the same.
  std::shared_ptr<PoolBlock> Stage(uint64_t min_size, uint64_t max_size,
                                   std::chrono::steady_clock::time_point deadline);

  // Usable capacity (size rounded down to the alignment).
  uint64_t capacity() const;

 private:
  friend class PoolBlock;
  Pool(int fd, char* base, uint64_t size);
  // An application allocation, by offset.
  struct AppBlock {
    uint32_t node;
    uint32_t pins = 0;   // PinAllocations tokens holding it
    bool freed = false;  // Free came while pinned: given back with the last pin
  };

  struct PinSet;  // a PinAllocations token

  std::shared_ptr<PoolBlock> StageLocked(uint64_t min_size, uint64_t max_size);
  void ReleaseStage(uint32_t node);
  void Unpin(const std::vector<uint64_t>& offsets);

  const int fd_;
  char* const base_;
  const uint64_t size_;

  mutable std::mutex mu_;
  std::condition_variable stage_freed_;
  OffsetAllocator allocator_;                         // guarded by mu_
  std::unordered_map<uint64_t, AppBlock> app_blocks_;  // by offset; guarded by mu_
  uint64_t staged_blocks_ = 0;                        // guarded by mu_
};

}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_POOL_H_
