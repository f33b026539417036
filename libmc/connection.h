// One handle's Unix-socket connection to mooncaked (docs/protocol.md), multiplexed: many
// threads send requests on it at once and each response goes to the request with the same
// id; who reads the socket is the business of Channel (channel.h: a waiting caller reads
// its own reply when nobody else is reading). No lock is held across a round trip.
//
// Every wait is bounded by the timeout (MOONCAKE_STORE_TIMEOUT_MS, default 30000 ms):
// a request not answered in time fails with -901. When the socket dies (the daemon exited
// or was killed), every pending request fails at once with -900 and the connection is
// down; the next request dials again, says HELLO with the same pool fd (so pool pointers
// stay valid) and re-mounts the handle's extra segment. When the daemon is still gone the
// dial fails at once and the request returns -900. What the failed requests pinned stays
// out of the pool (PoolQuarantine) until the daemon is done with it: after every HELLO
// while something is held for that daemon, the connection sends POOL_FENCE, whose answer
// gives it back.
#ifndef MOONCAKE_LIBMC_CONNECTION_H_
#define MOONCAKE_LIBMC_CONNECTION_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/base/error_code.h"
#include "common/uds/uds_ops.h"
#include "common/uds/uds_protocol.h"
#include "libmc/pool_quarantine.h"

namespace mooncake {
namespace client {

class Channel;
struct Pending;

// The id of a new request: unique in the process.
uint64_t NextRequestId();

// A request frame with a fresh id: [id, op, args] behind its length prefix, args being
// the op's Args struct (common/uds/uds_ops.h).
class Request {
 public:
  template <class Args>
  Request(uds::Op op, const Args& args) : id_(NextRequestId()), frame_(id_, op, args) {}
  uint64_t id() const { return id_; }

 private:
  friend class Connection;

  uint64_t id_;
  uds::RequestFrame frame_;
};

// A response: OK and the results array, or the code (from the daemon, or RPC_FAIL /
// RPC_TIMEOUT made here). The message is valid while the Reply lives.
struct Reply {
  ErrorCode code = ErrorCode::OK;
  uds::Message message;
};

// A request in flight; pass it to Connection::Wait exactly once. Dropped unwaited, it is
// forgotten as if it had timed out.
class Ticket {
 public:
  Ticket() = default;
  ~Ticket();
  Ticket(Ticket&&) = default;
  Ticket& operator=(Ticket&&) = delete;
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;

 private:
  friend class Connection;
  std::shared_ptr<Channel> channel_;
  std::shared_ptr<Pending> pending_;
  ErrorCode immediate_code_ = ErrorCode::OK;  // set when the request never left (daemon gone)
  std::chrono::steady_clock::time_point deadline_;
};

class Connection {
 public:
  struct Options {
    std::string socket_path;
    int pool_fd = -1;  // -1: no pool
    std::shared_ptr<void> pool_owner;  // keeps pool_fd open while the connection lives
    uint64_t pool_size = 0;
    std::string master_address;  // "" or the endpoint (master_endpoint.h) the daemon must use
    std::string tenant;          // named at every HELLO; "" names none
    uint64_t mount_size = 0;     // > 0: MOUNT_SEGMENT after every HELLO
    std::string client_name;     // not "": SET_CLIENT_NAME after every HELLO, before it
    int timeout_ms = 30000;
    int64_t spin_us = 0;  // a reply's wait spins this long before blocking; 0 = never
    std::shared_ptr<PoolQuarantine> quarantine;  // the pool's; null without a pool
  };

  explicit Connection(Options options);
  ~Connection();  // Close()
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // First connection: dial, HELLO, SET_CLIENT_NAME and MOUNT_SEGMENT if asked. OK, RPC_FAIL
  // when no daemon answers, or the daemon's code (INVALID_PARAMS for an ABI or master
  // mismatch, PERMISSION_DENIED for a tenant this process may not claim, and from this
  // side for a socket this process does not trust, libmc/socket_trust.h, before anything
  // is sent; SEGMENT_ALREADY_EXISTS for a client name another client's memory carries).
  //
  // Every failure here and in the calls below is explained (libmc/last_error.h): why the
  // dial failed (the errno, and what to do about it), a timeout, a lost connection, or
  // the reason the daemon's reply carries. Nothing is logged for a first connect: the C
  // ABI logs its one line.
  ErrorCode Open();
  // Disconnects for good; pending requests fail with -900, later ones with -600.
  void Close();

  // Sends a request on the live channel, reconnecting first when the last one died.
  // keepalive (e.g. the pool block the daemon reads or writes) is held until the daemon
  // answers or the channel dies, even when the caller gave up waiting (-901), so the
  // daemon never touches memory that was given back.
  Ticket Send(Request& request, std::shared_ptr<void> keepalive = nullptr);
  // Waits for the response (bounded by the timeout); returns reply->code.
  ErrorCode Wait(Ticket& ticket, Reply* reply);
  // Send and Wait in one, without a heap allocation for the pending request. fd_to_pass
  // (>= 0) goes with the request's frame (SCM_RIGHTS: MOUNT_FILE_SEGMENT).
  ErrorCode Call(Request& request, Reply* reply, std::shared_ptr<void> keepalive = nullptr,
                 int fd_to_pass = -1);

  // The typed form of Call: sends op with args and parses the results into *out. The
  // daemon's code, or INTERNAL_ERROR when a successful reply does not have op's shape.
  template <uds::Op op>
  ErrorCode Invoke(const typename uds::OpSpec<op>::Args& args,
                   typename uds::OpSpec<op>::Reply* out,
                   std::shared_ptr<void> keepalive = nullptr) {
    Request request(op, args);
    Reply reply;
    ErrorCode code = Call(request, &reply, std::move(keepalive));
    if (code == ErrorCode::OK && !uds::ParseFields(reply.message.args, out)) {
      return ErrorCode::INTERNAL_ERROR;
    }
    return code;
  }

  // Makes sure a channel is up (reconnecting if needed): OK or why not.
  ErrorCode EnsureUp();

  // An exchange of several requests tied to one daemon connection (a put session: its
  // staged put id means something on that connection only). Pin takes the live channel,
  // reconnecting if needed (nullptr with *code set when there is none); SendPinned sends on
  // that channel alone: RPC_FAIL once it is down, never on a successor.
  std::shared_ptr<Channel> Pin(ErrorCode* code) { return Current(code); }
  Ticket SendPinned(const std::shared_ptr<Channel>& channel, Request& request,
                    std::shared_ptr<void> keepalive = nullptr) {
    return SendOn(channel, request, std::move(keepalive));
  }
  // "host:port" from the latest HELLO.
  std::string hostname() const;
  int timeout_ms() const { return options_.timeout_ms; }
  const std::string& socket_path() const { return options_.socket_path; }
  // The handle mounts an extra segment (memory it lends) with every HELLO.
  bool lends_memory() const { return options_.mount_size > 0; }

 private:
  // The live channel, reconnecting when it is down; nullptr with *code set on failure.
  std::shared_ptr<Channel> Current(ErrorCode* code);
  // Dials and greets a new channel (HELLO with the pool fd, then MOUNT_SEGMENT when asked;
  // a failed re-mount after a reconnect is only logged; then POOL_FENCE when the
  // quarantine holds memory for this daemon); 0, or a code and *why (the reason and the
  // fix, for an operator).
  ErrorCode Dial(bool first, std::shared_ptr<Channel>* out, std::string* hostname,
                 std::string* why);
  // Explains a request's failure with code: the daemon's reason in reply, or what
  // happened on this side (a timeout, the connection lost).
  void ExplainFailure(ErrorCode code, const uds::Message& reply) const;
  Ticket SendOn(const std::shared_ptr<Channel>& channel, Request& request,
                std::shared_ptr<void> keepalive);
  ErrorCode CallOn(const std::shared_ptr<Channel>& channel, Request& request, Reply* reply,
                   std::shared_ptr<void> keepalive, int fd_to_pass);

  const Options options_;
  mutable std::mutex mu_;  // guards channel_, closed_, hostname_
  std::shared_ptr<Channel> channel_;
  bool closed_ = false;
  bool lost_logged_ = false;
  std::string hostname_;
  std::mutex dial_mu_;  // one reconnect at a time
};

// The timeout from MOONCAKE_STORE_TIMEOUT_MS (milliseconds), default 30000.
int TimeoutFromEnvironment();
// The spin budget from MOONCAKE_STORE_SPIN_US (microseconds, 0..10000; 0 = never spin),
// default kDefaultSpinMicros (common/base/spin_wait.h); a value out of range is logged and the
// default used.
int64_t SpinMicrosFromEnvironment();

}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_CONNECTION_H_
