#include "daemon/store_service.h"

#include <cstring>

#include "common/crc32c.h"
#include "common/logging.h"
#include "include/mooncake_store.h"

namespace mooncake {

using uds::ArgReader;
using uds::Op;
using namespace store_detail;

namespace store_detail {

bool ValidKey(const std::string& key) {
  return !key.empty() && key.size() <= MOONCAKE_STORE_MAX_KEY_LEN;
}

bool ValidSize(uint64_t size) { return size >= 1 && size <= MOONCAKE_STORE_MAX_VALUE_SIZE; }

int ReadFlag(ArgReader* r) {
  ArgReader probe = *r;
  bool value = probe.Bool();
  if (probe.ok()) {
    *r = probe;
    return value ? 1 : 0;
  }
  uint64_t number = r->U64();  // a wrong type fails the reader
  return number > 1 ? -1 : static_cast<int>(number);
}

bool ToRpcConfig(const uds::WireConfig& wire, rpc::ReplicateConfig* out) {
  if (wire.replica_num < 1 || wire.replica_num > 64) return false;
  out->replica_num = static_cast<int32_t>(wire.replica_num);
  out->with_soft_pin = wire.with_soft_pin;
  out->with_hard_pin = wire.with_hard_pin;
  out->preferred_segments = wire.preferred_segments;
  out->soft_pin_ttl_ms = 0;
  return true;
}

bool ReadKeyArg(ClientSession* s, uint64_t id, ArgReader* a, std::string* key) {
  *key = a->Str();
  if (!Done(*a)) return false;
  if (!ValidKey(*key)) {
    key->clear();
    Reply(s, id, kInvalid);
  }
  return true;
}

void Reply(ClientSession* s, uint64_t id, int32_t code) {
  uds::FrameBuilder frame(id, code, 0);
  s->Send(&frame);
}

void ReplyInts(ClientSession* s, uint64_t id, int32_t code, const std::vector<int64_t>& values) {
  if (code != 0) return Reply(s, id, code);
  uds::FrameBuilder frame(id, code, static_cast<uint32_t>(values.size()));
  for (int64_t v : values) frame.args().pack(v);
  s->Send(&frame);
}

}  // namespace store_detail

StoreService::StoreService(MasterClient* master, Membership* membership, ReadCache* cache,
                           ReplicaIO* io, std::string master_address, bool checksum)
    : master_(master),
      membership_(membership),
      cache_(cache),
      io_(io),
      master_address_(std::move(master_address)),
      checksum_(checksum) {}

int64_t StoreService::ValueChecksum(const ValueSlice& written) const {
  if (!checksum_) return -1;
  if (written.crc >= 0) return written.crc;
  return static_cast<int64_t>(Crc32c(written.pool, written.length));
}

bool StoreService::Hello(ClientSession* s, const uds::Message& hello, std::vector<int> fds,
                         std::string* why) {
  ArgReader args = hello.args;
  uint64_t abi = args.U64();
  uint64_t pool_size = args.U64();
  args.U64();  // pid: the kernel's SO_PEERCRED is what we trust and log
  std::string master = args.Str();
  if (!Done(args)) {
    for (int fd : fds) close(fd);
    *why = "malformed HELLO";
    return false;
  }
  if (abi != MOONCAKE_STORE_ABI_VERSION) {
    *why = "ABI version " + std::to_string(abi) + ", daemon speaks " +
           std::to_string(MOONCAKE_STORE_ABI_VERSION);
  } else if (!master.empty() && master != master_address_) {
    *why = "client expects master " + master + ", daemon uses " + master_address_;
  } else if (fds.size() > 1 || (pool_size == 0) != fds.empty()) {
    *why = pool_size == 0 ? "a pool fd came with pool_size 0"
                          : "pool_size " + std::to_string(pool_size) + " needs exactly one fd";
  } else if (pool_size == 0 || s->AttachPool(fds[0], pool_size, why)) {
    fds.clear();  // the session owns the pool fd now
    // Remote reads land in the pool and remote writes leave from it: RDMA must know it.
    char* pool = s->PoolRange(0, pool_size);
    if (pool != nullptr && io_->engine()->RegisterMemory(pool, pool_size) != 0) {
      *why = "the pool could not be registered with the transfer engine";
      Reply(s, hello.id, ToInt(ErrorCode::TRANSFER_FAIL));
      return false;
    }
    uds::FrameBuilder reply(hello.id, kOk, 2);
    reply.args().pack(membership_->name());
    reply.args().pack(static_cast<uint64_t>(membership_->daemon_id()));
    if (!s->Send(&reply)) {
      *why = "HELLO reply could not be sent";
      return false;
    }
    return true;
  } else {
    fds.clear();  // AttachPool closed it
  }
  for (int fd : fds) close(fd);
  Reply(s, hello.id, kInvalid);
  return false;
}

bool StoreService::Handle(ClientSession* s, uds::Message* m, std::string* why) {
  ArgReader* a = &m->args;
  uint64_t id = m->id;
  bool ok = false;
  switch (static_cast<Op>(m->head)) {
    case Op::kPut: ok = OnPut(s, id, a, false); break;
    case Op::kBatchPut: ok = OnBatchPut(s, id, a); break;
    case Op::kUpsert: ok = OnPut(s, id, a, true); break;
    case Op::kPutBegin: ok = OnPutBegin(s, id, a); break;
    case Op::kPutChunk: ok = OnPutChunk(s, id, a); break;
    case Op::kPutCommit: ok = OnPutEnd(s, id, a, true); break;
    case Op::kPutAbort: ok = OnPutEnd(s, id, a, false); break;
    case Op::kGet: ok = OnGet(s, id, a); break;
    case Op::kBatchGet: ok = OnBatchGet(s, id, a); break;
    case Op::kGetBegin: ok = OnGetBegin(s, id, a); break;
    case Op::kGetChunk: ok = OnGetChunk(s, id, a); break;
    case Op::kGetEnd: ok = OnGetEnd(s, id, a); break;
    case Op::kExist: ok = OnExist(s, id, a); break;
    case Op::kBatchExist: ok = OnBatchExist(s, id, a); break;
    case Op::kGetSize: ok = OnGetSize(s, id, a); break;
    case Op::kRemove: ok = OnRemove(s, id, a); break;
    case Op::kRemoveByRegex: ok = OnRemoveByRegex(s, id, a); break;
    case Op::kRemoveAll: ok = OnRemoveAll(s, id, a); break;
    case Op::kHostname:
      if ((ok = Done(*a))) {
        uds::FrameBuilder frame(id, kOk, 1);
        frame.args().pack(membership_->name());
        s->Send(&frame);
      }
      break;
    case Op::kHealth:
      if ((ok = Done(*a))) ReplyInts(s, id, kOk, {membership_->healthy() ? 1 : 0});
      break;
    case Op::kMountSegment: ok = OnMountSegment(s, id, a); break;
    case Op::kHello:
    default:
      *why = "unexpected op " + std::to_string(m->head);
      return false;
  }
  if (!ok) *why = "malformed arguments for op " + std::to_string(m->head);
  return ok;
}

void StoreService::Teardown(ClientSession* s) {
  size_t revoked = 0;
  for (const auto& put : s->TakeAllPuts()) {
    std::unique_lock<std::shared_mutex> lock(put->mu);
    if (put->finished) continue;
    put->finished = true;
    RevokePut(put->key, put->upsert);
    ++revoked;
  }
  s->ClearGets();
  std::vector<int64_t> segments = s->TakeSegments();
  for (int64_t segment : segments) {
    // Forgotten here only after Membership stopped resolving it and the master dropped
    // its objects, so no fill can bring an entry for it back.
    membership_->Unmount(segment);
    cache_->DropSegment(segment);
  }
  char* pool = s->PoolRange(0, s->pool_size());
  if (pool != nullptr) io_->engine()->UnregisterMemory(pool);
  s->UnmapPool();
  if (revoked > 0 || !segments.empty()) {
    MC_LOG_INFO("connection %llu (pid %d) closed: %zu staged puts revoked, %zu segments unmounted",
                static_cast<unsigned long long>(s->id()), static_cast<int>(s->peer_pid()),
                revoked, segments.size());
  } else {
    MC_LOG_DEBUG("connection %llu (pid %d) closed", static_cast<unsigned long long>(s->id()),
                 static_cast<int>(s->peer_pid()));
  }
}

// ---- queries and removal ----

bool StoreService::OnExist(ClientSession* s, uint64_t id, ArgReader* a) {
  std::string key;
  if (!ReadKeyArg(s, id, a, &key)) return false;
  if (key.empty()) return true;  // answered -600
  ReadCache::Entry cached;
  int32_t v = cache_->Lookup(key, &cached) ? 1 : master_->ExistKey(key);
  ReplyInts(s, id, v < 0 ? v : kOk, {v});
  return true;
}

bool StoreService::OnBatchExist(ClientSession* s, uint64_t id, ArgReader* a) {
  ArgReader list = a->Array();
  if (!Done(*a) || list.size() > uds::kMaxBatch) return false;
  std::vector<int64_t> results(list.size(), kInvalid);
  std::vector<std::string> keys;
  std::vector<size_t> index;
  ReadCache::Entry cached;
  for (size_t i = 0; i < results.size(); ++i) {
    std::string key = list.Str();
    if (!ValidKey(key)) continue;
    if (cache_->Lookup(key, &cached)) {
      results[i] = 1;
      continue;
    }
    keys.push_back(std::move(key));
    index.push_back(i);
  }
  if (!list.ok()) return false;
  if (!keys.empty()) {
    std::vector<int32_t> found;
    int32_t rc = master_->BatchExistKey(keys, &found);
    for (size_t j = 0; j < index.size(); ++j) results[index[j]] = rc != 0 ? rc : found[j];
  }
  ReplyInts(s, id, kOk, results);
  return true;
}

bool StoreService::OnGetSize(ClientSession* s, uint64_t id, ArgReader* a) {
  std::string key;
  if (!ReadKeyArg(s, id, a, &key)) return false;
  if (key.empty()) return true;  // answered -600
  ReadCache::Entry cached;
  if (cache_->Lookup(key, &cached)) {
    ReplyInts(s, id, kOk, {static_cast<int64_t>(cached.size)});
    return true;
  }
  ReadCache::Ticket ticket = cache_->Begin(key);
  auto asked_at = std::chrono::steady_clock::now();
  rpc::ReplicaListResult list;
  int32_t code = master_->GetReplicaList(key, &list);
  std::vector<ReplicaTarget> candidates;
  uint64_t size = 0;
  // Only to remember where the bytes are: the size is the answer whoever holds them. Not
  // a local replica of an object with a checksum: cached local reads do not verify it.
  if (code == 0 && Locate(list, &candidates, &size) == 0 &&
      (list.checksum < 0 || !candidates[0].local())) {
    Remember(key, ticket, candidates[0], size, asked_at, list.lease_ttl_ms, list.checksum);
  }
  ReplyInts(s, id, code, {list.size});
  return true;
}

bool StoreService::OnRemove(ClientSession* s, uint64_t id, ArgReader* a) {
  std::string key = a->Str();
  int force = ReadFlag(a);
  if (!Done(*a) || force < 0) return false;
  if (!ValidKey(key)) {
    Reply(s, id, kInvalid);
    return true;
  }
  int32_t code = master_->Remove(key, force == 1);
  // Whatever the outcome (a -900 may hide a removal that happened), and before the client
  // hears of it: its next read must not come from the cache.
  cache_->Invalidate(key);
  Reply(s, id, code);
  return true;
}

bool StoreService::OnRemoveByRegex(ClientSession* s, uint64_t id, ArgReader* a) {
  std::string pattern = a->Str();
  int force = ReadFlag(a);
  if (!Done(*a) || force < 0) return false;
  int64_t n = master_->RemoveByRegex(pattern, force == 1);
  cache_->Clear();  // cheaper than matching the pattern against every entry
  ReplyInts(s, id, n < 0 ? static_cast<int32_t>(n) : kOk, {n});
  return true;
}

bool StoreService::OnRemoveAll(ClientSession* s, uint64_t id, ArgReader* a) {
  int force = ReadFlag(a);
  if (!Done(*a) || force < 0) return false;
  int64_t n = master_->RemoveAll(force == 1);
  cache_->Clear();
  ReplyInts(s, id, n < 0 ? static_cast<int32_t>(n) : kOk, {n});
  return true;
}

bool StoreService::OnMountSegment(ClientSession* s, uint64_t id, ArgReader* a) {
  uint64_t size = a->U64();
  if (!Done(*a)) return false;
  if (size == 0 || size > (1ull << 46)) {
    Reply(s, id, kInvalid);
    return true;
  }
  std::string error;
  std::shared_ptr<SegmentMemory> memory = SegmentMemory::Create(size, &error);
  if (memory == nullptr) {
    MC_LOG_WARN("connection %llu: extra segment: %s", static_cast<unsigned long long>(s->id()),
                error.c_str());
    Reply(s, id, ToInt(ErrorCode::NO_AVAILABLE_HANDLE));
    return true;
  }
  int64_t segment_id = 0;
  int32_t code = membership_->Mount(std::move(memory), &segment_id);
  if (code == 0) s->AddSegment(segment_id);
  Reply(s, id, code);
  return true;
}

}  // namespace mooncake
