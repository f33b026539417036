// One application connection: its shared-memory pool, its staged puts and gets, the extra
// segments mounted for it, and the count of its requests still running.
//
// Lifetime. The connection is closed (Close) when the peer hangs up, sends something
// malformed, or a response cannot be delivered. Closing shuts the socket down at once
// but tears nothing down while requests run: they still use the pool. Each running
// request is a Request object; when the connection is closed and no Request is left,
// it calls its teardown callback, exactly once, on the thread that brought that
// about (the one closing it, or the one dropping the last Request). The socket descriptor
// itself is closed by the destructor, when the server and every request have let go of
// the connection, so its number cannot be reused while anyone might still write to it.
//
// Thread-safety: every method may be called from any thread.
#ifndef MOONCAKE_DAEMON_CLIENT_CONNECTION_H_
#define MOONCAKE_DAEMON_CLIENT_CONNECTION_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/uds/uds_protocol.h"
#include "daemon/base/chunked_checksum.h"
#include "daemon/transfer/replica_target.h"

namespace mooncake {

// A put larger than the pool, written chunk by chunk (PUT_BEGIN .. PUT_COMMIT).
struct StagedPut {
  std::string key;
  uint64_t size = 0;
  bool upsert = false;
  bool checksum = false;  // compute the value's CRC32C from the chunks
  std::vector<ReplicaTarget> targets;
  ChunkedChecksum crc;
  // Chunks copy under a shared lock; commit and abort take it exclusively and set
  // finished, so no chunk lands after the object is published or its space freed.
  std::shared_mutex mu;
  bool finished = false;  // guarded by mu
  std::atomic<bool> failed{false};  // a chunk could not be written to every replica
};

// A get larger than the pool, read chunk by chunk (GET_BEGIN .. GET_END). The bytes are
// guaranteed only until the read lease runs out.
struct StagedGet {
  std::vector<ReplicaTarget> candidates;  // best first
  std::atomic<size_t> current{0};         // the candidate chunks read from; moves on failure
  std::atomic<bool> mixed{false};         // some chunk came from another candidate
  std::string key;                        // when checksum >= 0: its key, for a report
  uint64_t size = 0;
  int64_t checksum = -1;                  // the value's CRC32C, -1: none to verify
  ChunkedChecksum crc;                    // of the chunks read so far
  std::chrono::steady_clock::time_point deadline;
  uint64_t generation = 0;  // ReadCache::remount_generation() before the lease was asked
};

class ClientConnection : public std::enable_shared_from_this<ClientConnection> {
 public:
  // At most this many staged puts (and as many staged gets) open per connection.
  static constexpr size_t kMaxStaged = 4096;

  // Releases what the connection holds (StoreService::Teardown). Receives the connection so
  // that it can hand the work to another thread and keep it alive until then.
  using Teardown = std::function<void(std::shared_ptr<ClientConnection>)>;

  // Takes ownership of fd. Create with std::make_shared: requests hold the connection.
  ClientConnection(int fd, uint64_t id, Teardown teardown);
  ~ClientConnection();
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  uint64_t id() const { return id_; }
  int fd() const { return fd_; }
  // Who connected, as the kernel saw it at connect (SO_PEERCRED); -1 when unknown.
  pid_t peer_pid() const { return peer_pid_; }
  uid_t peer_uid() const { return peer_uid_; }
  gid_t peer_gid() const { return peer_gid_; }
  // The tenant the connection's keys belong to ("": the default tenant; daemon/
  // tenant_scope.h). Set once at HELLO, before any other request of the connection is read.
  void set_tenant(std::string tenant) { tenant_ = std::move(tenant); }
  const std::string& tenant() const { return tenant_; }
  // Set once HELLO has been answered OK (on the loop thread, before any other request of
  // the connection runs, as tenant_): the teardown then counts one client less.
  void set_greeted() { greeted_ = true; }
  bool greeted() const { return greeted_; }

  // ---- handshake and pool ----
  // Maps the pool passed at HELLO: a memfd sealed against shrinking and growing, of
  // exactly pool_size bytes. Takes ownership of pool_fd (closed on refusal). false with
  // *why on refusal.
  bool AttachPool(int pool_fd, uint64_t pool_size, std::string* why);
  // [offset, offset + length) of the pool, or nullptr when that is not inside it.
  char* PoolRange(uint64_t offset, uint64_t length) const;
  uint64_t pool_size() const { return pool_size_; }
  // The pool's memfd (-1 without a pool, or once unmapped): only while holding a Request.
  int pool_fd() const { return pool_fd_; }
  // The pool's memfd as the kernel knows it (device, inode): the same on every connection
  // it is passed on, so it tells which connections share a pool. {0, 0} without a pool;
  // kept after UnmapPool.
  std::pair<uint64_t, uint64_t> pool_identity() const { return pool_identity_; }
  void UnmapPool();

  // ---- responses ----
  // Writes one frame under the connection's write lock (bounded by SO_SNDTIMEO). A failed
  // write closes the connection. Only call while holding a Request.
  bool Send(uds::FrameBuilder* frame);
  bool SendBytes(const char* data, size_t size);
  // For the event-loop thread, which must never block: writes the frame only if the
  // write lock is free and the socket takes it now. kBusy: nothing was written; have a
  // worker Send it. kFailed: the connection is closed.
  enum class TrySendResult { kSent, kBusy, kFailed };
  TrySendResult TrySend(const char* data, size_t size);

  // ---- lifecycle ----
  // One running request: counted from Acquire until the Request is destroyed, keeping the
  // connection alive meanwhile. Destroying the last one of a closed connection runs the
  // teardown, so no caller has to remember it. Move-only (hand it to the closure that
  // finishes the request); a moved-from or refused Request holds nothing.
  class Request {
   public:
    Request() = default;
    Request(Request&&) noexcept = default;
    Request& operator=(Request&&) = delete;
    ~Request();

    explicit operator bool() const { return client_ != nullptr; }
    ClientConnection* connection() const { return client_.get(); }

   private:
    friend class ClientConnection;
    explicit Request(std::shared_ptr<ClientConnection> client) : client_(std::move(client)) {}

    std::shared_ptr<ClientConnection> client_;
  };
  // A request starts, unless the connection is closed or limit requests are running already:
  // then the Request is empty (closed() tells which).
  Request Acquire(int limit = std::numeric_limits<int>::max());
  // Marks closed and shuts the socket down; runs the teardown now if no request runs.
  void Close();
  bool closed() const;
  // No request running (shutdown waits for this before closing connections).
  bool Quiet() const;

  // ---- staged puts and gets ----
  // Ids are unique across both kinds. Add returns 0 when kMaxStaged are already open.
  uint64_t AddPut(std::shared_ptr<StagedPut> put);
  std::shared_ptr<StagedPut> FindPut(uint64_t put_id) const;
  std::shared_ptr<StagedPut> TakePut(uint64_t put_id);
  std::vector<std::shared_ptr<StagedPut>> TakeAllPuts();
  uint64_t AddGet(std::shared_ptr<StagedGet> get);
  std::shared_ptr<StagedGet> FindGet(uint64_t get_id) const;
  bool EraseGet(uint64_t get_id);
  void ClearGets();

  // ---- requests in flight, in bytes ----
  // Bytes of this connection's parsed requests queued for or running on workers (their
  // messages' zones). The event loop charges a request when it hands it over, and stops
  // reading the connection while the total is at or over its limit (so a client that
  // sends faster than it is served holds a bounded amount of daemon memory); the worker
  // that finishes the request releases it.
  void ChargeInput(size_t bytes) { input_bytes_.fetch_add(bytes); }
  // true when this release took the total below limit while reading was paused: the
  // caller then asks the event loop to resume.
  bool ReleaseInput(size_t bytes, size_t limit);
  // The event loop's: pauses reading when the total is at or over limit; false (nothing
  // paused) when it is not, also when a release brought it below meanwhile.
  bool PauseInput(size_t limit);
  void ResumeInput() { input_paused_.store(false); }
  size_t input_bytes() const { return input_bytes_.load(); }

  // ---- what the connection's reads did (CLIENT_STATS) ----
  // Reads (a get's value, a fragment of a ranged read, a staged get's chunk) served from an
  // SSD replica, this daemon's or another's: Mooncake's "offload RPC" reads. ReplicaIO
  // counts them here through a DiskReadSink around each request.
  std::atomic<uint64_t>* disk_read_counter() { return &disk_reads_; }
  uint64_t disk_reads() const { return disk_reads_.load(std::memory_order_relaxed); }

  // ---- segments mounted for this connection ----
  // Counts size more bytes of segments against this connection, unless that would take
  // it over limit (false: nothing counted). Return what a mount that failed had counted.
  bool ReserveSegmentBytes(uint64_t size, uint64_t limit);
  void ReturnSegmentBytes(uint64_t size);
  uint64_t segment_bytes() const;
  // counted: the bytes ReserveSegmentBytes counted for it (0 for memory of the pool's),
  // given back when it is taken.
  void AddSegment(int64_t segment_id, uint64_t counted = 0);
  std::vector<int64_t> TakeSegments();
  // Takes one segment; false when it is not the connection's.
  bool TakeSegment(int64_t segment_id);
  // The name the connection's client gave itself (SET_CLIENT_NAME: Mooncake's
  // local_hostname, docs/mooncake-api.md "naming"), under which the segments it lends from
  // then on are mounted; "" while it gave none (they carry the daemon's name).
  void set_client_name(std::string name);
  std::string client_name() const;
  // Whether the connection has a segment mounted (AddSegment, not taken since).
  bool lends_segments() const;
  // The descriptor that came with the connection's MOUNT_FILE_SEGMENT (the server sets it,
  // closing one left unclaimed; its handler takes it: -1 when none came). The connection
  // owns it until then.
  void SetFileFd(int fd);
  int TakeFileFd();

 private:
  // The open staged puts or gets, by id. Synchronized by the connection's mu_.
  template <typename T>
  class StagedTable {
   public:
    // Adds entry under the id *next_id (then advances it); 0 when kMaxStaged are open.
    uint64_t Add(std::shared_ptr<T> entry, uint64_t* next_id);
    // nullptr when id is not open.
    std::shared_ptr<T> Find(uint64_t id) const;
    std::shared_ptr<T> Take(uint64_t id);
    std::vector<std::shared_ptr<T>> TakeAll();

   private:
    std::map<uint64_t, std::shared_ptr<T>> entries_;
  };

  // A Request ended: true when it was the last one of a closed connection.
  bool Release();

  const int fd_;
  const uint64_t id_;
  const Teardown teardown_;
  pid_t peer_pid_ = 0;
  uid_t peer_uid_ = static_cast<uid_t>(-1);
  gid_t peer_gid_ = static_cast<gid_t>(-1);
  std::string tenant_;  // set once at HELLO, like pool_
  bool greeted_ = false;  // set once at HELLO, like pool_

  char* pool_ = nullptr;  // set once at HELLO, before any other request runs
  uint64_t pool_size_ = 0;
  int pool_fd_ = -1;
  std::pair<uint64_t, uint64_t> pool_identity_{0, 0};  // set with pool_

  std::mutex write_mu_;

  // Sequentially consistent both: a release either sees the pause or is seen by it.
  std::atomic<size_t> input_bytes_{0};
  std::atomic<bool> input_paused_{false};
  std::atomic<uint64_t> disk_reads_{0};

  mutable std::mutex mu_;
  // Once closed_, active_ only falls, so it reaches 0 at most once: the teardown's moment.
  bool closed_ = false;            // guarded by mu_
  int active_ = 0;                 // Requests alive; guarded by mu_
  uint64_t next_staged_id_ = 1;    // guarded by mu_
  StagedTable<StagedPut> puts_;    // guarded by mu_
  StagedTable<StagedGet> gets_;    // guarded by mu_
  std::vector<std::pair<int64_t, uint64_t>> segments_;  // id, counted; guarded by mu_
  uint64_t segment_bytes_ = 0;     // mounted or being mounted; guarded by mu_
  std::string client_name_;        // guarded by mu_
  int file_fd_ = -1;               // guarded by mu_
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_CLIENT_CONNECTION_H_
