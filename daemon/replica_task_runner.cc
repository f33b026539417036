#include "daemon/replicas/replica_task_runner.h"

#include <algorithm>
#include <memory>

#include "common/base/logging.h"

namespace mooncake {

ReplicaTaskRunner::~ReplicaTaskRunner() { Stop(); }

void ReplicaTaskRunner::Start() {
  // Copied but never reported at the end: one last try (the master's timeout settles the
  // rest).
  loop_.Start([this] { return RunRound(); },
              [this] {
                if (!unsent_.empty()) Report();
              });
}

void ReplicaTaskRunner::Stop() {
  if (!loop_.Stop()) return;
  Stats s = stats();
  if (s.done + s.failed > 0) {
    MC_LOG_INFO("replica tasks: %llu copies and moves done, %llu failed",
                static_cast<unsigned long long>(s.done),
                static_cast<unsigned long long>(s.failed));
  }
}

ReplicaTaskRunner::Stats ReplicaTaskRunner::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::chrono::milliseconds ReplicaTaskRunner::RunRound() {
  if (!unsent_.empty() && !Report()) return kIdle;
  rpc::ReplicaTasksResult batch;
  ErrorCode code = master_->FetchReplicaTasks(membership_->daemon_id(), kMaxTasks, &batch);
  if (code == ErrorCode::CLIENT_NOT_FOUND) membership_->Reregister();
  if (code != ErrorCode::OK || batch.tasks.empty()) {  // also unreachable, or no tasks there
    std::chrono::milliseconds wait = idle_;
    idle_ = std::min(idle_ * 2, kIdleMax);
    return wait;
  }
  idle_ = kIdle;
  CopyAll(batch, &unsent_);
  Report();
  return kBusy;
}

void ReplicaTaskRunner::CopyAll(const rpc::ReplicaTasksResult& batch,
                                std::vector<rpc::ReplicaTaskOutcome>* outcomes) {
  const size_t n = batch.tasks.size();
  std::vector<std::vector<ReplicaTarget>> targets(n);
  std::vector<std::shared_ptr<SegmentMemory>> sources(n);  // held while copying from them
  std::vector<ValueSlice> slices;
  std::vector<size_t> sliced;  // the task of each slice
  std::vector<int32_t> codes(n, ToInt(ErrorCode::OK));
  for (size_t i = 0; i < n; ++i) {
    const rpc::ReplicaTaskAssignment& task = batch.tasks[i];
    uint64_t size = static_cast<uint64_t>(task.size);
    uint64_t from = static_cast<uint64_t>(task.source_offset);
    // The master's word on our own memory is checked all the same.
    sources[i] = membership_->Find(task.source_segment_id);
    if (sources[i] == nullptr || task.size <= 0 || task.source_offset < 0 ||
        !sources[i]->Contains(from, size)) {
      MC_LOG_WARN("replica task of '%.64s': the source (segment %lld, offset %lld) is not in "
                  "this daemon's memory",
                  task.key.c_str(), static_cast<long long>(task.source_segment_id),
                  static_cast<long long>(task.source_offset));
      codes[i] = ToInt(ErrorCode::SEGMENT_NOT_FOUND);
      continue;
    }
    ErrorCode resolved = io_->ResolveAll(task.targets, size, batch.master_epoch, &targets[i]);
    if (resolved != ErrorCode::OK) {
      codes[i] = ToInt(resolved);
      continue;
    }
    slices.push_back(ValueSlice{&targets[i], 0, sources[i]->base() + from, size});
    sliced.push_back(i);
  }
  io_->WriteAll(&slices, std::chrono::steady_clock::now() + kCopyBudget);
  for (size_t k = 0; k < slices.size(); ++k) codes[sliced[k]] = ToInt(slices[k].result);
  for (size_t i = 0; i < n; ++i) {
    rpc::ReplicaTaskOutcome outcome;
    outcome.id_high = batch.tasks[i].id_high;
    outcome.id_low = batch.tasks[i].id_low;
    outcome.code = codes[i];
    outcomes->push_back(outcome);
  }
}

bool ReplicaTaskRunner::Report() {
  std::vector<ErrorCode> answers;
  ErrorCode code =
      master_->CompleteReplicaTasks(membership_->daemon_id(), unsent_, &answers);
  if (code == ErrorCode::RPC_FAIL) return false;  // kept: the next round sends it first
  uint64_t done = 0, failed = 0;
  for (size_t i = 0; i < unsent_.size(); ++i) {
    bool ok = code == ErrorCode::OK && unsent_[i].code == 0 && answers[i] == ErrorCode::OK;
    (ok ? done : failed) += 1;
  }
  if (code != ErrorCode::OK) {
    MC_LOG_WARN("CompleteReplicaTasks of %zu tasks: %s; the master's timeout settles them",
                unsent_.size(), ErrorName(code));
  }
  unsent_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  stats_.done += done;
  stats_.failed += failed;
  return true;
}

}  // namespace mooncake
