// A fixed set of threads running submitted closures in FIFO order. Requests block on
// master RPCs, so there are more workers than cores; a closure never waits for another
// closure.
//
// Spinning (spin_ns > 0, common/base/spin_wait.h): an idle worker polls the queue for a while
// before it sleeps on the condition variable, so that a job submitted soon after needs no
// futex wake (tens of microseconds of the submitter's CPU on a VM whose idle vCPUs halt).
// At most kMaxSpinners workers spin at once (two vCPUs: more spinners starve the threads
// doing the work); the others sleep at once. Each worker's budget adapts to how long its
// waits turn out to be, so an idle pool stops spinning. Push skips the notify while the
// spinners outnumber the queued jobs; the argument that no job is stranded is at Push in
// worker_threads.cc.
//
// ("Pool" in this project is the application's shared-memory pool, hence not ThreadPool.)
#ifndef MOONCAKE_DAEMON_WORKER_THREADS_H_
#define MOONCAKE_DAEMON_WORKER_THREADS_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/base/spin_wait.h"

namespace mooncake {

class WorkerThreads {
 public:
  // spin_ns: how long an idle worker polls for a job before it sleeps; 0 = never.
  explicit WorkerThreads(size_t threads, int64_t spin_ns = 0);
  ~WorkerThreads();  // Stop()
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;

  // Queues task, any callable taking no arguments. Move-only ones are welcome: a closure
  // may own what it must give back when done (a ClientConnection::Request), and it is
  // destroyed on its worker right after it ran. Dropped (destroyed at once) after Stop().
  template <typename F>
  void Submit(F task) {
    Push(std::make_unique<Task<F>>(std::move(task)));
  }
  // Runs what is queued, then joins the workers.
  void Stop();

  // At most this many idle workers poll the queue at once.
  static constexpr int kMaxSpinners = 1;

 private:
  // A queued closure, type-erased (std::function would demand a copyable one).
  struct Job {
    virtual ~Job() = default;
    virtual void Run() = 0;
  };
  template <typename F>
  struct Task final : Job {
    explicit Task(F f) : fn(std::move(f)) {}
    void Run() override { fn(); }
    F fn;
  };

  void Push(std::unique_ptr<Job> job);
  void Work();

  const int64_t spin_ns_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> queue_;  // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  int sleepers_ = 0;  // workers in cv_.wait (notified or not); guarded by mu_
  // What spinners poll, lock-free: queue_.size() (written under mu_) and stopping_.
  std::atomic<size_t> queued_{0};
  std::atomic<bool> stopping_flag_{false};
  // The workers spinning now: counted from TryEnter until Leave, which each does before
  // it takes mu_ to look at the queue.
  SpinnerLimit spinners_{kMaxSpinners};
  std::vector<std::thread> workers_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_WORKER_THREADS_H_
