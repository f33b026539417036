// GET, BATCH_GET and the staged get (GET_BEGIN / CHUNK / END).
//
// A replica list comes with a read lease: until it runs out the master neither evicts the
// object nor reuses its space. Every copy is checked against that deadline, measured from
// before the RPC was sent, and a copy that may have overrun it reports LEASE_EXPIRED
// (-707) rather than bytes that could be torn. A copy that overlapped a re-registration
// (a restarted master knows no leases) is not trusted either.
//
// Replicas are read best first (daemon/replicas/replica_io.h): this daemon's own memory, then
// other daemons' over the transfer engine, then this daemon's SSD, then other daemons'
// SSDs (READ_DISK), straight into the pool; a failed or corrupt replica (when the object
// carries a checksum) makes the read move on to the next.
//
// The replica a read used is remembered in the read cache for 90% of its lease (a remote
// one only over TCP, see daemon/cluster/read_cache.h; a disk replica never: its owner deletes
// whole buckets without asking readers' caches); a read the cache can answer copies or
// transfers without asking the master, and one whose cached copy cannot be trusted (it
// overran the entry, or the owner refused or failed it) simply asks the master as if it
// had missed.
//
// A GET or BATCH_GET served from a disk replica of an object the master marked `promote`
// offers it to the promoter (daemon/ssd_tier/promoter.h), which copies the value out of the pool
// before the client is answered and re-creates a memory replica in the background. A
// staged get does not: its value never lies whole in one place.
#include <algorithm>
#include <cstring>

#include "daemon/transfer/daemon_metrics.h"
#include "daemon/service/store_service.h"

namespace mooncake {

using namespace store_detail;
using Clock = std::chrono::steady_clock;

namespace {

Clock::time_point Deadline(Clock::time_point asked_at, int64_t lease_ttl_ms) {
  return asked_at + std::chrono::milliseconds(lease_ttl_ms);
}

// A LOCAL_DISK replica of the listing (one was read): it names the value to promote.
int64_t DiskReplicaId(const rpc::ReplicaListResult& list) {
  for (const rpc::ReplicaDescriptor& r : list.replicas) {
    if (r.kind == rpc::ReplicaKind::LOCAL_DISK) return r.replica_id;
  }
  return 0;
}

}  // namespace

void StoreService::Remember(const std::string& key, ReadCache::Ticket ticket,
                            const ReplicaTarget& where, uint64_t size, Clock::time_point asked_at,
                            int64_t lease_ttl_ms, int64_t checksum) {
  // A remote replica only while every read of it goes over TCP, where its owner checks
  // the lease's master epoch (daemon/cluster/read_cache.h). A disk replica never: the lease does
  // not keep its bucket from being evicted.
  if (!cache_->enabled() || where.on_disk() ||
      (!where.local() && io_->engine()->rdma() != nullptr)) {
    return;
  }
  ReadCache::Entry entry;
  entry.where = where;
  entry.size = size;
  entry.checksum = where.local() ? -1 : checksum;
  entry.deadline = ReadCache::EntryDeadline(asked_at, lease_ttl_ms);
  cache_->Fill(key, ticket, std::move(entry));
}

ErrorCode StoreService::Locate(const std::string& key, const rpc::ReplicaListResult& list,
                               std::vector<ReplicaTarget>* candidates, uint64_t* size) {
  if (list.code != 0) return FromWire(list.code);
  if (list.size <= 0) return ErrorCode::TRANSFER_FAIL;
  *size = static_cast<uint64_t>(list.size);
  *candidates = io_->Candidates(key, list.replicas, *size, list.checksum, list.master_epoch);
  return candidates->empty() ? ErrorCode::TRANSFER_FAIL : ErrorCode::OK;
}

void StoreService::ReadListed(const ListedReads& reads, size_t first, size_t count,
                              Clock::time_point asked_at, uint64_t generation,
                              std::vector<int64_t>* results) {
  std::vector<std::vector<ReplicaTarget>> candidates(count);  // of read first + i
  std::vector<ValueSlice> slices;
  std::vector<int64_t> expected;
  std::vector<size_t> owner;  // the read of each slice
  slices.reserve(count);
  expected.reserve(count);
  owner.reserve(count);
  Clock::time_point deadline = Clock::time_point::max();
  for (size_t j = first; j < first + count; ++j) {
    const rpc::ReplicaListResult& list = reads.lists[j];
    // Too small a buffer is -600 whoever holds the replica.
    if (list.code == 0 && list.size > 0 &&
        static_cast<uint64_t>(list.size) > reads.capacities[j]) {
      (*results)[j] = ToInt(ErrorCode::INVALID_PARAMS);
      continue;
    }
    uint64_t size = 0;
    ErrorCode code = Locate(reads.keys[j], list, &candidates[j - first], &size);
    if (code != ErrorCode::OK) {
      (*results)[j] = ToInt(code);
      continue;
    }
    slices.push_back({&candidates[j - first], 0, reads.dests[j], size});
    slices.back().key = &reads.keys[j];
    expected.push_back(list.checksum);
    owner.push_back(j);
    deadline = std::min(deadline, Deadline(asked_at, list.lease_ttl_ms));
  }
  io_->ReadAny(&slices, expected, deadline);
  bool in_time = Clock::now() <= deadline && cache_->SameGeneration(generation);
  for (size_t k = 0; k < slices.size(); ++k) {
    size_t j = owner[k];
    const ValueSlice& s = slices[k];
    if (s.result != ErrorCode::OK) {
      (*results)[j] = ToInt(s.result);
    } else if (!in_time) {
      (*results)[j] = ToInt(ErrorCode::LEASE_EXPIRED);
    } else {
      const ReplicaTarget& served = candidates[j - first][s.served];
      (*results)[j] = static_cast<int64_t>(s.length);
      Remember(reads.keys[j], reads.tickets[j], served, s.length, asked_at,
               reads.lists[j].lease_ttl_ms, reads.lists[j].checksum);
      // Before the answer: the pool is the client's again once it has it.
      if (reads.lists[j].promote && served.on_disk()) {
        promoter_.Offer(reads.keys[j], s.pool, s.length, DiskReplicaId(reads.lists[j]));
      }
    }
  }
}

Result<uint64_t> StoreService::CopyCached(const std::string& key, char* dest, uint64_t capacity,
                                          uint64_t max_size) {
  uint64_t generation = cache_->remount_generation();
  ReadCache::Entry e;
  if (!cache_->Lookup(key, &e) || !e.local() || e.size > max_size) return uint64_t{0};
  if (e.size > capacity) return ErrorCode::INVALID_PARAMS;
  std::memcpy(dest, e.data(), e.size);
  if (Clock::now() > e.deadline || !cache_->SameGeneration(generation)) return uint64_t{0};
  return e.size;
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
  // The local hits are copied together (two threads for a big batch, daemon/base/parallel_copy.h),
  // each trusted if all the copies ended inside its entry's deadline.
  std::vector<ParallelCopy::Piece> copies;
  std::vector<ReadCache::Entry> hits;  // each keeps its segment mapped until copied
  std::vector<size_t> hit_owner;       // the read of each hit
  for (size_t j = 0; j < n; ++j) {
    ReadCache::Entry e;
    if (!cache_->Lookup(keys[j], &e)) continue;
    if (e.size > capacities[j]) {
      (*results)[j] = ToInt(ErrorCode::INVALID_PARAMS);
    } else if (e.local()) {
      copies.push_back(ParallelCopy::Piece{dests[j], e.data(), e.size});
      hits.push_back(std::move(e));
      hit_owner.push_back(j);
    } else {
      remote.push_back(std::move(e));
      owner.push_back(j);
    }
  }
  if (!copies.empty()) {
    io_->CopyAll(copies);
    Clock::time_point now = Clock::now();
    bool same = cache_->SameGeneration(generation);
    uint64_t bytes = 0;
    for (size_t k = 0; k < hits.size(); ++k) {
      size_t j = hit_owner[k];
      bool trusted = now <= hits[k].deadline && same;
      (*results)[j] = trusted ? static_cast<int64_t>(copies[k].length) : 0;
      if (trusted) bytes += copies[k].length;
    }
    if (bytes > 0) {
      DaemonMetrics::Get().CountBytes(TransferKind::kRead, ReplicaTier::kLocalMemory, bytes);
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
    if (slices[k].result == ErrorCode::OK && in_time) {
      (*results)[j] = static_cast<int64_t>(slices[k].length);
    } else if (slices[k].result != ErrorCode::OK) {
      // The owner died, restarted, or refused the lease (its master restarted): forget
      // the place, and let the master say where the object is now.
      cache_->Invalidate(keys[j]);
    }
  }
}

ErrorCode StoreService::OnGet(ClientConnection* s, const uds::GetArgs& in, uds::GetReply* out) {
  char* dest = s->PoolRange(in.pool_offset, in.capacity);
  if (!ValidKey(in.key)) return ErrorCode::INVALID_PARAMS;  // Run names the key's rule
  if (dest == nullptr) return RefusePoolRange(s, in.pool_offset, in.capacity);
  std::vector<int64_t> cached;
  ReadCached({in.key}, {dest}, {in.capacity}, &cached);
  int64_t n = cached[0];
  if (n != 0) DaemonMetrics::Get().CountCacheHit();
  if (n == 0) {
    DaemonMetrics::Get().CountCacheMiss();
    ListedReads reads;
    reads.tickets.push_back(cache_->Begin(in.key));
    uint64_t generation = cache_->remount_generation();
    Clock::time_point asked_at = Clock::now();
    reads.lists.resize(1);
    ErrorCode rc = batcher_.GetReplicaList(in.key, CacheReader(), &reads.lists[0]);
    if (rc != ErrorCode::OK) return rc;
    reads.keys.push_back(in.key);
    reads.dests.push_back(dest);
    reads.capacities.push_back(in.capacity);
    std::vector<int64_t> result(1);
    ReadListed(reads, 0, 1, asked_at, generation, &result);
    n = result[0];
  }
  if (n == ToInt(ErrorCode::INVALID_PARAMS)) {
    return Refuse(ErrorCode::INVALID_PARAMS,
                  "the value is larger than the buffer of " + std::to_string(in.capacity) +
                      " bytes (get_size says how large)");
  }
  if (n < 0) return FromWire(n);
  out->bytes = static_cast<uint64_t>(n);
  return ErrorCode::OK;
}

ErrorCode StoreService::OnBatchGet(ClientConnection* s, const uds::BatchGetArgs& in,
                                   uds::BatchGetReply* out) {
  const size_t n = in.entries.size();
  std::vector<int64_t>& results = out->values;
  results.assign(n, ToInt(ErrorCode::INVALID_PARAMS));
  // Per key: a read-cache lookup; for the misses a ticket, one entry of one master RPC,
  // the copy (all of a batch's local copies together, see ReplicaIO), a cache fill.
  ListedReads wanted;  // the acceptable entries
  std::vector<size_t> wanted_index;
  wanted.keys.reserve(n);
  wanted.dests.reserve(n);
  wanted.capacities.reserve(n);
  wanted_index.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uds::GetArgs& e = in.entries[i];
    char* dest = s->PoolRange(e.pool_offset, e.capacity);
    if (!ValidKey(e.key) || dest == nullptr) continue;
    wanted.keys.push_back(e.key);
    wanted.dests.push_back(dest);
    wanted.capacities.push_back(e.capacity);
    wanted_index.push_back(i);
  }
  std::vector<int64_t> cached;
  ReadCached(wanted.keys, wanted.dests, wanted.capacities, &cached);
  ListedReads reads;  // the entries the cache could not answer
  std::vector<size_t> index;
  const size_t m = cached.size();
  reads.keys.reserve(m);
  reads.dests.reserve(m);
  reads.capacities.reserve(m);
  reads.tickets.reserve(m);
  index.reserve(m);
  for (size_t j = 0; j < m; ++j) {
    if (cached[j] != 0) {
      results[wanted_index[j]] = cached[j];
      continue;
    }
    reads.keys.push_back(std::move(wanted.keys[j]));
    reads.dests.push_back(wanted.dests[j]);
    reads.capacities.push_back(wanted.capacities[j]);
    index.push_back(wanted_index[j]);
  }
  DaemonMetrics::Get().CountCacheHit(m - index.size());
  DaemonMetrics::Get().CountCacheMiss(index.size());
  if (!reads.keys.empty()) {
    for (const std::string& key : reads.keys) reads.tickets.push_back(cache_->Begin(key));
    uint64_t generation = cache_->remount_generation();
    // The misses are listed in chunks, pipelined: the master lists the next chunks while
    // this thread copies one (MasterClient::BatchGetReplicaListPipelined).
    reads.lists.resize(reads.keys.size());
    std::vector<int64_t> listed(reads.keys.size());
    master_->BatchGetReplicaListPipelined(
        reads.keys, CacheReader(), kMasterChunk,
        [&](size_t first, ErrorCode rc, std::vector<rpc::ReplicaListResult>* lists,
            Clock::time_point asked_at) {
          size_t count = std::min(kMasterChunk, reads.keys.size() - first);
          if (rc != ErrorCode::OK) {
            std::fill(listed.begin() + first, listed.begin() + first + count, ToInt(rc));
            return;
          }
          for (size_t i = 0; i < count; ++i) swap(reads.lists[first + i], (*lists)[i]);
          ReadListed(reads, first, count, asked_at, generation, &listed);
        });
    for (size_t j = 0; j < index.size(); ++j) results[index[j]] = listed[j];
  }
  return ErrorCode::OK;
}

ErrorCode StoreService::OnGetBegin(ClientConnection* s, const uds::KeyArgs& in,
                                   uds::GetBeginReply* out) {
  if (!ValidKey(in.key)) return ErrorCode::INVALID_PARAMS;
  auto get = std::make_shared<StagedGet>();
  get->generation = cache_->remount_generation();
  ErrorCode code = ErrorCode::OK;
  ReadCache::Entry cached;
  // Only a local entry: a remote one may have gone stale, and a large value is worth the
  // master round trip that finds its replicas now.
  if (cache_->Lookup(in.key, &cached) && cached.local()) {
    DaemonMetrics::Get().CountCacheHit();
    // The chunks are bounded by the entry's deadline, which lies inside the lease.
    get->candidates.push_back(std::move(cached.where));
    get->size = cached.size;
    get->deadline = cached.deadline;
  } else {
    DaemonMetrics::Get().CountCacheMiss();
    Clock::time_point asked_at = Clock::now();
    rpc::ReplicaListResult list;
    code = master_->GetReplicaList(in.key, 0, &list);  // never cached: no holder
    if (code == ErrorCode::OK) code = Locate(in.key, list, &get->candidates, &get->size);
    if (code == ErrorCode::OK) {
      get->deadline = Deadline(asked_at, list.lease_ttl_ms);
      get->checksum = list.checksum;
      get->key = in.key;
    }
  }
  if (code != ErrorCode::OK) return code;
  out->get_id = s->AddGet(get);
  out->size = get->size;
  if (out->get_id != 0) return ErrorCode::OK;
  return Refuse(ErrorCode::INVALID_PARAMS, "more than " +
                                               std::to_string(ClientConnection::kMaxStaged) +
                                               " staged gets open on this connection");
}

ErrorCode StoreService::ReadChunk(StagedGet* get, uint64_t value_offset, char* dest,
                                  uint64_t length) {
  if (Clock::now() > get->deadline) return ErrorCode::LEASE_EXPIRED;
  size_t first = get->current.load();
  Result<size_t> served =
      io_->ReadFrom(get->candidates, first, value_offset, dest, length, get->deadline);
  if (!served.ok()) return served.code();
  // Later chunks start where this one succeeded; two chunks racing here both moved on.
  if (served.value() != first) get->mixed.store(true);
  get->current.compare_exchange_strong(first, served.value());
  if (Clock::now() > get->deadline || !cache_->SameGeneration(get->generation)) {
    return ErrorCode::LEASE_EXPIRED;
  }
  if (get->checksum < 0) return ErrorCode::OK;
  get->crc.Add(value_offset, dest, length);
  uint32_t crc = 0;
  // The chunk that completes the value answers for all of it.
  if (get->crc.bytes() == get->size && get->crc.Total(get->size, &crc) &&
      crc != static_cast<uint32_t>(get->checksum)) {
    // Every chunk from one replica: that one is bad (else no one replica is to blame).
    BadReplicaReporter* reporter = io_->reporter();
    if (!get->mixed.load() && reporter != nullptr) {
      reporter->ReportMismatch(get->key, get->candidates[served.value()].replica_id,
                                get->size, static_cast<uint32_t>(get->checksum));
    }
    return ErrorCode::CHECKSUM_MISMATCH;
  }
  return ErrorCode::OK;
}

ErrorCode StoreService::OnGetChunk(ClientConnection* s, const uds::ChunkArgs& in, uds::NoReply*) {
  std::shared_ptr<StagedGet> get = s->FindGet(in.staged_id);
  char* dest = s->PoolRange(in.pool_offset, in.length);
  if (get == nullptr) return RefuseStagedId("get", in.staged_id);
  if (dest == nullptr) return RefusePoolRange(s, in.pool_offset, in.length);
  if (!ChunkInside(in, get->size)) {
    return Refuse(ErrorCode::INVALID_PARAMS, "chunk runs past the value's " +
                                                 std::to_string(get->size) + " bytes");
  }
  return ReadChunk(get.get(), in.value_offset, dest, in.length);
}

ErrorCode StoreService::OnGetEnd(ClientConnection* s, const uds::StagedIdArgs& in, uds::NoReply*) {
  return s->EraseGet(in.staged_id) ? ErrorCode::OK : RefuseStagedId("get", in.staged_id);
}

}  // namespace mooncake
