#include "daemon/base/parallel_copy.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>

#include "common/base/spin_wait.h"

namespace mooncake {

ParallelCopy::ParallelCopy(size_t min_bytes, size_t wake_bytes, int64_t spin_ns)
    : min_bytes_(min_bytes), wake_bytes_(wake_bytes), spin_ns_(spin_ns) {
  if (min_bytes_ == 0) return;
  helper_ = std::thread([this] { HelperLoop(); });
  pthread_setname_np(helper_.native_handle(), "mc-copy");
}

ParallelCopy::~ParallelCopy() {
  if (!helper_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(sleep_mu_);
    stop_.store(true);
  }
  wake_.notify_one();
  helper_.join();
}

void ParallelCopy::Copy(const Piece* pieces, size_t count) {
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) total += pieces[i].length;
  std::unique_lock<std::mutex> slot(slot_mu_, std::defer_lock);
  // Alone: too small to be worth sharing, no helper, or the helper is someone else's now.
  if (min_bytes_ == 0 || total < min_bytes_ || count == 0 || !slot.try_lock()) {
    for (size_t i = 0; i < count; ++i) std::memcpy(pieces[i].dest, pieces[i].src, pieces[i].length);
    return;
  }
  parts_.clear();
  group_end_.clear();
  size_t in_group = 0;
  for (size_t i = 0; i < count; ++i) {
    for (size_t off = 0; off < pieces[i].length; off += kGroupBytes) {
      size_t n = std::min(kGroupBytes, pieces[i].length - off);
      parts_.push_back(Piece{pieces[i].dest + off, pieces[i].src + off, n});
      in_group += n;
      if (in_group >= kGroupBytes) {
        group_end_.push_back(parts_.size());
        in_group = 0;
      }
    }
  }
  if (in_group > 0) group_end_.push_back(parts_.size());
  next_group_.store(0, std::memory_order_relaxed);
  open_.store(true);  // seq_cst, as every step of the hand-shake below
  posted_.fetch_add(1);
  if (total >= wake_bytes_ && sleeping_.load()) {
    // Under the lock: the helper is then either before its last look at posted_ (and sees
    // the new copy) or inside wait() (and is woken).
    std::lock_guard<std::mutex> lock(sleep_mu_);
    wake_.notify_one();
  }
  RunGroups();
  // Every group is taken. The helper may still be copying its last one, or about to look
  // at open_: once open_ is false and helper_in_ reads 0, it is neither.
  open_.store(false);
  while (helper_in_.load() != 0) {
    // At most one group (kGroupBytes) of copying away; yielding lets a helper that was
    // woken onto this very CPU finish it.
    sched_yield();
  }
}

size_t ParallelCopy::RunGroups() {
  size_t bytes = 0;
  const size_t groups = group_end_.size();
  for (;;) {
    size_t g = next_group_.fetch_add(1, std::memory_order_relaxed);
    if (g >= groups) return bytes;
    for (size_t p = g == 0 ? 0 : group_end_[g - 1]; p < group_end_[g]; ++p) {
      std::memcpy(parts_[p].dest, parts_[p].src, parts_[p].length);
      bytes += parts_[p].length;
    }
  }
}

void ParallelCopy::HelperLoop() {
  uint64_t seen = posted_.load();
  for (;;) {
    auto posted = [&] { return posted_.load() != seen || stop_.load(); };
    if (!SpinUntil(posted, spin_ns_)) {
      std::unique_lock<std::mutex> lock(sleep_mu_);
      sleeping_.store(true);
      wake_.wait(lock, posted);
      sleeping_.store(false);
    }
    if (stop_.load()) return;
    seen = posted_.load();
    helper_in_.store(1);
    // open_ read after helper_in_ is set: the caller cannot finish under us from here on.
    if (open_.load()) {
      helper_bytes_.fetch_add(RunGroups(), std::memory_order_relaxed);
    }
    helper_in_.store(0);
  }
}

}  // namespace mooncake
