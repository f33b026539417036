#include "daemon/replicas/segment_drainer.h"

#include <thread>

#include "common/base/logging.h"

namespace mooncake {

SegmentDrainer::Outcome SegmentDrainer::DrainAndUnmount(int64_t segment_id) {
  Outcome outcome;
  // Held for the drain: the bytes are read from it (and an unmount elsewhere cannot unmap it).
  std::shared_ptr<SegmentMemory> memory = membership_->Find(segment_id);
  if (memory == nullptr) return outcome;
  Clock::time_point started = Clock::now();
  Clock::time_point deadline = started + kBudget;
  Walk last;
  int walks = 0;
  while (walks < kMaxWalks && !GivingUp(deadline)) {
    ++walks;
    Walk walk;
    ErrorCode code = RunWalk(segment_id, *memory, deadline, &walk);
    outcome.moved += walk.moved;
    if (code == ErrorCode::CLIENT_NOT_FOUND) {
      // The master forgot us (it restarted, or took us for dead): registering again
      // mounts the segment again, and the next walk starts over.
      membership_->Reregister();
      continue;
    }
    if (code == ErrorCode::RPC_FAIL) {
      std::this_thread::sleep_for(kSettle);
      continue;
    }
    if (code != ErrorCode::OK) {
      MC_LOG_WARN("drain of segment %lld: the master answered %s; unmounting it as it is",
                  static_cast<long long>(segment_id), ErrorName(code));
      break;
    }
    last = walk;
    if (walk.complete && walk.busy == 0 && walk.failed == 0) break;  // nothing more to move
    if (walk.moved == 0 && walk.failed == 0) std::this_thread::sleep_for(kSettle);
  }
  outcome.shed = last.shed;
  // A walk cut short says nothing of the objects after its end: they are dropped unseen.
  outcome.dropped = last.stranded + last.busy;
  ErrorCode unmounted = membership_->Unmount(segment_id);
  if (walks == 0) {
    MC_LOG_WARN("segment %lld unmounted without draining (the daemon is stopping): its "
                "objects go with it; unmount: %s",
                static_cast<long long>(segment_id), ErrorName(unmounted));
    return outcome;
  }
  int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  bool clean = last.complete && outcome.dropped == 0;
  MC_LOG_AT_(clean ? LogLevel::kInfo : LogLevel::kWarning,
      "segment %lld drained in %lld ms (%d walks%s): %llu objects moved, %llu kept a replica "
      "elsewhere, %llu dropped with it (%llu with no room elsewhere, %llu still being "
      "written); unmount: %s",
      static_cast<long long>(segment_id), static_cast<long long>(ms), walks,
      last.complete ? "" : ", the last cut short", static_cast<unsigned long long>(outcome.moved),
      static_cast<unsigned long long>(outcome.shed),
      static_cast<unsigned long long>(outcome.dropped),
      static_cast<unsigned long long>(last.stranded), static_cast<unsigned long long>(last.busy),
      ErrorName(unmounted));
  return outcome;
}

ErrorCode SegmentDrainer::RunWalk(int64_t segment_id, const SegmentMemory& memory,
                                  Clock::time_point deadline, Walk* walk) {
  int64_t cursor = 0;
  do {
    if (GivingUp(deadline)) return ErrorCode::OK;  // not complete
    rpc::DrainBatchResult batch;
    ErrorCode code = master_->DrainSegment(membership_->daemon_id(), segment_id, cursor, kBatch,
                                           io_->engine()->Suspects(), &batch);
    if (code != ErrorCode::OK) return code;
    walk->stranded += static_cast<uint64_t>(batch.stranded);
    walk->shed += static_cast<uint64_t>(batch.shed);
    walk->busy += static_cast<uint64_t>(batch.busy);
    MoveBatch(segment_id, memory, batch, deadline, walk);
    cursor = batch.next_cursor;
  } while (cursor >= 0);
  walk->complete = true;
  return ErrorCode::OK;
}

void SegmentDrainer::MoveBatch(int64_t segment_id, const SegmentMemory& memory,
                               const rpc::DrainBatchResult& batch, Clock::time_point deadline,
                               Walk* walk) {
  const size_t n = batch.moves.size();
  if (n == 0) return;
  std::vector<std::vector<ReplicaTarget>> targets(n);
  std::vector<ValueSlice> slices;
  std::vector<size_t> sliced;  // the move of each slice
  std::vector<std::string> to_commit, to_revoke;
  for (size_t j = 0; j < n; ++j) {
    const rpc::SegmentMove& move = batch.moves[j];
    uint64_t size = static_cast<uint64_t>(move.size);
    uint64_t from = static_cast<uint64_t>(move.from_offset);
    // The master's word on our own memory is checked all the same.
    bool valid = move.size > 0 && move.from_offset >= 0 && memory.Contains(from, size) &&
                 io_->ResolveAll({move.to}, size, batch.master_epoch, &targets[j]) ==
                     ErrorCode::OK;
    if (!valid) {
      to_revoke.push_back(move.key);
      continue;
    }
    slices.push_back(ValueSlice{&targets[j], 0, memory.base() + from, size});
    sliced.push_back(j);
  }
  io_->WriteAll(&slices, deadline);
  for (size_t k = 0; k < slices.size(); ++k) {
    const std::string& key = batch.moves[sliced[k]].key;
    (slices[k].result == ErrorCode::OK ? to_commit : to_revoke).push_back(key);
  }
  walk->failed += to_revoke.size();
  std::vector<ErrorCode> codes;
  if (!to_commit.empty()) {
    ErrorCode code = EndMoves(true, segment_id, to_commit, &codes);
    for (size_t k = 0; k < to_commit.size(); ++k) {
      ErrorCode one = code != ErrorCode::OK ? code : codes[k];
      if (one == ErrorCode::OK) {
        ++walk->moved;
      } else if (one != ErrorCode::OBJECT_NOT_FOUND) {  // -704: changed meanwhile, not ours
        ++walk->failed;
      }
    }
  }
  // Best effort: a move left pending is released by the master's timeout.
  if (!to_revoke.empty()) EndMoves(false, segment_id, to_revoke, &codes);
}

ErrorCode SegmentDrainer::EndMoves(bool commit, int64_t segment_id,
                                   const std::vector<std::string>& keys,
                                   std::vector<ErrorCode>* codes) {
  int64_t daemon = membership_->daemon_id();
  ErrorCode code = ErrorCode::RPC_FAIL;
  for (int attempt = 0; attempt < 2 && code == ErrorCode::RPC_FAIL; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(kSettle);
    // A commit applied whose reply was lost answers -704 the second time: the object moved.
    code = commit ? master_->CommitMoves(daemon, segment_id, keys, codes)
                  : master_->RevokeMoves(daemon, segment_id, keys, codes);
  }
  return code;
}

}  // namespace mooncake
