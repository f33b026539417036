// SsdStore: Open, the scan of the directory at start, the index and reads
// (daemon/ssd_store/ssd_store_impl.h; writes and eviction are in daemon/ssd_store/ssd_store_write.cc).
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common/base/crc32c.h"
#include "common/base/logging.h"
#include "common/base/private_dir.h"
#include "daemon/ssd_store/ssd_store_impl.h"

namespace mooncake {

namespace {

// Readers' rings: as many readers at once as the transfer port and the workers run.
constexpr unsigned kMaxReadRings = 32;
constexpr unsigned kReadRingDepth = 16;
// Writers' rings: one per Write in progress (each has up to 8 pieces in flight).
constexpr unsigned kMaxWriteRings = 16;
constexpr unsigned kWriteRingDepth = 16;
constexpr uint32_t kReadChunk = 512 << 10;  // one read SQE at most
// A reader's bounce buffer is kept for its next read up to this size.
constexpr size_t kKeptBounceBytes = 8 << 20;

// "<digits>.bucket" / "<digits>.meta" -> the id; false for any other name.
bool ParseBucketName(const std::string& name, uint64_t* id, bool* is_meta) {
  size_t digits = 0;
  while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
  if (digits == 0 || digits > 18) return false;
  const std::string rest = name.substr(digits);
  if (rest == ".bucket") {
    *is_meta = false;
  } else if (rest == ".meta") {
    *is_meta = true;
  } else {
    return false;
  }
  *id = std::stoull(name.substr(0, digits));
  return *id != 0;
}

bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

ErrorCode SsdStore::Open(const SsdOptions& options, DropFn drop, std::unique_ptr<SsdStore>* out,
                         std::string* error) {
  if (options.path.empty()) {
    *error = "no SSD directory given";
    return ErrorCode::INVALID_PARAMS;
  }
  if (!ValidateSsdOptions(options, error)) return ErrorCode::INVALID_PARAMS;
  if (!drop) {
    *error = "SsdStore needs a DropFn";
    return ErrorCode::INVALID_PARAMS;
  }
  std::unique_ptr<SsdStoreImpl> store(new SsdStoreImpl(options, std::move(drop)));
  const ErrorCode rc = store->Start(error);
  if (rc != ErrorCode::OK) return rc;
  *out = std::move(store);
  return ErrorCode::OK;
}

SsdStoreImpl::SsdStoreImpl(const SsdOptions& options, DropFn drop)
    : options_(options),
      drop_(std::move(drop)),
      limit_(static_cast<uint64_t>(static_cast<double>(options.capacity) * options.high_watermark)),
      read_rings_(kMaxReadRings, kReadRingDepth),
      write_rings_(kMaxWriteRings, kWriteRingDepth) {}

SsdStoreImpl::~SsdStoreImpl() {
  if (flusher_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(sync_mu_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    flusher_.join();
    // A clean close keeps everything: what the flusher had not written yet goes now.
    uint64_t ticket;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ticket = write_seq_;
    }
    GroupSync(ticket);
  }
  if (dir_fd_ >= 0) close(dir_fd_);
  if (lock_fd_ >= 0) close(lock_fd_);  // releases the flock
}

ErrorCode SsdStoreImpl::LockDirectory(std::string* error) {
  const std::string& dir = options_.path;
  // Never created here: a missing directory is an error (common/base/process_setup.h).
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    *error = "the SSD directory " + dir + ": " + std::strerror(errno);
    return ErrorCode::FILE_OPEN_FAIL;
  }
  if (!S_ISDIR(st.st_mode)) {
    *error = dir + " is not a directory";
    return ErrorCode::FILE_OPEN_FAIL;
  }
  KeepPrivate(dir, "--ssd_path");  // it holds values: its files are 0600, it 0700
  const std::string lock_path = dir + "/LOCK";
  lock_fd_ = open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) {
    *error = "cannot open " + lock_path + ": " + std::strerror(errno);
    return ErrorCode::FILE_OPEN_FAIL;
  }
  if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    *error = e == EWOULDBLOCK
                 ? lock_path + " is held by another process: a daemon already uses " + dir
                 : "cannot lock " + lock_path + ": " + std::strerror(e);
    return ErrorCode::FILE_LOCK_FAIL;
  }
  dir_fd_ = open(dir.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  if (dir_fd_ < 0 || access(dir.c_str(), W_OK) != 0) {
    *error = "the SSD directory " + dir + " is not writable: " + std::strerror(errno);
    return ErrorCode::FILE_OPEN_FAIL;
  }
  return ErrorCode::OK;
}

ErrorCode SsdStoreImpl::Start(std::string* error) {
  ErrorCode rc = LockDirectory(error);
  if (rc != ErrorCode::OK) return rc;
  const std::string& dir = options_.path;
  std::string why;
  direct_ = ProbeDirectIo(dir, &why);
  if (!direct_) {
    MC_LOG_WARN("ssd: %s does not take O_DIRECT (%s): buffered I/O", dir.c_str(), why.c_str());
  }
  if (IoRing::Create(kReadRingDepth, &why) == nullptr) {
    *error = "io_uring is not available: " + why;
    return ErrorCode::FILE_OPEN_FAIL;
  }

  // Our own files only: IDENTITY, LOCK and anything else stay as they are.
  std::vector<uint64_t> ids;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    *error = "cannot list " + dir + ": " + std::strerror(errno);
    return ErrorCode::FILE_OPEN_FAIL;
  }
  while (dirent* ent = readdir(d)) {
    uint64_t id = 0;
    bool is_meta = false;
    if (ParseBucketName(ent->d_name, &id, &is_meta)) ids.push_back(id);
  }
  closedir(d);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (!ids.empty()) next_id_ = ids.back() + 1;

  if (persistent()) {
    Rebuild(ids);
    flusher_ = std::thread([this] { FlusherLoop(); });
  } else {
    Wipe(ids);
  }
  return ErrorCode::OK;
}

void SsdStoreImpl::Wipe(const std::vector<uint64_t>& ids) {
  for (uint64_t id : ids) {
    unlink(SsdBucket::DataPath(options_.path, id).c_str());
    unlink(SsdBucket::MetaPath(options_.path, id).c_str());
  }
  if (!ids.empty()) {
    MC_LOG_INFO("ssd: %s: persistence disabled, %zu buckets wiped", options_.path.c_str(),
                ids.size());
  }
}

void SsdStoreImpl::Rebuild(const std::vector<uint64_t>& ids) {
  const std::string& dir = options_.path;
  uint64_t torn = 0, skipped = 0, dropped_buckets = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t id : ids) {
    const std::string data_path = SsdBucket::DataPath(dir, id);
    const std::string meta_path = SsdBucket::MetaPath(dir, id);
    struct stat st {};
    std::string meta;
    MetaScan scan;
    std::vector<MetaRecord> records;
    if (stat(data_path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ReadWholeFile(meta_path, &meta)) {
      scan = ParseMeta(meta, id, static_cast<uint64_t>(st.st_size),
                       [&](MetaRecord&& r) { records.push_back(std::move(r)); });
    }
    // The end of its last slot: beyond it is preallocation of a bucket that was open.
    uint64_t end = 0;
    for (const MetaRecord& r : records) end = std::max(end, r.offset + RoundUpToPage(r.length));
    if (scan.torn) ++torn;
    skipped += scan.skipped;
    std::vector<MetaRecord> live = LiveRecords(std::move(records));
    std::string why;
    std::unique_ptr<SsdBucket> file;
    if (scan.header_ok && !live.empty()) {
      file = SsdBucket::OpenExisting(dir, id, direct_, scan.valid_bytes, &why);
    }
    if (file == nullptr) {
      // Nothing of it can be served: a bucket without (a readable) .meta, a .meta
      // without its bucket, or one whose objects are all dead.
      if (!why.empty()) MC_LOG_WARN("ssd: bucket %llu dropped: %s", (unsigned long long)id, why.c_str());
      unlink(data_path.c_str());
      unlink(meta_path.c_str());
      ++dropped_buckets;
      continue;
    }
    Bucket& b = buckets_[id];
    b.file = std::move(file);
    b.size = static_cast<uint64_t>(st.st_size);
    if (b.size > end) {
      b.file->TruncateData(end);
      b.size = end;
    }
    b.sealed = true;  // new objects go to a new bucket
    b.last_use = ++clock_;
    used_ += b.size;
    for (MetaRecord& r : live) {
      auto it = index_.find(r.key);
      // A later bucket's record of the same key wins; the earlier one is marked dead so
      // that it cannot come back if the later bucket goes first.
      if (it != index_.end()) RemoveEntryLocked(it);
      Entry e;
      e.bucket = id;
      e.offset = r.offset;
      e.length = r.length;
      e.data_crc = r.data_crc;
      e.checksum = r.checksum;
      e.block_crcs = std::move(r.block_crcs);
      live_bytes_ += e.length;
      b.slots.emplace_back(r.key, r.offset);
      index_.emplace(std::move(r.key), std::move(e));
    }
  }
  MC_LOG_INFO("ssd: %s (%s, %s, %s I/O): %zu objects in %zu buckets rebuilt; %llu torn .meta, "
              "%llu records past their bucket's end, %llu buckets dropped",
              dir.c_str(), SsdPersistModeName(options_.persist_mode),
              SsdEvictionPolicyName(options_.eviction_policy), direct_ ? "direct" : "buffered",
              index_.size(), buckets_.size(), (unsigned long long)torn,
              (unsigned long long)skipped, (unsigned long long)dropped_buckets);
}

void SsdStoreImpl::RemoveEntryLocked(std::unordered_map<std::string, Entry>::iterator it) {
  const Entry& e = it->second;
  auto b = buckets_.find(e.bucket);
  if (b != buckets_.end() && persistent()) {
    MetaRecord drop;
    drop.type = MetaRecord::kDrop;
    drop.key = it->first;
    drop.offset = e.offset;
    AppendMetaRecord(&b->second.pending_meta, drop);
    ++write_seq_;  // for the flusher: a record to write
  }
  live_bytes_ -= e.length;
  index_.erase(it);
}

std::vector<SsdObject> SsdStoreImpl::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SsdObject> out;
  out.reserve(index_.size());
  for (const auto& [key, e] : index_) out.push_back(SsdObject{key, e.length, e.checksum});
  return out;
}

bool SsdStoreImpl::Find(const std::string& key, SsdObject* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  *out = SsdObject{key, it->second.length, it->second.checksum};
  return true;
}

void SsdStoreImpl::Forget(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& key : keys) {
    auto it = index_.find(key);
    if (it != index_.end()) RemoveEntryLocked(it);
  }
}

SsdStats SsdStoreImpl::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  SsdStats s;
  s.capacity = options_.capacity;
  s.used_bytes = used_;
  s.live_bytes = live_bytes_;
  s.objects = index_.size();
  s.buckets = buckets_.size();
  s.evicted_buckets = evicted_buckets_;
  s.write_failures = write_failures_;
  s.corrupt_reads = corrupt_reads_;
  s.syncs = syncs_;
  s.read_objects = read_objects_;
  s.read_bytes = read_bytes_;
  s.read_failures = read_failures_;
  s.written_objects = written_objects_;
  s.written_bytes = written_bytes_;
  s.direct_io = direct_;
  return s;
}

ErrorCode SsdStoreImpl::Read(const std::string& key, uint64_t offset, char* dest,
                             uint64_t length) {
  Entry e;
  Bucket* bucket = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return ErrorCode::OBJECT_NOT_FOUND;
    if (offset > it->second.length || length > it->second.length - offset) {
      return ErrorCode::INVALID_PARAMS;
    }
    e = it->second;
    bucket = &buckets_.at(e.bucket);  // stays while readers > 0: eviction waits for them
    ++bucket->readers;
    bucket->last_use = ++clock_;
  }
  const ErrorCode rc = ReadChecked(*bucket->file, e, offset, dest, length);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--bucket->readers == 0) changed_.notify_all();
    if (rc == ErrorCode::OK) {
      ++read_objects_;
      read_bytes_ += length;
    } else if (rc != ErrorCode::CHECKSUM_MISMATCH) {
      ++read_failures_;
    }
    if (rc != ErrorCode::CHECKSUM_MISMATCH) return rc;
    ++corrupt_reads_;
    auto it = index_.find(key);
    if (it != index_.end() && it->second.bucket == e.bucket && it->second.offset == e.offset) {
      RemoveEntryLocked(it);
    }
  }
  MC_LOG_WARN("ssd: the object of key %s in bucket %llu at %llu is corrupt: dropped",
              key.c_str(), (unsigned long long)e.bucket, (unsigned long long)e.offset);
  drop_({key});  // whether the master heard it or not, this copy is never served
  return rc;
}

ErrorCode SsdStoreImpl::ReadChecked(const SsdBucket& file, const Entry& e, uint64_t offset,
                                    char* dest, uint64_t length) {
  if (length == 0) return ErrorCode::OK;
  // The check blocks the range touches are read and checked whole.
  const uint64_t first_block = offset / kSsdCheckBlock;
  const uint64_t last_block = (offset + length - 1) / kSsdCheckBlock;
  const uint64_t span_begin = first_block * kSsdCheckBlock;
  const uint64_t span_end = std::min((last_block + 1) * kSsdCheckBlock, e.length);
  const uint64_t span = span_end - span_begin;
  // Straight into dest when the range is the span and, with O_DIRECT, dest is aligned; the
  // last page of a value that ends mid-page then goes through a page of its own (dest has
  // no room for the padding).
  const bool into_dest = span_begin == offset && span_end == offset + length &&
                         (!direct_ || IsPageAligned(dest));
  thread_local AlignedBuffer kept;
  AlignedBuffer own;
  char* target = dest;
  if (!into_dest) {
    const size_t need = RoundUpToPage(span);
    if (need <= kKeptBounceBytes) {
      if (kept.size() < need) kept = AlignedBuffer(need);
      target = kept.data();
    } else {
      own = AlignedBuffer(need);
      target = own.data();
    }
  }
  // [0, body) of the span is read into target; with O_DIRECT into dest, the rest (< a page)
  // into tail_page.
  uint64_t body = span;
  if (direct_) body = into_dest ? (span & ~(kSsdPage - 1)) : RoundUpToPage(span);
  alignas(kSsdPage) static thread_local char tail_page[kSsdPage];
  std::vector<IoOp> ops;
  ops.reserve(body / kReadChunk + 2);
  const uint64_t file_at = e.offset + span_begin;
  for (uint64_t at = 0; at < body; at += kReadChunk) {
    IoOp op;
    op.fd = file.data_fd();
    op.buffer = target + at;
    op.length = static_cast<uint32_t>(std::min<uint64_t>(kReadChunk, body - at));
    op.offset = file_at + at;
    ops.push_back(op);
  }
  const bool tail = direct_ && into_dest && body < span;
  if (tail) {
    IoOp op;
    op.fd = file.data_fd();
    op.buffer = tail_page;
    op.length = kSsdPage;
    op.offset = file_at + body;
    ops.push_back(op);
  }
  // Each check block is checked as soon as the op that brought it in ends, while the
  // others are still in flight; one that spans the tail page, once everything is in.
  const uint64_t blocks = last_block - first_block + 1;
  std::vector<bool> checked(blocks, false);
  bool corrupt = false;
  auto check = [&](uint64_t k) {
    const uint64_t from = (first_block + k) * kSsdCheckBlock - span_begin;
    const uint64_t n = std::min(kSsdCheckBlock, span - from);
    checked[k] = true;
    if (Crc32c(target + from, n) != e.block_crcs[first_block + k]) corrupt = true;
  };
  RingPool::Lease ring = read_rings_.Acquire();
  if (ring.get() == nullptr) return ErrorCode::FILE_READ_FAIL;
  IoRing* r = ring.get();
  size_t next = 0;
  ErrorCode rc = ErrorCode::OK;
  while (next < ops.size() || r->in_flight() > 0) {
    while (next < ops.size() && r->in_flight() < r->depth()) r->Start(&ops[next++]);
    IoOp* op = r->WaitOne();
    if (op == nullptr) {
      rc = ErrorCode::FILE_READ_FAIL;
      break;
    }
    if (op->error == ENODATA) {
      rc = ErrorCode::CHECKSUM_MISMATCH;  // the file ends before the object does
    } else if (op->error != 0 || op->done != op->length) {
      if (rc == ErrorCode::OK) rc = ErrorCode::FILE_READ_FAIL;
      MC_LOG_WARN("ssd: reading bucket %llu: %s", (unsigned long long)e.bucket,
                  std::strerror(op->error != 0 ? op->error : EIO));
    } else if (op->buffer != tail_page && rc == ErrorCode::OK) {
      const uint64_t from = static_cast<uint64_t>(op->buffer - target);
      const uint64_t to = std::min<uint64_t>(from + op->length, span);
      for (uint64_t k = (from + kSsdCheckBlock - 1) / kSsdCheckBlock; k < blocks; ++k) {
        const uint64_t block_end = std::min((k + 1) * kSsdCheckBlock, span);
        if (block_end > to) break;
        check(k);
      }
    }
  }
  if (rc != ErrorCode::OK) return rc;
  if (tail) std::memcpy(target + body, tail_page, span - body);
  for (uint64_t k = 0; k < blocks; ++k) {
    if (!checked[k]) check(k);
  }
  if (corrupt) return ErrorCode::CHECKSUM_MISMATCH;
  if (target != dest) std::memcpy(dest, target + (offset - span_begin), length);
  return ErrorCode::OK;
}

}  // namespace mooncake
