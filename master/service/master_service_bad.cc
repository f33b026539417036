// ReportBadReplicas: a reader found a replica unreadable, and the master stops listing it.
//
// Why the daemon's word is taken: the master never sees bytes, so it cannot check the
// claim; a daemon is trusted with the data anyway (it holds and serves it: docs/
// security.md). What the master does check is that the report is about the value that is
// listed now: the replica still listed under that id, and the object's size and checksum
// those the reader read it under. A replica id is a segment slot and an allocator node,
// and a node can be reused once freed: a replica re-placed at the same node since (the
// object removed and put again) keeps its id, and only a different size or checksum tells
// the values apart. So a stale report of a value put again with the very same bytes at
// the very same place would drop a good replica: the object then answers -704 and a put
// stores it again; no read answers wrong bytes.
#include <algorithm>
#include <cstdio>

#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "master/service/master_service.h"

namespace mooncake {

namespace {

const char* ReasonName(rpc::BadReplicaReason::type reason) {
  return reason == rpc::BadReplicaReason::CHECKSUM_MISMATCH ? "checksum mismatch"
                                                            : "not on its SSD";
}

}  // namespace

std::vector<int32_t> MasterService::ReportBadReplicas(
    int64_t daemon_id, const std::vector<rpc::BadReplica>& replicas) {
  StateGate::Shared gate(gate_);
  if (!daemons_.Known(daemon_id)) {
    return std::vector<int32_t>(replicas.size(), ToInt(ErrorCode::CLIENT_NOT_FOUND));
  }
  std::vector<int32_t> out(replicas.size(), ToInt(ErrorCode::OBJECT_NOT_FOUND));
  int64_t dropped = 0, gone = 0;
  bool freed = false;
  const rpc::BadReplica* example = nullptr;
  for (size_t k = 0; k < replicas.size(); ++k) {
    const rpc::BadReplica& bad = replicas[k];
    const bool mismatch = bad.reason == rpc::BadReplicaReason::CHECKSUM_MISMATCH;
    const bool not_held = bad.reason == rpc::BadReplicaReason::NOT_HELD;
    if (!ValidKey(bad.key) || (!mismatch && !not_held) || bad.size <= 0 ||
        bad.checksum > int64_t{0xFFFFFFFF} || (mismatch && bad.checksum < 0)) {
      out[k] = ToInt(ErrorCode::INVALID_PARAMS);
      continue;
    }
    // Only its owner can say what an SSD holds.
    std::shared_ptr<Segment> disk;
    if (not_held) {
      ErrorCode own = FindOwnDiskSegment(daemon_id, bad.segment_id, &disk);
      if (own != ErrorCode::OK) {
        out[k] = ToInt(own == ErrorCode::ILLEGAL_CLIENT ? own : ErrorCode::INVALID_PARAMS);
        continue;
      }
    }
    LockedKey locked(objects_, bad.key);
    ObjectMetadata* meta = locked.object;
    if (meta == nullptr || !meta->complete || meta->size != static_cast<uint64_t>(bad.size) ||
        meta->checksum_or_none() != (bad.checksum < 0 ? kNoChecksum : bad.checksum)) {
      continue;  // -704: not the value the reader read
    }
    size_t in = not_held ? DiskReplicaIn(meta->replicas, disk->slot())
                         : ReplicaById(meta->replicas, bad.replica_id);
    if (in == kNoReplica || meta->replicas[in].status != ReplicaStatus::kComplete) continue;
    out[k] = ToInt(ErrorCode::OK);
    ++dropped;
    example = &bad;
    freed = DropBadReplica(locked, in) || freed;
    gone += locked.object == nullptr;
  }
  if (dropped > 0) {
    char why[256];
    std::snprintf(why, sizeof why,
                  "unreadable replicas daemon %lld reported (%lld object(s) left with none, "
                  "gone), e.g. '%.64s' (%s)",
                  static_cast<long long>(daemon_id), static_cast<long long>(gone),
                  std::string(tenant_key::UserKeyOf(example->key)).c_str(),
                  ReasonName(example->reason));
    drops_.Record(DropReason::kUnreadable, dropped, why);
  }
  if (freed) ReclaimEvicted();  // a put may be waiting for the room
  return out;
}

bool MasterService::DropBadReplica(LockedKey& locked, size_t in) {
  ObjectMetadata& meta = *locked.object;
  if (meta.replicas.size() == 1) {
    // The last one: the object goes (its bytes freed once no lease covers them and the
    // removal is on disk), as a removal takes it.
    RemoveLogged(locked.shard, locked.key, meta);
    locked.Erase();
    return true;
  }
  ReplicaList memory;
  if (meta.replicas[in].memory()) {
    memory.push_back(meta.replicas[in]);
    tenants_.Add(locked.key, 0, -MemoryBytes(meta.size, memory));
    DropPendingMove(locked.shard, locked.key);  // it may be copying that replica
  }
  disk_tier_.Count(meta, -1);
  meta.replicas.erase(in);
  disk_tier_.Count(meta, 1);
  uint64_t seq = LogPublish(locked.key, meta);
  if (memory.empty()) return false;
  // As an eviction's: reused once no lease covers it and the record is on disk.
  int64_t now = Now();
  if (meta.leased(now) || seq > 0) {
    DeferFree(memory, meta.leased(now) ? meta.time_ms : 0, seq);
  } else {
    FreeReplicas(memory);
  }
  return true;
}

}  // namespace mooncake
