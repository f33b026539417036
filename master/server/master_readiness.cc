#include "master/server/master_readiness.h"

#include "common/base/service_notify.h"

namespace mooncake {

MasterReadiness::MasterReadiness(RoleMachine* role, std::string address)
    : role_(role), address_(std::move(address)) {}

void MasterReadiness::Listening() {
  if (role_ == nullptr) {
    NotifyReady("serving on " + address_);
    return;
  }
  NotifyStatus("standby on " + address_ + ": waiting for etcd to name a leader");
  role_->SetObserver([this] { ReportRole(); });
}

void MasterReadiness::Stopping(const std::string& why) {
  NotifyStopping(why + ": stopping (" + address_ + ")");
}

void MasterReadiness::ReportRole() {
  const std::string term = std::to_string(role_->term());
  switch (role_->role()) {
    case RoleMachine::Role::kLeader:
      NotifyReady("leader of term " + term + ", serving on " + address_);
      return;
    case RoleMachine::Role::kStandby: {
      const std::string leader = role_->leader();
      if (leader.empty()) {
        NotifyStatus("standby on " + address_ + ": no leader now (term " + term + ")");
      } else if (leader == role_->self()) {
        // The key names us before the takeover is done: ready once it is (kLeader).
        NotifyStatus("elected (term " + term + "), taking over on " + address_);
      } else {
        NotifyReady("standby on " + address_ + ", following " + leader + " (term " + term + ")");
      }
      return;
    }
    case RoleMachine::Role::kDeposed:
      NotifyStatus("deposed (term " + term + "): exiting with status 3, to come back as a standby");
      return;
  }
}

}  // namespace mooncake
