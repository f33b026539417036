// The operations of docs/protocol.md, one handler per op, run on worker threads.
//
// A put asks the master where (PutStart), copies pool -> segment for every replica, and
// publishes (PutEnd); any failure, or a client gone before the publish, revokes instead,
// so nothing half-written is ever visible. A get asks which replicas (GetReplicaList),
// copies segment -> pool from one this daemon owns, and checks the copy finished inside
// the read lease. Batches become the master's batch RPCs: one round trip per phase.
//
// Reads remember where the object lives for 90% of its lease (daemon/read_cache.h), and
// later reads of the key within it skip the master. Every write or removal made here
// invalidates what it touches before its client is answered.
//
// Most requests run on workers. A few that cannot block (HOSTNAME, HEALTH, and a small
// GET, EXIST or GET_SIZE the read cache answers) run on the event-loop thread through
// TryInline, saving the hand-off to a worker.
//
// Replicas that live on another daemon need the transfer engine (the cluster issue);
// until then a put or get that meets one fails with TRANSFER_FAIL (-800).
//
// Input is untrusted. A request whose shape is wrong (argument count or type, a batch
// over uds::kMaxBatch) is malformed: the handler returns false and the caller closes the
// connection. Values that are well-typed but unacceptable (key length, value size, a
// pool range outside the pool, an unknown staged id) get INVALID_PARAMS (-600).
#ifndef MOONCAKE_DAEMON_STORE_SERVICE_H_
#define MOONCAKE_DAEMON_STORE_SERVICE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "MasterService.h"
#include "common/error_code.h"
#include "common/uds_protocol.h"
#include "daemon/client_session.h"
#include "daemon/master_client.h"
#include "daemon/membership.h"
#include "daemon/read_cache.h"

namespace mooncake {

class StoreService {
 public:
  // Values up to this size are copied on the event-loop thread when cached; a bigger
  // copy would hold up every other connection.
  static constexpr uint64_t kInlineMaxBytes = 64 * 1024;

  StoreService(MasterClient* master, Membership* membership, ReadCache* cache,
               std::string master_address);

  // The handshake, run before any other frame of the connection is read. Sends the reply.
  // false (with *why for the log) when the connection must be closed: a malformed HELLO,
  // an ABI or master mismatch, or a pool fd that is missing, extra or unsealed.
  // Takes ownership of fds.
  bool Hello(ClientSession* session, const uds::Message& hello, std::vector<int> fds,
             std::string* why);

  // Any request after HELLO. Sends the response, unless the request is malformed: then
  // false, with *why for the log, and the caller closes the connection.
  bool Handle(ClientSession* session, uds::Message* request, std::string* why);

  // Answers a request on the calling (event-loop) thread when that is cheap and cannot
  // block: never a master RPC, never a copy over kInlineMaxBytes, never a blocking write.
  // The caller holds the session (Acquire). kNotInline: nothing was done or sent (also
  // for anything malformed or unacceptable); hand the request to Handle on a worker.
  // kDeferred: the answer is in *deferred, for a worker to write (the socket was full, or
  // a worker was writing to it).
  enum class Inline { kNotInline, kAnswered, kDeferred };
  Inline TryInline(ClientSession* session, const uds::Message& request, std::string* deferred);

  // Runs once per connection, after it closed and its last request ended: revokes its
  // unfinished staged puts, ends its staged gets, unmounts its segments, unmaps its pool.
  void Teardown(ClientSession* session);

 private:
  using Reader = uds::ArgReader;

  // ---- puts (store_service_put.cc) ----
  bool OnPut(ClientSession* s, uint64_t id, Reader* args, bool upsert);
  bool OnBatchPut(ClientSession* s, uint64_t id, Reader* args);
  bool OnPutBegin(ClientSession* s, uint64_t id, Reader* args);
  bool OnPutChunk(ClientSession* s, uint64_t id, Reader* args);
  // PUT_COMMIT (commit) or PUT_ABORT: both take the staged put and wait for its chunks.
  bool OnPutEnd(ClientSession* s, uint64_t id, Reader* args, bool commit);
  // PutStart or UpsertStart, registering again and retrying once on -103.
  int32_t StartPut(const std::string& key, uint64_t size, const rpc::ReplicateConfig& config,
                   bool upsert, rpc::PutStartResult* out);
  int32_t EndPut(const std::string& key, bool upsert);
  int32_t RevokePut(const std::string& key, bool upsert);
  // Publishes, or revokes when the client is gone or the publish failed.
  int32_t FinishPut(ClientSession* s, const std::string& key, bool upsert);

  // ---- gets (store_service_get.cc) ----
  bool OnGet(ClientSession* s, uint64_t id, Reader* args);
  bool OnBatchGet(ClientSession* s, uint64_t id, Reader* args);
  bool OnGetBegin(ClientSession* s, uint64_t id, Reader* args);
  bool OnGetChunk(ClientSession* s, uint64_t id, Reader* args);
  bool OnGetEnd(ClientSession* s, uint64_t id, Reader* args);
  // Copies a listed object into dest (capacity bytes) and remembers its place in the
  // read cache; bytes copied or a code. ticket and generation were taken before the RPC.
  int64_t CopyOut(const std::string& key, ReadCache::Ticket ticket, uint64_t generation,
                  const rpc::ReplicaListResult& list, char* dest, uint64_t capacity,
                  std::chrono::steady_clock::time_point asked_at);
  // Copies a cached object of at most max_size bytes into dest: bytes copied, -600 when
  // it exceeds capacity, or 0 when the cache cannot answer (miss, too big, or the copy
  // overran the entry's deadline or overlapped a re-registration).
  int64_t CopyCached(const std::string& key, char* dest, uint64_t capacity, uint64_t max_size);
  // The local replica of a listed object, remembered in the read cache (*size set).
  int32_t Locate(const std::string& key, ReadCache::Ticket ticket,
                 const rpc::ReplicaListResult& list, std::chrono::steady_clock::time_point asked_at,
                 ReplicaTarget* out, uint64_t* size);

  // ---- everything else (store_service.cc) ----
  bool OnExist(ClientSession* s, uint64_t id, Reader* args);
  bool OnBatchExist(ClientSession* s, uint64_t id, Reader* args);
  bool OnGetSize(ClientSession* s, uint64_t id, Reader* args);
  bool OnRemove(ClientSession* s, uint64_t id, Reader* args);
  bool OnRemoveByRegex(ClientSession* s, uint64_t id, Reader* args);
  bool OnRemoveAll(ClientSession* s, uint64_t id, Reader* args);
  bool OnMountSegment(ClientSession* s, uint64_t id, Reader* args);

  // Where each replica lives in this daemon's memory; -800 when one is not ours.
  int32_t Resolve(const std::vector<rpc::ReplicaDescriptor>& replicas, uint64_t size,
                  std::vector<ReplicaTarget>* out) const;
  // The first replica this daemon owns; -800 when there is none.
  int32_t ResolveOne(const std::vector<rpc::ReplicaDescriptor>& replicas, uint64_t size,
                     ReplicaTarget* out) const;

  MasterClient* const master_;
  Membership* const membership_;
  ReadCache* const cache_;
  const std::string master_address_;
};

// ---- helpers shared by the handler files ----
namespace store_detail {

constexpr int32_t kOk = 0;
constexpr int32_t kInvalid = static_cast<int32_t>(ErrorCode::INVALID_PARAMS);

bool ValidKey(const std::string& key);
bool ValidSize(uint64_t size);
// A msgpack boolean, or an integer 0/1 (C callers pass int flags): 1, 0, or -1 when the
// argument is neither.
int ReadFlag(uds::ArgReader* r);
// Converts a wire config; false when replica_num is out of 1..64.
bool ToRpcConfig(const uds::WireConfig& wire, rpc::ReplicateConfig* out);
// All arguments read, of the right types, and nothing left over.
inline bool Done(const uds::ArgReader& r) { return r.ok() && r.remaining() == 0; }

// Reads the lone key of EXIST, GET_SIZE or GET_BEGIN: false when malformed; true with
// *key empty when the key is unacceptable, -600 having been sent.
bool ReadKeyArg(ClientSession* s, uint64_t id, uds::ArgReader* a, std::string* key);

// [id, code, []]
void Reply(ClientSession* s, uint64_t id, int32_t code);
// [id, code, [v...]], or [id, code, []] when code is not 0.
void ReplyInts(ClientSession* s, uint64_t id, int32_t code, const std::vector<int64_t>& values);

}  // namespace store_detail

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_STORE_SERVICE_H_
