#include "daemon/worker_threads.h"
#include "common/spin_wait.h"

namespace mooncake {

WorkerThreads::WorkerThreads(size_t threads) {
  for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
}

WorkerThreads::~WorkerThreads() { Stop(); }

void WorkerThreads::Push(std::unique_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Dropped: job is destroyed once the lock is released, since that can submit again
    // (a Request's end can run a teardown that hands work over).
    if (stopping_) return;
    queue_.push_back(std::move(job));
    queued_.fetch_add(1);
    if (sleepers_ == 0 || queue_.size() <= static_cast<size_t>(spinners_.load())) return;
  }
  cv_.notify_one();
}

void WorkerThreads::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    stopping_flag_.store(true);
  }
  cv_.notify_all();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
}

void WorkerThreads::Work() {
  for (;;) {
    std::unique_ptr<Job> job;
    {
      if (queued_.load() == 0) {
        spinners_.fetch_add(1);
        SpinUntil([this] { return queued_.load() != 0 || stopping_flag_.load(); }, SpinBudgetNanos());
        spinners_.fetch_sub(1);
      }
      std::unique_lock<std::mutex> lock(mu_);
      ++sleepers_;
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      --sleepers_;
      if (queue_.empty()) return;  // stopping, and nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
      queued_.fetch_sub(1);
    }
    job->Run();
  }
}

}  // namespace mooncake
