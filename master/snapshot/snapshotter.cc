#include "master/snapshot/snapshotter.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/base/logging.h"
#include "master/snapshot/snapshot_codec.h"
#include "master/snapshot/snapshot_format.h"
#include "master/snapshot/snapshot_writer.h"

namespace mooncake {

namespace {

using Clock = std::chrono::steady_clock;

int64_t WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t MicrosSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count();
}

// The child's report: "ok <bytes> <objects>" or "error <code> <message>", one write below
// PIPE_BUF so that it arrives whole or not at all.
constexpr size_t kReportBytes = 1024;

void Report(int fd, const std::string& text) {
  std::string line = text.substr(0, kReportBytes - 1);
  ssize_t ignored = write(fd, line.data(), line.size());
  (void)ignored;  // a parent that stopped listening learns from the exit status
}

}  // namespace

Snapshotter::Snapshotter(MasterService* service, OpLog* oplog, SnapshotterOptions options)
    : service_(service), oplog_(oplog), options_(std::move(options)), store_(options_.dir) {}

Snapshotter::~Snapshotter() { Stop(); }

void Snapshotter::Start() {
  loop_ = std::thread([this] { Loop(); });
}

void Snapshotter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  loop_cv_.SignalAll();
  state_cv_.SignalAll();
  pid_t child = child_.load();
  if (child > 0) kill(child, SIGKILL);  // AwaitChild reaps it and removes its directory
  if (loop_.joinable()) loop_.join();
}

void Snapshotter::Loop() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    const absl::Time deadline = absl::Now() + absl::Milliseconds(options_.interval_ms);
    while (!stopping_ && !requested_ && !loop_cv_.WaitWithDeadline(&mu_, deadline)) {
    }
    if (stopping_) return;
    if (!requested_ && skip_periodic_ && skip_periodic_()) continue;
    requested_ = false;
    mu_.Unlock();
    Take();
    mu_.Lock();
  }
}

void Snapshotter::SetSkipPeriodic(std::function<bool()> skip) {
  absl::MutexLock lock(&mu_);
  skip_periodic_ = std::move(skip);
}

SnapshotOutcome Snapshotter::Request() {
  absl::MutexLock lock(&mu_);
  if (current_.running) return current_;  // join it
  uint64_t forks = forks_, ends = ends_;
  requested_ = true;
  loop_cv_.SignalAll();
  while (!stopping_ && forks_ == forks && ends_ == ends) state_cv_.Wait(&mu_);
  if (forks_ != forks && current_.running) return current_;
  if (ends_ != ends) return last_;  // it failed before forking, or has ended already
  SnapshotOutcome stopped;
  stopped.code = ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
  stopped.error = "the master is shutting down";
  return stopped;
}

SnapshotOutcome Snapshotter::Last() const {
  absl::MutexLock lock(&mu_);
  return last_;
}

SnapshotOutcome Snapshotter::Take() {
  absl::MutexLock one_at_a_time(&take_mu_);
  SnapshotOutcome outcome = Run();
  absl::MutexLock lock(&mu_);
  current_ = SnapshotOutcome();
  last_ = outcome;
  ++ends_;
  state_cv_.SignalAll();
  return outcome;
}

void Snapshotter::Forked(const SnapshotOutcome& so_far) {
  absl::MutexLock lock(&mu_);
  current_ = so_far;
  current_.running = true;
  ++forks_;
  requested_ = false;  // this one serves whoever asked
  state_cv_.SignalAll();
}

SnapshotOutcome Snapshotter::Run() {
  SnapshotOutcome outcome;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      outcome.code = ErrorCode::UNAVAILABLE_IN_CURRENT_STATUS;
      outcome.error = "the master is shutting down";
      return outcome;
    }
  }
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    outcome.code = ErrorCode::PERSISTENT_FAIL;
    outcome.error = std::string("pipe: ") + std::strerror(errno);
    MC_LOG_ERROR("snapshot not taken: %s", outcome.error.c_str());
    return outcome;
  }
  int64_t created_ms = WallClockMs();
  Clock::time_point started = Clock::now();
  const pid_t parent = getpid();
  pid_t pid;
  {
    StateGate::Exclusive gate(service_->gate());
    outcome.sequence = oplog_ != nullptr ? std::max(oplog_->last(), options_.base_sequence)
                                         : options_.base_sequence;
    pid = fork();
    if (pid == 0) {
      // Still inside the guard: the child's only thread holds its copy of the gate
      // exclusively, so the state walk's shared guards pass without touching the lock.
      LetGoOfTheParent(parent, report[1]);
      _exit(RunChild(outcome.sequence, created_ms, report[1]));
    }
    outcome.pause_us = MicrosSince(started);
  }
  close(report[1]);
  outcome.name = SnapshotName(outcome.sequence, created_ms);
  if (pid < 0) {
    close(report[0]);
    outcome.code = ErrorCode::PERSISTENT_FAIL;
    outcome.error = std::string("fork: ") + std::strerror(errno);
    MC_LOG_ERROR("snapshot not taken: %s", outcome.error.c_str());
    return outcome;
  }
  child_ = pid;
  Forked(outcome);
  AwaitChild(pid, report[0], options_.dir + "/snapshots/" + outcome.name, &outcome);
  child_ = 0;
  close(report[0]);
  outcome.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            Clock::now() - started).count();
  if (outcome.code != ErrorCode::OK) {
    MC_LOG_ERROR("snapshot %s failed: %s", outcome.name.c_str(), outcome.error.c_str());
    return outcome;
  }
  last_sequence_ = outcome.sequence;
  store_.Retain(options_.retention_count);
  if (oplog_ != nullptr) oplog_->DropThrough(store_.OldestRetainedSequence());
  MC_LOG_INFO("snapshot %s published: %lld objects, %lld bytes, requests paused %lld us, "
              "%lld ms in all",
              outcome.name.c_str(), static_cast<long long>(outcome.objects),
              static_cast<long long>(outcome.bytes), static_cast<long long>(outcome.pause_us),
              static_cast<long long>(outcome.duration_ms));
  return outcome;
}

void Snapshotter::LetGoOfTheParent(pid_t parent, int report_fd) {
  // Every descriptor but stdio and the report pipe: the listening socket and the clients'
  // connections above all. A child holding them would keep a dead master's port bound
  // (its successor could not listen), queue new connections nobody accepts, and keep a
  // closed connection open for its peer.
  if (report_fd > 3) close_range(3, static_cast<unsigned>(report_fd) - 1, 0);
  close_range(static_cast<unsigned>(report_fd) + 1, ~0u, 0);
  // A snapshot outliving its master would race its successor's on the latest pointer.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);  // it died before the line above
}

int Snapshotter::RunChild(uint64_t sequence, int64_t created_ms, int report_fd) {
  // A copy of a multithreaded process: no logging, no lock another thread may have held.
  SnapshotWriter writer(options_.dir, sequence, created_ms);
  SnapshotFigures figures;
  std::string error;
  ErrorCode code = writer.Begin(&error);
  if (code == ErrorCode::OK) code = WriteSnapshotPayloads(service_, &writer, &figures, &error);
  if (code == ErrorCode::OK) {
    code = writer.Publish({{"objects", std::to_string(figures.objects)},
                           {"segments", std::to_string(figures.segments)}},
                          &error);
  }
  if (code != ErrorCode::OK) {
    Report(report_fd, "error " + std::to_string(ToInt(code)) + " " + error);
    return 1;
  }
  Report(report_fd, "ok " + std::to_string(writer.bytes_written()) + " " +
                        std::to_string(figures.objects));
  return 0;
}

void Snapshotter::AwaitChild(pid_t pid, int report_fd, const std::string& path,
                             SnapshotOutcome* outcome) {
  Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(options_.child_timeout_ms);
  std::string text;
  int status = 0;
  bool timed_out = false;
  for (;;) {
    // The report arrives just before the exit; polling the pipe wakes us at once for it.
    struct pollfd p = {report_fd, POLLIN, 0};
    int64_t left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - Clock::now()).count();
    poll(&p, 1, static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left_ms, 100))));
    if (p.revents & POLLIN) {
      char buffer[kReportBytes];
      ssize_t n = read(report_fd, buffer, sizeof(buffer));
      if (n > 0) text.append(buffer, static_cast<size_t>(n));
    }
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (Clock::now() >= deadline) {
      timed_out = true;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
  }
  long long bytes = 0, objects = 0;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
      std::sscanf(text.c_str(), "ok %lld %lld", &bytes, &objects) == 2) {
    outcome->bytes = bytes;
    outcome->objects = objects;
    return;
  }
  outcome->code = ErrorCode::PERSISTENT_FAIL;
  if (timed_out) {
    outcome->error = "the child ran past --snapshot_child_timeout_seconds and was killed";
  } else if (text.rfind("error ", 0) == 0) {
    size_t space = text.find(' ', 6);
    outcome->error = space == std::string::npos ? text : text.substr(space + 1);
  } else {
    outcome->error = "the child ended without a report (status " + std::to_string(status) + ")";
  }
  // It never published: its directory is a partial snapshot.
  std::vector<std::string> published = store_.Candidates();
  if (std::find(published.begin(), published.end(), outcome->name) == published.end()) {
    SnapshotStore::RemoveSnapshotDir(path);
  }
}

}  // namespace mooncake
