// Group commit (LevelDB's write group): concurrent calls of one kind share one run.
//
// A call that arrives while fewer than max_leaders runs are in progress becomes a leader
// and runs at once, alone: a lone caller pays nothing. Calls that arrive while
// max_leaders runs are in progress queue up. When its run ends a leader, still on its
// CPU, wakes the members of the group it ran and runs the next group itself: the oldest
// queued call and every queued call that may share its run (Compatible), up to
// max_group. It goes on while calls queue up, for up to kRunsPerLeader runs, and then
// hands the lead to the oldest waiter. (LevelDB hands the lead on after every run; here a
// hand-off is a wake-up, and on a loaded VM a woken thread may wait milliseconds for a
// CPU while every call queued behind it waits too.)
//
// A follower first spins (common/base/spin_wait.h: sched_yield between polls, for the spin
// budget) on its state: a run takes tens of microseconds, and a thread put to sleep costs
// its waker about as much again on a VM whose idle CPUs sleep. Only then does it block.
//
// The Runner fills each request's result (it must not throw) and runs without the lock;
// what it wrote is published to each follower by the release store of its state.
//
// Thread roles: any thread calls Submit; up to max_leaders at a time lead (run groups,
// their own first), the others wait. Lock order: mu_ is a leaf; the Runner runs without it.
#ifndef MOONCAKE_DAEMON_GROUP_COMMIT_H_
#define MOONCAKE_DAEMON_GROUP_COMMIT_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

#include "common/base/spin_wait.h"

namespace mooncake {

template <class Request>
class GroupCommit {
 public:
  // Runs one group, the leader's request first, and fills every request's result.
  using Runner = std::function<void(const std::vector<Request*>& group)>;
  // Whether other may share a run led by leader.
  using Compatible = std::function<bool(const Request& leader, const Request& other)>;

  // max_group: requests in one run, at least 1. max_leaders: runs in progress at once, at
  // least 1; a call waits only while that many are. spin_ns: how long a follower polls
  // before it sleeps (the daemon's --spin_us; 0: it sleeps at once).
  GroupCommit(size_t max_group, Runner run, Compatible compatible, size_t max_leaders = 1,
              int64_t spin_ns = kDefaultSpinMicros * 1000)
      : max_group_(std::max<size_t>(max_group, 1)),
        max_leaders_(std::max<size_t>(max_leaders, 1)),
        spin_ns_(spin_ns),
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
    if (leaders_ < max_leaders_) {
      ++leaders_;  // queue_ is empty: nobody to take along
    } else {
      // Wait for a leader to run ours, or to hand us the lead (taking us off queue_).
      queue_.push_back(&self);
      lock.unlock();
      SpinUntil([&] { return self.state.load(std::memory_order_acquire) != kQueued; },
                spin_ns_);
      lock.lock();
      while (self.state.load(std::memory_order_acquire) == kQueued) {
        self.sleeping = true;
        self.cv.wait(lock);
      }
      self.sleeping = false;
      if (self.state.load(std::memory_order_acquire) == kDone) return self.group_size;
    }
    // Leading: run head's group (ours first), then the oldest waiter's, again and again
    // while calls queue up, for up to kRunsPerLeader runs; then hand the lead on.
    Waiter* head = &self;
    size_t own_group = 0;
    for (int runs = 1;; ++runs) {
      std::vector<Waiter*> members{head};
      for (size_t i = 0; i < queue_.size() && members.size() < max_group_; ++i) {
        if (compatible_(*head->request, *queue_[i]->request)) members.push_back(queue_[i]);
      }
      // The members were taken in queue_'s order: one pass removes them.
      size_t next = 1;
      queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                                  [&](Waiter* w) {
                                    if (next < members.size() && w == members[next]) {
                                      ++next;
                                      return true;
                                    }
                                    return false;
                                  }),
                   queue_.end());
      lock.unlock();
      std::vector<Request*> group;
      group.reserve(members.size());
      for (Waiter* w : members) group.push_back(w->request);
      run_(group);
      lock.lock();
      for (Waiter* w : members) {
        if (w == &self) {
          own_group = members.size();
        } else {
          w->group_size = members.size();
          Wake(w, kDone);
        }
      }
      if (queue_.empty()) {
        --leaders_;
        return own_group;
      }
      head = queue_.front();
      queue_.erase(queue_.begin());
      if (runs >= kRunsPerLeader) {
        Wake(head, kLead);  // leaders_ stays: the lead passes on
        return own_group;
      }
    }
  }

  // Calls waiting for a run (not those running).
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
  const size_t max_leaders_;
  const int64_t spin_ns_;
  const Runner run_;
  const Compatible compatible_;
  std::mutex mu_;
  // The requests waiting for a run, oldest first. Guarded by mu_.
  std::vector<Waiter*> queue_;
  // Threads leading (running groups, or being handed the lead); below max_leaders_ only
  // while queue_ is empty. Guarded by mu_.
  size_t leaders_ = 0;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_GROUP_COMMIT_H_
