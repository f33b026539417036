#include "master/log/oplog.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include "common/base/crc32c.h"
#include "common/base/little_endian.h"
#include "common/base/logging.h"
#include "common/base/private_dir.h"

namespace mooncake {

namespace {

constexpr size_t kFrameHead = 12;  // length u32 + seq u64, what precedes the payload
constexpr auto kRetryInterval = std::chrono::milliseconds(100);
constexpr char kSuffix[] = ".log";
constexpr size_t kSeqDigits = 20;
constexpr uint64_t kMaxPreallocate = 1ull << 30;

thread_local uint64_t t_last_appended = 0;

std::string ErrnoText(int err) { return std::system_category().message(err); }

std::string FileName(uint64_t first_seq) {
  char name[kSeqDigits + sizeof(kSuffix)];
  snprintf(name, sizeof(name), "%020" PRIu64 "%s", first_seq, kSuffix);
  return name;
}

// True for "<20 digits>.log" naming a seq >= 1 (Start never names a file 0).
bool ParseFileName(const std::string& name, uint64_t* seq) {
  auto digit = [](unsigned char c) { return std::isdigit(c) != 0; };
  if (name.size() != kSeqDigits + strlen(kSuffix) || name.compare(kSeqDigits, -1, kSuffix) != 0 ||
      !std::all_of(name.begin(), name.begin() + kSeqDigits, digit)) {
    return false;
  }
  errno = 0;
  *seq = strtoull(name.c_str(), nullptr, 10);
  return errno == 0 && *seq != 0;  // ERANGE: 20 digits can name more than 2^64 - 1
}

struct LogFile {
  uint64_t first_seq;
  std::string path;
};

// The *.log files of dir, in sequence order. Logs nothing: stats() lists a directory that
// may not exist yet.
std::error_code ListLogFiles(const std::string& dir, std::vector<LogFile>* out) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    uint64_t seq;
    if (!ParseFileName(it->path().filename().string(), &seq)) continue;  // .cut, .discarded, ...
    out->push_back({seq, it->path().string()});
  }
  std::sort(out->begin(), out->end(),
            [](const LogFile& a, const LogFile& b) { return a.first_seq < b.first_seq; });
  return ec;
}

// What Recover and DiscardAll start with.
ErrorCode CreateAndList(const std::string& dir, std::vector<LogFile>* out) {
  std::error_code ec;
  if (!MakePrivateDirectories(dir, "the operation log's directory")) {
    ec = std::error_code(errno, std::generic_category());
  }
  if (!ec) ec = ListLogFiles(dir, out);
  if (!ec) return ErrorCode::OK;
  MC_LOG_ERROR("oplog: cannot create or list %s: %s", dir.c_str(), ec.message().c_str());
  return ErrorCode::FILE_OPEN_FAIL;
}

// fsync(2) of path, after cutting it to length bytes when length >= 0: how a truncation
// becomes durable, and a directory's new and renamed entries.
bool SyncPath(const std::string& path, int flags, off_t length = -1) {
  const int fd = open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = (length < 0 || ftruncate(fd, length) == 0) && fsync(fd) == 0;
  close(fd);
  return ok;
}

bool SyncDir(const std::string& dir) { return SyncPath(dir, O_RDONLY | O_DIRECTORY); }

// Renames files[from..] to <path><suffix>, stopping at the first failure (errno says why).
bool RenameAll(const std::vector<LogFile>& files, size_t from, const char* suffix) {
  for (size_t i = from; i < files.size(); ++i) {
    if (rename(files[i].path.c_str(), (files[i].path + suffix).c_str()) != 0) return false;
  }
  return true;
}

// pwrite(2) until all is written: it may write less than asked, or be interrupted.
bool PwriteAll(int fd, const char* p, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t w = pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return true;
}

// Writes zeros into fd from *size up to `to`, advancing *size as chunks land (so that after
// a failure it still says how far the file surely holds zeros).
bool WriteZeros(int fd, uint64_t* size, uint64_t to) {
  static const char zeros[64 << 10] = {};
  while (*size < to) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(sizeof(zeros), to - *size));
    if (!PwriteAll(fd, zeros, n, *size)) return false;
    *size += n;
  }
  return true;
}

// n rounded up to a multiple of step (step > 0, at most kMaxPreallocate: no overflow for
// any file size this log reaches).
uint64_t RoundUp(uint64_t n, uint64_t step) { return (n + step - 1) / step * step; }

bool AllZero(const char* p, size_t n) {
  return std::all_of(p, p + n, [](char c) { return c == 0; });
}

bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);  // opened at the end: tellg is the size
  const std::streamoff size = in ? static_cast<std::streamoff>(in.tellg()) : -1;
  if (size < 0) return false;
  out->resize(static_cast<size_t>(size));
  return static_cast<bool>(in.seekg(0).read(&(*out)[0], size));
}

std::string EncodeHeader(uint64_t first_seq) {
  std::string header(OpLog::kMagic, sizeof(OpLog::kMagic));
  AppendLittleEndian(&header, first_seq, 8);
  AppendLittleEndian(&header, OpLog::kFormatVersion, 4);
  AppendLittleEndian(&header, Crc32c(header.data(), header.size()), 4);
  return header;
}

// Append leaves each frame's CRC zero so that checksumming happens here, off the lock.
void FillCrcs(std::string* frames) {
  for (size_t pos = 0; pos < frames->size();) {
    const char* p = frames->data() + pos;
    const size_t body = kFrameHead + GetLittleEndian(&p, 4);
    char* crc_at = &(*frames)[pos + body];
    PutLittleEndian(&crc_at, Crc32c(frames->data() + pos, body), 4);
    pos += body + 4;
  }
}

// Where replay stopped inside one file, and why (reason null: it ran to the end of the
// file's records, offset its logical size: where the zero tail starts, or the file's end).
struct Cut {
  const char* reason = nullptr;
  uint64_t offset = 0;
};

// Replays data, the contents of file, advancing *last (the last seq replayed, after_seq
// before the first) and *replayed.
Cut ReplayFile(const LogFile& file, const std::string& data, uint64_t after_seq,
               const OpLog::ApplyFn& apply, uint64_t* last, uint64_t* replayed) {
  if (data.size() < OpLog::kHeaderBytes) return {"torn header", 0};
  if (memcmp(data.data(), OpLog::kMagic, sizeof(OpLog::kMagic)) != 0) return {"bad magic", 0};
  const char* p = data.data() + sizeof(OpLog::kMagic);
  const uint64_t first_seq = GetLittleEndian(&p, 8);
  const uint64_t version = GetLittleEndian(&p, 4);
  const uint64_t header_crc = GetLittleEndian(&p, 4);
  if (header_crc != Crc32c(data.data(), OpLog::kHeaderBytes - 4)) return {"bad header checksum", 0};
  if (version != OpLog::kFormatVersion) return {"unknown format version", 0};
  if (first_seq != file.first_seq) return {"header seq differs from the file name", 0};

  size_t pos = OpLog::kHeaderBytes;
  while (pos < data.size()) {
    const size_t left = data.size() - pos;
    const char* f = data.data() + pos;
    const size_t head = std::min(left, kFrameHead);
    if (AllZero(f, head)) {  // no frame has seq 0: the preallocated tail, if zeros only
      if (AllZero(f + head, left - head)) break;
      return {"zero frame head before non-zero bytes", pos};
    }
    if (left < kFrameHead) return {"torn frame", pos};
    const uint64_t length = GetLittleEndian(&f, 4);
    const uint64_t seq = GetLittleEndian(&f, 8);
    if (length > OpLog::kMaxPayload) return {"payload length above 64 MiB", pos};
    if (left < OpLog::kFrameOverhead + length) return {"torn frame", pos};
    const char* crc_at = f + length;
    if (GetLittleEndian(&crc_at, 4) != Crc32c(data.data() + pos, kFrameHead + length)) {
      return {"checksum mismatch", pos};
    }
    if (pos == OpLog::kHeaderBytes && seq != first_seq) return {"first seq is not the name's", pos};
    // Before replay begins, records the snapshot holds are skipped; from then on every
    // record must be the next one.
    if (seq > after_seq || *replayed > 0) {
      if (seq != *last + 1) return {"gap in the sequence", pos};
      if (!apply(seq, std::string_view(f, length))) return {"apply rejected the record", pos};
      *last = seq;
      ++*replayed;
    }
    pos += OpLog::kFrameOverhead + length;
  }
  return {nullptr, pos};
}

// Cuts the log at files[i], cut.offset: truncates that file there (or sets it aside when
// only its header would be left, so that its name stays free for Start), and sets aside
// every later file.
ErrorCode CutLog(const std::string& dir, const std::vector<LogFile>& files, size_t i,
                 uint64_t file_size, const Cut& cut, uint64_t last) {
  const bool whole = cut.offset <= OpLog::kHeaderBytes;
  const bool ok = (whole || SyncPath(files[i].path, O_WRONLY, static_cast<off_t>(cut.offset))) &&
                  RenameAll(files, whole ? i : i + 1, ".cut") && SyncDir(dir);
  if (!ok) {
    MC_LOG_ERROR("oplog: cannot cut the log at %s, byte %" PRIu64 ": %s", files[i].path.c_str(),
                 cut.offset, ErrnoText(errno).c_str());
    return ErrorCode::FILE_WRITE_FAIL;
  }
  MC_LOG_WARN("oplog: %s: %s at byte %" PRIu64 "; cut %" PRIu64 " byte(s) there (%s) and %zu "
              "later file(s) (renamed *.cut); the log ends at seq %" PRIu64,
              files[i].path.c_str(), cut.reason, cut.offset, file_size - cut.offset,
              whole ? "the whole file, renamed *.cut" : "truncated",
              files.size() - i - 1, last);
  return ErrorCode::OK;
}

}  // namespace

OpLog::OpLog(OpLogOptions options)
    : options_(std::move(options)),
      tail_(options_.tail_bytes > 0 ? std::make_unique<LogTail>(options_.tail_bytes) : nullptr) {}

OpLog::~OpLog() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  flusher_cv_.Signal();
  if (flusher_.joinable()) flusher_.join();
  if (fd_ >= 0) close(fd_);
}

Result<uint64_t> OpLog::Recover(uint64_t after_seq, const ApplyFn& apply) {
  {
    absl::MutexLock lock(&mu_);
    if (started_ || options_.dir.empty()) return ErrorCode::INVALID_PARAMS;
  }
  std::vector<LogFile> files;
  ErrorCode code = CreateAndList(options_.dir, &files);
  if (code != ErrorCode::OK) return code;
  uint64_t last = after_seq, replayed = 0;
  // The tail starts with what the log still has, so a restarted master serves it.
  const ApplyFn feed_tail = [&](uint64_t seq, std::string_view payload) {
    if (!apply(seq, payload)) return false;
    tail_->Add(seq, payload);
    return true;
  };
  const ApplyFn& replay = tail_ != nullptr ? feed_tail : apply;
  std::string data;
  std::string kept;  // the last file left with records in it
  for (size_t i = 0; i < files.size(); ++i) {
    if (!ReadWholeFile(files[i].path, &data)) {
      MC_LOG_ERROR("oplog: cannot read %s: %s", files[i].path.c_str(), ErrnoText(errno).c_str());
      return ErrorCode::FILE_READ_FAIL;
    }
    const Cut cut = ReplayFile(files[i], data, after_seq, replay, &last, &replayed);
    if (cut.reason != nullptr) {
      code = CutLog(options_.dir, files, i, data.size(), cut, last);
      if (code != ErrorCode::OK) return code;
      if (cut.offset > kHeaderBytes) kept = files[i].path;
      break;
    }
    // A crash right after a file was created leaves it with its header only (and maybe
    // zeros); its name is the one the next Start wants.
    if (cut.offset == kHeaderBytes) {
      if (unlink(files[i].path.c_str()) != 0) {
        MC_LOG_ERROR("oplog: cannot delete the empty %s: %s", files[i].path.c_str(),
                     ErrnoText(errno).c_str());
        return ErrorCode::FILE_WRITE_FAIL;
      }
    } else {
      kept = files[i].path;
    }
  }
  // Only the last file can hold what no fdatasync covered (zeros extended after its last
  // flush, records of a killed process): make it durable before a later file exists.
  if (!kept.empty() && !SyncPath(kept, O_RDONLY)) {
    MC_LOG_ERROR("oplog: cannot fsync %s: %s", kept.c_str(), ErrnoText(errno).c_str());
    return ErrorCode::FILE_WRITE_FAIL;
  }
  MC_LOG_INFO("oplog: replayed %" PRIu64 " record(s) after seq %" PRIu64
              " from %s; the log ends at seq %" PRIu64,
              replayed, after_seq, options_.dir.c_str(), last);
  absl::MutexLock lock(&mu_);
  recovered_ = true;
  recovered_last_ = last;
  return last;
}

ErrorCode OpLog::DiscardAll() {
  {
    absl::MutexLock lock(&mu_);
    if (started_ || options_.dir.empty()) return ErrorCode::INVALID_PARAMS;
  }
  std::vector<LogFile> files;
  const ErrorCode code = CreateAndList(options_.dir, &files);
  if (code != ErrorCode::OK) return code;
  if (!files.empty()) {
    if (!RenameAll(files, 0, ".discarded") || !SyncDir(options_.dir)) {
      MC_LOG_ERROR("oplog: cannot discard the files of %s: %s", options_.dir.c_str(),
                   ErrnoText(errno).c_str());
      return ErrorCode::FILE_WRITE_FAIL;
    }
    MC_LOG_WARN("oplog: discarded %zu file(s) of %s (renamed *.discarded): no snapshot to "
                "replay them on", files.size(), options_.dir.c_str());
  }
  absl::MutexLock lock(&mu_);
  recovered_ = true;
  recovered_last_ = 0;
  return ErrorCode::OK;
}

ErrorCode OpLog::Start(uint64_t last) {
  if (options_.flush_interval_ms < 1 || options_.sync_timeout_ms < 0 || options_.file_bytes == 0 ||
      options_.preallocate_bytes > kMaxPreallocate) {
    return ErrorCode::INVALID_PARAMS;
  }
  // Nobody appends before Start returns, so the file I/O under mu_ delays no one.
  absl::MutexLock lock(&mu_);
  if (started_ || !recovered_ || last < recovered_last_) return ErrorCode::INVALID_PARAMS;
  std::string error;
  const ErrorCode code = OpenFile(last + 1, &error);
  if (code != ErrorCode::OK) {
    MC_LOG_ERROR("oplog: %s", error.c_str());
    return code;
  }
  last_.store(last, std::memory_order_release);
  synced_.store(last, std::memory_order_release);
  if (tail_ != nullptr && tail_->last() != last) tail_->Reset(last);
  try {
    flusher_ = std::thread([this] { FlusherLoop(); });
  } catch (const std::system_error& e) {
    MC_LOG_ERROR("oplog: cannot start the flusher thread: %s", e.what());
    close(fd_);
    fd_ = -1;
    unlink(file_path_.c_str());  // so that a later Start can create it again
    return ErrorCode::PERSISTENT_FAIL;
  }
  started_ = true;
  return ErrorCode::OK;
}

ErrorCode OpLog::Rebase(uint64_t last) {
  absl::MutexLock lock(&mu_);
  if (!started_) return ErrorCode::INVALID_PARAMS;
  while (flushing_) synced_cv_.Wait(&mu_);  // the flusher owns the file meanwhile
  // What is pending belongs to the history being given up: it need not reach the disk,
  // but the file is renamed below, so nothing half-written may follow.
  pending_.clear();
  batch_.clear();
  flushing_ = true;  // keeps Sync and the flusher off the file while it is replaced
  mu_.Unlock();
  std::vector<LogFile> files;
  ErrorCode code = CreateAndList(options_.dir, &files);
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  std::string error;
  if (code == ErrorCode::OK && !files.empty() &&
      (!RenameAll(files, 0, ".discarded") || !SyncDir(options_.dir))) {
    error = "cannot discard the files of " + options_.dir + ": " + ErrnoText(errno);
    code = ErrorCode::FILE_WRITE_FAIL;
  }
  if (code == ErrorCode::OK) code = OpenFile(last + 1, &error);
  mu_.Lock();
  flushing_ = false;
  if (code == ErrorCode::OK) {
    last_.store(last, std::memory_order_release);
    synced_.store(last, std::memory_order_release);
    if (tail_ != nullptr) tail_->Reset(last);
    failing_ = false;
    healthy_.store(true, std::memory_order_release);
    MC_LOG_INFO("oplog: %s rebased: %zu old file(s) discarded, continuing after seq %" PRIu64,
                options_.dir.c_str(), files.size(), last);
  } else {
    // No file to write to: every flush fails until a Rebase succeeds.
    failing_ = true;
    healthy_.store(false, std::memory_order_release);
    MC_LOG_ERROR("oplog: rebase of %s failed: %s", options_.dir.c_str(), error.c_str());
  }
  synced_cv_.SignalAll();
  return code;
}

uint64_t OpLog::Append(std::string_view payload) {
  if (payload.size() > kMaxPayload) return 0;
  char head[kFrameHead];
  char* p = head;
  PutLittleEndian(&p, payload.size(), 4);
  uint64_t seq;
  {
    absl::MutexLock lock(&mu_);
    if (!started_) return 0;
    seq = last_.load(std::memory_order_relaxed) + 1;
    PutLittleEndian(&p, seq, 8);
    pending_.append(head, kFrameHead);
    pending_.append(payload.data(), payload.size());
    pending_.append(4, '\0');  // the CRC, which the flush fills in
    last_.store(seq, std::memory_order_release);
    if (tail_ != nullptr) tail_->Add(seq, payload);  // under mu_: in seq order
  }
  t_last_appended = seq;
  return seq;
}

uint64_t OpLog::LastAppendedByThisThread() { return t_last_appended; }

ErrorCode OpLog::Sync(uint64_t seq) {
  if (seq <= synced()) return ErrorCode::OK;
  absl::MutexLock lock(&mu_);
  if (seq > last()) return ErrorCode::INVALID_PARAMS;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.sync_timeout_ms);
  while (synced() < seq) {
    // The first to find no flush running writes everything pending itself, on its own
    // thread: no thread to wake and none to wake it, the cost a request would otherwise
    // pay twice. A failing disk is left to the flusher's retries.
    if (!flushing_ && !failing_ && started_) {
      FlushLocked();
    } else if (synced_cv_.WaitWithTimeout(
                   &mu_, absl::FromChrono(deadline - std::chrono::steady_clock::now())) &&
               synced() < seq) {
      return ErrorCode::PERSISTENT_FAIL;
    }
  }
  return ErrorCode::OK;
}

void OpLog::FlusherLoop() {
  const auto interval = std::chrono::milliseconds(options_.flush_interval_ms);
  absl::MutexLock lock(&mu_);
  while (true) {
    // Syncs do not wake it: they flush themselves, and a disk that refuses is retried at
    // its own pace. A flush that leaves little room does, to have the file extended.
    const absl::Time deadline =
        absl::Now() + absl::FromChrono(failing_ ? kRetryInterval : interval);
    while (!stopping_ && !extend_wanted_ && !flusher_cv_.WaitWithDeadline(&mu_, deadline)) {
    }
    const bool stop = stopping_;
    while (flushing_) synced_cv_.Wait(&mu_);  // one flush at a time
    // Extending first lets the flush below (if anything is pending) sync the zeros.
    if (extend_wanted_ && !stop) ExtendLocked();
    const bool ok = FlushLocked();
    if (stop) {
      if (!ok) {
        MC_LOG_ERROR("oplog: stopped with records %" PRIu64 "..%" PRIu64 " not on disk",
                     synced() + 1, batch_last_);
      }
      return;
    }
  }
}

bool OpLog::FlushLocked() {
  // Records appended while the last write failed join the records it kept: they are
  // written again, together, in order.
  if (batch_.empty()) {
    batch_.swap(pending_);  // pending_ gets the old batch's buffer: no allocation
  } else {
    batch_.append(pending_);
    pending_.clear();
  }
  if (batch_.empty()) return true;
  flushing_ = true;
  batch_last_ = last();
  mu_.Unlock();
  FillCrcs(&batch_);
  std::string error;
  const bool ok = Flush(&error);
  mu_.Lock();
  flushing_ = false;
  if (ok) {
    synced_.store(batch_last_, std::memory_order_release);
    batch_.clear();
    if (failing_) MC_LOG_INFO("oplog: writes succeed again; synced through %" PRIu64, batch_last_);
    failing_ = false;
    if (low_room_ && !extend_wanted_) {
      extend_wanted_ = true;
      flusher_cv_.Signal();
    }
  } else {
    failed_flushes_.fetch_add(1, std::memory_order_relaxed);
    if (!failing_) {
      MC_LOG_ERROR("oplog: %s; records %" PRIu64 "..%" PRIu64
                   " stay in memory, retrying every %lld ms", error.c_str(), synced() + 1,
                   batch_last_, static_cast<long long>(kRetryInterval.count()));
    }
    failing_ = true;
  }
  healthy_.store(ok, std::memory_order_release);
  synced_cv_.SignalAll();  // synced moved, or the flush is free again
  return ok;
}

bool OpLog::Flush(std::string* error) {
  // Drops what a failed write left past the durable length, so that no torn frame is ever
  // followed by records (a later fdatasync would make them durable behind it). The zeros
  // go with it: the next attempt extends again.
  auto cut_back = [&] {
    if (ftruncate(fd_, static_cast<off_t>(file_bytes_)) == 0) {
      dirty_ = false;
      alloc_bytes_ = file_bytes_;
    }
    return !dirty_;
  };
  auto fail = [&](const char* step) {
    *error = std::string(step) + " " + file_path_ + ": " + ErrnoText(errno);
    cut_back();  // if even that fails, the next attempt tries again before writing
    return false;
  };
  if (dirty_ && !cut_back()) return fail("ftruncate");
  const bool full = file_bytes_ >= options_.file_bytes;
  if (full && OpenFile(synced() + 1, error) != ErrorCode::OK) return false;
  const uint64_t step = options_.preallocate_bytes;
  const uint64_t end = file_bytes_ + batch_.size();
  dirty_ = true;
  // Zeros ahead are an optimization: a disk without room for a whole step may still take
  // the records, written past the zeros as into any file. Until an extension succeeds
  // again, none is attempted here, so that a full disk is not filled with zeros and cut
  // back at every retry.
  if (step != 0 && end > alloc_bytes_ && !extend_failing_ && !Preallocate(end)) {
    MC_LOG_WARN("oplog: cannot preallocate %s: %s; writing without", file_path_.c_str(),
                ErrnoText(errno).c_str());
    extend_failing_ = true;
  }
  if (!PwriteAll(fd_, batch_.data(), batch_.size(), file_bytes_)) return fail("write");
  if (!DataSync(fd_)) return fail("fdatasync");
  file_bytes_ = end;
  alloc_bytes_ = std::max(alloc_bytes_, end);
  dirty_ = false;
  // A full file is never extended: the next flush starts a new one.
  low_room_ =
      step != 0 && file_bytes_ < options_.file_bytes && alloc_bytes_ - file_bytes_ < step / 2;
  return true;
}

void OpLog::ExtendLocked() {
  extend_wanted_ = false;
  if (failing_) return;  // the retried flush extends (or fails) itself
  flushing_ = true;
  mu_.Unlock();
  const uint64_t half = options_.preallocate_bytes / 2;
  const auto now = std::chrono::steady_clock::now();
  // After a failure, once a second: each attempt fills what room the disk has with zeros.
  const bool due = !extend_failing_ || now - last_extend_try_ >= std::chrono::seconds(1);
  if (due && !dirty_ && file_bytes_ < options_.file_bytes && alloc_bytes_ - file_bytes_ < half) {
    // A failure costs nothing yet: the flushes use the room left, then write past it.
    last_extend_try_ = now;
    const bool ok = Preallocate(file_bytes_ + half);
    if (!ok && !extend_failing_) {
      MC_LOG_WARN("oplog: cannot preallocate %s: %s", file_path_.c_str(), ErrnoText(errno).c_str());
    }
    extend_failing_ = !ok;
  }
  mu_.Lock();
  flushing_ = false;
  synced_cv_.SignalAll();  // the flush is free again
}

bool OpLog::Preallocate(uint64_t end) {
  const uint64_t before = alloc_bytes_;
  if (WriteZeros(fd_, &alloc_bytes_, RoundUp(end, options_.preallocate_bytes))) return true;
  // The zeros that did fit would take the room the records need.
  const int err = errno;
  if (ftruncate(fd_, static_cast<off_t>(std::max(before, file_bytes_))) == 0) {
    alloc_bytes_ = std::max(before, file_bytes_);
  }
  errno = err;
  return false;
}

bool OpLog::DataSync(int fd) {
  fdatasyncs_.fetch_add(1, std::memory_order_relaxed);
  return fdatasync(fd) == 0;
}

ErrorCode OpLog::OpenFile(uint64_t first_seq, std::string* error) {
  const std::string path = options_.dir + "/" + FileName(first_seq);
  // O_EXCL: a file of that name holds records of an earlier run; never write over it. No
  // O_APPEND: records go at the logical end (pwrite), before the preallocated zeros.
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kPrivateFileMode);
  if (fd < 0) {
    *error = "create " + path + ": " + ErrnoText(errno);
    return ErrorCode::FILE_OPEN_FAIL;
  }
  const std::string header = EncodeHeader(first_seq);
  const uint64_t prealloc = options_.preallocate_bytes;
  uint64_t size = kHeaderBytes;
  const char* step = nullptr;
  if (!PwriteAll(fd, header.data(), header.size(), 0)) {
    step = "write";
  } else if (prealloc != 0 && !WriteZeros(fd, &size, RoundUp(size, prealloc))) {
    step = "preallocate";
  } else if (!DataSync(fd)) {  // the header (and the zeros) durable before the name is
    step = "fdatasync";
  } else if (!SyncDir(options_.dir)) {
    step = "fsync the directory of";
  }
  if (step != nullptr) {
    *error = std::string(step) + " " + path + ": " + ErrnoText(errno);
    close(fd);
    unlink(path.c_str());  // a retry creates it again
    return ErrorCode::FILE_WRITE_FAIL;
  }
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
  file_path_ = path;
  file_bytes_ = kHeaderBytes;
  alloc_bytes_ = size;
  dirty_ = false;
  low_room_ = false;
  return ErrorCode::OK;
}

void OpLog::DropThrough(uint64_t seq) {
  std::vector<LogFile> files;
  const std::error_code ec = ListLogFiles(options_.dir, &files);
  if (ec) {
    MC_LOG_WARN("oplog: cannot list %s: %s", options_.dir.c_str(), ec.message().c_str());
    return;
  }
  // A file holds the seqs from its own first up to the next file's first - 1. The last
  // file's end is unknown (it is the one being appended to), so it always stays. Dropping
  // stops at a file that will not go, so the log stays one contiguous run of files.
  for (size_t i = 0; i + 1 < files.size() && files[i + 1].first_seq - 1 <= seq; ++i) {
    if (unlink(files[i].path.c_str()) != 0) {
      MC_LOG_WARN("oplog: cannot delete %s: %s", files[i].path.c_str(), ErrnoText(errno).c_str());
      return;
    }
  }
}

OpLogStats OpLog::stats() const {
  OpLogStats stats;
  std::vector<LogFile> files;
  ListLogFiles(options_.dir, &files);  // no directory yet: no files
  for (const LogFile& file : files) {
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(file.path, ec);
    if (ec) continue;  // dropped since the listing
    ++stats.files;
    stats.bytes += size;
  }
  stats.fdatasyncs = fdatasyncs_.load(std::memory_order_relaxed);
  stats.failed_flushes = failed_flushes_.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace mooncake
