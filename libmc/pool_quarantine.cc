#include "libmc/pool_quarantine.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/base/logging.h"

namespace mooncake {
namespace client {

PoolQuarantine::Loss::~Loss() {
  if (pidfd >= 0) close(pidfd);
}

int PoolQuarantine::OpenPidfd(int pid) {
#ifdef SYS_pidfd_open
  if (pid <= 0) return -1;
  // A pidfd is always close-on-exec.
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

PoolQuarantine::PoolQuarantine(std::shared_ptr<Pool> pool) : pool_(std::move(pool)) {}

PoolQuarantine::~PoolQuarantine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  Wake();
  if (watcher_.joinable()) watcher_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void PoolQuarantine::Hold(uint64_t daemon_id, int daemon_pidfd,
                          std::vector<std::shared_ptr<void>> pinned) {
  auto loss = std::make_unique<Loss>();
  loss->daemon_id = daemon_id;
  loss->pinned = std::move(pinned);
  // Ranges of the application's own allocations may be in flight too (zero copy).
  if (pool_) loss->pinned.push_back(pool_->PinAllocations());
  if (daemon_pidfd >= 0) loss->pidfd = fcntl(daemon_pidfd, F_DUPFD_CLOEXEC, 0);
  bool watch = loss->pidfd >= 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    loss->seq = next_seq_++;
    held_.push_back(std::move(loss));
    if (watch && !watcher_.joinable()) {
      wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      if (wake_fd_ >= 0) {
        try {
          watcher_ = std::thread([this] { WatchLoop(); });
        } catch (...) {  // no thread: the fence alone brings the memory back
          close(wake_fd_);
          wake_fd_ = -1;
        }
      }
    }
  }
  Wake();
  MC_LOG_DEBUG("mooncake_store: pool memory of a lost connection held until mooncaked is done "
               "with it");
}

std::shared_ptr<void> PoolQuarantine::TakeFor(uint64_t daemon_id) {
  auto taken = std::make_shared<Losses>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = held_.begin(); it != held_.end();) {
      if ((*it)->daemon_id == daemon_id) {
        taken->push_back(std::move(*it));
        it = held_.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (taken->empty()) return nullptr;
  Wake();  // the watcher no longer needs to look at these
  return taken;
}

std::shared_ptr<void> PoolQuarantine::PinAllocations() {
  return pool_ ? pool_->PinAllocations() : nullptr;
}

size_t PoolQuarantine::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}

void PoolQuarantine::Wake() {
  if (wake_fd_ < 0) return;
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0 && errno != EAGAIN) {
    MC_LOG_WARN("mooncake_store: eventfd write: %s", std::strerror(errno));
  }
}

void PoolQuarantine::WatchLoop() {
  std::vector<struct pollfd> fds;
  std::vector<uint64_t> watched;  // the seq of fds[i + 1]'s loss
  for (;;) {
    fds.assign(1, {wake_fd_, POLLIN, 0});
    watched.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      for (const auto& loss : held_) {
        if (loss->pidfd < 0) continue;
        fds.push_back({loss->pidfd, POLLIN, 0});
        watched.push_back(loss->seq);
      }
    }
    if (poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) {
      MC_LOG_WARN("mooncake_store: poll on daemon pidfds: %s", std::strerror(errno));
      return;  // the fence alone brings the memory back
    }
    uint64_t count;
    if (read(wake_fd_, &count, sizeof(count)) < 0 && errno != EAGAIN) return;
    Losses exited;  // released below, outside the lock
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 1; i < fds.size(); ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        uint64_t seq = watched[i - 1];  // still held? TakeFor may have taken it meanwhile
        auto it = std::find_if(held_.begin(), held_.end(),
                               [seq](const std::unique_ptr<Loss>& l) { return l->seq == seq; });
        if (it == held_.end()) continue;
        exited.push_back(std::move(*it));
        held_.erase(it);
      }
    }
  }
}

}  // namespace client
}  // namespace mooncake
