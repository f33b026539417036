// A fixed set of threads running submitted closures in FIFO order. Requests block on
// master RPCs, so there are more workers than cores; a closure never waits for another
// closure.
//
// ("Pool" in this project is the application's shared-memory pool, hence not ThreadPool.)
#ifndef MOONCAKE_DAEMON_WORKER_THREADS_H_
#define MOONCAKE_DAEMON_WORKER_THREADS_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace mooncake {

class WorkerThreads {
 public:
  explicit WorkerThreads(size_t threads);
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

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> queue_;  // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  int sleepers_ = 0;                        // guarded by mu_
  std::atomic<int64_t> queued_{0};
  std::atomic<int> spinners_{0};
  std::atomic<bool> stopping_flag_{false};
  std::vector<std::thread> workers_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_WORKER_THREADS_H_
