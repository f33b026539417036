// SsdStore's writes (daemon/ssd_store/ssd_store_impl.h): room under the watermark and bucket
// eviction, placement in the open bucket, the staged and pipelined io_uring writes, the
// index update, and durability (the group commit of strict mode, the relaxed flusher).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/base/crc32c.h"
#include "common/base/logging.h"
#include "common/base/tenant_key.h"
#include "daemon/ssd_store/ssd_store_impl.h"

namespace mooncake {

namespace {

// How often the flusher looks for records to write: a quarter of the bound, so that a slow
// sync still ends within it.
constexpr int kFlushPeriodMs = SsdStore::kRelaxedSyncMs / 4;
// A Write moves its objects in pieces of this size, this many at once.
constexpr uint64_t kStageBytes = 1 << 20;
constexpr size_t kStagePerWrite = 8;

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
    SealLocked(&open->second);
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

void SsdStoreImpl::SealLocked(Bucket* b) {
  b->sealed = true;
  if (b->file->id() == open_id_) open_id_ = 0;
  // The preallocated rest goes back; Writes still writing into it write below size.
  b->file->TruncateData(b->size);
}

SsdStoreImpl::Bucket* SsdStoreImpl::OpenNewBucket() {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto open = buckets_.find(open_id_);
    if (open != buckets_.end()) SealLocked(&open->second);
    id = next_id_++;
  }
  std::string error;
  std::unique_ptr<SsdBucket> file =
      SsdBucket::Create(options_.path, id, direct_, persistent(), options_.bucket_size, &error);
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

  // Placement, one Write at a time (write_mu_): the open bucket while the object fits (a
  // larger one alone in a new one). The slot is claimed at once (used_), and the Write
  // counts as a writer of each bucket it touches, which keeps the bucket from eviction
  // until its I/O is done. The I/O itself overlaps with other Writes'.
  std::vector<uint64_t> touched;  // buckets this Write is a writer of
  std::vector<int> fds(n, -1);
  {
    std::lock_guard<std::mutex> write_lock(write_mu_);
    for (size_t i = 0; i < n; ++i) {
      Placement& p = place[i];
      if (!p.planned) continue;
      for (int attempt = 0; attempt < 2 && p.planned; ++attempt) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          auto open = buckets_.find(open_id_);
          if (open != buckets_.end() && !open->second.sealed &&
              (open->second.size == 0 || open->second.size + p.slot <= options_.bucket_size)) {
            Bucket& b = open->second;
            if (std::find(touched.begin(), touched.end(), open_id_) == touched.end()) {
              touched.push_back(open_id_);
              ++b.writers;
            }
            p.bucket = open_id_;
            p.offset = b.size;
            b.size += p.slot;
            used_ += p.slot;
            fds[i] = b.file->data_fd();
            break;
          }
        }
        Bucket* b = attempt == 0 ? OpenNewBucket() : nullptr;  // comes with this Write as writer
        if (b == nullptr) {
          p.planned = false;
          p.error = EIO;
        } else {
          touched.push_back(b->file->id());
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    reserved_ -= granted;  // what was placed moved to used_; the rest is given back
  }

  // The I/O: each object written in pieces of a staging buffer's size, up to kStagePerWrite
  // in flight: straight from data when it is page-aligned (and the piece whole pages),
  // else copied into a page-aligned staging buffer (its padding zeroed). The check blocks'
  // CRCs are taken on the way.
  RingPool::Lease ring = write_rings_.Acquire();
  std::vector<IoOp> ops(kStagePerWrite);
  // Kept per thread (the offloader's): no page faults on fresh buffers at every Write.
  thread_local std::vector<AlignedBuffer> stage(kStagePerWrite);
  std::vector<size_t> free_slots;
  for (size_t s = 0; s < kStagePerWrite; ++s) free_slots.push_back(s);
  auto finish = [&](IoOp* op) {
    Placement& p = place[op->tag];
    if ((op->error != 0 || op->done != op->length) && p.error == 0) {
      p.error = op->error != 0 ? op->error : EIO;
    }
    free_slots.push_back(static_cast<size_t>(op - ops.data()));
  };
  for (size_t i = 0; i < n; ++i) {
    Placement& p = place[i];
    if (!p.planned) continue;
    if (ring.get() == nullptr) {
      p.error = EIO;
      continue;
    }
    const WriteItem& item = (*items)[i];
    const uint64_t size = item.object.size;
    const bool from_data = IsPageAligned(item.data);
    p.block_crcs.resize(CheckBlocksOf(size));
    for (uint64_t at = 0; at < p.slot && p.error == 0; at += kStageBytes) {
      while (free_slots.empty()) {
        IoOp* done = ring.get()->WaitOne();
        if (done == nullptr) break;
        finish(done);
      }
      if (free_slots.empty()) {  // the ring failed
        p.error = EIO;
        break;
      }
      const size_t s = free_slots.back();
      free_slots.pop_back();
      const uint64_t io_length = std::min<uint64_t>(kStageBytes, p.slot - at);
      const uint64_t data_length = std::min(io_length, size - at);
      char* buf;
      if (from_data && data_length == io_length) {
        buf = const_cast<char*>(item.data + at);  // only read: a write's source
      } else {
        if (stage[s].data() == nullptr) stage[s] = AlignedBuffer(kStageBytes);
        buf = stage[s].data();
        std::memcpy(buf, item.data + at, data_length);
        std::memset(buf + data_length, 0, io_length - data_length);
      }
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
      ring.get()->Start(&op);
    }
  }
  while (ring.get() != nullptr && ring.get()->in_flight() > 0) {
    IoOp* done = ring.get()->WaitOne();
    if (done == nullptr) break;
    finish(done);
  }
  if (ring.get() != nullptr && ring.get()->in_flight() > 0) {
    // The ring failed under them (the pool discards it): none can be trusted.
    for (Placement& p : place) {
      if (p.planned && p.error == 0) p.error = EIO;
    }
  }

  bool no_space = false;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A failed slot at a bucket's end gives its room back (newest first, so that a run
    // of them at the end all do); one before another Write's slot stays as dead space.
    std::vector<size_t> failed;
    for (size_t i = 0; i < n; ++i) {
      if (place[i].planned && place[i].error != 0) failed.push_back(i);
      if (place[i].error == ENOSPC || place[i].error == EDQUOT) no_space = true;
    }
    std::sort(failed.begin(), failed.end(),
              [&](size_t a, size_t b) { return place[a].offset > place[b].offset; });
    for (size_t i : failed) {
      Bucket& b = buckets_.at(place[i].bucket);
      if (place[i].offset + place[i].slot != b.size) continue;
      b.size = place[i].offset;
      used_ -= place[i].slot;
      b.file->TruncateData(b.size);  // under mu_: no other Write places here meanwhile
    }
    for (uint64_t id : touched) --buckets_.at(id).writers;
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
    changed_.notify_all();  // writers left buckets
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const WriteItem& item : *items) {
      if (item.result != ErrorCode::OK) continue;
      ++written_objects_;
      written_bytes_ += item.object.size;
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
