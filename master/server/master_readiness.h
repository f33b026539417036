// When mooncake-master is ready, for the service manager (common/base/service_notify.h; the
// unit deploy/mooncake-master.service is Type=notify):
//
//   without HA  once its RPC port listens: it serves from then on.
//   with HA     once its RPC port listens AND it knows its place in the cluster: it was
//               elected leader, or it is a standby that knows the leader it follows.
//               A standby serves no client (they hear NOT_LEADER), but it is doing its
//               job: following the log, ready to take over. One that sees no leader yet
//               (etcd unreachable, or a cluster whose masters all wait) is not ready: it
//               says so in STATUS= and systemd's start timeout applies.
//
// STATUS= says which (leader of term N, standby following whom, deposed) whenever the
// role changes; STOPPING=1 when a stop signal arrives.
//
// Thread roles: main constructs it and calls Listening(); the election's and the
// watcher's threads report role changes through RoleMachine::SetObserver; the signal
// thread calls Stopping(). It holds no state of its own beyond the address.
#ifndef MOONCAKE_MASTER_MASTER_READINESS_H_
#define MOONCAKE_MASTER_MASTER_READINESS_H_

#include <string>

#include "master/ha/master_role.h"

namespace mooncake {

class MasterReadiness {
 public:
  // role: null without --enable_ha. With one, this object must outlive the election's
  // threads, which call it (main stops the HaMaster before it returns). address:
  // "host:port" of the RPC port, for the STATUS= lines.
  MasterReadiness(RoleMachine* role, std::string address);

  // The RPC port listens. Call it before the election starts (HaMaster::Start): the role
  // observer is set here.
  void Listening();
  // A stop signal (why: e.g. "signal 15"): STOPPING=1.
  void Stopping(const std::string& why);

 private:
  // The role now, reported: READY=1 when it is a place in the cluster, STATUS= always.
  void ReportRole();

  RoleMachine* const role_;
  const std::string address_;
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_MASTER_READINESS_H_
