// The transfer port's connections: which peer each belongs to, and which one gives way
// when a cap is reached, so that a fresh peer is served even when the port is full.
//
// Who is a peer. A connection that opens with HELLO (daemon/transfer_protocol.h) belongs
// to the daemon it names, "host:port": every daemon has its own name even where many share
// an address (all of them on 127.0.0.1, say), which is why a per-address cap alone would
// not do. A connection whose first request is anything else belongs to its source address,
// as an unnamed peer. Until that first request has arrived a connection is new, counted
// per source address too.
//
// Caps. Each peer (a named daemon, or the unnamed connections of one address) holds at
// most per_peer connections; the new connections of one address at most new_per_address;
// the port at most max_connections in all. A connection that would exceed a cap takes the
// place of one that is waiting (not in a request): within its group when the group is
// full, anywhere when the port is. The one chosen is a new connection before any other
// (it has said nothing yet), then the one idle the longest. A connection with a request in
// progress — from a whole, valid header until its reply has gone out — is never taken;
// when every connection in the way is busy, the newcomer is refused. A connection taken is
// shut down; its peer sees a pooled connection break and opens another one
// (daemon/tcp_transport.h), which is admitted the same way.
//
// Trust. With a cluster key the server settles a connection under the name its HELLO
// gave only once AUTH has proved the key (daemon/transfer_server.h): a name claimed
// without it takes no one's place. A key holder (or, without a key, any process on the
// host) may still claim many names and get many shares. What the caps guarantee is that
// idle connections, however many and whoever holds them, never keep a fresh peer out,
// and that a peer holds at most per_peer connections busy; a busy connection ends within
// the stall timeout once its peer stops moving bytes.
//
// Threads. The accept thread calls Admit and Reclaim; each connection's own thread calls
// Settle, BeginRequest, EndRequest and Remove. One mutex guards the table. BeginRequest
// and EndRequest take no lock (an atomic state per connection), so requests on different
// connections never meet. A connection is shut down (shutdown(2)) under the lock, and its
// descriptor is closed only by Remove, under the same lock: a shutdown never reaches a
// descriptor that was closed and reused.
#ifndef MOONCAKE_DAEMON_TRANSFER_CONNECTIONS_H_
#define MOONCAKE_DAEMON_TRANSFER_CONNECTIONS_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace mooncake {

class TransferConnections {
 public:
  struct Limits {
    size_t max_connections = 1024;
    size_t per_peer = 64;
    size_t new_per_address = 256;
  };

  // Counts since construction, for logs and tests.
  struct Stats {
    size_t open = 0;         // admitted and not yet removed (taken ones included)
    size_t busy = 0;         // of them, with a request in progress
    uint64_t admitted = 0;
    uint64_t taken = 0;      // shut down to make room for another connection
    uint64_t refused = 0;    // at Admit or Settle: every connection in the way was busy
  };

  class Connection {
   public:
    int fd() const { return fd_; }
    const std::string& address() const { return address_; }  // the source IP
    // The daemon it named, "" if none (yet). Read by the connection's own thread.
    const std::string& peer() const { return peer_; }

   private:
    friend class TransferConnections;
    enum State : int { kWaiting, kBusy, kTaken };
    Connection(int fd, std::string address) : fd_(fd), address_(std::move(address)) {}

    const int fd_;
    const std::string address_;
    std::string peer_;     // written under the table's mutex by Settle
    bool settled_ = false; // likewise: its first request has arrived
    std::atomic<int> state_{kWaiting};
    std::atomic<int64_t> waiting_since_ns_;  // steady clock: accepted, or last request ended
  };

  explicit TransferConnections(Limits limits) : limits_(limits) {}

  const Limits& limits() const { return limits_; }

  // A connection just accepted from address (its IP). Null when it cannot be admitted
  // (every connection in its way is busy, or Shutdown ran): the caller closes fd.
  // *took: another connection was taken to make room.
  std::shared_ptr<Connection> Admit(int fd, const std::string& address, bool* took);
  // The first request of c arrived: it belongs to the daemon named peer (HELLO), or with
  // peer "" to the unnamed connections of its address. False when that group is full of
  // busy connections: the caller refuses the request (-1305) and closes c. *took as above.
  bool Settle(Connection* c, const std::string& peer, bool* took);
  // A request begins on c (after its header was received and checked): false when c was
  // taken meanwhile, and the request must not be served. EndRequest when it has ended.
  static bool BeginRequest(Connection* c);
  static void EndRequest(Connection* c);
  // Closes c's descriptor and forgets it.
  void Remove(const std::shared_ptr<Connection>& c);

  // Out of descriptors: takes a waiting connection (as for a full port) to free one.
  // False when there is none.
  bool Reclaim();
  // Shuts every connection down, admits no more, and returns once all are removed.
  void Shutdown();

  Stats stats() const;

 private:
  // Whether a connection belongs to a group (key: its name or address).
  using Filter = bool (*)(const Connection& c, const std::string& key);
  // Makes room for one more connection in a group that may hold cap: true if there is
  // room, or was made by taking waiting connections of the group (*took set).
  bool MakeRoomLocked(Filter filter, const std::string& key, size_t cap, bool* took);
  // Takes the waiting connection of the group that gives way first: false if none.
  bool TakeOneLocked(Filter filter, const std::string& key);

  const Limits limits_;
  mutable std::mutex mu_;
  std::condition_variable removed_;
  std::map<int, std::shared_ptr<Connection>> open_;  // guarded by mu_; by descriptor
  bool shutting_down_ = false;                       // guarded by mu_
  Stats stats_;                                      // guarded by mu_ (but open)
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TRANSFER_CONNECTIONS_H_
