#include "libmc/store_client.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>

#include "common/base/error_code.h"
#include "common/base/logging.h"
#include "common/base/master_endpoint.h"
#include "common/base/tenant_key.h"
#include "common/base/units.h"
#include "libmc/last_error.h"

namespace mooncake {
namespace client {

namespace {

// Staged transfers move chunks of up to kChunkBytes (at least kMinChunkBytes when the pool
// is that large), kChunksInFlight at a time: one is copied here while the daemon copies
// the other.
constexpr uint64_t kChunkBytes = 4ull << 20;
constexpr uint64_t kMinChunkBytes = 64ull << 10;
constexpr size_t kChunksInFlight = 2;
// A batch frame carries at most uds::kMaxBatch entries and about this many bytes, far
// below the 64 MiB frame limit (4096-byte keys x 65536 entries would exceed it).
constexpr size_t kBatchFrameBudget = 16u << 20;
constexpr size_t kEntryOverhead = 32;  // msgpack bytes per batch entry besides the key

using Clock = std::chrono::steady_clock;

Clock::time_point Deadline(const Connection& conn) {
  return Clock::now() + std::chrono::milliseconds(conn.timeout_ms());
}

// The block for a staged transfer's next chunk (kChunkBytes at most, kMinChunkBytes at
// least unless the pool or the rest is smaller). It waits for room only while nothing of
// ours is in flight (see Pool::Stage); otherwise nullptr when the pool is full.
std::shared_ptr<PoolBlock> NextChunkBlock(Pool& pool, const Connection& conn,
                                          uint64_t remaining, bool idle) {
  uint64_t want = std::min(remaining, kChunkBytes);
  uint64_t least = std::min({want, kMinChunkBytes, pool.capacity()});
  return idle ? pool.Stage(least, want, Deadline(conn)) : pool.TryStage(least, want);
}

// The one chunk pipeline of staged puts and gets: the value's size bytes go through the
// pool in chunks (PUT_CHUNK or GET_CHUNK of staged_id), kChunksInFlight at a time.
// before_send(block, value_offset) fills a chunk's block before it is sent (puts);
// after_reply(block, value_offset) empties it once the daemon answered OK (gets); each
// returns OK or why the caller's memory could not be copied. The first failure stops it;
// the chunks still in flight are waited for before it returns.
template <class BeforeSend, class AfterReply>
ErrorCode RunChunks(Connection& conn, Pool& pool, uds::Op op, uint64_t staged_id,
                    uint64_t size, BeforeSend before_send, AfterReply after_reply) {
  struct Chunk {
    Ticket ticket;
    std::shared_ptr<PoolBlock> block;
    uint64_t value_offset;
  };
  std::deque<Chunk> in_flight;
  uint64_t sent = 0;
  ErrorCode rc = ErrorCode::OK;
  while (rc == ErrorCode::OK && (sent < size || !in_flight.empty())) {
    if (sent < size && in_flight.size() < kChunksInFlight) {
      std::shared_ptr<PoolBlock> block = NextChunkBlock(pool, conn, size - sent, in_flight.empty());
      if (block) {
        rc = before_send(*block, sent);
        if (rc != ErrorCode::OK) break;
        Request chunk(op, uds::ChunkArgs{staged_id, sent, block->offset(), block->size()});
        in_flight.push_back({conn.Send(chunk, block), block, sent});
        sent += block->size();
        continue;
      }
      if (in_flight.empty()) {
        rc = ErrorCode::NO_AVAILABLE_HANDLE;
        break;
      }
    }
    Chunk& front = in_flight.front();
    Reply reply;
    rc = conn.Wait(front.ticket, &reply);
    if (rc == ErrorCode::OK) rc = after_reply(*front.block, front.value_offset);
    in_flight.pop_front();
  }
  for (Chunk& chunk : in_flight) {  // after a failure: let the others finish first
    Reply ignored;
    conn.Wait(chunk.ticket, &ignored);
  }
  return rc;
}

// Present or not from an EXIST-style wire value: 1 present, 0 missing; a key missing or
// still being written is not present; anything else is the code.
Result<bool> Presence(int64_t value) {
  if (value == 0 || value == 1) return value == 1;
  ErrorCode code = FromWire(value);
  if (code == ErrorCode::OBJECT_NOT_FOUND) return false;
  return code;
}

// A batch entry's wire value as a count: bytes, or the code.
Result<uint64_t> EntryCount(int64_t value) {
  if (value >= 0) return static_cast<uint64_t>(value);
  return FromWire(value);
}

// A batch frame's results: the daemon's per-entry values, or, when the frame failed as a
// whole (or came back with the wrong count), its code for every entry.
std::vector<int64_t> EntryValues(ErrorCode frame, std::vector<int64_t> values, size_t n) {
  if (frame == ErrorCode::OK && values.size() != n) frame = ErrorCode::INTERNAL_ERROR;
  if (frame != ErrorCode::OK) values.assign(n, ToInt(frame));
  return values;
}

// Splits keys into frames of at most uds::kMaxBatch keys and about kBatchFrameBudget bytes:
// send(first, frame_keys) for each, in order, first being the index of frame_keys[0].
template <class Send>
void ForEachKeyFrame(const std::vector<std::string>& keys, Send send) {
  size_t first = 0;
  while (first < keys.size()) {
    std::vector<std::string> frame;
    size_t frame_bytes = 0;
    while (first + frame.size() < keys.size() && frame.size() < uds::kMaxBatch &&
           frame_bytes < kBatchFrameBudget) {
      const std::string& key = keys[first + frame.size()];
      frame_bytes += key.size() + kEntryOverhead;
      frame.push_back(key);
    }
    const size_t n = frame.size();
    send(first, std::move(frame));
    first += n;
  }
}

// One entry of a batch frame and where it came from.
struct BatchEntry {
  size_t item;  // index into the caller's items
  PoolBlock* block;  // staging block (kept alive by the frame), nullptr for zero copy
};

// The machinery BatchPut and BatchGetInto share: a BATCH_PUT / BATCH_GET frame being
// filled (Args: BatchPutArgs or BatchGetArgs), sent once it holds uds::kMaxBatch entries
// or about kBatchFrameBudget bytes. deliver(entry, value) gets each entry's wire value.
template <uds::Op op, typename Deliver>
class BatchFrame {
 public:
  using Args = typename uds::OpSpec<op>::Args;
  using Entry = typename decltype(Args::entries)::value_type;

  BatchFrame(Connection& conn, Args args, Deliver deliver)
      : conn_(conn), args_(std::move(args)), deliver_(std::move(deliver)) {}

  // Where the n bytes at data go: their own pool offset when they lie in the pool (zero
  // copy), else a staging block (*block) of n bytes; when the pool is full, this frame is
  // sent first so its blocks come back. false when even that leaves no room.
  bool Place(Pool& pool, const void* data, uint64_t n, uint64_t* offset,
             std::shared_ptr<PoolBlock>* block) {
    if (pool.Contains(data, n, offset)) return true;
    *block = pool.TryStage(n, n);
    if (!*block && !entries_.empty()) {
      Flush();
      *block = pool.TryStage(n, n);
    }
    if (!*block) return false;
    *offset = (*block)->offset();
    return true;
  }

  void Add(size_t item, Entry entry, std::shared_ptr<PoolBlock> block) {
    frame_bytes_ += entry.key.size() + kEntryOverhead;
    args_.entries.push_back(std::move(entry));
    entries_.push_back({item, block.get()});
    if (block) blocks_->push_back(std::move(block));
    if (entries_.size() >= uds::kMaxBatch || frame_bytes_ >= kBatchFrameBudget) Flush();
  }

  void Flush() {
    if (entries_.empty()) return;
    typename uds::OpSpec<op>::Reply reply;
    ErrorCode code = conn_.Invoke<op>(args_, &reply, blocks_);
    std::vector<int64_t> values = EntryValues(code, std::move(reply.values), entries_.size());
    for (size_t i = 0; i < entries_.size(); ++i) deliver_(entries_[i], values[i]);
    entries_.clear();
    args_.entries.clear();
    // A fresh vector, not clear(): after a timeout the connection still holds the old one
    // until the daemon answers, so those blocks must not be given back yet.
    blocks_ = std::make_shared<std::vector<std::shared_ptr<PoolBlock>>>();
    frame_bytes_ = 0;
  }

 private:
  Connection& conn_;
  Args args_;  // the entries so far, and what every frame repeats (the config)
  Deliver deliver_;
  std::vector<BatchEntry> entries_;
  std::shared_ptr<std::vector<std::shared_ptr<PoolBlock>>> blocks_ =
      std::make_shared<std::vector<std::shared_ptr<PoolBlock>>>();
  size_t frame_bytes_ = 0;
};

template <uds::Op op, typename Deliver>
BatchFrame<op, Deliver> MakeBatchFrame(Connection& conn, typename uds::OpSpec<op>::Args args,
                                       Deliver deliver) {
  return BatchFrame<op, Deliver>(conn, std::move(args), std::move(deliver));
}

// A batch's config for one of its entries put on its own: with the entry's group id.
uds::WireConfig WithGroup(const uds::WireConfig& batch, const std::string& group) {
  uds::WireConfig one = batch;
  one.group = group;
  return one;
}

std::atomic<uint64_t> g_next_serial{1};

ErrorCode NotConnected() {
  return Refused(ErrorCode::INVALID_PARAMS,
                 "not connected: call mooncake_store_connect() or mooncake_store_setup() "
                 "first (or again, after close)");
}

ErrorCode NoPool() {
  return Refused(ErrorCode::INVALID_PARAMS,
                 "the handle has no pool (local_buffer_size 0): values cannot be copied; "
                 "connect with a local_buffer_size");
}

}  // namespace

StoreClient::StoreClient() : serial_(g_next_serial.fetch_add(1)) {}

StoreClient::~StoreClient() { Close(); }

ErrorCode StoreClient::SetTenant(const std::string& tenant) {
  if (!tenant_key::ValidTenantOrDefault(tenant)) {
    return Refused(ErrorCode::INVALID_PARAMS,
                   "tenant id of " + std::to_string(tenant.size()) +
                       " bytes: a tenant id is 1 to 64 characters of [A-Za-z0-9_.-]");
  }
  absl::WriterMutexLock lock(&state_mu_);
  if (connected_) {
    return Refused(ErrorCode::INVALID_PARAMS,
                   "set_tenant while connected: name the tenant before connect or setup");
  }
  tenant_ = tenant;
  return ErrorCode::OK;
}

ErrorCode StoreClient::Connect(const std::string& socket_path, uint64_t local_buffer_size,
                               const std::string& master_address, uint64_t mount_size,
                               const std::string& local_hostname) {
  // The daemon compares endpoints, not spellings: the name is resolved here, once, so that
  // the daemon never waits for DNS on a client's behalf (common/base/master_endpoint.h).
  std::string master_endpoint;
  if (!master_address.empty()) {
    std::string error;
    if (!CanonicalMasterEndpoint(master_address, HostLookup::kResolve, &master_endpoint,
                                 &error)) {
      return Refused(ErrorCode::INVALID_PARAMS,
                     "master_server_addr \"" + master_address + "\": " + error +
                         "; name the daemon's master as host:port (or etcd://...), or pass "
                         "\"\" to skip the check");
    }
  }
  absl::WriterMutexLock lock(&state_mu_);
  if (connected_) {
    return Refused(ErrorCode::INVALID_PARAMS,
                   "already connected: close the handle before connecting it again");
  }
  std::shared_ptr<Pool> pool;
  std::shared_ptr<PoolQuarantine> quarantine;
  if (local_buffer_size > 0) {
    if (pool_ && pool_->size() == local_buffer_size) {
      pool = pool_;  // a reconnect after close keeps the application's pool pointers
      quarantine = quarantine_;  // and what the daemon may still write in it
    } else {
      std::string why;
      ErrorCode rc = Pool::Create(local_buffer_size, &pool, &why);
      if (rc != ErrorCode::OK) {
        Explain(rc, "local_buffer_size " + FormatSize(local_buffer_size) + ": " + why,
                rc == ErrorCode::INVALID_PARAMS ? Blame::kArgument : Blame::kOther);
        return rc;
      }
      quarantine = std::make_shared<PoolQuarantine>(pool);
    }
  }
  Connection::Options options;
  options.socket_path = socket_path;
  options.pool_fd = pool ? pool->fd() : -1;
  options.pool_owner = pool;
  options.pool_size = pool ? pool->size() : 0;
  options.master_address = master_endpoint;
  options.tenant = tenant_;
  options.mount_size = mount_size;
  options.timeout_ms = TimeoutFromEnvironment();
  options.spin_us = SpinMicrosFromEnvironment();
  options.quarantine = quarantine;
  ClientName name;
  std::shared_ptr<Connection> conn;
  ErrorCode rc = ErrorCode::OK;
  // A port picked here may name another host's client already: Mooncake's setup tries
  // another port then, as often as its AutoPortBinder tries ports.
  for (int attempt = 0; attempt < 20; ++attempt) {
    std::string why;
    rc = ClientName::Make(local_hostname, &name, &why);
    if (rc != ErrorCode::OK) {
      Explain(rc, why, rc == ErrorCode::INVALID_PARAMS ? Blame::kArgument : Blame::kOther);
      return rc;
    }
    options.client_name = name.name();
    conn = std::make_shared<Connection>(options);
    rc = conn->Open();
    if (rc != ErrorCode::SEGMENT_ALREADY_EXISTS || !name.picked_port()) break;
  }
  if (rc != ErrorCode::OK) return rc;
  name_ = std::move(name);
  conn_ = std::move(conn);
  pool_ = std::move(pool);
  quarantine_ = std::move(quarantine);
  connected_ = true;
  return ErrorCode::OK;
}

ErrorCode StoreClient::Close() {
  std::shared_ptr<Connection> conn;
  {
    absl::WriterMutexLock lock(&state_mu_);
    if (!connected_) return ErrorCode::OK;
    connected_ = false;
    conn = std::move(conn_);
    name_ = ClientName();  // its port is let go
  }
  {
    // The daemon revokes their puts when the connection goes; writes in flight hold theirs.
    absl::MutexLock lock(&sessions_mu_);
    put_sessions_.clear();
  }
  if (conn->lends_memory()) {
    // Before the connection goes: the daemon moves the objects in the lent memory (others'
    // puts too) to other segments, and answers once done. Should the wait run out, the
    // daemon finishes the drain all the same.
    uds::UnmountSegmentsReply drained;
    ErrorCode code = conn->Invoke<uds::Op::kUnmountSegments>(uds::NoArgs(), &drained);
    if (code != ErrorCode::OK) {
      MC_LOG_WARN("mooncake_store: close: draining the handle's segment: %s (the daemon "
                  "drains it when the connection is gone)", ErrorName(code));
    } else if (drained.dropped > 0) {
      MC_LOG_WARN("mooncake_store: close: %llu objects moved out of the handle's segment, "
                  "%llu dropped with it (no room elsewhere)",
                  static_cast<unsigned long long>(drained.moved),
                  static_cast<unsigned long long>(drained.dropped));
    }
  }
  conn->Close();
  return ErrorCode::OK;
}

ErrorCode StoreClient::Acquire(Context* ctx) {
  absl::ReaderMutexLock lock(&state_mu_);
  if (!connected_) return NotConnected();
  ctx->conn = conn_;
  ctx->pool = pool_;
  return ErrorCode::OK;
}

int StoreClient::HealthCheck() {
  Context c;
  uds::HealthReply health;
  if (Acquire(&c) != ErrorCode::OK ||
      c.conn->Invoke<uds::Op::kHealth>(uds::NoArgs(), &health) != ErrorCode::OK) {
    return 1;
  }
  if (health.master_reachable == 1) return 0;
  if (health.master_reachable == 0) return 2;
  return 1;
}

ErrorCode StoreClient::GetHostname(std::string* hostname) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  {
    absl::ReaderMutexLock lock(&state_mu_);
    if (!name_.name().empty()) {
      *hostname = name_.name();
      return ErrorCode::OK;
    }
  }
  rc = c.conn->EnsureUp();
  if (rc != ErrorCode::OK) return rc;
  *hostname = c.conn->hostname();
  return ErrorCode::OK;
}

void* StoreClient::Alloc(uint64_t size) {
  Context c;
  if (Acquire(&c) != ErrorCode::OK) return nullptr;
  if (!c.pool) {
    NoPool();
    return nullptr;
  }
  if (size == 0) {
    Refused(ErrorCode::INVALID_PARAMS, "size 0");
    return nullptr;
  }
  void* p = c.pool->Allocate(size);
  if (p == nullptr) {
    Explain(ErrorCode::NO_AVAILABLE_HANDLE,
            "no free block of " + std::to_string(size) + " bytes in the handle's pool of " +
                std::to_string(c.pool->size()) +
                " bytes: free some, or connect with a larger local_buffer_size");
  }
  return p;
}

void StoreClient::Free(void* ptr) {
  std::shared_ptr<Pool> pool;
  {
    absl::ReaderMutexLock lock(&state_mu_);
    pool = pool_;
  }
  if (pool) pool->Free(ptr);
}

// ---- put ------------------------------------------------------------------------------

ErrorCode StoreClient::Put(const std::string& key, const void* value, uint64_t size,
                           const uds::WireConfig& config, bool upsert, const MemoryPlace& place) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  return PutOne(c, key, static_cast<const char*>(value), size, config, upsert, place);
}

ErrorCode StoreClient::PutOne(Context& c, const std::string& key, const char* value,
                              uint64_t size, const uds::WireConfig& config, bool upsert,
                              const MemoryPlace& place) {
  // No pool: nothing can be copied (as in Mooncake).
  if (!c.pool) return NoPool();
  uint64_t offset;
  if (c.pool->Contains(value, size, &offset)) {
    return PutOnce(c, key, offset, size, config, upsert, nullptr);
  }
  std::shared_ptr<PoolBlock> block = c.pool->TryStage(size, size);
  if (block) {
    ErrorCode rc = CopyFromCaller(place, block->data(), value, size);
    if (rc != ErrorCode::OK) return rc;
    return PutOnce(c, key, block->offset(), size, config, upsert, block);
  }
  return PutStaged(c, key, value, size, config, upsert, place);
}

ErrorCode StoreClient::PutOnce(Context& c, const std::string& key, uint64_t pool_offset,
                               uint64_t size, const uds::WireConfig& config, bool upsert,
                               std::shared_ptr<void> keepalive) {
  uds::PutArgs args{key, pool_offset, size, config};
  uds::NoReply none;
  ErrorCode rc = upsert ? c.conn->Invoke<uds::Op::kUpsert>(args, &none, std::move(keepalive))
                        : c.conn->Invoke<uds::Op::kPut>(args, &none, std::move(keepalive));
  // put never overwrites; the old value stays
  if (rc == ErrorCode::OBJECT_ALREADY_EXISTS && !upsert) return ErrorCode::OK;
  return rc;
}

ErrorCode StoreClient::PutStaged(Context& c, const std::string& key, const char* value,
                                 uint64_t size, const uds::WireConfig& config, bool upsert,
                                 const MemoryPlace& place) {
  uds::PutBeginReply begun;
  ErrorCode rc = c.conn->Invoke<uds::Op::kPutBegin>(
      uds::PutBeginArgs{key, size, config, uds::Flag{upsert}}, &begun);
  if (rc == ErrorCode::OBJECT_ALREADY_EXISTS && !upsert) return ErrorCode::OK;
  if (rc != ErrorCode::OK) return rc;
  rc = RunChunks(
      *c.conn, *c.pool, uds::Op::kPutChunk, begun.put_id, size,
      [&](PoolBlock& block, uint64_t at) {
        return CopyFromCaller(place, block.data(), value + at, block.size());
      },
      [](PoolBlock&, uint64_t) { return ErrorCode::OK; });
  uds::NoReply none;
  if (rc == ErrorCode::OK) {
    return c.conn->Invoke<uds::Op::kPutCommit>(uds::StagedIdArgs{begun.put_id}, &none);
  }
  // Best effort: a dead connection revokes it anyway.
  c.conn->Invoke<uds::Op::kPutAbort>(uds::StagedIdArgs{begun.put_id}, &none);
  return rc;
}

void StoreClient::BatchPut(std::vector<PutItem>& items, const uds::WireConfig& config,
                           bool upsert) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) {
    for (PutItem& it : items) it.result = rc;
    return;
  }
  if (upsert) {
    BatchUpsert(c, items, config);
    return;
  }
  uds::BatchPutArgs shared;
  shared.config = config;
  auto frame = MakeBatchFrame<uds::Op::kBatchPut>(
      *c.conn, std::move(shared), [&](const BatchEntry& e, int64_t value) {
        ErrorCode code = value > 0 ? ErrorCode::INTERNAL_ERROR : FromWire(value);
        items[e.item].result = code == ErrorCode::OBJECT_ALREADY_EXISTS ? ErrorCode::OK : code;
      });
  for (size_t i = 0; i < items.size(); ++i) {
    PutItem& it = items[i];
    uint64_t offset = 0;
    std::shared_ptr<PoolBlock> block;
    if (!c.pool) {
      it.result = ErrorCode::INVALID_PARAMS;
    } else if (!frame.Place(*c.pool, it.data, it.size, &offset, &block)) {
      // Too large for the pool right now: chunked, on its own.
      it.result = PutOne(c, it.key, it.data, it.size, WithGroup(config, it.group), false,
                         it.place);
    } else {
      if (block) {
        it.result = CopyFromCaller(it.place, block->data(), it.data, it.size);
        if (it.result != ErrorCode::OK) continue;  // the caller's memory could not be read
      }
      frame.Add(i, uds::PutEntry{std::move(it.key), offset, it.size, std::move(it.group)},
                std::move(block));
    }
  }
  frame.Flush();
}

void StoreClient::BatchUpsert(Context& c, std::vector<PutItem>& items,
                              const uds::WireConfig& config) {
  uds::BatchPutArgs shared;
  shared.config = config;
  auto frame = MakeBatchFrame<uds::Op::kBatchUpsert>(
      *c.conn, std::move(shared), [&](const BatchEntry& e, int64_t value) {
        items[e.item].result = value > 0 ? ErrorCode::INTERNAL_ERROR : FromWire(value);
      });
  for (size_t i = 0; i < items.size(); ++i) {
    PutItem& it = items[i];
    uint64_t offset = 0;
    std::shared_ptr<PoolBlock> block;
    if (!c.pool) {
      it.result = ErrorCode::INVALID_PARAMS;
    } else if (!frame.Place(*c.pool, it.data, it.size, &offset, &block)) {
      // Too large for the pool right now: the entries framed so far go first, so that the
      // batch's upserts of one key still apply in order; then this one, chunked.
      frame.Flush();
      it.result = PutOne(c, it.key, it.data, it.size, WithGroup(config, it.group), true,
                         it.place);
    } else {
      if (block) {
        it.result = CopyFromCaller(it.place, block->data(), it.data, it.size);
        if (it.result != ErrorCode::OK) continue;  // the caller's memory could not be read
      }
      frame.Add(i, uds::PutEntry{std::move(it.key), offset, it.size, std::move(it.group)},
                std::move(block));
    }
  }
  frame.Flush();
}

// ---- get ------------------------------------------------------------------------------

Result<uint64_t> StoreClient::GetInto(const std::string& key, void* buffer, uint64_t capacity,
                                      const MemoryPlace& place) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  return GetOne(c, key, static_cast<char*>(buffer), capacity, place);
}

Result<uint64_t> StoreClient::GetOne(Context& c, const std::string& key, char* buffer,
                                     uint64_t capacity, const MemoryPlace& place) {
  if (capacity == 0) {  // nothing fits: -600 when the object exists, its miss code if not
    uds::SizeReply size;
    ErrorCode code = c.conn->Invoke<uds::Op::kGetSize>(uds::KeyArgs{key}, &size);
    if (code != ErrorCode::OK) return code;
    return Refused(ErrorCode::INVALID_PARAMS,
                   "buffer size 0: the value is " + std::to_string(size.size) + " bytes");
  }
  if (!c.pool) return NoPool();
  uint64_t offset;
  std::shared_ptr<PoolBlock> block;
  if (!c.pool->Contains(buffer, capacity, &offset)) {
    block = c.pool->TryStage(capacity, capacity);
    if (!block) return GetStaged(c, key, buffer, capacity, place);
    offset = block->offset();
  }
  uds::GetReply got;
  ErrorCode code = c.conn->Invoke<uds::Op::kGet>(uds::GetArgs{key, offset, capacity}, &got, block);
  if (code != ErrorCode::OK) return code;
  if (got.bytes > capacity) return ErrorCode::INTERNAL_ERROR;
  if (block) {
    code = CopyToCaller(place, buffer, block->data(), got.bytes);
    if (code != ErrorCode::OK) return code;
  }
  return got.bytes;
}

Result<uint64_t> StoreClient::GetStaged(Context& c, const std::string& key, char* buffer,
                                        uint64_t capacity, const MemoryPlace& place) {
  uds::GetBeginReply begun;
  ErrorCode rc = c.conn->Invoke<uds::Op::kGetBegin>(uds::KeyArgs{key}, &begun);
  if (rc != ErrorCode::OK) return rc;
  Result<uint64_t> result = begun.size;
  if (begun.size > capacity) {
    result = Refused(ErrorCode::INVALID_PARAMS,
                     "the value is " + std::to_string(begun.size) +
                         " bytes, larger than the buffer of " + std::to_string(capacity));
  } else {
    rc = RunChunks(
        *c.conn, *c.pool, uds::Op::kGetChunk, begun.get_id, begun.size,
        [](PoolBlock&, uint64_t) { return ErrorCode::OK; },
        [&](PoolBlock& block, uint64_t at) {
          return CopyToCaller(place, buffer + at, block.data(), block.size());
        });
    if (rc != ErrorCode::OK) result = rc;
  }
  uds::NoReply none;
  // Ends the lease; its code does not change the result.
  c.conn->Invoke<uds::Op::kGetEnd>(uds::StagedIdArgs{begun.get_id}, &none);
  return result;
}

void StoreClient::BatchGetInto(std::vector<GetItem>& items) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) {
    for (GetItem& it : items) it.result = rc;
    return;
  }
  auto frame = MakeBatchFrame<uds::Op::kBatchGet>(
      *c.conn, uds::BatchGetArgs(), [&](const BatchEntry& e, int64_t value) {
        GetItem& it = items[e.item];
        Result<uint64_t> got = EntryCount(value);
        if (got.ok() && got.value() > it.capacity) got = ErrorCode::INTERNAL_ERROR;
        if (got.ok() && got.value() > 0 && e.block != nullptr) {
          ErrorCode copied = CopyToCaller(it.place, it.buffer, e.block->data(), got.value());
          if (copied != ErrorCode::OK) got = copied;
        }
        it.result = got;
      });
  for (size_t i = 0; i < items.size(); ++i) {
    GetItem& it = items[i];
    uint64_t offset = 0;
    std::shared_ptr<PoolBlock> block;
    if (!c.pool || it.capacity == 0) {
      it.result = GetOne(c, it.key, it.buffer, it.capacity, it.place);
    } else if (!frame.Place(*c.pool, it.buffer, it.capacity, &offset, &block)) {
      it.result = GetStaged(c, it.key, it.buffer, it.capacity, it.place);  // chunked, alone
    } else {
      frame.Add(i, uds::GetArgs{std::move(it.key), offset, it.capacity}, std::move(block));
    }
  }
  frame.Flush();
}

// ---- query and remove -----------------------------------------------------------------

Result<bool> StoreClient::IsExist(const std::string& key) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  uds::ExistReply exist;
  rc = c.conn->Invoke<uds::Op::kExist>(uds::KeyArgs{key}, &exist);
  if (rc == ErrorCode::OBJECT_NOT_FOUND) return false;
  if (rc != ErrorCode::OK) return rc;
  return Presence(static_cast<int64_t>(exist.present));
}

void StoreClient::BatchIsExist(const std::vector<std::string>& keys,
                               std::vector<Result<bool>>* results) {
  results->assign(keys.size(), false);
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) {
    std::fill(results->begin(), results->end(), rc);
    return;
  }
  ForEachKeyFrame(keys, [&](size_t first, std::vector<std::string> frame) {
    const size_t n = frame.size();
    uds::BatchExistReply reply;
    ErrorCode code =
        c.conn->Invoke<uds::Op::kBatchExist>(uds::BatchExistArgs{std::move(frame)}, &reply);
    std::vector<int64_t> values = EntryValues(code, std::move(reply.values), n);
    for (size_t i = 0; i < n; ++i) (*results)[first + i] = Presence(values[i]);
  });
}

Result<uint64_t> StoreClient::GetSize(const std::string& key) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  uds::SizeReply size;
  rc = c.conn->Invoke<uds::Op::kGetSize>(uds::KeyArgs{key}, &size);
  if (rc != ErrorCode::OK) return rc;
  return size.size;
}

ErrorCode StoreClient::Remove(const std::string& key, bool force) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  uds::NoReply none;
  return c.conn->Invoke<uds::Op::kRemove>(uds::RemoveArgs{key, uds::Flag{force}}, &none);
}

template <uds::Op op, class ArgsOf>
void StoreClient::BatchKeyCodes(const std::vector<std::string>& keys, ArgsOf args_of,
                                std::vector<ErrorCode>* results) {
  Context c;
  ErrorCode rc = Acquire(&c);
  results->assign(keys.size(), rc);
  if (rc != ErrorCode::OK) return;
  ForEachKeyFrame(keys, [&](size_t first, std::vector<std::string> frame) {
    const size_t n = frame.size();
    typename uds::OpSpec<op>::Reply reply;
    ErrorCode code = c.conn->Invoke<op>(args_of(std::move(frame)), &reply);
    std::vector<int64_t> values = EntryValues(code, std::move(reply.values), n);
    for (size_t i = 0; i < n; ++i) (*results)[first + i] = FromWire(values[i]);
  });
}

void StoreClient::BatchRemove(const std::vector<std::string>& keys, bool force,
                              std::vector<ErrorCode>* results) {
  BatchKeyCodes<uds::Op::kBatchRemove>(
      keys,
      [&](std::vector<std::string> frame) {
        return uds::BatchRemoveArgs{std::move(frame), uds::Flag{force}};
      },
      results);
}

void StoreClient::BatchReplicaClear(const std::vector<std::string>& keys,
                                    const std::string& segment_name,
                                    std::vector<ErrorCode>* results) {
  BatchKeyCodes<uds::Op::kBatchReplicaClear>(
      keys,
      [&](std::vector<std::string> frame) {
        return uds::BatchReplicaClearArgs{std::move(frame), segment_name};
      },
      results);
}

Result<uint64_t> StoreClient::RemoveByRegex(const std::string& pattern, bool force) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  uds::CountReply removed;
  rc = c.conn->Invoke<uds::Op::kRemoveByRegex>(uds::RemoveByRegexArgs{pattern, uds::Flag{force}},
                                                &removed);
  if (rc != ErrorCode::OK) return rc;
  return removed.count;
}

Result<uint64_t> StoreClient::RemoveAll(bool force) {
  Context c;
  ErrorCode rc = Acquire(&c);
  if (rc != ErrorCode::OK) return rc;
  uds::CountReply removed;
  rc = c.conn->Invoke<uds::Op::kRemoveAll>(uds::RemoveAllArgs{uds::Flag{force}}, &removed);
  if (rc != ErrorCode::OK) return rc;
  return removed.count;
}

}  // namespace client
}  // namespace mooncake
