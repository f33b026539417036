// The Unix-socket front of the daemon (docs/protocol.md).
//
// One event-loop thread accepts connections and reads frames (epoll, level-triggered);
// worker threads run the requests, because requests block on master RPCs. The HELLO
// handshake runs on the loop thread itself, so that no request of a connection can run
// before its pool is mapped; so do the few requests that cannot block
// (StoreService::TryInline: cached small reads, HOSTNAME, HEALTH), which saves them the
// hand-off to a worker. Any number of requests of one connection run at once and
// answer in any order; responses are written under the connection's write lock.
//
// Who may connect is checked at accept (daemon/base/local_access.h): a peer the rule refuses
// gets -1401 in reply to its first frame and is closed, before anything is served or its
// pool mapped; refusals are logged at a bounded rate, admissions once each, at HELLO.
//
// POOL_FENCE, which is about the connection's pool rather than the store, is the server's
// too (daemon/service/pool_fences.h): it knows which connections map which pool and when their
// teardown is done.
//
// The socket file never exists with a mode other than the one asked for: it is bound and
// given its mode under a private name, in a fresh directory next to it that only this
// user can enter, and only then linked to its real name.
//
// Anything malformed at the frame level (a length over uds::kMaxFrameBytes, or over
// uds::kMaxHelloFrameBytes before HELLO; bytes that are not exactly one message within the
// decode limits of common/uds/uds_protocol.h; a first frame that is not HELLO; an unknown op;
// a descriptor after HELLO) costs one warning line and that connection only. So does
// saying nothing: a connection that has not completed HELLO within hello_timeout_ms is
// closed.
//
// Memory a connection can make the daemon hold is bounded: its read buffer never exceeds
// one frame (common/uds/uds_protocol.h), and the requests it has queued or running on workers
// at most max_in_flight_bytes (their parsed messages): past that, the loop stops reading
// the connection until workers have finished enough of them (backpressure, not a
// refusal: the client's frames wait in its socket).
#ifndef MOONCAKE_DAEMON_UDS_SERVER_H_
#define MOONCAKE_DAEMON_UDS_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/base/spin_wait.h"
#include "common/uds/uds_protocol.h"
#include "daemon/service/client_connection.h"
#include "daemon/base/local_access.h"
#include "daemon/service/pool_fences.h"
#include "daemon/service/store_service.h"
#include "daemon/base/worker_threads.h"

namespace mooncake {

class UdsServer {
 public:
  struct Limits {
    int64_t hello_timeout_ms = 5000;           // --hello_timeout
    size_t max_in_flight_bytes = 256u << 20;  // per connection, see above
    // --spin_us: the loop polls for frames, and idle workers for jobs, this long before
    // they block (adaptive, common/base/spin_wait.h); 0 = never.
    int64_t spin_us = 0;
  };

  UdsServer(StoreService* service, size_t worker_threads);  // the default Limits
  UdsServer(StoreService* service, size_t worker_threads, Limits limits);
  ~UdsServer();
  UdsServer(const UdsServer&) = delete;
  UdsServer& operator=(const UdsServer&) = delete;

  // Whether the directory of the socket path is one that only this user (and its group)
  // may write: else someone else could bind the name before the daemon, or put their own
  // socket in its place, and receive the clients' pools and values. Refused: a directory
  // others may write (o+w), sticky or not; one a group other than the daemon's own may
  // write; one under a directory others may write that is not sticky
  // (common/base/path_trust.h). false with *error naming the directory and the fix. The daemon
  // checks it at start (exit status 2); Listen checks it again.
  static bool CheckSocketDirectory(const std::string& path, std::string* error);

  // Listens on path, in an existing directory CheckSocketDirectory accepts, the socket file
  // having mode from the moment it appears. Replaces a stale socket file, but refuses one
  // that a live daemon still answers on. false with *error (and nothing left behind) on
  // failure.
  bool Listen(const std::string& path, unsigned mode, std::string* error);
  // The socket file's group, once Listen succeeded: the default group LocalAccess admits.
  gid_t socket_group() const { return socket_group_; }
  // Who may connect; call before Start. Default: LocalAccess().
  void SetLocalAccess(LocalAccess access) { access_ = std::move(access); }
  // Starts the event loop.
  void Start();
  // Stops accepting and reading, removes the socket file, lets running requests finish
  // (up to drain_ms), then closes every connection (revoking staged puts, unmounting
  // their segments) and stops the workers.
  void Shutdown(int64_t drain_ms);

 private:
  // What the loop thread knows of one connection: its frames as they arrive and where its
  // handshake stands.
  struct Incoming {
    std::shared_ptr<ClientConnection> client;
    uds::FrameReader reader;
    bool hello_done = false;
    bool hello_refused = false;  // its refusal went to LogRefusal: closed without a warning
    LocalPeer peer;  // read at accept
    LocalAccess::Verdict admission = LocalAccess::Verdict::kRefused;
    bool fd_after_hello = false;  // refuse the next frame with -600, then close
    bool watched = true;          // in the epoll set; not while reading is paused
    bool paused = false;          // too many bytes in flight (ClientConnection::PauseInput)
    bool peer_closed = false;     // end of file seen; frames still buffered are served
    std::vector<int> pending_fds;  // arrived before HELLO was parsed
    // After HELLO: descriptors not claimed by their frame yet (MOUNT_FILE_SEGMENT's), and
    // the one the frame being parsed claimed (-1: none).
    std::vector<uds::FrameReader::ArrivedFd> file_fds;
    int claimed_fd = -1;
  };
  using IncomingMap = std::map<uint64_t, std::unique_ptr<Incoming>>;
  using Clock = std::chrono::steady_clock;

  void Loop();
  void AcceptAll();
  void OnReadable(IncomingMap::iterator it);
  // Serves the complete frames buffered, until none is left or reading pauses; closes
  // the connection (and returns false) when one is malformed or the peer is gone.
  bool ServeBuffered(IncomingMap::iterator it);
  // Processes one complete frame; false when the connection must be closed (*why set).
  bool OnFrame(Incoming* conn, const char* payload, size_t length, std::string* why);
  // Before OnFrame of the frame at stream offsets [start, end): takes the descriptor that
  // came with it into claimed_fd; one that came with an earlier frame, or a second one,
  // is closed and marks the connection (fd_after_hello).
  void ClaimFileFd(Incoming* conn, uint64_t start, uint64_t end);
  // Closes; warns with why unless told not to, or the connection was refused (its refusal
  // was logged, throttled, at accept or at HELLO).
  void CloseConnection(IncomingMap::iterator it, const std::string& why, bool warn);
  // The refusal's log line, unless the throttle holds it back (a peer can cause refusals
  // at will): of the admission at accept (why ""), or of a HELLO (why: the service's
  // reason, as the peer was told).
  void LogRefusal(const Incoming& conn, const std::string& why = std::string());
  // Answers a refused connection's first frame with -1401 (then it is closed).
  void Refuse(Incoming* conn, const uds::Message& first);
  // POOL_FENCE: answered on a worker now, or by the teardown it waits for.
  bool OnPoolFence(Incoming* conn, const uds::Message& message, std::string* why);
  // Runs the request on a worker, which ends it.
  void Dispatch(ClientConnection::Request request, std::unique_ptr<uds::Message> message);
  // Closes the connections whose HELLO deadline passed; the epoll timeout until the next.
  int ExpireHellos();
  // A worker released enough of a paused connection's bytes: the loop resumes it.
  void RequestResume(uint64_t id);
  void ResumePaused();
  // The connections' teardown callback: runs RunTeardown here, or on a worker when called
  // on the event loop.
  void ScheduleTeardown(std::shared_ptr<ClientConnection> client);
  void RunTeardown(const std::shared_ptr<ClientConnection>& client);

  // Listen's steps. false with *error naming what failed; CloseDescriptors cleans up.
  bool OpenLoopDescriptors(std::string* error);
  bool ListenPrivately(const std::string& path, unsigned mode, bool replace_stale,
                       std::string* error);
  bool Watch(int fd, uint64_t tag, std::string* error);
  void CloseDescriptors();
  void Unwatch(int fd);

  StoreService* const service_;
  const Limits limits_;
  std::string path_;
  ino_t socket_inode_ = 0;
  gid_t socket_group_ = 0;
  LocalAccess access_;
  RefusalThrottle refusals_;  // loop thread only
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread loop_;
  uint64_t next_id_ = 1;
  IncomingMap incoming_;  // loop thread only
  AdaptiveSpin loop_spin_;  // the loop's wait for events; loop thread only
  // Connections in accept order, each with its HELLO deadline; loop thread only.
  std::deque<std::pair<Clock::time_point, uint64_t>> hello_deadlines_;

  std::mutex resume_mu_;
  std::vector<uint64_t> resume_;  // paused connections to look at; guarded by resume_mu_

  PoolFences fences_;

  // Every connection not yet torn down, for Shutdown.
  std::mutex open_mu_;
  std::condition_variable open_cv_;
  std::map<uint64_t, std::shared_ptr<ClientConnection>> open_;  // guarded by open_mu_

  // Last: destroyed first, while everything its closures use is still there.
  WorkerThreads workers_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_UDS_SERVER_H_
