// The transfer port's connections: which peer each belongs to, and which one gives way
// when a cap is reached, so that a fresh peer is served even when the port is full.
//
// Who is a peer. A connection is *opening* until it has proved it may be served: with a
// cluster key until AUTH has proved the key, without one until its first request (a HELLO,
// or anything else) has arrived. Then it is *open* (Settle), and belongs to a peer: the
// daemon its HELLO named, "host:port" (every daemon has its own name even where many share
// an address, all of them on 127.0.0.1 say, which is why a per-address cap alone would not
// do), or, when it sent something else first, the unnamed connections of its source
// address.
//
// Caps. Each peer (a named daemon, or the unnamed connections of one address) holds at
// most per_peer open connections. Opening connections are capped twice: new_per_address
// from one source address, new_total from all addresses together, well below the port's
// max_connections, so that however many addresses a flood comes from, most of the port
// stays for peers that proved themselves. A connection that would exceed a cap takes the
// place of another in the same group (anywhere when the port is full):
//   - an opening connection first, whatever it has sent or is blocked reading (a
//     header cut short, a HELLO whose payload never comes, an AUTH half sent): until it
//     is open it holds nothing anyone relies on. The one from the address with the most
//     opening connections goes first, then the oldest: a daemon proving the key takes a
//     round trip or two, so a flood must open a whole cap's worth of connections within
//     that time to push it out, and a flood from other addresses never does;
//   - then an open connection waiting between requests, the one idle the longest.
// An open connection with a request in progress (from a whole, valid header until its
// reply has gone out) is never taken; when every connection in the way is such, the
// newcomer is refused. A connection taken is shut down (shutdown(2)), which wakes its
// thread wherever it blocks; its peer, if it was open, sees a pooled connection break and
// opens another one (daemon/transfer/tcp_transport.h), admitted the same way.
//
// Time. An opening connection must open within the handshake deadline; the accept thread
// shuts down those that have not (CloseOpeningsBefore), whatever their threads are doing.
//
// Trust. A key holder (or, without a key, a process of this daemon's user or root on this
// host) may claim many names and get many shares. What the caps guarantee is that neither
// idle connections nor connections that never open, however many and from however many
// addresses, keep a fresh peer out, and that a peer holds at most per_peer connections
// busy; a busy connection ends within the stall timeout once its peer stops moving bytes.
//
// Threads. The accept thread calls Admit, Reclaim and CloseOpeningsBefore; each
// connection's own thread calls Settle, BeginRequest, EndRequest and Remove. One mutex
// guards the table. BeginRequest and EndRequest take no lock (an atomic state per
// connection), so requests on different connections never meet. A connection is shut
// down under the lock, and its descriptor is closed only by Remove, under the same lock:
// a shutdown never reaches a descriptor that was closed and reused.
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
    size_t new_per_address = 128;  // opening connections of one source address
    size_t new_total = 256;        // opening connections in all
  };
  // The caps of a port of max_connections: per_peer as given; an eighth of the port for
  // the opening connections of one address, a quarter for all of them (each at least
  // one, and at least four where the port has room: daemons open a few at once).
  static Limits ForPort(size_t max_connections, size_t per_peer);

  // Counts since construction, for logs and tests.
  struct Stats {
    size_t open = 0;         // admitted and not yet removed (taken ones included)
    size_t opening = 0;      // of them, not open yet (not settled) and not taken
    size_t busy = 0;         // of them, with a request in progress
    uint64_t admitted = 0;
    uint64_t taken = 0;      // shut down to make room for another connection
    uint64_t refused = 0;    // at Admit or Settle: every connection in the way was busy
    uint64_t overdue = 0;    // opening ones shut down at the handshake deadline
  };

  class Connection {
   public:
    int fd() const { return fd_; }
    const std::string& address() const { return address_; }  // the source IP
    // The daemon it named, "" if none (yet). Read by the connection's own thread.
    const std::string& peer() const { return peer_; }
    // Open (Settle ran): read by the connection's own thread, the one that settles it.
    bool settled() const { return settled_; }
    // Taken, or shut down at the handshake deadline: it is closing, whatever it was doing.
    bool taken() const { return state_.load(std::memory_order_acquire) == kTaken; }

   private:
    friend class TransferConnections;
    enum State : int { kWaiting, kBusy, kTaken };
    Connection(int fd, std::string address, int64_t now_ns)
        : fd_(fd), address_(std::move(address)), admitted_ns_(now_ns), waiting_since_ns_(now_ns) {}

    const int fd_;
    const std::string address_;
    const int64_t admitted_ns_;  // steady clock
    std::string peer_;     // written under the table's mutex by Settle
    bool settled_ = false; // likewise: open
    std::atomic<int> state_{kWaiting};
    std::atomic<int64_t> waiting_since_ns_;  // steady clock: accepted, or last request ended
  };

  explicit TransferConnections(Limits limits) : limits_(limits) {}

  const Limits& limits() const { return limits_; }

  // A connection just accepted from address (its IP). Null when it cannot be admitted
  // (every connection in its way is busy, or Shutdown ran): the caller closes fd.
  // *took: another connection was taken to make room.
  std::shared_ptr<Connection> Admit(int fd, const std::string& address, bool* took);
  // c is open: it belongs to the daemon named peer (HELLO), or with peer "" to the unnamed
  // connections of its address. False when that group is full of busy connections (the
  // caller refuses the request, -1305, and closes c), or when c was taken meanwhile
  // (c->taken(): it is closing already). *took as above.
  bool Settle(Connection* c, const std::string& peer, bool* took);
  // A request begins on c (after its header was received and checked): false when c was
  // taken meanwhile, and the request must not be served. EndRequest when it has ended.
  // While c is opening, a request in progress does not keep it from being taken.
  static bool BeginRequest(Connection* c);
  static void EndRequest(Connection* c);
  // Closes c's descriptor and forgets it.
  void Remove(const std::shared_ptr<Connection>& c);

  // Out of descriptors: takes a connection (as for a full port) to free one. False when
  // there is none that may be.
  bool Reclaim();
  // Shuts down every opening connection admitted before cutoff_ns (steady clock, as
  // NowNanos), counted in *closed; returns when the oldest opening one left was admitted,
  // INT64_MAX when there is none.
  int64_t CloseOpeningsBefore(int64_t cutoff_ns, size_t* closed);
  // Shuts every connection down, admits no more, and returns once all are removed.
  void Shutdown();

  Stats stats() const;

  // The steady clock, in nanoseconds: what the table's times are in.
  static int64_t NowNanos();

 private:
  // Whether a connection belongs to a group (key: its name or address).
  using Filter = bool (*)(const Connection& c, const std::string& key);
  // Makes room for one more connection in a group that may hold cap: true if there is
  // room, or was made by taking connections of the group (*took set).
  bool MakeRoomLocked(Filter filter, const std::string& key, size_t cap, bool* took);
  // Takes the connection of the group that gives way first: false if none may.
  bool TakeOneLocked(Filter filter, const std::string& key);
  // c's state from kWaiting or kBusy (only while opening) to kTaken, and its shutdown.
  bool TakeLocked(Connection* c);

  const Limits limits_;
  mutable std::mutex mu_;
  std::condition_variable removed_;
  std::map<int, std::shared_ptr<Connection>> open_;  // guarded by mu_; by descriptor
  bool shutting_down_ = false;                       // guarded by mu_
  Stats stats_;                                      // guarded by mu_ (but open)
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TRANSFER_CONNECTIONS_H_
