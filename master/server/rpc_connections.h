// The RPC server's account of its connections (master/server/rpc_server.h): which are admitted
// (their processor says so, RpcAdmission), which are not yet, and which must be closed to
// keep the budgets. Bookkeeping only: no descriptors and no clock (callers pass the time),
// so that tests and a fuzzer (fuzz/rpc_connections_fuzzer.cc) drive it as the server does.
//
// Two budgets (Limits), which together bound the descriptors the server holds:
//  - connections not admitted yet (a handshake under way, or a peer refused for good): at
//    most max_unadmitted in all, and max_unadmitted_per_source from one source address. A
//    new one over either cap closes the OLDEST not admitted (of its own source, for the
//    per-source cap). So a peer that floods the port displaces its own connections first;
//    a member's new connection is the newest and completes its handshake (two round
//    trips) long before it becomes the oldest; and nothing a peer without the key does
//    can close an admitted connection.
//  - admitted connections: at most max_admitted. One admitted past it closes the admitted
//    connection idle the longest: its peer is a member (or, without a key, this host's own
//    user), which reconnects when it needs to, and an authenticated caller is never
//    refused for want of room.
// A connection chosen to close (a Victim) leaves both budgets at once, so that it is not
// chosen twice; its I/O thread closes it and then calls Remove.
//
// Thread roles: Add and PickAny from the acceptor; Admit and Remove from the connection's
// I/O thread; Touch (lock-free: a relaxed store) from that thread; the counts from any
// thread. Everything else is under one mutex, held for bookkeeping only: O(1) but for
// the choice of a victim (a walk of the connections not admitted, or, at the admitted
// cap, of the admitted ones).
#ifndef MOONCAKE_MASTER_RPC_CONNECTIONS_H_
#define MOONCAKE_MASTER_RPC_CONNECTIONS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace mooncake {

// Why the server closed a connection itself (its metric's reason label, RpcClosureName).
enum class RpcClosure : uint8_t {
  kFrameBeforeAdmission,  // a frame over the small limit before admission
  kFrameLimit,            // an admitted connection's frame of 0 bytes or over the limit
  kHandshakeTimeout,      // not admitted within the handshake deadline
  kSourceCap,             // the oldest not admitted of a source over its cap
  kUnadmittedCap,         // the oldest not admitted, over the cap of all sources
  kAdmittedCap,           // the admitted connection idle the longest, over the cap
  kIdle,                  // admitted, and silent for the idle timeout
  kDescriptors,           // accept() found no descriptor left: one closed to make one
  kCount
};
// "frame_before_admission", "frame_limit", "handshake_timeout", "source_cap",
// "unadmitted_cap", "connection_cap", "idle", "descriptors".
const char* RpcClosureName(RpcClosure why);

class RpcConnections {
 public:
  struct Limits {
    size_t max_unadmitted = 256;
    size_t max_unadmitted_per_source = 32;
    size_t max_admitted = 16384;
  };
  // A total budget of connections split between the two: a quarter for those not admitted
  // (at most 256, at least 1), an eighth of that per source (at most 32, at least 4 or
  // all of it); the rest admitted (at least 1).
  static Limits Split(size_t total);
  // The total a descriptor limit leaves room for: all but a quarter of it (at least 64
  // kept for the rest of the master: the admin HTTP port, the log and snapshots, etcd,
  // the I/O threads' epoll sets), and at most wanted unless wanted is 0; at least 8.
  static size_t WithinDescriptors(uint64_t descriptor_limit, uint64_t wanted);

  struct Entry {
    uint64_t id = 0;
    size_t owner = 0;     // the I/O thread's index
    std::string source;   // the peer's address without its port: the per-source cap's key
    std::string peer;     // "address:port", for log lines
    int64_t accepted_ns = 0;
    std::atomic<int64_t> last_active_ns{0};
    // Under the mutex:
    bool admitted = false;
    bool closing = false;  // chosen as a victim: counted in no budget
    std::list<Entry*>::iterator in_unadmitted;
  };

  // A connection to close now, and why.
  struct Victim {
    uint64_t id = 0;
    size_t owner = 0;
    std::string peer;
    bool admitted = false;
    RpcClosure why = RpcClosure::kCount;
  };

  explicit RpcConnections(Limits limits);
  RpcConnections(const RpcConnections&) = delete;
  RpcConnections& operator=(const RpcConnections&) = delete;
  ~RpcConnections();

  // A new connection, owned by I/O thread owner, admitted from the start (its processor
  // said so at connect) or not. *victims gets those that must close for it to fit (never
  // itself). The entry lives until Remove.
  Entry* Add(const std::string& source, const std::string& peer, size_t owner, bool admitted,
             int64_t now_ns, std::vector<Victim>* victims);
  // The connection is admitted now (nothing when it was admitted already or is closing);
  // *victims as Add's.
  void Admit(Entry* entry, int64_t now_ns, std::vector<Victim>* victims);
  // It was active now (a call read or a reply written): how long it has been idle counts
  // from here.
  static void Touch(Entry* entry, int64_t now_ns) {
    entry->last_active_ns.store(now_ns, std::memory_order_relaxed);
  }
  // Closed, for whatever reason: forgotten.
  void Remove(Entry* entry);
  // Out of descriptors: one connection to close, the oldest not admitted or else the
  // admitted one idle the longest, as why. False when there is none.
  bool PickAny(RpcClosure why, Victim* victim);

  size_t admitted() const { return admitted_count_.load(std::memory_order_relaxed); }
  size_t unadmitted() const { return unadmitted_count_.load(std::memory_order_relaxed); }
  const Limits& limits() const { return limits_; }

 private:
  // Takes entry out of its budget as a victim.
  Victim Close(Entry* entry, RpcClosure why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The admitted connection idle the longest other than spared, or null.
  Entry* LongestIdle(const Entry* spared) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The caps, after spared came in or was admitted.
  void Enforce(Entry* spared, std::vector<Victim>* victims) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Limits limits_;
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  std::list<Entry*> unadmitted_ ABSL_GUARDED_BY(mu_);  // oldest first
  std::unordered_map<std::string, size_t> unadmitted_by_source_ ABSL_GUARDED_BY(mu_);
  std::unordered_set<Entry*> admitted_set_ ABSL_GUARDED_BY(mu_);  // the admitted, not closing
  std::atomic<size_t> admitted_count_{0};
  std::atomic<size_t> unadmitted_count_{0};
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_RPC_CONNECTIONS_H_
