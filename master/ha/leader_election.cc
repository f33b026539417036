#include "master/ha/leader_election.h"

#include <algorithm>

#include "common/base/log_throttle.h"
#include "common/base/logging.h"
#include "common/base/text.h"

namespace mooncake {

namespace {

using std::chrono::milliseconds;

int64_t WholeSecondsMs(int64_t ms) { return std::max<int64_t>(1, (ms + 999) / 1000) * 1000; }

int64_t ToNs(LeaderElection::Clock::time_point t) { return t.time_since_epoch().count(); }

LogThrottle renewal_failure_log;  // an etcd outage fails every renewal

}  // namespace

int64_t LeaderElection::MarginMs(int64_t ttl_ms) {
  return std::min(std::max<int64_t>(ttl_ms / 5, 250), ttl_ms / 2);
}

LeaderElection::LeaderElection(EtcdClient* etcd, Options options)
    : etcd_(etcd),
      options_(std::move(options)),
      key_(LeaderKey(options_.cluster_id)),
      ttl_ms_(WholeSecondsMs(options_.ttl_ms)),
      margin_ms_(MarginMs(ttl_ms_)) {
  static_assert(std::is_same<Clock::duration, std::chrono::nanoseconds>::value,
                "deadline_ns_ holds steady-clock ticks as nanoseconds");
}

LeaderElection::~LeaderElection() { Stop(); }

void LeaderElection::Start() {
  absl::MutexLock lock(&mu_);
  if (running_) return;
  running_ = true;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void LeaderElection::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!running_) return;
    stop_ = true;
    deadline_ns_.store(0, std::memory_order_release);
  }
  cv_.SignalAll();
  thread_.join();
  absl::MutexLock lock(&mu_);
  running_ = false;
  if (phase_ == Phase::kLeader) {
    MC_LOG_INFO("election %s: %s stops leading (term %ld) without resigning",
                options_.cluster_id.c_str(), options_.name.c_str(), long(term_));
    phase_ = Phase::kIdle;
  }
}

ErrorCode LeaderElection::Resign() {
  int64_t term, lease;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ != Phase::kLeader) {
      phase_ = Phase::kIdle;
      cv_.SignalAll();
      return ErrorCode::OK;
    }
    deadline_ns_.store(0, std::memory_order_release);
    phase_ = Phase::kIdle;
    term = term_;
    lease = lease_;
    lease_ = 0;
  }
  cv_.SignalAll();
  MC_LOG_INFO("election %s: %s leader -> resigned (term %ld)", options_.cluster_id.c_str(),
              options_.name.c_str(), long(term));
  return Release(term, lease);
}

void LeaderElection::Campaign() {
  absl::MutexLock lock(&mu_);
  if (phase_ != Phase::kIdle) return;
  phase_ = Phase::kCandidate;
  cv_.SignalAll();
}

int64_t LeaderElection::term() const {
  absl::MutexLock lock(&mu_);
  return term_;
}

LeaderInfo LeaderElection::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

bool LeaderElection::PublishSyncSet(const std::vector<std::string>& names) {
  std::string value;
  for (const std::string& name : names) {
    if (name.empty() || name.find(',') != std::string::npos) {
      MC_LOG_ERROR("election %s: sync set member '%s' is not a name",
                   options_.cluster_id.c_str(), name.c_str());
      return false;
    }
    value += (value.empty() ? "" : ",") + name;
  }
  int64_t term;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ != Phase::kLeader) return false;
    term = term_;
  }
  if (!Leading()) return false;
  bool done = false;
  ErrorCode rc = etcd_->PutIfHeld(key_, term, SyncSetKey(options_.cluster_id), value, &done);
  if (rc != ErrorCode::OK) {
    MC_LOG_WARN("election %s: sync set {%s} not written: %s", options_.cluster_id.c_str(),
                value.c_str(), ErrorName(rc));
    return false;
  }
  if (!done) {
    MC_LOG_WARN("election %s: sync set {%s} not written: the leader key of term %ld is gone",
                options_.cluster_id.c_str(), value.c_str(), long(term));
  }
  return done;
}

ErrorCode LeaderElection::ReadSyncSet(std::vector<std::string>* names) {
  EtcdClient::KeyValue kv;
  bool found = false;
  ErrorCode rc = etcd_->Get(SyncSetKey(options_.cluster_id), &kv, &found);
  if (rc != ErrorCode::OK) return rc;
  names->clear();
  if (found && !kv.value.empty()) *names = SplitList(kv.value, ',');
  return ErrorCode::OK;
}

void LeaderElection::FreezeForTest() {
  absl::MutexLock lock(&mu_);
  frozen_ = true;
  cv_.SignalAll();
}

void LeaderElection::ThawForTest() {
  absl::MutexLock lock(&mu_);
  frozen_ = false;
  cv_.SignalAll();
}

void LeaderElection::WaitUntil(Clock::time_point until, Phase phase) {
  while (!stop_ && !frozen_ && phase_ == phase &&
         !cv_.WaitWithTimeout(&mu_, absl::FromChrono(until - Clock::now()))) {
  }
}

ErrorCode LeaderElection::ReadLeaderKey(LeaderInfo* out) {
  ErrorCode rc = ReadLeader(etcd_, options_.cluster_id, out);
  if (rc == ErrorCode::OK) {
    absl::MutexLock lock(&mu_);
    current_ = *out;
  }
  return rc;
}

void LeaderElection::Run() {
  for (;;) {
    Phase phase;
    {
      absl::MutexLock lock(&mu_);
      while (!stop_ && frozen_) cv_.Wait(&mu_);
      if (stop_) return;
      phase = phase_;
    }
    switch (phase) {
      case Phase::kCandidate: StepCandidate(); break;
      case Phase::kLeader: StepLeader(); break;
      case Phase::kIdle: StepIdle(); break;
    }
  }
}

void LeaderElection::StepCandidate() {
  const Clock::time_point next_poll = Clock::now() + milliseconds(ttl_ms_ / 4);
  LeaderInfo leader;
  if (ReadLeaderKey(&leader) == ErrorCode::OK && !leader.known() &&
      (!may_campaign_ || may_campaign_())) {
    const Clock::time_point sent = Clock::now();
    int64_t lease = 0;
    bool created = false;
    EtcdClient::KeyValue kv;
    if (etcd_->GrantLease(ttl_ms_ / 1000, &lease) == ErrorCode::OK &&
        etcd_->CreateIfAbsent(key_, options_.name, lease, &created, &kv) == ErrorCode::OK &&
        created) {
      const Clock::time_point deadline = sent + milliseconds(ttl_ms_ - margin_ms_);
      bool won = false;
      {
        absl::MutexLock lock(&mu_);
        // Resign or Stop may have come meanwhile; a slow etcd may have used up the lease.
        if (phase_ == Phase::kCandidate && !stop_ && Clock::now() < deadline) {
          phase_ = Phase::kLeader;
          lease_ = lease;
          term_ = kv.create_revision;
          last_renewal_ = sent;
          renewal_failed_ = false;
          lost_reason_ = nullptr;
          current_ = LeaderInfo{options_.name, term_};
          deadline_ns_.store(ToNs(deadline), std::memory_order_release);
          won = true;
        }
      }
      if (!won) {
        Release(kv.create_revision, lease);
        return;
      }
      MC_LOG_INFO("election %s: %s candidate -> leader (term %ld, lease %lx)",
                  options_.cluster_id.c_str(), options_.name.c_str(), long(kv.create_revision),
                  static_cast<unsigned long>(lease));
      if (on_elected_) {
        // The owner's takeover may outlast a renewal interval: the pump renews meanwhile.
        std::atomic<bool> done{false};
        std::thread pump([&] { RenewWhile(&done, lease, kv.create_revision); });
        on_elected_(kv.create_revision);
        {
          absl::MutexLock lock(&mu_);
          done = true;
        }
        cv_.SignalAll();
        pump.join();
      }
      return;
    }
    if (lease != 0) etcd_->RevokeLease(lease);  // lost the race (or etcd failed): not needed
    if (!created && !kv.key.empty()) {
      absl::MutexLock lock(&mu_);
      current_ = LeaderInfo{kv.value, kv.create_revision};
    }
  }
  absl::MutexLock lock(&mu_);
  WaitUntil(next_poll, Phase::kCandidate);
}

LeaderElection::Clock::time_point LeaderElection::NextRenewalLocked() const {
  const Clock::time_point deadline =
      Clock::time_point(Clock::duration(deadline_ns_.load(std::memory_order_acquire)));
  const Clock::time_point next =
      renewal_failed_ ? Clock::now() + milliseconds(std::max<int64_t>(ttl_ms_ / 10, 50))
                      : last_renewal_ + milliseconds(ttl_ms_ / 3);
  return std::min(next, deadline);
}

void LeaderElection::StepLeader() {
  int64_t lease, term;
  Clock::time_point deadline;
  const char* lost = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ != Phase::kLeader) return;
    lease = lease_;
    term = term_;
    lost = lost_reason_;
    lost_reason_ = nullptr;
    if (lost == nullptr) {
      const Clock::time_point next = NextRenewalLocked();
      WaitUntil(next, Phase::kLeader);
      if (stop_ || frozen_ || phase_ != Phase::kLeader || lease_ != lease) return;
      if (Clock::now() < next) return;  // spurious wake
    }
    deadline = Clock::time_point(Clock::duration(deadline_ns_.load(std::memory_order_acquire)));
  }
  if (lost != nullptr) {
    Depose(lease, lost);
    return;
  }
  if (Clock::now() >= deadline) {
    Depose(lease, "no renewal of the lease before the local deadline");
    return;
  }
  const char* reason = nullptr;
  if (Renew(lease, term, &reason) == Renewal::kLost) Depose(lease, reason);
}

void LeaderElection::RenewWhile(const std::atomic<bool>* done, int64_t lease, int64_t term) {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      const Clock::time_point next = NextRenewalLocked();
      while (!stop_ && !frozen_ && !done->load() &&
             !cv_.WaitWithTimeout(&mu_, absl::FromChrono(next - Clock::now()))) {
      }
      // A frozen election renews nothing (the test hook), as its own thread would not.
      while (!stop_ && frozen_ && !done->load()) cv_.Wait(&mu_);
      if (stop_ || done->load() || phase_ != Phase::kLeader || lease_ != lease) return;
      if (Clock::now() < next) continue;
      if (Clock::now() >= Clock::time_point(Clock::duration(
                              deadline_ns_.load(std::memory_order_acquire)))) {
        lost_reason_ = "no renewal of the lease before the local deadline";
        return;
      }
    }
    const char* reason = nullptr;
    if (Renew(lease, term, &reason) == Renewal::kLost) {
      absl::MutexLock lock(&mu_);
      if (lost_reason_ == nullptr) lost_reason_ = reason;
      return;
    }
  }
}

LeaderElection::Renewal LeaderElection::Renew(int64_t lease, int64_t term, const char** reason) {
  // A renewal is the lease kept alive AND the key found still ours (an operator, or a
  // tool, may have deleted it while the lease lives on).
  const Clock::time_point sent = Clock::now();
  int64_t ttl_left = 0;
  ErrorCode rc = etcd_->KeepAlive(lease, &ttl_left);
  if (rc == ErrorCode::OK && ttl_left <= 0) {
    *reason = "etcd says the lease is gone";
    return Renewal::kLost;
  }
  LeaderInfo holder;
  if (rc == ErrorCode::OK) rc = ReadLeaderKey(&holder);
  if (rc == ErrorCode::OK && holder.term != term) {
    *reason = "the leader key is no longer ours";
    return Renewal::kLost;
  }
  absl::MutexLock lock(&mu_);
  if (phase_ != Phase::kLeader || lease_ != lease) return Renewal::kFailed;  // resigned
  if (rc != ErrorCode::OK) {
    renewal_failed_ = true;
    if (renewal_failure_log.Due()) {
      const Clock::time_point deadline =
          Clock::time_point(Clock::duration(deadline_ns_.load(std::memory_order_acquire)));
      MC_LOG_WARN("election %s: lease renewal failed (%s); still leader for %ld ms",
                  options_.cluster_id.c_str(), ErrorName(rc),
                  long(std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count()));
    }
    return Renewal::kFailed;
  }
  // etcd restarted the lease's full TTL when it received the request, after `sent`.
  int64_t renewed_ms = std::min(ttl_ms_, ttl_left * 1000);
  renewal_failed_ = false;
  last_renewal_ = sent;
  deadline_ns_.store(ToNs(sent + milliseconds(renewed_ms - margin_ms_)), std::memory_order_release);
  return Renewal::kRenewed;
}

void LeaderElection::StepIdle() {
  const Clock::time_point next_poll = Clock::now() + milliseconds(ttl_ms_ / 4);
  LeaderInfo leader;
  ReadLeaderKey(&leader);  // keeps Current() up to date for the owner
  absl::MutexLock lock(&mu_);
  WaitUntil(next_poll, Phase::kIdle);
}

void LeaderElection::Depose(int64_t lease, const char* reason) {
  int64_t term;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ != Phase::kLeader || lease_ != lease) return;  // resigned meanwhile
    deadline_ns_.store(0, std::memory_order_release);
    phase_ = Phase::kIdle;
    lease_ = 0;
    term = term_;
  }
  MC_LOG_WARN("election %s: %s leader -> deposed (term %ld): %s", options_.cluster_id.c_str(),
              options_.name.c_str(), long(term), reason);
  if (on_deposed_) on_deposed_();
  Release(term, lease);
}

ErrorCode LeaderElection::Release(int64_t term, int64_t lease) {
  bool deleted = false;
  ErrorCode rc = etcd_->DeleteIfHeld(key_, term, &deleted);
  ErrorCode revoked = etcd_->RevokeLease(lease);
  return rc != ErrorCode::OK ? rc : revoked;
}

}  // namespace mooncake
