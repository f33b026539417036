// Group commit (LevelDB's write group): concurrent calls of one kind share one run.
//
// A call that arrives while no run of its kind is in progress becomes the leader and runs
// at once, alone: a lone caller pays nothing. Calls that arrive while a run is in
// progress queue up. When the run ends the leader, still on its CPU, wakes the members
// of the group it ran and runs the next group itself: the oldest queued call and every
// queued call that may share its run (Compatible), up to max_group. It goes on while
// calls queue up, for up to kRunsPerLeader runs, and then hands the lead to the oldest
// waiter: one run at a time, each as large as the calls that piled up during the last.
// (LevelDB hands the lead on after every run; here a hand-off is a wake-up, and on a
// loaded VM a woken thread may wait milliseconds for a CPU while every call queued
// behind it waits too.)
//
// A follower first spins (common/spin_wait.h: sched_yield between polls, for the spin
// budget) on its state: a run takes tens of microseconds, and a thread put to sleep costs
// its waker about as much again on a VM whose idle CPUs sleep. Only then does it block.
//
// The Runner fills each request's result (it must not throw) and runs without the lock;
// what it wrote is published to each follower by the release store of its state.
//
// Thread roles: any thread calls Submit; one at a time leads (runs groups, its own first),
// the others wait. Lock order: mu_ is a leaf; the Runner runs without it.
#ifndef MOONCAKE_DAEMON_GROUP_COMMIT_H_
#define MOONCAKE_DAEMON_GROUP_COMMIT_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

#include "common/spin_wait.h"

namespace mooncake {

template <class Request>
class GroupCommit {
 public:
  // Runs one group, the leader's request first, and fills every request's result.
  using Runner = std::function<void(const std::vector<Request*>& group)>;
  // Whether other may share a run led by leader.
  using Compatible = std::function<bool(const Request& leader, const Request& other)>;

  // max_group: requests in one run, at least 1.
  GroupCommit(size_t max_group, Runner run, Compatible compatible)
      : max_group_(std::max<size_t>(max_group, 1)),
        run_(std::move(run)),
        compatible_(std::move(compatible)) {}
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Returns once request's group has run (request's result filled): the size of that
  // group (1: it ran alone).
  size_t Submit(Request* request) {
    Waiter self;
    self.request = request;
    std::unique_lock<std::mutex> lock(mu_);
    queue_.push_back(&self);
    if (running_) {
      // Wait for a leader to run ours, or to hand us the lead.
      lock.unlock();
      SpinUntil([&] { return self.state.load(std::memory_order_acquire) != kQueued; },
                SpinBudgetNanos());
      lock.lock();
      while (self.state.load(std::memory_order_acquire) == kQueued) {
        self.sleeping = true;
        self.cv.wait(lock);
      }
      self.sleeping = false;
      if (self.state.load(std::memory_order_acquire) == kDone) return self.group_size;
    }
    // Leading (queue_[0] is self): run the oldest call's group, again and again while
    // calls queue up, for up to kRunsPerLeader runs; then hand the lead on.
    running_ = true;
    size_t own_group = 0;
    for (int runs = 1;; ++runs) {
      std::vector<Waiter*> members{queue_[0]};
      for (size_t i = 1; i < queue_.size() && members.size() < max_group_; ++i) {
        if (compatible_(*queue_[0]->request, *queue_[i]->request)) members.push_back(queue_[i]);
      }
      lock.unlock();
      std::vector<Request*> group;
      group.reserve(members.size());
      for (Waiter* w : members) group.push_back(w->request);
      run_(group);
      lock.lock();
      // The members stand in queue_ in the order they were taken: one pass removes them.
      size_t next = 0;
      queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                                  [&](Waiter* w) {
                                    if (next < members.size() && w == members[next]) {
                                      ++next;
                                      return true;
                                    }
                                    return false;
                                  }),
                   queue_.end());
      for (Waiter* w : members) {
        if (w == &self) {
          own_group = members.size();
        } else {
          w->group_size = members.size();
          Wake(w, kDone);
        }
      }
      if (queue_.empty()) {
        running_ = false;
        return own_group;
      }
      if (runs >= kRunsPerLeader) {
        Wake(queue_[0], kLead);  // running_ stays set: the lead passes on
        return own_group;
      }
    }
  }

  // Calls submitted and not answered yet, the running ones included.
  size_t pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }

 private:
  // Runs one leader makes before it hands the lead to the oldest waiter: enough that a
  // burst rarely needs the hand-off (a wake-up of a thread that, on a loaded VM, may not
  // run again for milliseconds while every call queued behind it waits), few enough that
  // the leader's own caller is not kept long (each run is one master round trip).
  static constexpr int kRunsPerLeader = 4;
  enum State { kQueued, kLead, kDone };
  struct Waiter {
    Request* request = nullptr;
    std::atomic<int> state{kQueued};
    bool sleeping = false;  // blocked on cv; guarded by mu_
    size_t group_size = 0;  // set before state becomes kDone
    std::condition_variable cv;
  };

  // Called with mu_ held. A spinning waiter may return (and its Waiter vanish) as soon as
  // state is stored, so sleeping is read first; a sleeping one cannot return before mu_
  // is released, so notifying it under mu_ is safe.
  static void Wake(Waiter* w, State state) {
    bool sleeping = w->sleeping;
    w->state.store(state, std::memory_order_release);
    if (sleeping) w->cv.notify_one();
  }

  const size_t max_group_;
  const Runner run_;
  const Compatible compatible_;
  std::mutex mu_;
  // Every request submitted and not yet answered, oldest first. Guarded by mu_.
  std::vector<Waiter*> queue_;
  // A leader is running groups (or the lead is being handed on); false only while
  // queue_ is empty. Guarded by mu_.
  bool running_ = false;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_GROUP_COMMIT_H_
