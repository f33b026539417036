#include "libmc/store_client.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <deque>

#include "common/error_code.h"

namespace mooncake {
namespace client {

namespace {

constexpr int kInternal = static_cast<int>(ErrorCode::INTERNAL_ERROR);
constexpr int kInvalidParams = static_cast<int>(ErrorCode::INVALID_PARAMS);
constexpr int kNoSpace = static_cast<int>(ErrorCode::NO_AVAILABLE_HANDLE);
constexpr int kExists = static_cast<int>(ErrorCode::OBJECT_ALREADY_EXISTS);
constexpr int kNotFound = static_cast<int>(ErrorCode::OBJECT_NOT_FOUND);

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

// PUT_CHUNK / GET_CHUNK: [staged id, value offset, pool offset, length].
void PackChunk(Request& r, uint64_t staged_id, uint64_t value_offset, const PoolBlock& block) {
  r.args().pack(staged_id);
  r.args().pack(value_offset);
  r.args().pack(block.offset());
  r.args().pack(block.size());
}

// The results array of a reply, read raw (so a 0/1 flag may come as an int or a bool).
const msgpack::object* RawResults(Reply& reply) {
  const msgpack::object& top = reply.message.handle.get();
  if (top.type != msgpack::type::ARRAY || top.via.array.size != 3) return nullptr;
  const msgpack::object& results = top.via.array.ptr[2];
  return results.type == msgpack::type::ARRAY ? &results : nullptr;
}

bool AsInt(const msgpack::object& o, int64_t* value) {
  switch (o.type) {
    case msgpack::type::POSITIVE_INTEGER:
      if (o.via.u64 > static_cast<uint64_t>(INT64_MAX)) return false;
      *value = static_cast<int64_t>(o.via.u64);
      return true;
    case msgpack::type::NEGATIVE_INTEGER:
      *value = o.via.i64;
      return true;
    case msgpack::type::BOOLEAN:
      *value = o.via.boolean ? 1 : 0;
      return true;
    default:
      return false;
  }
}

// results[i] of a reply as an integer; kInternal when missing or of another type.
int64_t ResultAt(Reply& reply, size_t i) {
  const msgpack::object* results = RawResults(reply);
  int64_t value;
  if (results == nullptr || i >= results->via.array.size ||
      !AsInt(results->via.array.ptr[i], &value)) {
    return kInternal;
  }
  return value;
}

int AsCode(int64_t value) {
  return (value > 0 || value < INT_MIN) ? kInternal : static_cast<int>(value);
}

// 1 present, 0 missing or not readable yet, or a code, from an EXIST-style entry.
int ExistResult(int64_t value) {
  if (value == 0 || value == 1) return static_cast<int>(value);
  if (value == kNotFound) return 0;
  return AsCode(value);
}

// A batch reply's code: kInternal when a successful reply does not carry n results.
int BatchCode(int code, Reply& reply, size_t n) {
  const msgpack::object* results = code == 0 ? RawResults(reply) : nullptr;
  return code == 0 && (results == nullptr || results->via.array.size != n) ? kInternal : code;
}

// Sends r and returns its first result, a size or count, or a code.
int64_t CallForCount(Connection& conn, Request& r) {
  Reply reply;
  int rc = conn.Call(r, &reply);
  if (rc != 0) return rc;
  int64_t n = ResultAt(reply, 0);
  return n < 0 ? kInternal : n;
}

void PackKeyRange(Request& r, const std::string& key, uint64_t offset, uint64_t size) {
  r.args().pack(key);
  r.args().pack(offset);
  r.args().pack(size);
}

// One entry of a batch frame: [key, offset, size] on the wire.
struct BatchEntry {
  size_t item;  // index into the caller's items
  const std::string* key;
  uint64_t offset;  // pool offset of the value (zero copy) or of its staging block
  uint64_t size;
  PoolBlock* block;  // staging block (kept alive by the frame), nullptr for zero copy
};

// The machinery BatchPut and BatchGetInto share: a BATCH_PUT / BATCH_GET frame being
// filled, sent once it holds uds::kMaxBatch entries or about kBatchFrameBudget bytes.
// deliver(entry, value) gets each entry's result, value being the daemon's integer or the
// frame's code (0 or negative, see Connection::Call) when the frame failed as a whole.
template <typename Deliver>
class BatchFrame {
 public:
  BatchFrame(Connection& conn, uds::Op op, const uds::WireConfig* config, Deliver deliver)
      : conn_(conn), op_(op), config_(config), deliver_(std::move(deliver)) {}

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

  void Add(size_t item, const std::string& key, uint64_t offset, uint64_t size,
           std::shared_ptr<PoolBlock> block) {
    entries_.push_back({item, &key, offset, size, block.get()});
    if (block) blocks_->push_back(std::move(block));
    frame_bytes_ += key.size() + kEntryOverhead;
    if (entries_.size() >= uds::kMaxBatch || frame_bytes_ >= kBatchFrameBudget) Flush();
  }

  void Flush() {
    if (entries_.empty()) return;
    Request r(op_, config_ != nullptr ? 2 : 1);
    r.args().pack_array(static_cast<uint32_t>(entries_.size()));
    for (const BatchEntry& e : entries_) {
      r.args().pack_array(3);
      PackKeyRange(r, *e.key, e.offset, e.size);
    }
    if (config_ != nullptr) r.PackConfig(*config_);
    Reply reply;
    int code = BatchCode(conn_.Call(r, &reply, blocks_), reply, entries_.size());
    for (size_t i = 0; i < entries_.size(); ++i) {
      deliver_(entries_[i], code == 0 ? ResultAt(reply, i) : code);
    }
    entries_.clear();
    // A fresh vector, not clear(): after a timeout the connection still holds the old one
    // until the daemon answers, so those blocks must not be given back yet.
    blocks_ = std::make_shared<std::vector<std::shared_ptr<PoolBlock>>>();
    frame_bytes_ = 0;
  }

 private:
  Connection& conn_;
  const uds::Op op_;
  const uds::WireConfig* const config_;  // packed after the entries; nullptr for none
  Deliver deliver_;
  std::vector<BatchEntry> entries_;
  std::shared_ptr<std::vector<std::shared_ptr<PoolBlock>>> blocks_ =
      std::make_shared<std::vector<std::shared_ptr<PoolBlock>>>();
  size_t frame_bytes_ = 0;
};

}  // namespace

StoreClient::~StoreClient() { Close(); }

int StoreClient::Connect(const std::string& socket_path, uint64_t local_buffer_size,
                         const std::string& master_address, uint64_t mount_size) {
  std::unique_lock<std::shared_mutex> lock(state_mu_);
  if (connected_) return kInvalidParams;
  std::shared_ptr<Pool> pool;
  if (local_buffer_size > 0) {
    if (pool_ && pool_->size() == local_buffer_size) {
      pool = pool_;  // a reconnect after close keeps the application's pool pointers
    } else {
      int rc = Pool::Create(local_buffer_size, &pool);
      if (rc != 0) return rc;
    }
  }
  Connection::Options options;
  options.socket_path = socket_path;
  options.pool_fd = pool ? pool->fd() : -1;
  options.pool_owner = pool;
  options.pool_size = pool ? pool->size() : 0;
  options.master_address = master_address;
  options.mount_size = mount_size;
  options.timeout_ms = TimeoutFromEnvironment();
  auto conn = std::make_shared<Connection>(std::move(options));
  int rc = conn->Open();
  if (rc != 0) return rc;
  conn_ = std::move(conn);
  pool_ = std::move(pool);
  connected_ = true;
  return 0;
}

int StoreClient::Close() {
  std::shared_ptr<Connection> conn;
  {
    std::unique_lock<std::shared_mutex> lock(state_mu_);
    if (!connected_) return 0;
    connected_ = false;
    conn = std::move(conn_);
  }
  conn->Close();
  return 0;
}

int StoreClient::Acquire(Context* ctx) {
  std::shared_lock<std::shared_mutex> lock(state_mu_);
  if (!connected_) return kInvalidParams;
  ctx->conn = conn_;
  ctx->pool = pool_;
  return 0;
}

int StoreClient::HealthCheck() {
  Context c;
  if (Acquire(&c) != 0) return 1;
  Request r(uds::Op::kHealth, 0);
  Reply reply;
  if (c.conn->Call(r, &reply) != 0) return 1;
  int64_t reachable = ResultAt(reply, 0);
  if (reachable == 1) return 0;
  if (reachable == 0) return 2;
  return 1;
}

int StoreClient::GetHostname(std::string* hostname) {
  Context c;
  int rc = Acquire(&c);
  if (rc != 0) return rc;
  rc = c.conn->EnsureUp();
  if (rc != 0) return rc;
  *hostname = c.conn->hostname();
  return 0;
}

void* StoreClient::Alloc(uint64_t size) {
  Context c;
  if (Acquire(&c) != 0 || !c.pool || size == 0) return nullptr;
  return c.pool->Allocate(size);
}

void StoreClient::Free(void* ptr) {
  std::shared_ptr<Pool> pool;
  {
    std::shared_lock<std::shared_mutex> lock(state_mu_);
    pool = pool_;
  }
  if (pool) pool->Free(ptr);
}

int StoreClient::RegisterBuffer(void* buffer, uint64_t size) {
  Context c;
  int rc = Acquire(&c);
  if (rc != 0) return rc;
  if (size == 0) return kInvalidParams;
  uintptr_t start = reinterpret_cast<uintptr_t>(buffer);
  if (start + size < start) return kInvalidParams;  // wraps around
  std::lock_guard<std::mutex> lock(registry_mu_);
  auto next = registered_.lower_bound(start);
  if (next != registered_.end() && next->first < start + size) return kInvalidParams;
  if (next != registered_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second > start) return kInvalidParams;  // overlaps
  }
  registered_.emplace(start, size);
  return 0;
}

int StoreClient::UnregisterBuffer(void* buffer) {
  Context c;
  int rc = Acquire(&c);
  if (rc != 0) return rc;
  std::lock_guard<std::mutex> lock(registry_mu_);
  return registered_.erase(reinterpret_cast<uintptr_t>(buffer)) == 1 ? 0 : kInvalidParams;
}

int StoreClient::CheckRegistered(const void* buffer, uint64_t size) {
  uintptr_t start = reinterpret_cast<uintptr_t>(buffer);
  std::lock_guard<std::mutex> lock(registry_mu_);
  auto it = registered_.upper_bound(start);
  if (it == registered_.begin()) return 0;
  --it;
  uint64_t end = it->first + it->second;
  if (start < end && size > end - start) return kInvalidParams;
  return 0;
}

// ---- put ------------------------------------------------------------------------------

int StoreClient::Put(const std::string& key, const void* value, uint64_t size,
                     const uds::WireConfig& config, bool upsert) {
  Context c;
  int rc = Acquire(&c);
  if (rc != 0) return rc;
  return PutOne(c, key, static_cast<const char*>(value), size, config, upsert);
}

int StoreClient::PutOne(Context& c, const std::string& key, const char* value, uint64_t size,
                        const uds::WireConfig& config, bool upsert) {
  if (!c.pool) return kInvalidParams;  // no pool: nothing can be copied (as in Mooncake)
  uint64_t offset;
  if (c.pool->Contains(value, size, &offset)) {
    return PutOnce(c, key, offset, size, config, upsert, nullptr);
  }
  std::shared_ptr<PoolBlock> block = c.pool->TryStage(size, size);
  if (block) {
    std::memcpy(block->data(), value, size);
    return PutOnce(c, key, block->offset(), size, config, upsert, block);
  }
  return PutStaged(c, key, value, size, config, upsert);
}

int StoreClient::PutOnce(Context& c, const std::string& key, uint64_t pool_offset,
                         uint64_t size, const uds::WireConfig& config, bool upsert,
                         std::shared_ptr<void> keepalive) {
  Request r(upsert ? uds::Op::kUpsert : uds::Op::kPut, 4);
  PackKeyRange(r, key, pool_offset, size);
  r.PackConfig(config);
  Reply reply;
  int rc = c.conn->Call(r, &reply, std::move(keepalive));
  if (rc == kExists && !upsert) return 0;  // put never overwrites; the old value stays
  return rc;
}

int StoreClient::PutStaged(Context& c, const std::string& key, const char* value,
                           uint64_t size, const uds::WireConfig& config, bool upsert) {
  Request begin(uds::Op::kPutBegin, 4);
  begin.args().pack(key);
  begin.args().pack(size);
  begin.PackConfig(config);
  begin.args().pack(upsert);
  Reply reply;
  int rc = c.conn->Call(begin, &reply);
  if (rc == kExists && !upsert) return 0;
  if (rc != 0) return rc;
  uint64_t put_id = reply.results().U64();
  if (!reply.results().ok()) return kInternal;

  std::deque<Ticket> in_flight;
  uint64_t sent = 0;
  while (rc == 0 && (sent < size || !in_flight.empty())) {
    if (sent < size && in_flight.size() < kChunksInFlight) {
      std::shared_ptr<PoolBlock> block =
          NextChunkBlock(*c.pool, *c.conn, size - sent, in_flight.empty());
      if (block) {
        std::memcpy(block->data(), value + sent, block->size());
        Request chunk(uds::Op::kPutChunk, 4);
        PackChunk(chunk, put_id, sent, *block);
        sent += block->size();
        in_flight.push_back(c.conn->Send(chunk, std::move(block)));
        continue;
      }
      if (in_flight.empty()) {
        rc = kNoSpace;
        break;
      }
    }
    Reply chunk_reply;
    rc = c.conn->Wait(in_flight.front(), &chunk_reply);
    in_flight.pop_front();
  }
  for (Ticket& t : in_flight) {  // after a failure: let the others finish first
    Reply ignored;
    c.conn->Wait(t, &ignored);
  }
  if (rc == 0) {
    Request commit(uds::Op::kPutCommit, 1);
    commit.args().pack(put_id);
    Reply commit_reply;
    return c.conn->Call(commit, &commit_reply);
  }
  Request abort(uds::Op::kPutAbort, 1);
  abort.args().pack(put_id);
  Reply abort_reply;
  c.conn->Call(abort, &abort_reply);  // best effort: a dead connection revokes it anyway
  return rc;
}

void StoreClient::BatchPut(std::vector<PutItem>& items, const uds::WireConfig& config) {
  Context c;
  int rc = Acquire(&c);
  if (rc != 0) {
    for (PutItem& it : items) *it.result = rc;
    return;
  }
  BatchFrame frame(*c.conn, uds::Op::kBatchPut, &config, [&](const BatchEntry& e, int64_t v) {
    int code = AsCode(v);
    *items[e.item].result = code == kExists ? 0 : code;
  });
  for (size_t i = 0; i < items.size(); ++i) {
    PutItem& it = items[i];
    uint64_t offset = 0;
    std::shared_ptr<PoolBlock> block;
    if (!c.pool) {
      *it.result = kInvalidParams;
    } else if (!frame.Place(*c.pool, it.data, it.size, &offset, &block)) {
      // Too large for the pool right now: chunked, on its own.
      *it.result = PutOne(c, it.key, it.data, it.size, config, false);
    } else {
      if (block) std::memcpy(block->data(), it.data, it.size);
      frame.Add(i, it.key, offset, it.size, std::move(block));
    }
  }
  frame.Flush();
}

// ---- get ------------------------------------------------------------------------------

int64_t StoreClient::GetInto(const std::string& key, void* buffer, uint64_t capacity) {
  Context c;
  int rc = Acquire(&c);
  if (rc != 0) return rc;
  return GetOne(c, key, static_cast<char*>(buffer), capacity);
}

int64_t StoreClient::GetOne(Context& c, const std::string& key, char* buffer,
                            uint64_t capacity) {
  if (capacity == 0) {  // nothing fits: -600 when the object exists, its miss code if not
    Request r(uds::Op::kGetSize, 1);
    r.args().pack(key);
    Reply reply;
    int code = c.conn->Call(r, &reply);
    return code == 0 ? kInvalidParams : code;
  }
  if (!c.pool) return kInvalidParams;
  uint64_t offset;
  std::shared_ptr<PoolBlock> block;
  if (!c.pool->Contains(buffer, capacity, &offset)) {
    block = c.pool->TryStage(capacity, capacity);
    if (!block) return GetStaged(c, key, buffer, capacity);
    offset = block->offset();
  }
  Request r(uds::Op::kGet, 3);
  r.args().pack(key);
  r.args().pack(offset);
  r.args().pack(capacity);
  Reply reply;
  int code = c.conn->Call(r, &reply, block);
  if (code != 0) return code;
  int64_t bytes = ResultAt(reply, 0);
  if (bytes < 0 || static_cast<uint64_t>(bytes) > capacity) return kInternal;
  if (block) std::memcpy(buffer, block->data(), static_cast<size_t>(bytes));
  return bytes;
}

int64_t StoreClient::GetStaged(Context& c, const std::string& key, char* buffer,
                               uint64_t capacity) {
  Request begin(uds::Op::kGetBegin, 1);
  begin.args().pack(key);
  Reply reply;
  int rc = c.conn->Call(begin, &reply);
  if (rc != 0) return rc;
  uint64_t get_id = reply.results().U64();
  uint64_t size = reply.results().U64();
  if (!reply.results().ok()) return kInternal;

  int64_t result = static_cast<int64_t>(size);
  if (size > capacity) {
    result = kInvalidParams;
  } else {
    struct Chunk {
      Ticket ticket;
      std::shared_ptr<PoolBlock> block;
      uint64_t value_offset;
    };
    std::deque<Chunk> in_flight;
    uint64_t requested = 0;
    while (rc == 0 && (requested < size || !in_flight.empty())) {
      if (requested < size && in_flight.size() < kChunksInFlight) {
        std::shared_ptr<PoolBlock> block =
            NextChunkBlock(*c.pool, *c.conn, size - requested, in_flight.empty());
        if (block) {
          Request chunk(uds::Op::kGetChunk, 4);
          PackChunk(chunk, get_id, requested, *block);
          Chunk entry{c.conn->Send(chunk, block), block, requested};
          requested += block->size();
          in_flight.push_back(std::move(entry));
          continue;
        }
        if (in_flight.empty()) {
          rc = kNoSpace;
          break;
        }
      }
      Chunk& front = in_flight.front();
      Reply chunk_reply;
      rc = c.conn->Wait(front.ticket, &chunk_reply);
      if (rc == 0) {
        std::memcpy(buffer + front.value_offset, front.block->data(), front.block->size());
      }
      in_flight.pop_front();
    }
    for (Chunk& chunk : in_flight) {
      Reply ignored;
      c.conn->Wait(chunk.ticket, &ignored);
    }
    if (rc != 0) result = rc;
  }
  Request end(uds::Op::kGetEnd, 1);
  end.args().pack(get_id);
  Reply end_reply;
  c.conn->Call(end, &end_reply);  // ends the lease; its code does not change the result
  return result;
}

void StoreClient::BatchGetInto(std::vector<GetItem>& items) {
  Context c;
  int rc = Acquire(&c);
  if (rc != 0) {
    for (GetItem& it : items) *it.result = rc;
    return;
  }
  BatchFrame frame(*c.conn, uds::Op::kBatchGet, nullptr, [&](const BatchEntry& e, int64_t v) {
    GetItem& it = items[e.item];
    if (v > 0 && static_cast<uint64_t>(v) > it.capacity) v = kInternal;
    if (v > 0 && e.block != nullptr) {
      std::memcpy(it.buffer, e.block->data(), static_cast<size_t>(v));
    }
    *it.result = v;
  });
  for (size_t i = 0; i < items.size(); ++i) {
    GetItem& it = items[i];
    uint64_t offset = 0;
    std::shared_ptr<PoolBlock> block;
    if (!c.pool || it.capacity == 0) {
      *it.result = GetOne(c, it.key, it.buffer, it.capacity);
    } else if (!frame.Place(*c.pool, it.buffer, it.capacity, &offset, &block)) {
      *it.result = GetStaged(c, it.key, it.buffer, it.capacity);  // chunked, on its own
    } else {
      frame.Add(i, it.key, offset, it.capacity, std::move(block));
    }
  }
  frame.Flush();
}

// ---- query and remove -----------------------------------------------------------------

int StoreClient::IsExist(const std::string& key) {
  Context c;
  int rc = Acquire(&c);
  if (rc != 0) return rc;
  Request r(uds::Op::kExist, 1);
  r.args().pack(key);
  Reply reply;
  rc = c.conn->Call(r, &reply);
  if (rc == kNotFound) return 0;
  if (rc != 0) return rc;
  return ExistResult(ResultAt(reply, 0));
}

void StoreClient::BatchIsExist(const std::vector<std::string>& keys,
                               std::vector<int>* results) {
  results->assign(keys.size(), 0);
  Context c;
  int rc = Acquire(&c);
  if (rc != 0) {
    std::fill(results->begin(), results->end(), rc);
    return;
  }
  size_t first = 0;
  while (first < keys.size()) {
    size_t last = first;
    size_t frame_bytes = 0;
    while (last < keys.size() && last - first < uds::kMaxBatch &&
           frame_bytes < kBatchFrameBudget) {
      frame_bytes += keys[last].size() + kEntryOverhead;
      ++last;
    }
    Request r(uds::Op::kBatchExist, 1);
    r.args().pack_array(static_cast<uint32_t>(last - first));
    for (size_t i = first; i < last; ++i) r.args().pack(keys[i]);
    Reply reply;
    int code = BatchCode(c.conn->Call(r, &reply), reply, last - first);
    for (size_t i = first; i < last; ++i) {
      (*results)[i] = code == 0 ? ExistResult(ResultAt(reply, i - first)) : code;
    }
    first = last;
  }
}

int64_t StoreClient::GetSize(const std::string& key) {
  Context c;
  int rc = Acquire(&c);
  if (rc != 0) return rc;
  Request r(uds::Op::kGetSize, 1);
  r.args().pack(key);
  return CallForCount(*c.conn, r);
}

int StoreClient::Remove(const std::string& key, bool force) {
  Context c;
  int rc = Acquire(&c);
  if (rc != 0) return rc;
  Request r(uds::Op::kRemove, 2);
  r.args().pack(key);
  r.args().pack(force);
  Reply reply;
  return c.conn->Call(r, &reply);
}

int64_t StoreClient::RemoveByRegex(const std::string& pattern, bool force) {
  Context c;
  int rc = Acquire(&c);
  if (rc != 0) return rc;
  Request r(uds::Op::kRemoveByRegex, 2);
  r.args().pack(pattern);
  r.args().pack(force);
  return CallForCount(*c.conn, r);
}

int64_t StoreClient::RemoveAll(bool force) {
  Context c;
  int rc = Acquire(&c);
  if (rc != 0) return rc;
  Request r(uds::Op::kRemoveAll, 1);
  r.args().pack(force);
  return CallForCount(*c.conn, r);
}

}  // namespace client
}  // namespace mooncake
