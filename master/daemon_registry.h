// The daemons the master knows, and when each was last heard from.
#ifndef MOONCAKE_MASTER_DAEMON_REGISTRY_H_
#define MOONCAKE_MASTER_DAEMON_REGISTRY_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mooncake {

class DaemonRegistry {
 public:
  // Adds the daemon or refreshes it; returns true when it was not known before.
  bool Register(int64_t daemon_id, const std::string& name, int64_t now_ms);
  // Records a heartbeat; false when the daemon is unknown (it must register again).
  bool Heartbeat(int64_t daemon_id, int64_t now_ms);
  bool Known(int64_t daemon_id) const;
  // Forgets and returns the other daemons registered under name: a daemon that registers
  // with the endpoint of a known one has replaced it (it restarted), so the old one is dead.
  std::vector<int64_t> TakeReplaced(const std::string& name, int64_t new_daemon_id);
  // Forgets and returns the daemons not heard from since now_ms - ttl_ms.
  std::vector<int64_t> TakeExpired(int64_t now_ms, int64_t ttl_ms);
  size_t count() const;

 private:
  struct Daemon {
    std::string name;
    int64_t last_seen_ms;
  };
  mutable std::mutex mu_;
  std::unordered_map<int64_t, Daemon> daemons_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_DAEMON_REGISTRY_H_
