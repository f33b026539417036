#include "daemon/ssd_tier/offloader.h"

#include <cstdlib>
#include <cstring>

#include "common/base/crc32c.h"
#include "common/base/logging.h"

namespace mooncake {

namespace {

// Values are staged at this alignment, so that the store may write them with O_DIRECT
// straight from the staging buffer.
constexpr uint64_t kStagingAlign = 4096;

uint64_t AlignUp(uint64_t n) { return (n + kStagingAlign - 1) / kStagingAlign * kStagingAlign; }

}  // namespace

Offloader::Offloader(MasterClient* master, Membership* membership, SsdTier* tier,
                     Options options)
    : master_(master), membership_(membership), tier_(tier), options_(options) {}

Offloader::~Offloader() { Stop(); }

void Offloader::Start() {
  // What was written but never reported at the end: one last try (the next start's
  // registration settles the rest).
  loop_.Start([this] { return RunRound(); },
              [this] {
                if (!unsent_.keys.empty()) SendReport(&unsent_);
              });
}

void Offloader::Stop() {
  if (!loop_.Stop()) return;
  Stats s = stats();
  MC_LOG_INFO("offloader stopped: %llu objects (%llu bytes) offloaded, %llu failed, %llu "
              "forgotten (changed meanwhile)",
              static_cast<unsigned long long>(s.offloaded),
              static_cast<unsigned long long>(s.bytes), static_cast<unsigned long long>(s.failed),
              static_cast<unsigned long long>(s.forgotten));
}

Offloader::Stats Offloader::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::chrono::milliseconds Offloader::RunRound() {
  const std::chrono::milliseconds idle(options_.idle_ms);
  const std::chrono::milliseconds later(1000);
  if (!unsent_.keys.empty() && !SendReport(&unsent_)) return idle;
  if (membership_->disk_segment_id() == 0) return idle;  // not mounted yet
  // The lease runs from the master's reply; counting from before the request is safe.
  const auto asked = std::chrono::steady_clock::now();
  rpc::OffloadTasksResult result;
  ErrorCode code = master_->FetchOffloads(membership_->daemon_id(), options_.max_tasks, &result);
  switch (code) {
    case ErrorCode::OK:
      break;
    case ErrorCode::CLIENT_NOT_FOUND:
      membership_->Reregister();
      return idle;
    case ErrorCode::SEGMENT_NOT_FOUND:
      tier_->MountAgain();
      return later;
    case ErrorCode::RPC_FAIL:
      return idle;
    case ErrorCode::NOT_SUPPORTED:
      if (!said_not_supported_) {
        MC_LOG_WARN("the master does not support offloads to SSD: asking again every second");
        said_not_supported_ = true;
      }
      return later;
    default:
      MC_LOG_WARN("FetchOffloads: %s", ErrorName(code));
      return later;
  }
  if (result.tasks.empty()) return idle;
  const auto lease_end = asked + std::chrono::milliseconds(result.lease_ttl_ms);
  std::vector<Job> jobs(result.tasks.size());
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].task = std::move(result.tasks[i]);
  for (size_t begin = 0; begin < jobs.size();) {
    size_t end = begin;
    uint64_t bytes = 0;
    while (end < jobs.size()) {
      uint64_t size = AlignUp(static_cast<uint64_t>(std::max<int64_t>(jobs[end].task.size, 0)));
      if (end > begin && bytes + size > options_.batch_bytes) break;
      bytes += size;
      ++end;
    }
    RunBatch(&jobs, begin, end, result.master_epoch, lease_end);
    begin = end;
  }
  if (staging_size_ > options_.batch_bytes) {  // one large object: do not keep its buffer
    staging_.reset();
    staging_size_ = 0;
  }
  return std::chrono::milliseconds(options_.busy_ms);
}

char* Offloader::Staging(uint64_t bytes) {
  if (bytes <= staging_size_) return staging_.get();
  staging_.reset();
  staging_size_ = 0;
  uint64_t size = std::max(bytes, options_.batch_bytes);
  void* p = nullptr;
  if (posix_memalign(&p, kStagingAlign, size) != 0) return nullptr;
  staging_ = std::unique_ptr<char, void (*)(void*)>(static_cast<char*>(p), std::free);
  staging_size_ = size;
  return staging_.get();
}

void Offloader::RunBatch(std::vector<Job>* jobs, size_t begin, size_t end, int64_t master_epoch,
                         std::chrono::steady_clock::time_point lease_end) {
  EpochGate* gate = membership_->epoch_gate();
  uint64_t bytes = 0;
  for (size_t i = begin; i < end; ++i) {
    bytes += AlignUp(static_cast<uint64_t>(std::max<int64_t>((*jobs)[i].task.size, 0)));
  }
  char* staging = Staging(std::max<uint64_t>(bytes, kStagingAlign));
  std::vector<SsdStore::WriteItem> items;
  std::vector<size_t> written;  // items[k] is (*jobs)[written[k]]
  uint64_t at = 0;
  for (size_t i = begin; i < end; ++i) {
    Job& job = (*jobs)[i];
    const rpc::OffloadTask& t = job.task;
    std::shared_ptr<SegmentMemory> segment = membership_->Find(t.segment_id);
    if (staging == nullptr) {
      job.result = ErrorCode::FILE_WRITE_FAIL;  // no memory to stage it in
    } else if (segment == nullptr) {
      job.result = ErrorCode::SEGMENT_NOT_FOUND;
    } else if (t.size < 0 || t.offset < 0 ||
               !segment->Contains(static_cast<uint64_t>(t.offset), static_cast<uint64_t>(t.size))) {
      job.result = ErrorCode::INVALID_PARAMS;
    } else if (!gate->Accepts(master_epoch)) {
      job.result = ErrorCode::LEASE_EXPIRED;
    }
    if (job.result != ErrorCode::OK) continue;
    char* into = staging + at;
    std::memcpy(into, segment->base() + t.offset, static_cast<size_t>(t.size));
    at += AlignUp(static_cast<uint64_t>(t.size));
    SsdStore::WriteItem item;
    item.object.key = t.key;
    item.object.size = static_cast<uint64_t>(t.size);
    item.object.checksum = t.checksum;
    item.data = into;
    items.push_back(std::move(item));
    written.push_back(i);
  }
  // Past the lease, or under a master we are no longer mounted at, the range may hold
  // another object's bytes by now: nothing of this copy may reach the SSD.
  const bool in_time =
      std::chrono::steady_clock::now() <= lease_end && gate->Accepts(master_epoch);
  std::vector<SsdStore::WriteItem> good;
  std::vector<size_t> good_jobs;
  for (size_t k = 0; k < items.size(); ++k) {
    Job& job = (*jobs)[written[k]];
    if (!in_time) {
      job.result = ErrorCode::LEASE_EXPIRED;
    } else if (job.task.checksum >= 0 &&
               Crc32c(items[k].data, items[k].object.size) !=
                   static_cast<uint32_t>(job.task.checksum)) {
      job.result = ErrorCode::CHECKSUM_MISMATCH;
      if (options_.reporter != nullptr) {
        options_.reporter->ReportMismatch(job.task.key, job.task.replica_id,
                                          static_cast<uint64_t>(job.task.size),
                                          static_cast<uint32_t>(job.task.checksum));
      }
    } else {
      good.push_back(std::move(items[k]));
      good_jobs.push_back(written[k]);
    }
  }
  std::unique_lock<std::mutex> reconcile = tier_->ReconcileLock();
  if (!good.empty()) tier_->store()->Write(&good);
  for (size_t k = 0; k < good.size(); ++k) (*jobs)[good_jobs[k]].result = good[k].result;
  size_t failures = 0;
  ErrorCode example = ErrorCode::OK;
  for (size_t i = begin; i < end; ++i) {
    const Job& job = (*jobs)[i];
    unsent_.keys.push_back(job.task.key);
    unsent_.replica_ids.push_back(job.task.replica_id);
    unsent_.codes.push_back(job.result);
    unsent_.sizes.push_back(static_cast<uint64_t>(std::max<int64_t>(job.task.size, 0)));
    if (job.result != ErrorCode::OK) {
      ++failures;
      example = job.result;
    }
  }
  if (failures > 0) {
    MC_LOG_WARN("offload: %zu of %zu objects not stored (%s, ...): their memory replicas stay",
                failures, end - begin, ErrorName(example));
  }
  SendReport(&unsent_);
}

bool Offloader::SendReport(Report* report) {
  std::vector<ErrorCode> answers;
  ErrorCode call = master_->ReportOffloads(membership_->daemon_id(), membership_->disk_segment_id(),
                                           report->keys, report->replica_ids, report->codes,
                                           &answers);
  if (call != ErrorCode::OK) return false;
  std::vector<std::string> forget;
  Stats delta;
  for (size_t i = 0; i < report->keys.size(); ++i) {
    if (report->codes[i] != ErrorCode::OK) {
      ++delta.failed;
    } else if (answers[i] == ErrorCode::OK) {
      ++delta.offloaded;
      delta.bytes += report->sizes[i];
    } else if (answers[i] == ErrorCode::OBJECT_NOT_FOUND ||
               answers[i] == ErrorCode::INVALID_PARAMS) {
      // Changed or gone meanwhile: the copy is of nothing the master holds.
      forget.push_back(report->keys[i]);
    }
    // Any other answer (-103, -101: the master lost us meanwhile): kept, and settled by the
    // registration that follows the re-mount.
  }
  delta.forgotten = forget.size();
  if (!forget.empty()) tier_->store()->Forget(forget);
  *report = Report{};
  std::lock_guard<std::mutex> lock(mu_);
  stats_.offloaded += delta.offloaded;
  stats_.bytes += delta.bytes;
  stats_.failed += delta.failed;
  stats_.forgotten += delta.forgotten;
  return true;
}

}  // namespace mooncake
