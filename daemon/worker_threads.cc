#include "daemon/base/worker_threads.h"

namespace mooncake {

WorkerThreads::WorkerThreads(size_t threads, int64_t spin_ns) : spin_ns_(spin_ns) {
  for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
}

WorkerThreads::~WorkerThreads() { Stop(); }

// Why skipping the notify strands no job. A worker is in one of three places: outside
// the lock (running a job, or spinning: counted in spinners_), or in cv_.wait (counted in
// sleepers_ from the moment it decides to wait, under mu_, until it has the lock back).
// Every worker outside cv_.wait takes mu_ and looks at the queue before it waits again,
// and it only waits when the queue is empty. So a queued job can be stranded only if at
// some point every worker is in cv_.wait, un-notified, with the queue non-empty. Take the
// last Push before such a point. Since waiting requires an empty queue, every worker
// entered cv_.wait before this Push took mu_ (a worker that waited later found the queue
// non-empty), and each left the spinners before taking mu_ to wait, so this Push saw
// sleepers_ == number of workers > 0 and spinning() == 0 (each decrement happened
// before that worker's lock, which happened before this Push's lock): it notified, and a
// worker left cv_.wait -- a contradiction. Skipping is also prompt, not only eventually
// right: Push skips only while the jobs queued are at most the workers spinning, and a
// spinner takes mu_ within its budget (it polls queued_), taking a job or finding the
// queue already drained by someone else.
void WorkerThreads::Push(std::unique_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Dropped: job is destroyed once the lock is released, since that can submit again
    // (a Request's end can run a teardown that hands work over).
    if (stopping_) return;
    queue_.push_back(std::move(job));
    queued_.store(queue_.size(), std::memory_order_release);
    if (sleepers_ == 0 || queue_.size() <= static_cast<size_t>(spinners_.spinning())) return;
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
  AdaptiveSpin spin(spin_ns_);
  for (;;) {
    std::unique_ptr<Job> job;
    bool spun = false;  // spun and missed: the wait below tells spin how long it was
    if (spin_ns_ > 0 && queued_.load(std::memory_order_acquire) == 0 &&
        spinners_.TryEnter()) {
      spun = !spin.Spin([this] {
        return queued_.load(std::memory_order_acquire) != 0 || stopping_flag_.load();
      });
      spinners_.Leave();
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!stopping_ && queue_.empty()) {
        ++sleepers_;
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        --sleepers_;
      }
      if (spun) spin.Blocked();
      if (queue_.empty()) return;  // stopping, and nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
      queued_.store(queue_.size(), std::memory_order_relaxed);
    }
    job->Run();
  }
}

}  // namespace mooncake
