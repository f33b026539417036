// Draining of MasterService: moving the objects of a segment that is about to leave (memory
// an application lent, whose connection closes) to other segments. The daemon's side is
// daemon/replicas/segment_drainer.h.
//
// A move is a small upsert that keeps the value: DrainSegment reserves a target beside the
// object (Shard::moves), the owner copies the bytes, CommitMoves swaps the one replica. The
// swap is logged as the object's new state (a publish record, as UpsertEnd logs), so a
// restored master finds the object at its new place; the old range is freed like any
// replaced value's, once no read lease covers it and the record is on disk.
//
// The rules: before a segment's owner unmounts it, it may move the objects living only
// there to other segments. The segment is marked draining (no new
// allocation), then the state gate is taken exclusively for a moment, which waits out every
// put between reserving in it and recording the reservation: from then on every replica
// bound for it is visible in the shards. A move is reserved like an upsert's new value (a PendingMove beside the
// object) and committed by swapping one replica; any change of the object in between (a
// remove, an eviction, an upsert's end) orphans the pending move, and the loss of either
// segment drops it, so a commit either swaps the very replica it copied or fails cleanly.
#include <algorithm>

#include "common/base/logging.h"
#include "master/service/master_service.h"

namespace mooncake {

namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

// The index of the replica in slot, or kNone.
size_t ReplicaIn(const ReplicaList& replicas, uint32_t slot) {
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (replicas[i].segment == slot) return i;
  }
  return kNone;
}

rpc::DrainBatchResult DrainError(ErrorCode code) {
  rpc::DrainBatchResult r;
  r.code = ToInt(code);
  r.next_cursor = -1;
  return r;
}

}  // namespace

ErrorCode MasterService::FindOwnSegment(int64_t daemon_id, int64_t segment_id,
                                        std::shared_ptr<Segment>* out) const {
  // A daemon the master forgot (a restart, or declared dead) must register and mount again
  // first; so must one whose segment was restored and is waiting for it.
  if (!daemons_.Known(daemon_id)) return ErrorCode::CLIENT_NOT_FOUND;
  uint32_t slot = 0;
  if (!segments_.SlotOf(segment_id, &slot)) return ErrorCode::SEGMENT_NOT_FOUND;
  std::shared_ptr<Segment> segment = segments_.Get(slot);
  if (!segment) return ErrorCode::SEGMENT_NOT_FOUND;
  if (segment->info().daemon_id != daemon_id) return ErrorCode::ILLEGAL_CLIENT;
  if (!segment->attached()) return ErrorCode::CLIENT_NOT_FOUND;
  if (segment->disk()) return ErrorCode::INVALID_PARAMS;  // an SSD tier holds no memory to move
  *out = std::move(segment);
  return ErrorCode::OK;
}

rpc::DrainBatchResult MasterService::DrainSegment(int64_t daemon_id, int64_t segment_id,
                                                  int64_t cursor, int32_t max_moves,
                                                  const std::vector<std::string>& avoided) {
  if (cursor < 0 || cursor >= static_cast<int64_t>(kShardCount) || max_moves < 1) {
    return DrainError(ErrorCode::INVALID_PARAMS);
  }
  std::shared_ptr<Segment> segment;
  {
    StateGate::Shared gate(gate_);
    ErrorCode rc = FindOwnSegment(daemon_id, segment_id, &segment);
    if (rc != ErrorCode::OK) return DrainError(rc);
  }
  if (!segment->drain_settled()) {
    segment->MarkDraining();
    // A put holds the gate shared from reserving its replicas to recording them in its
    // shard, so taking it exclusively waits out every put that reserved in the segment
    // before the mark: after that, every replica ever bound for the segment is in a shard
    // for the walks to see. Once per drain (the pause is a snapshot's without the fork),
    // and not at all for a segment with nothing allocated in it (the common lent memory
    // the cluster never needed): no put can be between the two steps there.
    if (segment->used() > 0) {
      StateGate::Exclusive barrier(gate_);
    }
    segment->MarkDrainSettled();
  }
  StateGate::Shared gate(gate_);
  ErrorCode rc = FindOwnSegment(daemon_id, segment_id, &segment);  // unmounted meanwhile?
  if (rc != ErrorCode::OK) return DrainError(rc);
  if (cursor == 0) {
    MC_LOG_INFO("segment %lld of %s%s draining: a walk over its objects starts",
                static_cast<long long>(segment_id), segment->info().name.c_str(),
                segment->lent() ? " (lent by a client)" : "");
  }
  const uint32_t slot = segment->slot();
  rpc::DrainBatchResult result;
  result.code = ToInt(ErrorCode::OK);
  result.master_epoch = epoch_;
  size_t s = static_cast<size_t>(cursor);
  while (s < kShardCount) {
    Shard& shard = objects_.shard(s++);
    absl::MutexLock lock(&shard.mu);
    // Replicas on their way into the segment: they settle (or go) before a later walk.
    for (const auto& [key, up] : shard.upserts) {
      result.busy += ReplicaIn(up.replicas, slot) != kNone;
    }
    for (const auto& [key, move] : shard.moves) {
      result.busy += move.Into(slot) && !move.orphaned;
    }
    shard.objects.ForEach([&](std::string_view key, ObjectMetadata& meta) {
      size_t in = ReplicaIn(meta.replicas, slot);
      if (in == kNone) return false;
      if (!meta.complete) {
        ++result.busy;  // a put still writing into it
      } else {
        PlanMove(shard, key, meta, in, daemon_id, avoided, &result);
      }
      return false;
    });
    if (result.moves.size() >= static_cast<size_t>(max_moves)) break;
  }
  result.next_cursor = s < kShardCount ? static_cast<int64_t>(s) : -1;
  return result;
}

void MasterService::PlanMove(Shard& shard, std::string_view key, ObjectMetadata& meta, size_t in,
                             int64_t daemon_id, const std::vector<std::string>& avoided,
                             rpc::DrainBatchResult* result) {
  if (!shard.moves.empty() && shard.moves.count(std::string(key)) != 0) {
    ++result->busy;  // moving already (out of this segment or another one)
    return;
  }
  for (size_t i = 0; i < meta.replicas.size(); ++i) {
    if (i == in) continue;
    std::shared_ptr<Segment> other = segments_.Get(meta.replicas[i].segment);
    if (other && other->attached() && !other->draining()) {
      ++result->shed;  // stays readable there
      return;
    }
  }
  // Under the shard lock, which comes before the registry and the segments in the lock
  // order; no eviction (it would take shard locks), so only free space is used.
  std::vector<Placement> placed = segments_.Allocate(meta.size, 1, {}, avoided);
  if (placed.empty()) {
    ++result->stranded;
    return;
  }
  PendingMove move;
  move.mover = daemon_id;
  move.start_ms = Now();
  move.from_slot = meta.replicas[in].segment;
  move.from_node = meta.replicas[in].alloc_node;
  Replica target;
  target.offset = placed[0].offset;
  target.segment = placed[0].segment->slot();
  target.alloc_node = placed[0].node;
  target.kind = meta.replicas[in].kind;
  move.to.push_back(target);
  std::vector<rpc::ReplicaDescriptor> described;
  DescribeReplicas(move.to, meta.size, /*include_processing=*/true, &described);
  rpc::SegmentMove out;
  out.key = std::string(key);
  out.size = static_cast<int64_t>(meta.size);
  out.from_offset = static_cast<int64_t>(meta.replicas[in].offset);
  out.to = described.at(0);  // just allocated in an attached segment: it is there
  result->moves.push_back(std::move(out));
  shard.moves.emplace(std::string(key), std::move(move));
}

std::vector<int32_t> MasterService::SettleOwnKeys(OwnSegmentFinder find, int64_t daemon_id,
                                                  int64_t segment_id,
                                                  const std::vector<std::string>& keys,
                                                  const KeySettle& settle,
                                                  const std::function<void()>& done) {
  StateGate::Shared gate(gate_);
  std::shared_ptr<Segment> segment;
  ErrorCode rc = (this->*find)(daemon_id, segment_id, &segment);
  std::vector<int32_t> out(keys.size(), ToInt(rc));
  if (rc != ErrorCode::OK) return out;
  for (size_t k = 0; k < keys.size(); ++k) {
    if (!ValidKey(keys[k])) {
      out[k] = ToInt(ErrorCode::INVALID_PARAMS);
      continue;
    }
    LockedKey locked(objects_, keys[k]);
    out[k] = ToInt(settle(k, locked, *segment));
  }
  if (done) done();
  return out;
}

std::vector<int32_t> MasterService::SettleMoves(
    int64_t daemon_id, int64_t segment_id, const std::vector<std::string>& keys,
    const std::function<ErrorCode(LockedKey&, PendingMove&)>& settle) {
  return SettleOwnKeys(
      &MasterService::FindOwnSegment, daemon_id, segment_id, keys,
      [&](size_t, LockedKey& locked, const Segment& segment) {
        auto it = locked.shard.moves.find(locked.key);
        if (it == locked.shard.moves.end()) {
          return ErrorCode::OBJECT_NOT_FOUND;  // changed or gone: its move was dropped
        }
        if (it->second.mover != daemon_id || it->second.from_slot != segment.slot() ||
            !(it->second.task == TaskId{})) {
          return ErrorCode::ILLEGAL_CLIENT;  // another daemon's, or a task's (its own report)
        }
        ErrorCode settled = settle(locked, it->second);
        locked.shard.moves.erase(it);
        return settled;
      });
}

std::vector<int32_t> MasterService::CommitMoves(int64_t daemon_id, int64_t segment_id,
                                                const std::vector<std::string>& keys) {
  return SettleMoves(daemon_id, segment_id, keys, [this](LockedKey& locked, PendingMove& move) {
    if (move.orphaned) {  // the object changed or went: the copy is nobody's
      FreeReplicas(move.to);
      return ErrorCode::OBJECT_NOT_FOUND;
    }
    // Any change of the object dropped the move, so the replica copied is still there;
    // checked all the same, since a swap into the wrong replica would lose data.
    size_t in = locked.object != nullptr ? ReplicaIn(locked.object->replicas, move.from_slot)
                                         : kNone;
    if (in == kNone || locked.object->replicas[in].alloc_node != move.from_node) {
      MC_LOG_ERROR("move of '%.64s' no longer matches its object; dropped",
                   locked.key.c_str());
      FreeReplicas(move.to);
      return ErrorCode::OBJECT_NOT_FOUND;
    }
    ObjectMetadata& meta = *locked.object;
    Replica old = meta.replicas[in];
    meta.replicas[in] = move.to[0];
    meta.replicas[in].status = ReplicaStatus::kComplete;
    ReplicaList freed;
    freed.push_back(old);
    // As an upsert's old value: leased readers may still read it, and until the record
    // is on disk a restart would bring the old place back.
    DeferFree(freed, std::max(Now(), meta.time_ms), LogPublish(locked.key, meta));
    return ErrorCode::OK;
  });
}

std::vector<int32_t> MasterService::RevokeMoves(int64_t daemon_id, int64_t segment_id,
                                                const std::vector<std::string>& keys) {
  return SettleMoves(daemon_id, segment_id, keys, [this](LockedKey&, PendingMove& move) {
    FreeReplicas(move.to);  // its mover is done with it
    return move.orphaned ? ErrorCode::OBJECT_NOT_FOUND : ErrorCode::OK;
  });
}

void MasterService::DropPendingMove(Shard& shard, std::string_view key) {
  if (shard.moves.empty()) return;
  auto it = shard.moves.find(std::string(key));
  if (it != shard.moves.end()) it->second.orphaned = true;
}

}  // namespace mooncake
