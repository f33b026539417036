// A thread that runs rounds of work until stopped, each round saying how long to wait
// before the next; Stop() cuts a wait short. The daemon's pollers of the master (the SSD
// offloader, the replica-task runner) are such loops.
//
// Thread roles: Start and Stop from the owner's thread; the round and the last call on
// the loop's own thread. Stop returns once the round in progress, and then the last call,
// have run; a round that is running is never interrupted.
#ifndef MOONCAKE_COMMON_PACED_LOOP_H_
#define MOONCAKE_COMMON_PACED_LOOP_H_

#include <chrono>
#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace mooncake {

class PacedLoop {
 public:
  using Round = std::function<std::chrono::milliseconds()>;

  PacedLoop() = default;
  ~PacedLoop() { Stop(); }
  PacedLoop(const PacedLoop&) = delete;
  PacedLoop& operator=(const PacedLoop&) = delete;

  // Runs round() until Stop(), waiting what each call returns between them; once stopped,
  // runs last() (if given) once. Called at most once.
  void Start(Round round, std::function<void()> last);
  // Ends the loop; false when it was never started.
  bool Stop();

 private:
  void Run();

  Round round_;                 // the loop's thread only, once started
  std::function<void()> last_;  // the loop's thread only, once started
  absl::Mutex mu_;
  absl::CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace mooncake

#endif  // MOONCAKE_COMMON_PACED_LOOP_H_
