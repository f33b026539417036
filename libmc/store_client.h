// The C++ core behind a mooncake_store_t handle: one Connection, one Pool, the buffer
// registry, and the data paths (zero copy, whole-value staging, chunked staging).
//
// Arguments arrive validated by c_api.cc (non-NULL, key 1..4096 bytes, value 1 byte..4 GiB,
// replica_num >= 1); every method returns an ErrorCode, or a Result where the C function
// returns a count (c_api.cc turns both into the ABI's integers), and explains a failure it
// decides itself (libmc/last_error.h). Thread-safe: calls share the connection without a
// lock across round trips; Connect and Close exclude other calls briefly.
//
// Data paths, per buffer:
//  - inside the pool: its pool offset goes to the daemon (zero copy on this side);
//  - otherwise, when a pool block of the whole size is free: copied through it, one request;
//  - otherwise: PUT_BEGIN / PUT_CHUNK... / PUT_COMMIT (GET_BEGIN / GET_CHUNK... / GET_END)
//    through chunks of up to 4 MiB, two in flight, so any value fits any non-zero pool.
// Copies to and from caller memory are memcpy for host memory and the CUDA driver's for
// device memory (libmc/device_memory.h): each buffer arrives with its MemoryPlace, from
// CheckBuffer.
#ifndef MOONCAKE_LIBMC_STORE_CLIENT_H_
#define MOONCAKE_LIBMC_STORE_CLIENT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/base/error_code.h"
#include "common/base/log_throttle.h"
#include "common/uds/uds_ops.h"
#include "libmc/client_name.h"
#include "libmc/connection.h"
#include "libmc/device_memory.h"
#include "libmc/pool.h"
#include "libmc/pool_quarantine.h"

namespace mooncake {
namespace client {

class StoreClient {
 public:
  // One put of a batch: result receives what Put would return.
  struct PutItem {
    std::string key;
    const char* data;
    uint64_t size;
    MemoryPlace place;
    ErrorCode result = ErrorCode::INTERNAL_ERROR;
    std::string group{};  // its group id when the batch's config names them (group_given)
  };
  // One get of a batch: result receives what GetInto would return.
  struct GetItem {
    std::string key;
    char* buffer;
    uint64_t capacity;
    MemoryPlace place;
    Result<uint64_t> result = ErrorCode::INTERNAL_ERROR;
  };

  // One fragment of a ranged get: bytes [src_offset, +length) of the value to
  // buffer + dst_offset; result receives its length or a code.
  struct Range {
    uint64_t src_offset;
    uint64_t length;
    uint64_t dst_offset;
    Result<uint64_t> result = ErrorCode::INTERNAL_ERROR;
  };
  // One key of a ranged get (mooncake_store_get_ranges, _batch_get_ranges).
  struct RangeGet {
    std::string key;
    char* buffer;
    uint64_t buffer_size;
    MemoryPlace place;
    std::vector<Range> ranges;
  };

  StoreClient();
  ~StoreClient();  // Close(); the pool is unmapped once no call uses it any more
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  // The tenant later connects name (common/base/tenant_key.h; "" names none). INVALID_PARAMS
  // for a malformed id, or while connected.
  ErrorCode SetTenant(const std::string& tenant);

  // Creates (or, for the same size, reuses) the pool, dials socket_path and says HELLO
  // (naming the tenant of SetTenant, and master_address, if not "", resolved to its
  // endpoint: the daemon refuses another master than its own); mount_size > 0 mounts an
  // extra segment for this handle. INVALID_PARAMS when already connected, or when
  // master_address is not host:port (or etcd://...) or its host does not resolve (logged).
  // local_hostname, if not "", names the client (libmc/client_name.h: with a port of this
  // host when it has none; another is picked when the daemon answers that the name is
  // taken): the memory it lends carries the name, and GetHostname answers it.
  ErrorCode Connect(const std::string& socket_path, uint64_t local_buffer_size,
                    const std::string& master_address, uint64_t mount_size,
                    const std::string& local_hostname = "");
  // Disconnects; the pool stays mapped (pointers stay readable) until the handle is
  // destroyed or a connect with another size replaces it. OK, also when not connected.
  ErrorCode Close();

  // What mooncake_store_health_check() reports: 0 healthy, 1 the daemon cannot be reached,
  // 2 the daemon cannot reach the master.
  int HealthCheck();
  // The client's name when Connect gave it one, else the daemon's "host:port".
  ErrorCode GetHostname(std::string* hostname);

  void* Alloc(uint64_t size);
  void Free(void* ptr);
  ErrorCode RegisterBuffer(void* buffer, uint64_t size);
  ErrorCode UnregisterBuffer(void* buffer);

  // place: where value lives (CheckBuffer's answer).
  ErrorCode Put(const std::string& key, const void* value, uint64_t size,
                const uds::WireConfig& config, bool upsert, const MemoryPlace& place);
  // upsert: BATCH_UPSERT, each entry replacing its key's value (in order).
  void BatchPut(std::vector<PutItem>& items, const uds::WireConfig& config, bool upsert = false);
  // The bytes read into buffer.
  Result<uint64_t> GetInto(const std::string& key, void* buffer, uint64_t capacity,
                           const MemoryPlace& place);
  void BatchGetInto(std::vector<GetItem>& items);
  // Reads only the fragments of each get (store_client_ranges.cc): zero copy for those
  // whose destination lies in the pool, else through pool blocks. A fragment running past
  // its buffer is -600 here, without a request; one past the value -600 from the daemon.
  void BatchGetRanges(std::vector<RangeGet>& gets);
  // Present or not (a key still being written is not present yet).
  Result<bool> IsExist(const std::string& key);
  // (*results)[i] for keys[i].
  void BatchIsExist(const std::vector<std::string>& keys, std::vector<Result<bool>>* results);
  Result<uint64_t> GetSize(const std::string& key);
  ErrorCode Remove(const std::string& key, bool force);
  // (*results)[i]: what Remove would return for keys[i].
  void BatchRemove(const std::vector<std::string>& keys, bool force,
                   std::vector<ErrorCode>* results);
  // The number of objects removed.
  Result<uint64_t> RemoveByRegex(const std::string& pattern, bool force);
  Result<uint64_t> RemoveAll(bool force);

  // ---- segments and replica clearing (store_client_segments.cc; docs/mooncake-api.md) ----
  // (*results)[i]: what BATCH_REPLICA_CLEAR answered for keys[i] (segment_name "": every
  // replica).
  void BatchReplicaClear(const std::vector<std::string>& keys, const std::string& segment_name,
                         std::vector<ErrorCode>* results);
  // Lends [buffer, buffer + size) of the pool as a segment of this connection (*segment_id).
  // INVALID_PARAMS when the range is not wholly inside the pool (logged: memory the daemon
  // does not share cannot be lent).
  ErrorCode MountPoolSegment(void* buffer, uint64_t size, uint64_t* segment_id);
  // Has the daemon map size bytes and lend them as a segment of this connection.
  ErrorCode AllocateSegment(uint64_t size, uint64_t* segment_id, uint64_t* allocated);
  // Lends [offset, offset + size) of the file fd (passed to the daemon, which maps it) as a
  // segment of this connection; the daemon's code and reason when it refuses.
  ErrorCode MountFileSegment(int fd, uint64_t offset, uint64_t size, uint64_t* segment_id);
  // Drains and unmounts one of the connection's segments; *drained says what became of
  // the objects in it. SEGMENT_NOT_FOUND when it is not one of them.
  ErrorCode UnmountSegment(uint64_t segment_id, uds::UnmountSegmentsReply* drained);
  // OK when the daemon has no SSD tier, NOT_SUPPORTED when it has one (it is the daemon's).
  ErrorCode UnmountLocalDiskSegment();

  // ---- copy and move tasks (store_client_tasks.cc; docs/mooncake-api.md, "tasks") ----
  ErrorCode CreateCopyTask(const std::string& key, const std::vector<std::string>& targets,
                           uds::TaskIdReply* id);
  ErrorCode CreateMoveTask(const std::string& key, const std::string& source,
                           const std::string& target, uds::TaskIdReply* id);
  ErrorCode QueryTask(const uds::TaskIdArgs& id, uds::TaskReply* task);

  // The replicas of key, as the master lists them (GET_REPLICA_DESC).
  ErrorCode GetReplicaDesc(const std::string& key, std::vector<uds::WireReplica>* replicas);
  // One result per key: (*codes)[i] and (*replicas)[i] as GetReplicaDesc would give them.
  void BatchGetReplicaDesc(const std::vector<std::string>& keys, std::vector<ErrorCode>* codes,
                           std::vector<std::vector<uds::WireReplica>>* replicas);

  // ---- put sessions (store_client_sessions.cc; docs/mooncake-api.md, "sessions") ----
  // Mooncake's batch_put_session_*: a put reserved whole (PUT_BEGIN), written range by
  // range at any offsets of the value (PUT_CHUNK), then published (PUT_COMMIT) or dropped
  // (PUT_ABORT). Sessions are the handle's, by key, one per key at a time, each on the
  // daemon connection it began on: one the connection lost (the daemon revoked its put when
  // the connection went, as it does when a process dies) answers RPC_FAIL, never reaching
  // another connection's staged put. Close forgets them all (the daemon revokes them).
  struct SessionStart {
    std::string key;
    uint64_t size;
    std::string group;  // its group id, with config.group_given
    ErrorCode result = ErrorCode::INTERNAL_ERROR;
  };
  // Opens a session for each start (result: OK, or INVALID_PARAMS when its key has one
  // open, or what PUT_BEGIN answered: OBJECT_ALREADY_EXISTS for a key stored, ...).
  void StartPutSessions(std::vector<SessionStart>& starts, const uds::WireConfig& config);
  struct SessionFragment {
    const char* src;      // length bytes of the caller's
    uint64_t length;
    uint64_t dst_offset;  // where they go in the value
  };
  struct SessionWrite {
    std::string key;
    std::vector<SessionFragment> fragments;
    Result<uint64_t> result = ErrorCode::INTERNAL_ERROR;  // the bytes written, or the code
  };
  // Writes each write's fragments into its key's session: zero copy from the pool, other
  // memory through pool blocks. INVALID_PARAMS for a key without a session, or (nothing
  // written for it) a fragment running past the value or past a registered buffer.
  void WritePutSessions(std::vector<SessionWrite>& writes);
  // Ends each key's session once its writes in flight are done: commit publishes it
  // (TRANSFER_FAIL and nothing published when a write to it failed), else it is dropped.
  // (*results)[i]: INVALID_PARAMS when keys[i] has no session; the session ends either way.
  void EndPutSessions(const std::vector<std::string>& keys, bool commit,
                      std::vector<ErrorCode>* results);

  // Reads of this connection the daemon served from an SSD replica (CLIENT_STATS): values,
  // fragments of ranged reads and chunks of staged gets, each once.
  Result<uint64_t> DiskReadCount();

  // The offload choice (uds::WireConfig::offload: 0 the master's default, 1 on, 2 off) that
  // c_api.cc puts into every put's config. Holds across reconnects.
  void SetSsdOffload(uint64_t mode) { ssd_offload_.store(mode, std::memory_order_relaxed); }
  uint64_t ssd_offload() const { return ssd_offload_.load(std::memory_order_relaxed); }

  // Where the buffer of a call lives (*place): host memory for the pool, what
  // register_buffer found for a registered range, else LocateMemory's answer. INVALID_PARAMS
  // (explained) when it starts inside a registered range but runs past its end, when it is
  // neither host nor device memory, or when for_write and it is read-only. A buffer of size
  // 0 is never touched: host, unchecked.
  ErrorCode CheckBuffer(const void* buffer, uint64_t size, bool for_write, MemoryPlace* place);

  // Names the handle in this thread's messages (libmc/last_error.h): unique in the process,
  // never 0, never reused.
  uint64_t serial() const { return serial_; }
  // Holds the log lines of refused arguments to one a second for this handle.
  LogThrottle& argument_log() { return argument_log_; }

 private:
  // What one call works with; taken under a short shared lock.
  struct Context {
    std::shared_ptr<Connection> conn;
    std::shared_ptr<Pool> pool;  // nullptr when local_buffer_size was 0
  };
  // OK with *ctx filled, or INVALID_PARAMS when not connected.
  ErrorCode Acquire(Context* ctx);

  ErrorCode PutOnce(Context& c, const std::string& key, uint64_t pool_offset, uint64_t size,
                    const uds::WireConfig& config, bool upsert, std::shared_ptr<void> keepalive);
  void BatchUpsert(Context& c, std::vector<PutItem>& items, const uds::WireConfig& config);
  ErrorCode PutStaged(Context& c, const std::string& key, const char* value, uint64_t size,
                      const uds::WireConfig& config, bool upsert, const MemoryPlace& place);
  Result<uint64_t> GetStaged(Context& c, const std::string& key, char* buffer,
                             uint64_t capacity, const MemoryPlace& place);
  ErrorCode PutOne(Context& c, const std::string& key, const char* value, uint64_t size,
                   const uds::WireConfig& config, bool upsert, const MemoryPlace& place);
  Result<uint64_t> GetOne(Context& c, const std::string& key, char* buffer, uint64_t capacity,
                          const MemoryPlace& place);

  // A staged fragment too large for the pool at once: its bytes in chunks through pool
  // blocks, one GET_RANGES each. Its length, or the first failure.
  Result<uint64_t> GetRangeChunked(Context& c, const std::string& key, char* dest,
                                   const MemoryPlace& place, uint64_t src_offset,
                                   uint64_t length);

  // A batch op whose reply is one code per key (kBatchRemove, kBatchReplicaClear), sent
  // frame by frame: args_of(frame_keys) is a frame's arguments; (*results)[i] gets key i's
  // code (every key gets Acquire's failure when not connected).
  template <uds::Op op, class ArgsOf>
  void BatchKeyCodes(const std::vector<std::string>& keys, ArgsOf args_of,
                     std::vector<ErrorCode>* results);

  const uint64_t serial_;
  LogThrottle argument_log_;

  std::shared_mutex state_mu_;  // guards the members below
  bool connected_ = false;
  std::string tenant_;
  std::shared_ptr<Connection> conn_;
  std::shared_ptr<Pool> pool_;
  std::shared_ptr<PoolQuarantine> quarantine_;  // pool_'s: it lives across reconnects
  ClientName name_;  // while connected, when Connect named the client

  std::atomic<uint64_t> ssd_offload_{0};

  // A range of register_buffer: its length, and where it lives (found once, when registered).
  struct Registered {
    uint64_t size;
    MemoryPlace place;
  };
  std::mutex registry_mu_;
  std::map<uintptr_t, Registered> registered_;  // by start

  // The open put sessions, by key (store_client_sessions.cc).
  struct PutSession;
  std::mutex sessions_mu_;  // guards put_sessions_ and every session's writers count
  std::condition_variable sessions_cv_;  // a session's last writer is done
  std::unordered_map<std::string, std::shared_ptr<PutSession>> put_sessions_;
};

}  // namespace client
}  // namespace mooncake

#endif  // MOONCAKE_LIBMC_STORE_CLIENT_H_
