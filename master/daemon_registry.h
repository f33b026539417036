// The daemons the master knows, and when each was last heard from.
//
// After a restore the daemons that own restored segments are expected back: they are known
// by id and name, but answer to no heartbeat and may not write until they register again
// (which makes them re-mount, proving who they are, see SegmentRegistry::Mount). One that has
// not registered by its deadline is declared dead with its segments.
#ifndef MOONCAKE_MASTER_DAEMON_REGISTRY_H_
#define MOONCAKE_MASTER_DAEMON_REGISTRY_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mooncake {

class DaemonRegistry {
 public:
  // Adds the daemon or refreshes it; returns true when it was not registered before (new,
  // or expected back).
  bool Register(int64_t daemon_id, const std::string& name, int64_t now_ms);
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
  // Forgets and returns the daemons not heard from since now_ms - ttl_ms, and those
  // expected back whose deadline has passed (*late, when given, gets those).
  std::vector<int64_t> TakeExpired(int64_t now_ms, int64_t ttl_ms,
                                   std::vector<int64_t>* late = nullptr);
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
    int64_t last_seen_ms;
    int64_t expected_until_ms;  // > 0 while expected back
  };
  mutable std::mutex mu_;
  std::unordered_map<int64_t, Daemon> daemons_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_DAEMON_REGISTRY_H_
