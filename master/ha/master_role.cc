#include "master/ha/master_role.h"

#include "common/base/logging.h"

namespace mooncake {

RoleMachine::RoleMachine(Role role, std::string self, AppliedSeq applied,
                         std::function<void()> on_deposed)
    : self_(std::move(self)),
      applied_(std::move(applied)),
      on_deposed_(std::move(on_deposed)),
      role_(role) {}

std::unique_ptr<RoleMachine> RoleMachine::Solo(AppliedSeq applied) {
  return std::unique_ptr<RoleMachine>(
      new RoleMachine(Role::kLeader, "", std::move(applied), nullptr));
}

std::unique_ptr<RoleMachine> RoleMachine::Standby(std::string self, AppliedSeq applied,
                                                  std::function<void()> on_deposed) {
  std::unique_ptr<RoleMachine> role(new RoleMachine(Role::kStandby, std::move(self),
                                                    std::move(applied), std::move(on_deposed)));
  MC_LOG_INFO("role: %s starts as a standby (seq %llu)", role->self_.c_str(),
              static_cast<unsigned long long>(role->applied_seq()));
  return role;
}

const char* RoleMachine::Name(Role role) {
  switch (role) {
    case Role::kLeader:
      return "leader";
    case Role::kStandby:
      return "standby";
    case Role::kDeposed:
      return "deposed";
  }
  return "?";
}

std::string RoleMachine::leader() const {
  if (role() == Role::kLeader) return self_;
  absl::MutexLock lock(&mu_);
  return leader_;
}

bool RoleMachine::LeaseHeld() {
  if (role() != Role::kLeader) return false;
  if (!lease_ || lease_()) return true;  // Solo: no lease
  Depose("its lease ran out before a reply could leave (the process stood still?)");
  return false;
}

void RoleMachine::SawLeader(const std::string& leader, int64_t term) {
  if (role() != Role::kStandby) return;
  {
    absl::MutexLock lock(&mu_);
    if (leader == leader_ && term == term_.load()) return;
    leader_ = leader;
    if (term > term_.load()) term_.store(term, std::memory_order_release);
    if (leader.empty()) {
      MC_LOG_INFO("role: standby %s: no leader (term %lld, seq %llu)", self_.c_str(),
                  static_cast<long long>(term_.load()),
                  static_cast<unsigned long long>(applied_seq()));
    } else {
      MC_LOG_INFO("role: standby %s: the leader is %s (term %lld, seq %llu)", self_.c_str(),
                  leader.c_str(), static_cast<long long>(term),
                  static_cast<unsigned long long>(applied_seq()));
    }
  }
  if (observer_) observer_();
}

void RoleMachine::BecomeLeader(int64_t term, LeaseCheck lease) {
  {
    absl::MutexLock lock(&mu_);
    if (role() != Role::kStandby) return;
    lease_ = std::move(lease);
    leader_ = self_;
    term_.store(term, std::memory_order_release);
    role_.store(Role::kLeader, std::memory_order_release);
  }
  MC_LOG_INFO("role: %s standby -> leader (term %lld, continuing after seq %llu)", self_.c_str(),
              static_cast<long long>(term), static_cast<unsigned long long>(applied_seq()));
  if (observer_) observer_();
}

bool RoleMachine::Depose(const char* why) {
  Role expected = Role::kLeader;
  if (!role_.compare_exchange_strong(expected, Role::kDeposed, std::memory_order_acq_rel)) {
    return false;
  }
  MC_LOG_WARN("role: %s leader -> deposed (term %lld, seq %llu): %s; serving nothing from now on",
              self_.c_str(), static_cast<long long>(term()),
              static_cast<unsigned long long>(applied_seq()), why);
  if (observer_) observer_();
  if (on_deposed_) on_deposed_();
  return true;
}

}  // namespace mooncake
