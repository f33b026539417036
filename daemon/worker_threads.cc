#include "daemon/worker_threads.h"

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
  }
  cv_.notify_one();
}

void WorkerThreads::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
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
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job->Run();
  }
}

}  // namespace mooncake
