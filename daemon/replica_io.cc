#include "daemon/replicas/replica_io.h"

#include <algorithm>
#include <cstring>

#include "common/base/crc32c.h"
#include "common/base/error_code.h"
#include "daemon/transfer/daemon_metrics.h"
#include "daemon/transfer/disk_reads.h"

namespace mooncake {

namespace {

bool InRange(uint64_t offset, uint64_t length, uint64_t size) {
  return length <= size && offset <= size - length;
}

}  // namespace

ErrorCode ReplicaIO::ResolveAll(const std::vector<rpc::ReplicaDescriptor>& replicas, uint64_t size,
                                int64_t master_epoch, std::vector<ReplicaTarget>* out) {
  out->clear();
  for (const auto& r : replicas) {
    if (r.kind != rpc::ReplicaKind::MEMORY || r.offset < 0) return ErrorCode::TRANSFER_FAIL;
    ReplicaTarget t;
    t.segment_id = r.segment_id;
    t.offset = static_cast<uint64_t>(r.offset);
    t.master_epoch = master_epoch;
    t.segment = membership_->Find(r.segment_id);
    if (t.segment == nullptr) t.remote = engine_->FindSegment(r.segment_id);
    bool inside = t.segment != nullptr ? t.segment->Contains(t.offset, size)
                  : t.remote != nullptr && !t.remote->disk ? InRange(t.offset, size, t.remote->size)
                                                           : false;
    if (!inside) return ErrorCode::TRANSFER_FAIL;
    out->push_back(std::move(t));
  }
  return out->empty() ? ErrorCode::TRANSFER_FAIL : ErrorCode::OK;
}

std::vector<ReplicaTarget> ReplicaIO::Candidates(
    const std::string& key, const std::vector<rpc::ReplicaDescriptor>& replicas, uint64_t size,
    int64_t checksum, int64_t master_epoch) {
  std::vector<ReplicaTarget> out;
  std::shared_ptr<const DiskAddress> disk;  // shared by the disk replicas of the value
  for (const auto& r : replicas) {
    ReplicaTarget t;
    t.segment_id = r.segment_id;
    t.replica_id = r.replica_id;
    t.master_epoch = master_epoch;
    if (r.kind == rpc::ReplicaKind::LOCAL_DISK) {
      if (key.empty()) continue;
      SsdStore* ssd = ssd_.load();
      if (ssd != nullptr && r.segment_id == disk_segment_id_.load()) {
        t.ssd = ssd;
      } else {
        t.remote = engine_->FindSegment(r.segment_id);
        if (t.remote == nullptr || !t.remote->disk) continue;
      }
      if (disk == nullptr) {
        disk = std::make_shared<const DiskAddress>(DiskAddress{key, size, checksum});
      }
      t.disk = disk;
      out.push_back(std::move(t));
      continue;
    }
    if (r.kind != rpc::ReplicaKind::MEMORY || r.offset < 0) continue;
    t.offset = static_cast<uint64_t>(r.offset);
    t.segment = membership_->Find(r.segment_id);
    if (t.segment != nullptr) {
      if (t.segment->Contains(t.offset, size)) out.push_back(std::move(t));
      continue;
    }
    t.remote = engine_->FindSegment(r.segment_id);
    if (t.remote != nullptr && !t.remote->disk && InRange(t.offset, size, t.remote->size)) {
      out.push_back(std::move(t));
    }
  }
  Order(&out, [this](const std::string& daemon) { return engine_->Suspect(daemon); });
  return out;
}

void ReplicaIO::Order(std::vector<ReplicaTarget>* candidates,
                      const std::function<bool(const std::string& daemon)>& suspect) {
  // Daemons a transfer just failed against go last: likely dead, tried only if all else
  // fails (a dead host can cost a connect timeout; a local SSD read costs a millisecond).
  auto rank = [&](const ReplicaTarget& t) {
    int tier = static_cast<int>(t.tier());
    bool suspected = t.remote != nullptr && suspect(t.remote->name);
    return suspected ? tier + 4 : tier;
  };
  if (candidates->size() < 2) return;  // the usual case: one replica
  std::vector<std::pair<int, size_t>> ranks;
  for (size_t i = 0; i < candidates->size(); ++i) ranks.emplace_back(rank((*candidates)[i]), i);
  auto by_rank = [](const std::pair<int, size_t>& a, const std::pair<int, size_t>& b) {
    return a.first < b.first;
  };
  if (std::is_sorted(ranks.begin(), ranks.end(), by_rank)) return;
  std::stable_sort(ranks.begin(), ranks.end(), by_rank);
  std::vector<ReplicaTarget> sorted;
  sorted.reserve(candidates->size());
  for (const auto& r : ranks) sorted.push_back(std::move((*candidates)[r.second]));
  candidates->swap(sorted);
}

void ReplicaIO::CountServed(const ReplicaTarget& t, uint64_t length) {
  DaemonMetrics::Get().CountBytes(TransferKind::kRead, t.tier(), length);
  if (!t.on_disk()) return;
  std::atomic<uint64_t>& count = t.ssd != nullptr ? disk_reads_local_ : disk_reads_remote_;
  count.fetch_add(1, std::memory_order_relaxed);
  if (DiskReadSink::t_sink_ != nullptr) {
    DiskReadSink::t_sink_->fetch_add(1, std::memory_order_relaxed);
  }
}

TransferOp ReplicaIO::MakeOp(TransferKind kind, const ReplicaTarget& t, uint64_t value_offset,
                             char* pool, uint64_t length) {
  TransferOp op;
  op.kind = kind;
  op.remote = t.remote;
  op.remote_offset = t.offset + value_offset;
  op.master_epoch = t.master_epoch;
  op.disk = t.disk;
  op.local = pool;
  op.length = length;
  return op;
}

void ReplicaIO::CopyLocal(TransferKind kind, const ReplicaTarget& t, uint64_t value_offset,
                          char* pool, uint64_t length) {
  char* replica = t.data() + value_offset;
  if (kind == TransferKind::kWrite) {
    std::memcpy(replica, pool, length);
  } else {
    std::memcpy(pool, replica, length);
  }
}

void ReplicaIO::AddLocal(TransferKind kind, const ReplicaTarget& t, uint64_t value_offset,
                         char* pool, uint64_t length, std::vector<ParallelCopy::Piece>* pieces) {
  char* replica = t.data() + value_offset;
  if (kind == TransferKind::kWrite) {
    pieces->push_back(ParallelCopy::Piece{replica, pool, length});
  } else {
    pieces->push_back(ParallelCopy::Piece{pool, replica, length});
  }
}

void ReplicaIO::CopyAll(const std::vector<ParallelCopy::Piece>& pieces) {
  if (copier_ != nullptr) {
    copier_->Copy(pieces);
    return;
  }
  for (const ParallelCopy::Piece& p : pieces) std::memcpy(p.dest, p.src, p.length);
}

void ReplicaIO::WriteAll(std::vector<ValueSlice>* slices,
                         std::chrono::steady_clock::time_point deadline) {
  std::vector<TransferOp> ops;
  std::vector<size_t> owner;  // the slice of each op
  std::vector<ParallelCopy::Piece> local;
  uint64_t local_bytes = 0;
  // Every local copy is admitted by the epoch gate until all of them are made.
  EpochGate* gate = membership_ != nullptr ? membership_->epoch_gate() : nullptr;
  size_t admitted = 0;
  for (size_t i = 0; i < slices->size(); ++i) {
    ValueSlice& s = (*slices)[i];
    s.result = ErrorCode::OK;
    s.crc = -1;
    bool crc_asked = false;  // of one remote replica: they all send the same bytes
    for (const ReplicaTarget& t : *s.targets) {
      if (t.local()) {
        if (gate == nullptr || gate->EnterWrite(t.master_epoch)) {
          admitted += gate != nullptr;
          AddLocal(TransferKind::kWrite, t, s.value_offset, s.pool, s.length, &local);
          local_bytes += s.length;
        } else {
          s.result = ErrorCode::TRANSFER_FAIL;  // reserved by a master we are no longer at
        }
      } else {
        ops.push_back(MakeOp(TransferKind::kWrite, t, s.value_offset, s.pool, s.length));
        ops.back().want_crc = s.want_crc && !crc_asked;
        crc_asked = crc_asked || s.want_crc;
        owner.push_back(i);
      }
    }
  }
  CopyAll(local);
  for (size_t k = 0; k < admitted; ++k) gate->LeaveWrite();
  if (local_bytes > 0) {
    DaemonMetrics::Get().CountBytes(TransferKind::kWrite, ReplicaTier::kLocalMemory, local_bytes);
  }
  if (ops.empty()) return;
  std::vector<TransferOp*> pointers;
  pointers.reserve(ops.size());
  for (TransferOp& op : ops) pointers.push_back(&op);
  engine_->Execute(&pointers, deadline);
  for (size_t k = 0; k < ops.size(); ++k) {
    ValueSlice& s = (*slices)[owner[k]];
    if (ops[k].result != ErrorCode::OK) {
      s.result = ErrorCode::TRANSFER_FAIL;
    } else {
      DaemonMetrics::Get().CountBytes(TransferKind::kWrite, ReplicaTier::kRemoteMemory,
                                      ops[k].length);
    }
    if (ops[k].has_crc) s.crc = ops[k].crc;
  }
}

void ReplicaIO::ReadAny(std::vector<ValueSlice>* slices, const std::vector<int64_t>& expected,
                        std::chrono::steady_clock::time_point deadline) {
  const size_t n = slices->size();
  std::vector<size_t> next(n, 0);  // the candidate each slice tries next
  std::vector<size_t> pending(n);
  for (size_t i = 0; i < n; ++i) {
    pending[i] = i;
    (*slices)[i].result = ErrorCode::TRANSFER_FAIL;
  }
  auto wants_crc = [&](size_t i) { return i < expected.size() && expected[i] >= 0; };
  std::vector<int64_t> summed(n, -1);  // a CRC the transport computed this round
  auto matches = [&](size_t i) {
    if (!wants_crc(i)) return true;
    const ValueSlice& s = (*slices)[i];
    uint32_t crc = summed[i] >= 0 ? static_cast<uint32_t>(summed[i]) : Crc32c(s.pool, s.length);
    return crc == static_cast<uint32_t>(expected[i]);
  };
  std::vector<bool> failed(n, false);
  std::vector<ParallelCopy::Piece> local;
  while (!pending.empty()) {
    std::vector<TransferOp> ops;
    std::vector<size_t> owner;
    std::vector<size_t> tried;  // slices whose attempt this round is over
    tried.reserve(pending.size());
    local.clear();
    for (size_t i : pending) {
      ValueSlice& s = (*slices)[i];
      if (next[i] >= s.targets->size()) continue;  // out of candidates: result stays
      const ReplicaTarget& t = (*s.targets)[next[i]];
      if (t.local()) {
        AddLocal(TransferKind::kRead, t, s.value_offset, s.pool, s.length, &local);
      } else if (t.ssd != nullptr) {
        ErrorCode code = ReadDiskReplica(t.ssd, *t.disk, s.value_offset, s.pool, s.length);
        CheckDiskRead(t, code);
        failed[i] = code != ErrorCode::OK;
      } else {
        ops.push_back(MakeOp(TransferKind::kRead, t, s.value_offset, s.pool, s.length));
        ops.back().want_crc = wants_crc(i);
        owner.push_back(i);
      }
      summed[i] = -1;
      tried.push_back(i);
    }
    CopyAll(local);
    if (!ops.empty()) {
      std::vector<TransferOp*> pointers;
      for (TransferOp& op : ops) pointers.push_back(&op);
      engine_->Execute(&pointers, deadline);
      for (size_t k = 0; k < ops.size(); ++k) {
        failed[owner[k]] = ops[k].result != ErrorCode::OK;
        if (ops[k].has_crc) summed[owner[k]] = ops[k].crc;
      }
    }
    pending.clear();
    for (size_t i : tried) {
      ValueSlice& s = (*slices)[i];
      if (!failed[i] && matches(i)) {
        s.result = ErrorCode::OK;
        s.served = next[i];
        s.served_tier = (*s.targets)[next[i]].tier();
        CountServed((*s.targets)[next[i]], s.length);
        continue;
      }
      BadReplicaReporter* reporter = reporter_.load();
      if (!failed[i] && reporter != nullptr && s.key != nullptr) {
        // The bytes arrived whole and are not the value's: the replica holds something else.
        reporter->ReportMismatch(*s.key, (*s.targets)[next[i]].replica_id, s.length,
                                 static_cast<uint32_t>(expected[i]));
      }
      // A checksum mismatch outranks a transfer failure: it is what the reader must hear
      // if no replica turns out good.
      if (!failed[i] || s.result != ErrorCode::CHECKSUM_MISMATCH) {
        s.result = failed[i] ? ErrorCode::TRANSFER_FAIL : ErrorCode::CHECKSUM_MISMATCH;
      }
      failed[i] = false;
      ++next[i];
      pending.push_back(i);
    }
  }
}

void ReplicaIO::CheckDiskRead(const ReplicaTarget& t, ErrorCode code) {
  // A corrupt copy (CHECKSUM_MISMATCH) the store has dropped itself, telling the master
  // (daemon/ssd_tier/ssd_tier.h); a missing one only a read finds.
  BadReplicaReporter* reporter = reporter_.load();
  if (code == ErrorCode::OBJECT_NOT_FOUND && reporter != nullptr) {
    reporter->ReportNotHeld(*t.disk, t.segment_id);
  }
}

Result<size_t> ReplicaIO::ReadFrom(const std::vector<ReplicaTarget>& candidates, size_t first,
                                   uint64_t value_offset, char* pool, uint64_t length,
                                   std::chrono::steady_clock::time_point deadline) {
  for (size_t k = first; k < candidates.size(); ++k) {
    const ReplicaTarget& t = candidates[k];
    if (t.local()) {
      CopyLocal(TransferKind::kRead, t, value_offset, pool, length);
      CountServed(t, length);
      return k;
    }
    if (t.ssd != nullptr) {
      ErrorCode code = ReadDiskReplica(t.ssd, *t.disk, value_offset, pool, length);
      CheckDiskRead(t, code);
      if (code != ErrorCode::OK) continue;
      CountServed(t, length);
      return k;
    }
    TransferOp op = MakeOp(TransferKind::kRead, t, value_offset, pool, length);
    std::vector<TransferOp*> one{&op};
    engine_->Execute(&one, deadline);
    if (op.result == ErrorCode::OK) {
      CountServed(t, length);
      return k;
    }
  }
  return ErrorCode::TRANSFER_FAIL;
}

}  // namespace mooncake
