// The lock that makes a snapshot consistent: every change to the master's state happens
// while its thread holds the gate shared; a snapshot holds it exclusively for the moment it
// takes to fork(), so the child's copy of memory sees no change half-made.
//
// Why not absl::Mutex: glibc's default rwlock prefers readers, and under a steady
// request load a snapshot could wait for the gate forever. This one prefers the writer:
// once a snapshot asks, new shared holders wait (the pause they see is what bench/
// durability_bench measures). That would deadlock a thread taking it shared twice, so the
// guards count per thread and only the outermost one locks; a thread holding it
// exclusively passes its shared guards (the forked child runs the state walk on that
// thread). The count is per thread, not per gate: a thread holds at most one gate shared at
// a time (MasterService never calls into another MasterService).
//
// Thread roles: any thread may hold it shared (request handlers, the upkeep thread); the
// snapshot thread takes it exclusively to fork, and a request handler starting a drain
// (MasterService::DrainSegment) as a barrier right after marking its segment, holding no
// shared guard then. It is never held across blocking I/O: a strict
// oplog's fdatasync wait happens after the guard is gone.
#ifndef MOONCAKE_MASTER_STATE_GATE_H_
#define MOONCAKE_MASTER_STATE_GATE_H_

#include <pthread.h>

#include "absl/synchronization/mutex.h"

namespace mooncake {

class StateGate {
 public:
  StateGate() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~StateGate() { pthread_rwlock_destroy(&lock_); }
  StateGate(const StateGate&) = delete;
  StateGate& operator=(const StateGate&) = delete;

  // Held for the life of one public call of MasterService.
  class Shared {
   public:
    explicit Shared(StateGate& gate) : gate_(gate) {
      if (exclusive_ != &gate_ && depth_++ == 0) pthread_rwlock_rdlock(&gate_.lock_);
    }
    ~Shared() {
      if (exclusive_ != &gate_ && --depth_ == 0) pthread_rwlock_unlock(&gate_.lock_);
    }
    Shared(const Shared&) = delete;
    Shared& operator=(const Shared&) = delete;

   private:
    StateGate& gate_;
  };

  // Held by the snapshot thread around fork(), and by a drain's start around one flag.
  class Exclusive {
   public:
    explicit Exclusive(StateGate& gate) : gate_(gate) {
      pthread_rwlock_wrlock(&gate_.lock_);
      exclusive_ = &gate_;
    }
    ~Exclusive() {
      exclusive_ = nullptr;
      pthread_rwlock_unlock(&gate_.lock_);
    }
    Exclusive(const Exclusive&) = delete;
    Exclusive& operator=(const Exclusive&) = delete;

   private:
    StateGate& gate_;
  };

 private:
  static inline thread_local int depth_ = 0;      // Shared guards alive on this thread
  static inline thread_local const StateGate* exclusive_ = nullptr;  // held by this thread
  pthread_rwlock_t lock_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_STATE_GATE_H_
