#include "libmc/pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/base/error_code.h"
#include "common/base/logging.h"
#include "common/base/shared_memory.h"

namespace mooncake {
namespace client {

namespace {

// MOONCAKE_STORE_HUGE_PAGES=0 keeps pools off the host's reserved huge pages (left to
// mooncaked's segments, say, on a host whose reservation only covers those).
bool PoolHugePagesWanted() {
  const char* text = std::getenv("MOONCAKE_STORE_HUGE_PAGES");
  return text == nullptr || std::strcmp(text, "0") != 0;
}

}  // namespace

PoolBlock::~PoolBlock() { pool_->ReleaseStage(node_); }

ErrorCode Pool::Create(uint64_t size, std::shared_ptr<Pool>* out, std::string* why) {
  if (size == 0 || size > static_cast<uint64_t>(INT64_MAX)) {
    if (why != nullptr) *why = "a pool of " + std::to_string(size) + " bytes cannot be made";
    return ErrorCode::INVALID_PARAMS;
  }
  SharedMemoryOptions options;
  options.name = "mooncake-pool";
  options.sealed = true;  // mooncaked refuses a pool whose size could change under it
  // The application's memory: its own writes fault the pages in, as with malloc. On huge
  // pages the pool is rounded up to whole pages, and the rest is usable too.
  options.huge_tlb = PoolHugePagesWanted();
  SharedMemory shm;
  std::string error;
  if (!CreateSharedMemory(size, options, &shm, &error)) {
    if (why != nullptr) {
      *why = "cannot create a pool of " + std::to_string(size) + " bytes: " + error;
    }
    return ErrorCode::INTERNAL_ERROR;
  }
  MC_LOG_DEBUG("mooncake_store: a %llu-byte pool on %s",
               static_cast<unsigned long long>(shm.mapped), SharedPagesName(shm.pages));
  out->reset(new Pool(shm.fd, shm.base, shm.mapped));
  return ErrorCode::OK;
}

Pool::Pool(int fd, char* base, uint64_t size)
    : fd_(fd), base_(base), size_(size), allocator_(size, kAlignment) {}

Pool::~Pool() {
  munmap(base_, size_);
  close(fd_);
}

uint64_t Pool::capacity() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocator_.capacity();
}

void* Pool::Allocate(uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  OffsetAllocator::Allocation a = allocator_.Allocate(size);
  if (!a.ok()) return nullptr;
  app_blocks_.emplace(a.offset, AppBlock{a.node});
  return base_ + a.offset;
}

void Pool::Free(void* ptr) {
  if (ptr == nullptr) return;
  uint64_t offset;
  if (!Contains(ptr, 0, &offset)) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = app_blocks_.find(offset);
    if (it == app_blocks_.end() || it->second.freed) return;
    if (it->second.pins > 0) {
      it->second.freed = true;  // the daemon may still write it: the last pin frees it
      return;
    }
    allocator_.Free(it->second.node);
    app_blocks_.erase(it);
  }
  stage_freed_.notify_all();  // a staged transfer may be waiting for room
}

// The offsets one PinAllocations token pins; unpinned when the last holder lets go.
struct Pool::PinSet {
  std::shared_ptr<Pool> pool;
  std::vector<uint64_t> offsets;
  ~PinSet() { pool->Unpin(offsets); }
};

std::shared_ptr<void> Pool::PinAllocations() {
  auto pins = std::make_shared<PinSet>();
  pins->pool = shared_from_this();
  std::lock_guard<std::mutex> lock(mu_);
  pins->offsets.reserve(app_blocks_.size());
  for (auto& [offset, block] : app_blocks_) {
    if (block.freed) continue;
    ++block.pins;
    pins->offsets.push_back(offset);
  }
  return pins;
}

void Pool::Unpin(const std::vector<uint64_t>& offsets) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t offset : offsets) {
      auto it = app_blocks_.find(offset);
      if (it == app_blocks_.end() || --it->second.pins > 0 || !it->second.freed) continue;
      allocator_.Free(it->second.node);
      app_blocks_.erase(it);
    }
  }
  stage_freed_.notify_all();
}

bool Pool::Contains(const void* ptr, uint64_t length, uint64_t* offset) const {
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  uintptr_t b = reinterpret_cast<uintptr_t>(base_);
  if (p < b || p - b >= size_) return false;
  uint64_t off = p - b;
  if (length > size_ - off) return false;
  *offset = off;
  return true;
}

std::shared_ptr<PoolBlock> Pool::StageLocked(uint64_t min_size, uint64_t max_size) {
  OffsetAllocator::Allocation a = allocator_.Allocate(max_size);
  uint64_t got = max_size;
  if (!a.ok() && min_size < max_size) {
    uint64_t largest = allocator_.largest_free();
    if (largest >= min_size) {
      got = std::min(largest, max_size);
      a = allocator_.Allocate(got);
    }
  }
  if (!a.ok()) return nullptr;
  ++staged_blocks_;
  return std::shared_ptr<PoolBlock>(
      new PoolBlock(shared_from_this(), base_ + a.offset, a.offset, got, a.node));
}

std::shared_ptr<PoolBlock> Pool::TryStage(uint64_t min_size, uint64_t max_size) {
  if (max_size == 0) return nullptr;
  min_size = std::max<uint64_t>(1, std::min(min_size, max_size));
  std::lock_guard<std::mutex> lock(mu_);
  return StageLocked(min_size, max_size);
}

std::shared_ptr<PoolBlock> Pool::Stage(uint64_t min_size, uint64_t max_size,
                                       std::chrono::steady_clock::time_point deadline) {
  if (max_size == 0) return nullptr;
  min_size = std::max<uint64_t>(1, std::min(min_size, max_size));
  std::unique_lock<std::mutex> lock(mu_);
  if (min_size > allocator_.capacity()) return nullptr;  // can never fit
  for (;;) {
    std::shared_ptr<PoolBlock> block = StageLocked(min_size, max_size);
    if (block) return block;
    if (staged_blocks_ == 0) return nullptr;
    if (stage_freed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      block = StageLocked(min_size, max_size);
      return block;
    }
  }
}

void Pool::ReleaseStage(uint32_t node) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    allocator_.Free(node);
    --staged_blocks_;
  }
  stage_freed_.notify_all();
}

}  // namespace client
}  // namespace mooncake
