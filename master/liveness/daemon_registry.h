// The daemons the master knows, and when each was last heard from.
//
// A daemon is either registered (it heartbeats; its last heartbeat is remembered) or
// expected back by a deadline. Expected back are the daemons that own restored segments
// (after a restore), and those that fell silent for the TTL (MarkSilent; their segments
// are detached meanwhile, see MasterService's "Liveness"). One expected back is known by
// id and name, but answers to no heartbeat and may not write until it registers again
// (which makes it re-mount, proving who it is, see SegmentRegistry::Mount). One that has
// not registered by its deadline is declared dead with its segments (TakeOverdue).
//
// Thread-safety: every method may be called from any thread (one mutex, a leaf in the
// master's lock order).
#ifndef MOONCAKE_MASTER_DAEMON_REGISTRY_H_
#define MOONCAKE_MASTER_DAEMON_REGISTRY_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace mooncake {

class DaemonRegistry {
 public:
  // Why a daemon is expected back.
  enum class Absence { kNone, kRestored, kSilent };

  // Adds the daemon or refreshes it. Returns what it was before: kNone for a new daemon or
  // a refresh of a registered one (*known tells which), else why it was expected back.
  Absence Register(int64_t daemon_id, const std::string& name, int64_t now_ms, bool* known);
  // A daemon owning restored segments, expected to register again by deadline_ms. No-op
  // when it is known already.
  void ExpectBack(int64_t daemon_id, const std::string& name, int64_t deadline_ms);
  // Records a heartbeat; false when the daemon is unknown or only expected back (it must
  // register again).
  bool Heartbeat(int64_t daemon_id, int64_t now_ms);
  // Registered (not merely expected back).
  bool Known(int64_t daemon_id) const;
  // Forgets and returns the other daemons registered (or expected) under name: a daemon
  // that registers with the endpoint of a known one has replaced it (it restarted), so
  // the old one is dead.
  std::vector<int64_t> TakeReplaced(const std::string& name, int64_t new_daemon_id);
  // The registered daemons not heard from since now_ms - ttl_ms become expected back by
  // deadline_ms (kSilent); returns them.
  std::vector<int64_t> MarkSilent(int64_t now_ms, int64_t ttl_ms, int64_t deadline_ms);
  // Forgets and returns the daemons expected back whose deadline has passed, each with why
  // it was expected.
  std::vector<std::pair<int64_t, Absence>> TakeOverdue(int64_t now_ms);
  // After the master itself stood still for lost_ms (upkeep found a gap in its own rounds):
  // registered daemons count as heard from now, and deadlines move lost_ms later, so that
  // nobody is judged over time the master was not running.
  void ForgiveStall(int64_t now_ms, int64_t lost_ms);
  // The name ("host:port" of its transfer port) of a daemon registered or expected back;
  // false when it is not known.
  bool NameOf(int64_t daemon_id, std::string* name) const;
  // Every daemon registered or expected back, with its name.
  std::vector<std::pair<int64_t, std::string>> List() const;
  size_t count() const;           // registered ones
  size_t expected_count() const;  // expected back, not registered yet

 private:
  struct Daemon {
    std::string name;
    int64_t last_seen_ms = 0;
    int64_t expected_until_ms = 0;  // > 0 while expected back
    Absence absence = Absence::kNone;
  };
  mutable absl::Mutex mu_;
  std::unordered_map<int64_t, Daemon> daemons_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_DAEMON_REGISTRY_H_
