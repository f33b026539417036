// Fresh reads on every host: a change made through this daemon reaches the other daemons'
// read caches before its writer is answered (docs/daemon.md, "Read cache"). This is the
// sending half, and the handler of the receiving half on the transfer port.
//
// Who. A reader that will cache a replica list names itself to the master, which records
// it for the lease (master/directory/cache_holders.h). The reply to a change (UpsertEnd, Remove,
// BatchRemove, RemoveByRegex, RemoveAll) names the daemons whose leases on what changed are
// still live, the writer excepted (it forgets locally), each with its transfer address and
// how long that lease still runs (StaleCaches, daemon/master_link/master_client.h).
//
// How. Forget() sends each of them an INVALIDATE: a CONTROL request on the transfer port
// (channel kCacheInvalidate, daemon/transfer/transfer_protocol.h) carrying the keys, or "everything"
// for a removal by pattern. The holder drops them from its ReadCache, which also voids any
// fill of theirs in flight, and only then acknowledges. Forget returns once each holder has
// acknowledged or, for one that has not (stopped, unreachable, refused, or named without an
// address because the master no longer knows it), once its deadline has passed: received_at
// + ms_left. Its entries end before that (at 0.9 x the lease, measured from before it asked,
// daemon/cluster/read_cache.h), so waiting the deadline out is as good as an acknowledgement. A
// writer thus waits no longer than the longest lease a holder has on the keys, and waits at
// all only for holders that do not answer. The deadline counts from when the reply arrived
// here, after the master computed ms_left: later than the true one, never earlier.
//
// Why no ordering leaves a stale entry (a holder H, a key k, the change C as the master
// ordered it under k's shard lock; "answered" is when the writer tells its client):
// - H's GetReplicaList(k) came before C. The master recorded H, so C names H. H took its
//   fill ticket before asking, and the INVALIDATE runs on H after C: if H's fill came first,
//   the INVALIDATE erases the entry; if later, the fill finds its stripe's epoch moved on
//   and is dropped (ReadCache::Fill). Either way the ack follows, then the answer.
// - H's GetReplicaList(k) came after C: H got the new value (or -704), and the master
//   recorded H for the next change.
// - H never answers: the writer answers after H's deadline. An entry of H's from before C
//   has ended by then, and a fill of H's still in flight (H stopped between the reply and
//   the fill) carries a deadline already past: Fill refuses it, Lookup would too.
// - A get on H that starts after the answer looks k up after the erase (or the deadline),
//   misses, and asks the master, which has ordered C before it.
// What is not covered: a change whose reply never came (-900: it may or may not have
// happened) names nobody; caches may then show the old value for up to one lease.
//
// Threads. The first holder is told on the calling thread, the others in parallel on a
// few threads of our own. A request to a stopped holder never outlives its deadline: the
// TCP transport bounds it by the deadline when that is nearer than the stall timeout.
//
// INVALIDATE payload (little-endian), at most transfer::kMaxControlPayload bytes; more keys
// go in several requests:
//   u8 what (1: the keys that follow, 2: everything) | u32 count |
//   count x (u16 length 1..tenant_key::kMaxStoredKeyLen | key bytes)
// "everything" has count 0. Anything else (another what, a bad length, bytes left over) is
// refused with -600 and a log line; an empty reply payload acknowledges.
#ifndef MOONCAKE_DAEMON_CACHE_INVALIDATOR_H_
#define MOONCAKE_DAEMON_CACHE_INVALIDATOR_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/master_link/master_client.h"
#include "daemon/cluster/read_cache.h"
#include "daemon/transfer/transport.h"
#include "daemon/base/worker_threads.h"

namespace mooncake {

namespace invalidation {

// The keys of which (indices into keys; all of them when which is empty) in as few
// payloads as fit max_payload bytes each. Keys are stored keys (common/base/tenant_key.h): 1..
// tenant_key::kMaxStoredKeyLen bytes.
std::vector<std::string> EncodeKeys(const std::vector<std::string>& keys,
                                    const std::vector<int32_t>& which, size_t max_payload);
std::string EncodeEverything();
// false when payload is not one of the above; *everything or *keys otherwise.
bool Decode(const std::string& payload, bool* everything, std::vector<std::string>* keys);

}  // namespace invalidation

class CacheInvalidator {
 public:
  // caller: the transport that sends CONTROL requests (the TCP one, always present).
  explicit CacheInvalidator(ControlCaller* caller, size_t threads = 4);
  CacheInvalidator(const CacheInvalidator&) = delete;
  CacheInvalidator& operator=(const CacheInvalidator&) = delete;

  // The receiving half, for TransferServer::SetControlHandler(kCacheInvalidate, ...).
  static ControlHandler Handler(ReadCache* cache);

  struct Outcome {
    size_t told = 0;        // holders that acknowledged
    size_t waited_out = 0;  // holders whose deadline was waited for instead
  };
  // Makes every holder stale names forget keys (a holder with key indices: those of them),
  // or everything; returns as described above. keys may be empty when everything is set.
  Outcome Forget(const StaleCaches& stale, const std::vector<std::string>& keys,
                 bool everything);

 private:
  struct Round;
  // Sends payloads to address one after another; true when every one was acknowledged.
  bool Tell(const std::string& address, const std::vector<std::string>& payloads,
            std::chrono::steady_clock::time_point deadline);

  ControlCaller* const caller_;
  WorkerThreads workers_;  // the holders after the first
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_CACHE_INVALIDATOR_H_
