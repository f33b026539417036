// A fixed set of worker threads draining one FIFO queue. Requests block on master RPCs,
// so there are more workers than cores; a closure never waits for another closure.
#ifndef MOONCAKE_DAEMON_THREAD_POOL_H_
#define MOONCAKE_DAEMON_THREAD_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mooncake {

class ThreadPool {
 public:
  explicit ThreadPool(size_t threads);
  ~ThreadPool();  // Stop()
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Submit(std::function<void()> task);
  // Runs what is queued, then joins the workers. Later Submit()s are dropped.
  void Stop();

 private:
  void Work();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_THREAD_POOL_H_
