#include "master/ha/log_server.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/base/log_throttle.h"
#include "common/base/logging.h"
#include "master/snapshot/snapshot_format.h"
#include "master/snapshot/snapshot_store.h"

namespace mooncake {

namespace {

// Refused input: one line a second at most (a hostile peer may loop).
LogThrottle g_refusals;

void LogRefusal(const char* call, const std::string& standby, const char* why) {
  uint64_t passed_over = 0;
  if (!g_refusals.Due(&passed_over)) return;
  MC_LOG_WARN("replication: %s from %.64s refused: %s (%llu more refusals since the last line)",
              call, standby.c_str(), why, static_cast<unsigned long long>(passed_over));
}

}  // namespace

LogServer::LogServer(OpLog* oplog, Snapshotter* snapshotter, std::string snapshot_dir)
    : oplog_(oplog), snapshotter_(snapshotter), snapshot_dir_(std::move(snapshot_dir)) {}

void LogServer::Lead(int64_t term, SyncSet* sync_set) {
  absl::MutexLock lock(&mu_);
  term_ = term;
  sync_set_ = sync_set;
}

void LogServer::Stop() {
  absl::MutexLock lock(&mu_);
  sync_set_ = nullptr;
}

bool LogServer::ValidStandbyName(const std::string& name) {
  if (name.empty() || name.size() > 255) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == ':' || c == '-';
  });
}

SyncSet* LogServer::Leading(int32_t* code, int64_t* term) {
  absl::MutexLock lock(&mu_);
  *term = term_;
  if (sync_set_ == nullptr || !sync_set_->leading()) {
    *code = ToInt(ErrorCode::NOT_LEADER);
    return nullptr;
  }
  *code = ToInt(ErrorCode::OK);
  return sync_set_;
}

void LogServer::FollowLog(rpc::FollowLogResult& out, const std::string& standby,
                          int64_t from_seq, int64_t durable_seq, int64_t prev_crc,
                          int32_t max_bytes) {
  SyncSet* sync_set = Leading(&out.code, &out.term);
  if (sync_set == nullptr) return;
  if (!ValidStandbyName(standby) || from_seq < 1 || durable_seq < 0 || durable_seq >= from_seq ||
      prev_crc < -1 || prev_crc > int64_t{0xFFFFFFFF} || max_bytes < 1) {
    LogRefusal("FollowLog", standby, "a bad name, seq, crc or size");
    out.code = ToInt(ErrorCode::INVALID_PARAMS);
    return;
  }
  const uint64_t from = static_cast<uint64_t>(from_seq);
  LogTail* tail = oplog_->tail();
  std::vector<LogTail::Entry> entries;
  const LogTail::ReadResult read =
      tail->Read(from, static_cast<uint64_t>(std::min(max_bytes, kMaxPullBytes)), &entries);
  out.last_seq = static_cast<int64_t>(tail->last());
  uint32_t crc = 0;
  // A standby whose record before from_seq is not ours followed another history (an
  // earlier leader's unacknowledged tail): it starts again from a snapshot.
  const bool diverged = prev_crc >= 0 && from > 1 && tail->Crc(from - 1, &crc) &&
                        crc != static_cast<uint32_t>(prev_crc);
  if (read != LogTail::ReadResult::kOk || diverged) {
    out.bootstrap = true;
    MC_LOG_INFO("replication: standby %s asks from seq %llu, %s (tail ends at %lld): it "
                "must start from a snapshot",
                standby.c_str(), static_cast<unsigned long long>(from),
                diverged ? "after a record that is not ours"
                : read == LogTail::ReadResult::kGone ? "older than the tail"
                                                     : "past our end",
                static_cast<long long>(out.last_seq));
    return;
  }
  // Only a standby on our history reports what it holds.
  sync_set->Report(standby, static_cast<uint64_t>(durable_seq),
                   static_cast<uint64_t>(out.last_seq));
  out.records.resize(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    out.records[i].seq = static_cast<int64_t>(entries[i].seq);
    out.records[i].payload = *entries[i].payload;
  }
}

void LogServer::FetchSnapshot(rpc::FetchSnapshotResult& out, const std::string& standby,
                              const std::string& name, const std::string& file, int64_t offset,
                              int32_t max_bytes) {
  if (Leading(&out.code, &out.term) == nullptr) return;
  uint64_t sequence = 0;
  int64_t created_ms = 0;
  if (!ValidStandbyName(standby) || (!name.empty() && !ParseSnapshotName(name, &sequence, &created_ms)) ||
      (!file.empty() && (name.empty() || !snapshot_format::ValidToken(file))) || offset < 0 ||
      (!file.empty() && (max_bytes < 1 || max_bytes > kMaxChunkBytes))) {
    LogRefusal("FetchSnapshot", standby, "a bad name, file, offset or size");
    out.code = ToInt(ErrorCode::INVALID_PARAMS);
    return;
  }
  if (snapshotter_ == nullptr) {
    out.code = ToInt(ErrorCode::UNAVAILABLE_IN_CURRENT_MODE);
    return;
  }
  if (name.empty()) {
    SnapshotOutcome taken = snapshotter_->Request();
    out.code = ToInt(taken.code);
    out.name = taken.name;
    out.sequence = static_cast<int64_t>(taken.sequence);
    if (taken.code == ErrorCode::OK) {
      MC_LOG_INFO("replication: snapshot %s taken for standby %s", taken.name.c_str(),
                  standby.c_str());
    }
    return;
  }
  out.name = name;
  out.sequence = static_cast<int64_t>(sequence);
  if (!file.empty()) {
    ReadChunk(out, name, file, offset, max_bytes);
    return;
  }
  // Until a snapshot as new as this one has ended, it is still being written.
  const SnapshotOutcome last = snapshotter_->Last();
  uint64_t last_sequence = 0;
  int64_t last_ms = 0;
  if (!ParseSnapshotName(last.name, &last_sequence, &last_ms) ||
      std::make_pair(last_sequence, last_ms) < std::make_pair(sequence, created_ms)) {
    return;  // not ready
  }
  if (last.name == name && last.code != ErrorCode::OK) {
    out.code = ToInt(ErrorCode::PERSISTENT_FAIL);  // it failed: the standby asks again
    return;
  }
  std::vector<std::string> published = SnapshotStore(snapshot_dir_).Candidates();
  if (std::find(published.begin(), published.end(), name) == published.end()) {
    out.code = ToInt(ErrorCode::FILE_NOT_FOUND);  // pruned, or never ours
    return;
  }
  const std::string path = snapshot_dir_ + "/" + snapshot_format::kSnapshotsDir + "/" + name;
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) {
    out.code = ToInt(ErrorCode::FILE_NOT_FOUND);
    return;
  }
  while (struct dirent* entry = readdir(dir)) {
    std::string file_name = entry->d_name;
    if (entry->d_type == DT_REG && snapshot_format::ValidToken(file_name)) {
      out.files.push_back(file_name);
    }
  }
  closedir(dir);
  std::sort(out.files.begin(), out.files.end());
  out.ready = true;
}

void LogServer::ReadChunk(rpc::FetchSnapshotResult& out, const std::string& name,
                          const std::string& file, int64_t offset, int32_t max_bytes) {
  const std::string path =
      snapshot_dir_ + "/" + snapshot_format::kSnapshotsDir + "/" + name + "/" + file;
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) close(fd);
    out.code = ToInt(ErrorCode::FILE_NOT_FOUND);
    return;
  }
  out.file_size = st.st_size;
  const int64_t want = std::max<int64_t>(0, std::min<int64_t>(max_bytes, st.st_size - offset));
  out.data.resize(static_cast<size_t>(want));
  int64_t got = 0;
  while (got < want) {
    ssize_t n = pread(fd, &out.data[got], static_cast<size_t>(want - got), offset + got);
    if (n <= 0) break;
    got += n;
  }
  close(fd);
  if (got != want) {
    out.data.clear();
    out.code = ToInt(ErrorCode::FILE_READ_FAIL);
  }
}

}  // namespace mooncake
