// GET, BATCH_GET and the staged get (GET_BEGIN / CHUNK / END).
//
// A replica list comes with a read lease: until it runs out the master neither evicts the
// object nor reuses its space. Every copy is checked against that deadline, measured from
// before the RPC was sent, and a copy that may have overrun it reports LEASE_EXPIRED
// (-707) rather than bytes that could be torn.
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

int64_t StoreService::CopyOut(const rpc::ReplicaListResult& list, char* dest, uint64_t capacity,
                              Clock::time_point asked_at) {
  if (list.code != 0) return list.code;
  if (list.size <= 0) return ToInt(ErrorCode::TRANSFER_FAIL);
  uint64_t size = static_cast<uint64_t>(list.size);
  if (size > capacity) return kInvalid;
  ReplicaTarget source;
  int32_t code = ResolveOne(list.replicas, size, &source);
  if (code != 0) return code;
  std::memcpy(dest, source.data(), size);
  if (Clock::now() > Deadline(asked_at, list.lease_ttl_ms)) return kLeaseExpired;
  return static_cast<int64_t>(size);
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
  Clock::time_point asked_at = Clock::now();
  rpc::ReplicaListResult list;
  int32_t rc = master_->GetReplicaList(key, &list);
  int64_t n = rc != 0 ? rc : CopyOut(list, dest, capacity, asked_at);
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
  std::vector<std::string> keys;
  std::vector<size_t> index;
  for (size_t i = 0; i < n; ++i) {
    ArgReader e = entries.Array();
    std::string key = e.Str();
    uint64_t offset = e.U64();
    capacities[i] = e.U64();
    if (!Done(e)) return false;
    dests[i] = s->PoolRange(offset, capacities[i]);
    if (!ValidKey(key) || dests[i] == nullptr) continue;
    keys.push_back(std::move(key));
    index.push_back(i);
  }
  if (!keys.empty()) {
    Clock::time_point asked_at = Clock::now();
    std::vector<rpc::ReplicaListResult> lists;
    int32_t rc = master_->BatchGetReplicaList(keys, &lists);
    for (size_t j = 0; j < index.size(); ++j) {
      size_t i = index[j];
      results[i] = rc != 0 ? rc : CopyOut(lists[j], dests[i], capacities[i], asked_at);
    }
  }
  ReplyInts(s, id, kOk, results);
  return true;
}

bool StoreService::OnGetBegin(ClientSession* s, uint64_t id, ArgReader* a) {
  std::string key = a->Str();
  if (!Done(*a)) return false;
  if (!ValidKey(key)) {
    Reply(s, id, kInvalid);
    return true;
  }
  Clock::time_point asked_at = Clock::now();
  rpc::ReplicaListResult list;
  int32_t code = master_->GetReplicaList(key, &list);
  auto get = std::make_shared<StagedGet>();
  if (code == 0 && list.size <= 0) code = ToInt(ErrorCode::TRANSFER_FAIL);
  if (code == 0) {
    get->size = static_cast<uint64_t>(list.size);
    get->deadline = Deadline(asked_at, list.lease_ttl_ms);
    code = ResolveOne(list.replicas, get->size, &get->source);
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
      code = Clock::now() > get->deadline ? kLeaseExpired : kOk;
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
