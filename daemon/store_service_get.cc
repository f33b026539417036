// GET, BATCH_GET and the staged get (GET_BEGIN / CHUNK / END).
//
// A replica list comes with a read lease: until it runs out the master neither evicts the
// object nor reuses its space. Every copy is checked against that deadline, measured from
// before the RPC was sent, and a copy that may have overrun it reports LEASE_EXPIRED
// (-707) rather than bytes that could be torn. A copy that overlapped a re-registration
// (a restarted master knows no leases) is not trusted either.
//
// Each list is remembered in the read cache for 90% of its lease; a read the cache can
// answer copies without asking the master, and one whose cached copy cannot be trusted
// (it overran the entry) simply asks the master as if it had missed.
#include <cstring>

#include "daemon/store_service.h"

namespace mooncake {

using uds::ArgReader;
using namespace store_detail;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int32_t kLeaseExpired = static_cast<int32_t>(ErrorCode::LEASE_EXPIRED);

Clock::time_point Deadline(Clock::time_point asked_at, int64_t lease_ttl_ms) {
  return asked_at + std::chrono::milliseconds(lease_ttl_ms);
}

}  // namespace

int32_t StoreService::Locate(const std::string& key, ReadCache::Ticket ticket,
                             const rpc::ReplicaListResult& list, Clock::time_point asked_at,
                             ReplicaTarget* out, uint64_t* size) {
  if (list.code != 0) return list.code;
  if (list.size <= 0) return ToInt(ErrorCode::TRANSFER_FAIL);
  *size = static_cast<uint64_t>(list.size);
  int32_t code = ResolveOne(list.replicas, *size, out);
  if (code != 0 || !cache_->enabled()) return code;
  ReadCache::Entry entry;
  entry.segment = out->segment;
  entry.segment_id = out->segment_id;
  entry.offset = out->offset;
  entry.size = *size;
  entry.deadline = ReadCache::EntryDeadline(asked_at, list.lease_ttl_ms);
  cache_->Fill(key, ticket, std::move(entry));
  return kOk;
}

int64_t StoreService::CopyOut(const std::string& key, ReadCache::Ticket ticket,
                              uint64_t generation, const rpc::ReplicaListResult& list, char* dest,
                              uint64_t capacity, Clock::time_point asked_at) {
  // Too small a buffer is -600 whoever holds the replica.
  if (list.code == 0 && list.size > 0 && static_cast<uint64_t>(list.size) > capacity) {
    return kInvalid;
  }
  ReplicaTarget source;
  uint64_t size = 0;
  int32_t code = Locate(key, ticket, list, asked_at, &source, &size);
  if (code != 0) return code;
  std::memcpy(dest, source.data(), size);
  if (Clock::now() > Deadline(asked_at, list.lease_ttl_ms) || !cache_->SameGeneration(generation)) {
    return kLeaseExpired;
  }
  return static_cast<int64_t>(size);
}

int64_t StoreService::CopyCached(const std::string& key, char* dest, uint64_t capacity,
                                 uint64_t max_size) {
  uint64_t generation = cache_->remount_generation();
  ReadCache::Entry e;
  if (!cache_->Lookup(key, &e) || e.size > max_size) return 0;
  if (e.size > capacity) return kInvalid;
  std::memcpy(dest, e.data(), e.size);
  if (Clock::now() > e.deadline || !cache_->SameGeneration(generation)) return 0;
  return static_cast<int64_t>(e.size);
}

bool StoreService::OnGet(ClientSession* s, uint64_t id, ArgReader* a) {
  std::string key = a->Str();
  uint64_t offset = a->U64();
  uint64_t capacity = a->U64();
  if (!Done(*a)) return false;
  char* dest = s->PoolRange(offset, capacity);
  if (!ValidKey(key) || dest == nullptr) {
    Reply(s, id, kInvalid);
    return true;
  }
  int64_t n = CopyCached(key, dest, capacity, UINT64_MAX);
  if (n == 0) {
    ReadCache::Ticket ticket = cache_->Begin(key);
    uint64_t generation = cache_->remount_generation();
    Clock::time_point asked_at = Clock::now();
    rpc::ReplicaListResult list;
    int32_t rc = master_->GetReplicaList(key, &list);
    n = rc != 0 ? rc : CopyOut(key, ticket, generation, list, dest, capacity, asked_at);
  }
  ReplyInts(s, id, n < 0 ? static_cast<int32_t>(n) : kOk, {n});
  return true;
}

bool StoreService::OnBatchGet(ClientSession* s, uint64_t id, ArgReader* a) {
  ArgReader entries = a->Array();
  if (!Done(*a) || entries.size() > uds::kMaxBatch) return false;
  const size_t n = entries.size();
  std::vector<int64_t> results(n, kInvalid);
  std::vector<char*> dests(n, nullptr);
  std::vector<uint64_t> capacities(n, 0);
  std::vector<std::string> keys;  // the entries the cache could not answer
  std::vector<size_t> index;
  for (size_t i = 0; i < n; ++i) {
    ArgReader e = entries.Array();
    std::string key = e.Str();
    uint64_t offset = e.U64();
    capacities[i] = e.U64();
    if (!Done(e)) return false;
    dests[i] = s->PoolRange(offset, capacities[i]);
    if (!ValidKey(key) || dests[i] == nullptr) continue;
    int64_t cached = CopyCached(key, dests[i], capacities[i], UINT64_MAX);
    if (cached != 0) {
      results[i] = cached;
      continue;
    }
    keys.push_back(std::move(key));
    index.push_back(i);
  }
  if (!keys.empty()) {
    std::vector<ReadCache::Ticket> tickets(keys.size());
    for (size_t j = 0; j < keys.size(); ++j) tickets[j] = cache_->Begin(keys[j]);
    uint64_t generation = cache_->remount_generation();
    Clock::time_point asked_at = Clock::now();
    std::vector<rpc::ReplicaListResult> lists;
    int32_t rc = master_->BatchGetReplicaList(keys, &lists);
    for (size_t j = 0; j < index.size(); ++j) {
      size_t i = index[j];
      results[i] = rc != 0 ? rc
                           : CopyOut(keys[j], tickets[j], generation, lists[j], dests[i],
                                     capacities[i], asked_at);
    }
  }
  ReplyInts(s, id, kOk, results);
  return true;
}

bool StoreService::OnGetBegin(ClientSession* s, uint64_t id, ArgReader* a) {
  std::string key;
  if (!ReadKeyArg(s, id, a, &key)) return false;
  if (key.empty()) return true;  // answered -600
  auto get = std::make_shared<StagedGet>();
  get->generation = cache_->remount_generation();
  int32_t code = kOk;
  ReadCache::Entry cached;
  if (cache_->Lookup(key, &cached)) {
    // The chunks are bounded by the entry's deadline, which lies inside the lease.
    get->source.segment = std::move(cached.segment);
    get->source.segment_id = cached.segment_id;
    get->source.offset = cached.offset;
    get->size = cached.size;
    get->deadline = cached.deadline;
  } else {
    ReadCache::Ticket ticket = cache_->Begin(key);
    Clock::time_point asked_at = Clock::now();
    rpc::ReplicaListResult list;
    code = master_->GetReplicaList(key, &list);
    if (code == 0) code = Locate(key, ticket, list, asked_at, &get->source, &get->size);
    if (code == 0) get->deadline = Deadline(asked_at, list.lease_ttl_ms);
  }
  uint64_t get_id = 0;
  if (code == 0 && (get_id = s->AddGet(get)) == 0) code = kInvalid;  // too many open
  ReplyInts(s, id, code, {static_cast<int64_t>(get_id), static_cast<int64_t>(get->size)});
  return true;
}

bool StoreService::OnGetChunk(ClientSession* s, uint64_t id, ArgReader* a) {
  uint64_t get_id = a->U64();
  uint64_t value_offset = a->U64();
  uint64_t pool_offset = a->U64();
  uint64_t length = a->U64();
  if (!Done(*a)) return false;
  std::shared_ptr<StagedGet> get = s->FindGet(get_id);
  char* dest = s->PoolRange(pool_offset, length);
  int32_t code = kInvalid;
  if (get != nullptr && dest != nullptr && length <= get->size &&
      value_offset <= get->size - length) {
    if (Clock::now() > get->deadline) {
      code = kLeaseExpired;
    } else {
      std::memcpy(dest, get->source.data() + value_offset, length);
      bool trusted = Clock::now() <= get->deadline && cache_->SameGeneration(get->generation);
      code = trusted ? kOk : kLeaseExpired;
    }
  }
  Reply(s, id, code);
  return true;
}

bool StoreService::OnGetEnd(ClientSession* s, uint64_t id, ArgReader* a) {
  uint64_t get_id = a->U64();
  if (!Done(*a)) return false;
  Reply(s, id, s->EraseGet(get_id) ? kOk : kInvalid);
  return true;
}

}  // namespace mooncake
