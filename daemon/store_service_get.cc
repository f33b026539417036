// GET, BATCH_GET and the staged get (GET_BEGIN / CHUNK / END).
//
// A replica list comes with a read lease: until it runs out the master neither evicts the
// object nor reuses its space. Every copy is checked against that deadline, measured from
// before the RPC was sent, and a copy that may have overrun it reports LEASE_EXPIRED
// (-707) rather than bytes that could be torn. A copy that overlapped a re-registration
// (a restarted master knows no leases) is not trusted either.
//
// Replicas are read best first (daemon/replica_io.h): this daemon's own memory, then
// other daemons' over the transfer engine, straight into the pool; a failed or corrupt
// replica (when the object carries a checksum) makes the read move on to the next.
//
// The replica a read used is remembered in the read cache for 90% of its lease (a remote
// one only over TCP, see daemon/read_cache.h); a read the cache can answer copies or
// transfers without asking the master, and one whose cached copy cannot be trusted (it
// overran the entry, or the owner refused or failed it) simply asks the master as if it
// had missed.
#include <algorithm>
#include <cstring>

#include "daemon/store_service.h"

namespace mooncake {

using uds::ArgReader;
using namespace store_detail;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int32_t kLeaseExpired = static_cast<int32_t>(ErrorCode::LEASE_EXPIRED);
constexpr int32_t kTransferFail = static_cast<int32_t>(ErrorCode::TRANSFER_FAIL);

Clock::time_point Deadline(Clock::time_point asked_at, int64_t lease_ttl_ms) {
  return asked_at + std::chrono::milliseconds(lease_ttl_ms);
}

}  // namespace

void StoreService::Remember(const std::string& key, ReadCache::Ticket ticket,
                            const ReplicaTarget& where, uint64_t size, Clock::time_point asked_at,
                            int64_t lease_ttl_ms, int64_t checksum) {
  // A remote replica only while every read of it goes over TCP, where its owner checks
  // the lease's master epoch (daemon/read_cache.h).
  if (!cache_->enabled() || (!where.local() && io_->engine()->rdma() != nullptr)) return;
  ReadCache::Entry entry;
  entry.where = where;
  entry.size = size;
  entry.checksum = where.local() ? -1 : checksum;
  entry.deadline = ReadCache::EntryDeadline(asked_at, lease_ttl_ms);
  cache_->Fill(key, ticket, std::move(entry));
}

int32_t StoreService::Locate(const rpc::ReplicaListResult& list,
                             std::vector<ReplicaTarget>* candidates, uint64_t* size) {
  if (list.code != 0) return list.code;
  if (list.size <= 0) return kTransferFail;
  *size = static_cast<uint64_t>(list.size);
  *candidates = io_->Candidates(list.replicas, *size, list.master_epoch);
  return candidates->empty() ? kTransferFail : kOk;
}

void StoreService::ReadListed(const ListedReads& reads, Clock::time_point asked_at,
                              uint64_t generation, std::vector<int64_t>* results) {
  const size_t n = reads.keys.size();
  std::vector<std::vector<ReplicaTarget>> candidates(n);
  std::vector<ValueSlice> slices;
  std::vector<int64_t> expected;
  std::vector<size_t> owner;  // the read of each slice
  Clock::time_point deadline = Clock::time_point::max();
  for (size_t j = 0; j < n; ++j) {
    const rpc::ReplicaListResult& list = reads.lists[j];
    // Too small a buffer is -600 whoever holds the replica.
    if (list.code == 0 && list.size > 0 &&
        static_cast<uint64_t>(list.size) > reads.capacities[j]) {
      (*results)[j] = kInvalid;
      continue;
    }
    uint64_t size = 0;
    int32_t code = Locate(list, &candidates[j], &size);
    if (code != 0) {
      (*results)[j] = code;
      continue;
    }
    slices.push_back({&candidates[j], 0, reads.dests[j], size});
    expected.push_back(list.checksum);
    owner.push_back(j);
    deadline = std::min(deadline, Deadline(asked_at, list.lease_ttl_ms));
  }
  io_->ReadAny(&slices, expected, deadline);
  bool in_time = Clock::now() <= deadline && cache_->SameGeneration(generation);
  for (size_t k = 0; k < slices.size(); ++k) {
    size_t j = owner[k];
    const ValueSlice& s = slices[k];
    if (s.result != 0) {
      (*results)[j] = s.result;
    } else if (!in_time) {
      (*results)[j] = kLeaseExpired;
    } else {
      (*results)[j] = static_cast<int64_t>(s.length);
      Remember(reads.keys[j], reads.tickets[j], candidates[j][s.served], s.length, asked_at,
               reads.lists[j].lease_ttl_ms, reads.lists[j].checksum);
    }
  }
}

int64_t StoreService::CopyCached(const std::string& key, char* dest, uint64_t capacity,
                                 uint64_t max_size) {
  uint64_t generation = cache_->remount_generation();
  ReadCache::Entry e;
  if (!cache_->Lookup(key, &e) || !e.local() || e.size > max_size) return 0;
  if (e.size > capacity) return kInvalid;
  std::memcpy(dest, e.data(), e.size);
  if (Clock::now() > e.deadline || !cache_->SameGeneration(generation)) return 0;
  return static_cast<int64_t>(e.size);
}

void StoreService::ReadCached(const std::vector<std::string>& keys,
                              const std::vector<char*>& dests,
                              const std::vector<uint64_t>& capacities,
                              std::vector<int64_t>* results) {
  const size_t n = keys.size();
  results->assign(n, 0);
  uint64_t generation = cache_->remount_generation();
  std::vector<ReadCache::Entry> remote;
  std::vector<size_t> owner;  // the read of each remote entry
  for (size_t j = 0; j < n; ++j) {
    ReadCache::Entry e;
    if (!cache_->Lookup(keys[j], &e)) continue;
    if (e.size > capacities[j]) {
      (*results)[j] = kInvalid;
    } else if (e.local()) {
      std::memcpy(dests[j], e.data(), e.size);
      bool trusted = Clock::now() <= e.deadline && cache_->SameGeneration(generation);
      (*results)[j] = trusted ? static_cast<int64_t>(e.size) : 0;
    } else {
      remote.push_back(std::move(e));
      owner.push_back(j);
    }
  }
  if (remote.empty()) return;
  std::vector<std::vector<ReplicaTarget>> where(remote.size());
  std::vector<ValueSlice> slices;
  std::vector<int64_t> expected;
  Clock::time_point deadline = Clock::time_point::max();
  for (size_t k = 0; k < remote.size(); ++k) {
    where[k].push_back(remote[k].where);
    slices.push_back({&where[k], 0, dests[owner[k]], remote[k].size});
    expected.push_back(remote[k].checksum);
    deadline = std::min(deadline, remote[k].deadline);
  }
  io_->ReadAny(&slices, expected, deadline);
  bool in_time = Clock::now() <= deadline && cache_->SameGeneration(generation);
  for (size_t k = 0; k < slices.size(); ++k) {
    size_t j = owner[k];
    if (slices[k].result == 0 && in_time) {
      (*results)[j] = static_cast<int64_t>(slices[k].length);
    } else if (slices[k].result != 0) {
      // The owner died, restarted, or refused the lease (its master restarted): forget
      // the place, and let the master say where the object is now.
      cache_->Invalidate(keys[j]);
    }
  }
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
  std::vector<int64_t> cached;
  ReadCached({key}, {dest}, {capacity}, &cached);
  int64_t n = cached[0];
  if (n == 0) {
    ListedReads reads;
    reads.tickets.push_back(cache_->Begin(key));
    uint64_t generation = cache_->remount_generation();
    Clock::time_point asked_at = Clock::now();
    reads.lists.resize(1);
    int32_t rc = master_->GetReplicaList(key, &reads.lists[0]);
    if (rc != 0) {
      n = rc;
    } else {
      reads.keys.push_back(std::move(key));
      reads.dests.push_back(dest);
      reads.capacities.push_back(capacity);
      std::vector<int64_t> result(1);
      ReadListed(reads, asked_at, generation, &result);
      n = result[0];
    }
  }
  ReplyInts(s, id, n < 0 ? static_cast<int32_t>(n) : kOk, {n});
  return true;
}

bool StoreService::OnBatchGet(ClientSession* s, uint64_t id, ArgReader* a) {
  ArgReader entries = a->Array();
  if (!Done(*a) || entries.size() > uds::kMaxBatch) return false;
  const size_t n = entries.size();
  std::vector<int64_t> results(n, kInvalid);
  ListedReads wanted;  // the acceptable entries
  std::vector<size_t> wanted_index;
  for (size_t i = 0; i < n; ++i) {
    ArgReader e = entries.Array();
    std::string key = e.Str();
    uint64_t offset = e.U64();
    uint64_t capacity = e.U64();
    if (!Done(e)) return false;
    char* dest = s->PoolRange(offset, capacity);
    if (!ValidKey(key) || dest == nullptr) continue;
    wanted.keys.push_back(std::move(key));
    wanted.dests.push_back(dest);
    wanted.capacities.push_back(capacity);
    wanted_index.push_back(i);
  }
  std::vector<int64_t> cached;
  ReadCached(wanted.keys, wanted.dests, wanted.capacities, &cached);
  ListedReads reads;  // the entries the cache could not answer
  std::vector<size_t> index;
  for (size_t j = 0; j < cached.size(); ++j) {
    if (cached[j] != 0) {
      results[wanted_index[j]] = cached[j];
      continue;
    }
    reads.keys.push_back(std::move(wanted.keys[j]));
    reads.dests.push_back(wanted.dests[j]);
    reads.capacities.push_back(wanted.capacities[j]);
    index.push_back(wanted_index[j]);
  }
  if (!reads.keys.empty()) {
    for (const std::string& key : reads.keys) reads.tickets.push_back(cache_->Begin(key));
    uint64_t generation = cache_->remount_generation();
    Clock::time_point asked_at = Clock::now();
    int32_t rc = master_->BatchGetReplicaList(reads.keys, &reads.lists);
    std::vector<int64_t> listed(reads.keys.size(), rc);
    if (rc == 0) ReadListed(reads, asked_at, generation, &listed);
    for (size_t j = 0; j < index.size(); ++j) results[index[j]] = listed[j];
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
  // Only a local entry: a remote one may have gone stale, and a large value is worth the
  // master round trip that finds its replicas now.
  if (cache_->Lookup(key, &cached) && cached.local()) {
    // The chunks are bounded by the entry's deadline, which lies inside the lease.
    get->candidates.push_back(std::move(cached.where));
    get->size = cached.size;
    get->deadline = cached.deadline;
  } else {
    Clock::time_point asked_at = Clock::now();
    rpc::ReplicaListResult list;
    code = master_->GetReplicaList(key, &list);
    if (code == 0) code = Locate(list, &get->candidates, &get->size);
    if (code == 0) {
      get->deadline = Deadline(asked_at, list.lease_ttl_ms);
      get->checksum = list.checksum;
    }
  }
  uint64_t get_id = 0;
  if (code == 0 && (get_id = s->AddGet(get)) == 0) code = kInvalid;  // too many open
  ReplyInts(s, id, code, {static_cast<int64_t>(get_id), static_cast<int64_t>(get->size)});
  return true;
}

int32_t StoreService::ReadChunk(StagedGet* get, uint64_t value_offset, char* dest,
                                uint64_t length) {
  if (Clock::now() > get->deadline) return kLeaseExpired;
  size_t first = get->current.load();
  int served = io_->ReadFrom(get->candidates, first, value_offset, dest, length, get->deadline);
  if (served < 0) return served;
  // Later chunks start where this one succeeded; two chunks racing here both moved on.
  get->current.compare_exchange_strong(first, static_cast<size_t>(served));
  if (Clock::now() > get->deadline || !cache_->SameGeneration(get->generation)) {
    return kLeaseExpired;
  }
  if (get->checksum < 0) return kOk;
  get->crc.Add(value_offset, dest, length);
  uint32_t crc = 0;
  // The chunk that completes the value answers for all of it.
  if (get->crc.bytes() == get->size && get->crc.Total(get->size, &crc) &&
      crc != static_cast<uint32_t>(get->checksum)) {
    return ToInt(ErrorCode::CHECKSUM_MISMATCH);
  }
  return kOk;
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
    code = ReadChunk(get.get(), value_offset, dest, length);
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
