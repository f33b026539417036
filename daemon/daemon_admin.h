// The daemon's admin HTTP port (docs/operations.md, "The daemon's admin HTTP"), on
// common/admin/admin_http.h: GET /metrics (DaemonMetrics' registry, plus collectors reading the
// figures that live in the daemon's components at scrape time) and GET /health, open to
// whoever reaches the port (aggregate figures only: no key, segment address or tenant);
// GET /log_level, open, and POST /log_level, for an admin caller only (the admin token, or
// without one the daemon's uid or root). It never serves object bytes.
//
// /health answers 200 {"status":"ok","master_connected":true,"daemon_id":N,"segments":N,
// "clients":N,"ssd":bool}, or 503 with "status":"degraded" while the last heartbeat went
// unanswered (Membership::healthy).
//
// A scrape asks the master once for the segments' used bytes (GetAllSegments), and only
// while the heartbeat is answered, so an unreachable master costs a scrape nothing; the
// used figures are then left out.
//
// Thread roles: constructed and started by main once the daemon serves; the handlers and
// collectors run on the server's thread. The sources must outlive this object.
#ifndef MOONCAKE_DAEMON_DAEMON_ADMIN_H_
#define MOONCAKE_DAEMON_DAEMON_ADMIN_H_

#include <string>
#include <vector>

#include "common/admin/admin_http.h"
#include "common/base/metrics.h"
#include "daemon/cluster/bad_replica_reporter.h"
#include "daemon/master_link/master_client.h"
#include "daemon/cluster/membership.h"
#include "daemon/ssd_tier/offloader.h"
#include "daemon/ssd_tier/ssd_tier.h"
#include "daemon/service/store_service.h"

namespace mooncake {

class DaemonAdmin {
 public:
  struct Sources {
    MasterClient* master = nullptr;
    Membership* membership = nullptr;
    StoreService* service = nullptr;  // its promoter's figures
    SsdTier* ssd = nullptr;           // null without --ssd_path
    Offloader* offloader = nullptr;   // null without --ssd_path
    BadReplicaReporter* reporter = nullptr;  // the bad replicas this daemon reported
  };

  // Adds the collectors to DaemonMetrics::Get()'s registry (once per process) and routes
  // the endpoints. tokens: the admin tokens accepted (LoadAdminTokensForProcess).
  DaemonAdmin(const Sources& sources, std::vector<std::string> tokens);

  // Binds address:port (0: a free one) and serves; false with *error when it cannot.
  bool Start(const std::string& address, int port, std::string* error) {
    return server_.Start(address, port, error);
  }
  int port() const { return server_.port(); }

 private:
  void CollectSegments(MetricsWriter* out) const;
  void CollectMaster(MetricsWriter* out) const;
  void CollectSsd(MetricsWriter* out) const;
  void Health(HttpResponse* response) const;

  const Sources sources_;
  AdminHttpServer server_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_DAEMON_ADMIN_H_
