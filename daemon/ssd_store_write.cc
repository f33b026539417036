// SsdStore's writes (daemon/ssd_store_impl.h): room under the watermark and bucket
// eviction, placement in the open bucket, the staged and pipelined io_uring writes, the
// index update, and durability (the group commit of strict mode, the relaxed flusher).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/crc32c.h"
#include "common/logging.h"
#include "common/tenant_key.h"
#include "daemon/ssd_store_impl.h"

namespace mooncake {

namespace {

// How often the flusher looks for records to write: a quarter of the bound, so that a slow
// sync still ends within it.
constexpr int kFlushPeriodMs = SsdStore::kRelaxedSyncMs / 4;

// Where one item of a batch goes.
struct Placement {
  uint64_t slot = 0;  // RoundUpToPage(size): 0 when the item is not written
  uint64_t bucket = 0;
  uint64_t offset = 0;
  int error = 0;  // the first errno of its I/O
  bool planned = false;
  std::vector<uint32_t> block_crcs;
};

}  // namespace

uint64_t SsdStoreImpl::MakeRoom(uint64_t need) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const uint64_t taken = used_ + reserved_;
    const uint64_t free = taken < limit_ ? limit_ - taken : 0;
    if (free >= need) {
      reserved_ += need;
      return need;
    }
    if (EvictOneLocked(&lock)) continue;
    if (evictions_ > 0) {  // another Write is making room: see what it leaves
      changed_.wait(lock);
      continue;
    }
    reserved_ += free;
    return free;
  }
}

SsdStoreImpl::Bucket* SsdStoreImpl::PickVictimLocked() {
  Bucket* victim = nullptr;
  for (auto& [id, b] : buckets_) {
    if (!b.sealed || b.evicting || b.writers > 0) continue;
    if (victim == nullptr) {
      victim = &b;  // the oldest: fifo's answer
      if (options_.eviction_policy == SsdEvictionPolicy::kFifo) break;
    } else if (b.last_use < victim->last_use) {
      victim = &b;
    }
  }
  if (victim != nullptr) return victim;
  // Only the open bucket holds anything (a watermark under two buckets): seal it, so that
  // it can go and the next object starts a new one.
  auto open = buckets_.find(open_id_);
  if (open != buckets_.end() && open->second.size > 0 && open->second.writers == 0 &&
      !open->second.evicting) {
    open->second.sealed = true;
    open_id_ = 0;
    return &open->second;
  }
  return nullptr;
}

bool SsdStoreImpl::EvictOneLocked(std::unique_lock<std::mutex>* lock) {
  Bucket* victim = PickVictimLocked();
  if (victim == nullptr) return false;
  const uint64_t id = victim->file->id();
  victim->evicting = true;
  ++evictions_;
  std::vector<std::string> keys;
  for (const auto& [key, offset] : victim->slots) {
    auto it = index_.find(key);
    if (it != index_.end() && it->second.bucket == id && it->second.offset == offset) {
      keys.push_back(key);
    }
  }
  lock->unlock();
  const bool dropped = keys.empty() || drop_(keys);
  lock->lock();
  if (!dropped) {
    victim->evicting = false;
    --evictions_;
    changed_.notify_all();
    uint64_t passed = 0;
    if (evict_log_.Due(&passed)) {
      MC_LOG_WARN("ssd: bucket %llu (%zu objects) not evicted: the master could not be told "
                  "(%llu more refusals not logged)",
                  (unsigned long long)id, keys.size(), (unsigned long long)passed);
    }
    return false;
  }
  // Objects Forget or a newer Write took away meanwhile are not in the index any more.
  for (const auto& [key, offset] : victim->slots) {
    auto it = index_.find(key);
    if (it != index_.end() && it->second.bucket == id && it->second.offset == offset) {
      live_bytes_ -= it->second.length;
      index_.erase(it);
    }
  }
  changed_.wait(*lock, [victim] { return victim->readers == 0; });
  victim->file->RemoveFiles();
  used_ -= victim->size;
  buckets_.erase(id);  // the last reference to the file may be a sync in progress
  ++evicted_buckets_;
  --evictions_;
  dir_dirty_ = true;
  changed_.notify_all();
  MC_LOG_INFO("ssd: bucket %llu evicted (%s, %zu objects)", (unsigned long long)id,
              SsdEvictionPolicyName(options_.eviction_policy), keys.size());
  return true;
}

SsdStoreImpl::Bucket* SsdStoreImpl::OpenNewBucket() {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto open = buckets_.find(open_id_);
    if (open != buckets_.end()) open->second.sealed = true;
    open_id_ = 0;
    id = next_id_++;
  }
  std::string error;
  std::unique_ptr<SsdBucket> file =
      SsdBucket::Create(options_.path, id, direct_, persistent(), &error);
  if (file == nullptr) {
    MC_LOG_WARN("ssd: no new bucket: %s", error.c_str());
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Bucket& b = buckets_[id];
  b.file = std::move(file);
  b.last_use = ++clock_;
  b.writers = 1;
  open_id_ = id;
  dir_dirty_ = true;
  return &b;
}

void SsdStoreImpl::Write(std::vector<WriteItem>* items) {
  const size_t n = items->size();
  std::vector<Placement> place(n);
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    WriteItem& item = (*items)[i];
    const SsdObject& o = item.object;
    item.result = ErrorCode::OK;
    if (o.key.empty() || o.key.size() > tenant_key::kMaxStoredKeyLen || (item.data == nullptr && o.size > 0)) {
      item.result = ErrorCode::INVALID_PARAMS;
      continue;
    }
    place[i].slot = RoundUpToPage(o.size);
    if (place[i].slot > limit_) {  // would never fit under the watermark
      item.result = ErrorCode::FILE_WRITE_FAIL;
      continue;
    }
    total += place[i].slot;
  }
  const uint64_t granted = MakeRoom(total);
  uint64_t given = 0;
  for (size_t i = 0; i < n; ++i) {
    if ((*items)[i].result != ErrorCode::OK) continue;
    if (given + place[i].slot > granted) {
      (*items)[i].result = ErrorCode::FILE_WRITE_FAIL;
      continue;
    }
    given += place[i].slot;
    place[i].planned = true;
  }

  bool no_space = false;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> write_lock(write_mu_);
    // Placement: the open bucket while the object fits (a larger one alone in a new one).
    // Each bucket touched keeps a writer count, which keeps it from eviction.
    std::map<uint64_t, std::pair<uint64_t, uint64_t>> touched;  // id -> (size before, planned end)
    for (size_t i = 0; i < n; ++i) {
      Placement& p = place[i];
      if (!p.planned) continue;
      uint64_t id = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto open = buckets_.find(open_id_);
        if (open != buckets_.end() && !open->second.sealed) {
          Bucket& b = open->second;
          auto t = touched.find(open_id_);
          const uint64_t end = t != touched.end() ? t->second.second : b.size;
          if (end == 0 || end + p.slot <= options_.bucket_size) {
            id = open_id_;
            if (t == touched.end()) {
              touched[id] = {b.size, b.size};
              ++b.writers;
            }
          }
        }
      }
      if (id == 0) {
        Bucket* b = OpenNewBucket();  // comes with this Write as its writer
        if (b == nullptr) {
          p.planned = false;
          p.error = EIO;
          continue;
        }
        id = b->file->id();
        touched[id] = {0, 0};
      }
      p.bucket = id;
      p.offset = touched[id].second;
      touched[id].second += p.slot;
    }

    // The I/O: each object copied into page-aligned staging buffers (its padding zeroed,
    // its check blocks' CRCs taken on the way), written by up to kStage SQEs in flight.
    std::vector<int> fds(n, -1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < n; ++i) {
        if (place[i].planned) fds[i] = buckets_.at(place[i].bucket).file->data_fd();
      }
    }
    const uint64_t stage_bytes = stage_[0].size();
    std::vector<IoOp> ops(stage_.size());
    std::vector<size_t> free_stage;
    for (size_t s = 0; s < stage_.size(); ++s) free_stage.push_back(s);
    auto finish = [&](IoOp* op) {
      Placement& p = place[op->tag];
      if (op->error != 0 || op->done != op->length) {
        if (p.error == 0) p.error = op->error != 0 ? op->error : EIO;
      }
      free_stage.push_back(static_cast<size_t>(op - ops.data()));
    };
    for (size_t i = 0; i < n; ++i) {
      Placement& p = place[i];
      if (!p.planned) continue;
      const WriteItem& item = (*items)[i];
      const uint64_t size = item.object.size;
      p.block_crcs.resize(CheckBlocksOf(size));
      for (uint64_t at = 0; at < p.slot && p.error == 0; at += stage_bytes) {
        while (free_stage.empty()) {
          IoOp* done = write_ring_->WaitOne();
          if (done == nullptr) break;
          finish(done);
        }
        if (free_stage.empty()) {  // the ring failed
          p.error = EIO;
          break;
        }
        const size_t s = free_stage.back();
        free_stage.pop_back();
        char* buf = stage_[s].data();
        const uint64_t io_length = std::min(stage_bytes, p.slot - at);
        const uint64_t data_length = std::min(io_length, size - at);
        std::memcpy(buf, item.data + at, data_length);
        std::memset(buf + data_length, 0, io_length - data_length);
        for (uint64_t b = 0; b < data_length; b += kSsdCheckBlock) {
          p.block_crcs[(at + b) / kSsdCheckBlock] =
              Crc32c(buf + b, std::min(kSsdCheckBlock, data_length - b));
        }
        IoOp& op = ops[s];
        op = IoOp();
        op.write = true;
        op.fd = fds[i];
        op.buffer = buf;
        op.length = static_cast<uint32_t>(io_length);
        op.offset = p.offset + at;
        op.tag = i;
        write_ring_->Start(&op);
      }
    }
    while (write_ring_->in_flight() > 0) {
      IoOp* done = write_ring_->WaitOne();
      if (done == nullptr) break;
      finish(done);
    }
    if (write_ring_->in_flight() > 0) {  // the ring failed under them: none can be trusted
      for (Placement& p : place) {
        if (p.planned && p.error == 0) p.error = EIO;
      }
    }

    // A failed write leaves no tail: each bucket ends after its last object written.
    std::map<uint64_t, uint64_t> end;  // id -> new size
    for (const auto& [id, sizes] : touched) end[id] = sizes.first;
    for (const Placement& p : place) {
      if (p.planned && p.error == 0) end[p.bucket] = std::max(end[p.bucket], p.offset + p.slot);
      if (p.error == ENOSPC || p.error == EDQUOT) no_space = true;
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, sizes] : touched) {
      Bucket& b = buckets_.at(id);
      if (end[id] < sizes.second) b.file->TruncateData(end[id]);
      used_ += end[id] - b.size;
      b.size = end[id];
      --b.writers;
    }
    reserved_ -= granted;
    for (size_t i = 0; i < n; ++i) {
      WriteItem& item = (*items)[i];
      Placement& p = place[i];
      if (item.result == ErrorCode::OK && (!p.planned || p.error != 0)) {
        item.result = ErrorCode::FILE_WRITE_FAIL;
        uint64_t passed = 0;
        if (p.error != 0 && write_log_.Due(&passed)) {
          MC_LOG_WARN("ssd: writing %s (%llu bytes) to bucket %llu: %s (%llu more failed "
                      "writes not logged)",
                      item.object.key.c_str(), (unsigned long long)item.object.size,
                      (unsigned long long)p.bucket, std::strerror(p.error),
                      (unsigned long long)passed);
        }
      }
      if (item.result != ErrorCode::OK) {
        ++write_failures_;
        continue;
      }
      auto it = index_.find(item.object.key);
      if (it != index_.end()) RemoveEntryLocked(it);  // replaced
      Bucket& b = buckets_.at(p.bucket);
      Entry e;
      e.bucket = p.bucket;
      e.offset = p.offset;
      e.length = item.object.size;
      e.checksum = item.object.checksum;
      e.data_crc = e.length == 0 ? 0 : p.block_crcs[0];
      for (size_t k = 1; k < p.block_crcs.size(); ++k) {
        const uint64_t block_length = std::min(kSsdCheckBlock, e.length - k * kSsdCheckBlock);
        e.data_crc = Crc32cCombine(e.data_crc, p.block_crcs[k], block_length);
      }
      if (persistent()) {
        MetaRecord put;
        put.key = item.object.key;
        put.offset = e.offset;
        put.length = e.length;
        put.data_crc = e.data_crc;
        put.checksum = e.checksum;
        put.block_crcs = p.block_crcs;
        AppendMetaRecord(&b.pending_meta, put);
      }
      e.block_crcs = std::move(p.block_crcs);
      b.data_dirty = true;
      b.slots.emplace_back(item.object.key, e.offset);
      live_bytes_ += e.length;
      index_[item.object.key] = std::move(e);
    }
    ticket = ++write_seq_;
    changed_.notify_all();  // reservations ended, writers left buckets
  }

  if (options_.persist_mode == SsdPersistMode::kStrict && !GroupSync(ticket)) {
    // Not durable: not stored. Reported as failed and taken out of the index.
    std::lock_guard<std::mutex> lock(mu_);
    for (WriteItem& item : *items) {
      if (item.result != ErrorCode::OK) continue;
      item.result = ErrorCode::FILE_WRITE_FAIL;
      ++write_failures_;
      auto it = index_.find(item.object.key);
      if (it != index_.end()) RemoveEntryLocked(it);
    }
  }
  if (no_space) {
    // The filesystem is fuller than the capacity says: free a bucket for the next writes.
    std::unique_lock<std::mutex> lock(mu_);
    EvictOneLocked(&lock);
  }
}

bool SsdStoreImpl::GroupSync(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(sync_mu_);
  for (;;) {
    if (synced_seq_ >= ticket) {
      for (const auto& [first, last] : failed_syncs_) {
        if (ticket >= first && ticket <= last) return false;
      }
      return true;
    }
    if (syncing_) {  // a sync under way may not cover us: wait, then lead the next
      sync_done_.wait(lock);
      continue;
    }
    syncing_ = true;
    lock.unlock();
    uint64_t target = 0;
    const bool ok = SyncOnce(&target);
    lock.lock();
    syncing_ = false;
    if (!ok) {
      failed_syncs_.emplace_back(synced_seq_ + 1, target);
      if (failed_syncs_.size() > 64) failed_syncs_.erase(failed_syncs_.begin());
    }
    synced_seq_ = std::max(synced_seq_, target);
    sync_done_.notify_all();
  }
}

bool SsdStoreImpl::SyncOnce(uint64_t* target) {
  struct Dirty {
    std::shared_ptr<SsdBucket> file;
    std::string records;
    bool data = false;
  };
  std::vector<Dirty> dirty;
  bool dir = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    *target = write_seq_;
    for (auto& [id, b] : buckets_) {
      if (!b.data_dirty && b.pending_meta.empty()) continue;
      dirty.push_back(Dirty{b.file, std::move(b.pending_meta), b.data_dirty});
      b.pending_meta.clear();
      b.data_dirty = false;
    }
    dir = dir_dirty_;
    dir_dirty_ = false;
    if (!dirty.empty() || dir) ++syncs_;
  }
  // The data first, then the records that name it: a crash never leaves a record of bytes
  // that were not on disk yet.
  bool ok = true;
  std::string error;
  for (Dirty& d : dirty) {
    if (d.data && !d.file->SyncData(&error)) ok = false;
  }
  std::vector<Dirty*> unwritten;
  for (Dirty& d : dirty) {
    if (d.records.empty()) continue;
    if (!ok || !d.file->AppendMeta(d.records, &error)) {
      unwritten.push_back(&d);
      ok = false;
    } else if (!d.file->SyncMeta(&error)) {
      ok = false;
    }
  }
  if (dir && fsync(dir_fd_) != 0) {
    error = options_.path + ": fsync: " + std::strerror(errno);
    ok = false;
  }
  if (!ok) {
    // Records not written are kept for the next round, before those added since.
    std::lock_guard<std::mutex> lock(mu_);
    for (Dirty* d : unwritten) {
      auto it = buckets_.find(d->file->id());
      if (it == buckets_.end()) continue;  // evicted meanwhile: nothing to record
      it->second.pending_meta.insert(0, d->records);
      it->second.data_dirty = true;
    }
    dir_dirty_ = dir_dirty_ || dir;
    uint64_t passed = 0;
    if (sync_log_.Due(&passed)) {
      MC_LOG_WARN("ssd: sync failed: %s (%llu more failures not logged)", error.c_str(),
                  (unsigned long long)passed);
    }
  }
  return ok;
}

void SsdStoreImpl::FlusherLoop() {
  std::unique_lock<std::mutex> lock(sync_mu_);
  while (!stop_) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(kFlushPeriodMs));
    if (stop_) break;
    lock.unlock();
    uint64_t ticket;
    {
      std::lock_guard<std::mutex> state(mu_);
      ticket = write_seq_;
    }
    // Also in strict mode: Forget's and the read path's drop records have no writer
    // waiting for them.
    GroupSync(ticket);
    lock.lock();
  }
}

}  // namespace mooncake
