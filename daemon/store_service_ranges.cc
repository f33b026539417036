// GET_RANGES and BATCH_GET_RANGES: partial reads that move only the requested bytes.
//
// Each fragment (src_offset, length -> pool_offset) is one slice of the value for
// ReplicaIO::ReadAny, so only its bytes move, whichever tier serves it: a memcpy from this
// daemon's memory, a READ of (replica offset + src_offset, length) over the transfer port
// (TCP or RDMA, both address remote memory by offset), a range of this daemon's SSD copy,
// or a READ_DISK of that range from another daemon's SSD. Nothing about the transfer
// protocol changed: its READ and READ_DISK always carried an offset and a length.
//
// What is verified (objects put with --checksum carry the value's CRC32C):
//  - a fragment that is the whole value is checked against that CRC, and read again from
//    the next replica on a mismatch, as a GET is;
//  - fragments that together cover the value exactly once (a layer-wise read) are checked
//    after the read by combining their CRCs (ChunkedChecksum); a mismatch answers -801 for
//    every fragment of the key (no retry: the bytes came from several reads);
//  - any other fragment cannot be checked against a whole-value CRC. From an SSD replica
//    its bytes are still checked by the SSD tier, which keeps a CRC per 256 KiB block and
//    checks every block the range touches (daemon/ssd_store/ssd_store.h); from memory they are not
//    checked (memory holds no per-range checksums), as with Mooncake's ranged reads.
//  - a memory replica a restore brought back and its daemon has not verified yet (it may
//    hold another object's bytes) serves no fragment but a checked whole value: another
//    replica does, or the fragment answers -703 (retry once verification is done).
// Every copy is bounded by the lease, as a GET's: one that may have overrun it answers -707.
//
// The read cache. A ranged read uses a local entry (a memcpy under the entry's deadline)
// and asks the master otherwise, as GET_BEGIN does: a remote entry that went stale would
// cost a failed transfer per fragment. A read the master answered remembers where the
// object lives (Remember, which keeps no bytes and never a disk replica): that is what the
// master said, whatever part of the value was read. It never promotes a disk replica:
// a partial read does not have the value to copy.
#include <algorithm>
#include <cstdint>
#include <map>

#include "daemon/base/chunked_checksum.h"
#include "daemon/transfer/daemon_metrics.h"
#include "daemon/service/store_service.h"

namespace mooncake {

using namespace store_detail;
using Clock = std::chrono::steady_clock;

namespace {

// One distinct key of a request and how it is read.
struct KeyRead {
  std::string key;
  std::vector<size_t> fragments;  // indexes into the request's flattened fragments
  ErrorCode code = ErrorCode::OK;  // of the key as a whole (a miss, no replica)
  std::vector<ReplicaTarget> candidates;
  uint64_t size = 0;
  int64_t checksum = -1;
  Clock::time_point deadline;
  // Asked of the master (not answered from the cache): its fill ticket and listing.
  bool listed = false;
  ReadCache::Ticket ticket = 0;
  Clock::time_point asked_at;
  int64_t lease_ttl_ms = 0;
};

// One fragment, flattened over the request's entries.
struct Fragment {
  const uds::WireRange* range;
  char* dest;  // null: outside the pool
};

bool InsideValue(const uds::WireRange& r, uint64_t size) {
  return r.length <= size && r.src_offset <= size - r.length;
}

// A restored replica its daemon has not verified yet may hold another object's bytes
// (docs/durability.md, "Verification after restore"): a read of the whole value checks
// them against the CRC, a fragment cannot, so fragments are not read from it. OK, or -703
// (retry) when no other replica is left.
ErrorCode SkipUnverified(const KeyRead& kr, const std::vector<Fragment>& fragments,
                         rpc::ReplicaListResult* list) {
  if (list->code != 0) return ErrorCode::OK;
  bool whole_only = true;
  for (size_t f : kr.fragments) {
    const uds::WireRange& r = *fragments[f].range;
    whole_only = whole_only && r.src_offset == 0 && static_cast<int64_t>(r.length) == list->size;
  }
  if (whole_only && list->checksum >= 0) return ErrorCode::OK;
  auto& replicas = list->replicas;
  size_t before = replicas.size();
  replicas.erase(std::remove_if(replicas.begin(), replicas.end(),
                                [](const rpc::ReplicaDescriptor& d) { return d.unverified; }),
                 replicas.end());
  return before > 0 && replicas.empty() ? ErrorCode::REPLICA_IS_NOT_READY : ErrorCode::OK;
}

}  // namespace

ErrorCode StoreService::ReadRanges(ClientConnection* s,
                                   const std::vector<const uds::GetRangesArgs*>& entries,
                                   std::vector<int64_t>* values) {
  std::vector<Fragment> fragments;
  std::vector<KeyRead> keys;
  std::map<std::string, size_t> by_key;
  for (const uds::GetRangesArgs* e : entries) {
    if (fragments.size() + e->ranges.size() > uds::kMaxRangesPerRequest) {
      return Refuse(ErrorCode::INVALID_PARAMS,
                    "more than " + std::to_string(uds::kMaxRangesPerRequest) +
                        " fragments in one request");
    }
    size_t k = keys.size();
    if (ValidKey(e->key) && !e->ranges.empty()) {
      auto [it, added] = by_key.emplace(e->key, keys.size());
      if (added) {
        keys.emplace_back();
        keys.back().key = e->key;
      }
      k = it->second;
    }
    for (const uds::WireRange& r : e->ranges) {
      if (k < keys.size()) keys[k].fragments.push_back(fragments.size());
      fragments.push_back({&r, s->PoolRange(r.pool_offset, r.length)});
    }
  }
  values->assign(fragments.size(), ToInt(ErrorCode::INVALID_PARAMS));
  if (keys.empty()) return ErrorCode::OK;

  // Local cache entries first; the rest ask the master, in one RPC.
  uint64_t generation = cache_->remount_generation();
  std::vector<size_t> misses;
  for (size_t k = 0; k < keys.size(); ++k) {
    ReadCache::Entry e;
    if (cache_->Lookup(keys[k].key, &e) && e.local()) {
      DaemonMetrics::Get().CountCacheHit();
      keys[k].candidates.push_back(std::move(e.where));
      keys[k].size = e.size;
      keys[k].deadline = e.deadline;
    } else {
      DaemonMetrics::Get().CountCacheMiss();
      misses.push_back(k);
    }
  }
  if (!misses.empty()) {
    std::vector<std::string> names;
    for (size_t k : misses) {
      names.push_back(keys[k].key);
      keys[k].ticket = cache_->Begin(keys[k].key);
    }
    Clock::time_point asked_at = Clock::now();
    std::vector<rpc::ReplicaListResult> lists;
    ErrorCode rc = master_->BatchGetReplicaList(names, CacheReader(), &lists);
    if (rc == ErrorCode::OK && lists.size() != names.size()) rc = ErrorCode::INTERNAL_ERROR;
    for (size_t m = 0; m < misses.size(); ++m) {
      KeyRead& kr = keys[misses[m]];
      if (rc != ErrorCode::OK) {
        kr.code = rc;
        continue;
      }
      kr.code = SkipUnverified(kr, fragments, &lists[m]);
      if (kr.code != ErrorCode::OK) continue;
      kr.code = Locate(kr.key, lists[m], &kr.candidates, &kr.size);
      kr.listed = true;
      kr.checksum = lists[m].checksum;
      kr.asked_at = asked_at;
      kr.lease_ttl_ms = lists[m].lease_ttl_ms;
      kr.deadline = asked_at + std::chrono::milliseconds(lists[m].lease_ttl_ms);
    }
  }

  // One slice per fragment that names a range of the value and of the pool.
  std::vector<ValueSlice> slices;
  std::vector<int64_t> expected;
  std::vector<size_t> slice_fragment;
  Clock::time_point deadline = Clock::time_point::max();
  for (KeyRead& kr : keys) {
    for (size_t f : kr.fragments) {
      const uds::WireRange& r = *fragments[f].range;
      if (kr.code != ErrorCode::OK) {
        (*values)[f] = ToInt(kr.code);
      } else if (fragments[f].dest == nullptr || !InsideValue(r, kr.size)) {
        (*values)[f] = ToInt(ErrorCode::INVALID_PARAMS);
      } else if (r.length == 0) {
        (*values)[f] = 0;
      } else {
        slices.push_back({&kr.candidates, r.src_offset, fragments[f].dest, r.length});
        if (kr.listed) slices.back().key = &kr.key;  // a bad replica the master listed
        expected.push_back(r.length == kr.size ? kr.checksum : -1);
        slice_fragment.push_back(f);
        deadline = std::min(deadline, kr.deadline);
      }
    }
  }
  if (slices.empty()) return ErrorCode::OK;
  io_->ReadAny(&slices, expected, deadline);
  const bool same_generation = cache_->SameGeneration(generation);
  const Clock::time_point now = Clock::now();
  std::vector<size_t> served(fragments.size(), SIZE_MAX);  // the candidate, per fragment
  for (size_t i = 0; i < slices.size(); ++i) {
    size_t f = slice_fragment[i];
    served[f] = slices[i].served;
    (*values)[f] = slices[i].result == ErrorCode::OK ? static_cast<int64_t>(slices[i].length)
                                                     : ToInt(slices[i].result);
  }
  for (KeyRead& kr : keys) {
    if (kr.code != ErrorCode::OK) continue;
    bool in_time = now <= kr.deadline && same_generation;
    bool all_read = !kr.fragments.empty();
    ChunkedChecksum crc;
    for (size_t f : kr.fragments) {
      int64_t& v = (*values)[f];
      if (v > 0 && !in_time) v = ToInt(ErrorCode::LEASE_EXPIRED);
      all_read = all_read && v >= 0;
      const uds::WireRange& r = *fragments[f].range;
      if (v > 0 && kr.checksum >= 0 && r.length < kr.size) {
        crc.Add(r.src_offset, fragments[f].dest, r.length);
      }
    }
    uint32_t total = 0;
    if (all_read && kr.checksum >= 0 && crc.bytes() == kr.size && crc.Total(kr.size, &total) &&
        total != static_cast<uint32_t>(kr.checksum)) {
      for (size_t f : kr.fragments) (*values)[f] = ToInt(ErrorCode::CHECKSUM_MISMATCH);
      continue;
    }
    if (!kr.listed || !all_read) continue;
    // The replica the first fragment came from: where the object lives.
    for (size_t f : kr.fragments) {
      if (served[f] == SIZE_MAX) continue;
      Remember(kr.key, kr.ticket, kr.candidates[served[f]], kr.size, kr.asked_at,
               kr.lease_ttl_ms, kr.checksum);
      break;
    }
  }
  return ErrorCode::OK;
}

ErrorCode StoreService::OnGetRanges(ClientConnection* s, const uds::GetRangesArgs& in,
                                    uds::GetRangesReply* out) {
  if (!ValidKey(in.key)) return ErrorCode::INVALID_PARAMS;
  return ReadRanges(s, {&in}, &out->values);
}

ErrorCode StoreService::OnBatchGetRanges(ClientConnection* s, const uds::BatchGetRangesArgs& in,
                                         uds::GetRangesReply* out) {
  std::vector<const uds::GetRangesArgs*> entries;
  for (const uds::GetRangesArgs& e : in.entries) entries.push_back(&e);
  return ReadRanges(s, entries, &out->values);
}

}  // namespace mooncake
