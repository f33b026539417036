// The master's admin HTTP endpoints (docs/operations.md, "The master's admin HTTP"), routed
// on an AdminHttpServer (common/admin/admin_http.h). Who may call them: open to whoever reaches
// the port ("open" below), or only to an admin caller ("admin": the admin token, or without
// one this master's uid or root; others get 401 or 403, common/admin/admin_http.h):
//
//   /metrics               open   Prometheus text (master/server/master_metrics.h): aggregate
//                                 figures; an admin caller also gets the series labelled
//                                 with a segment's address or a tenant's id
//   /health                open   JSON: status, role, ha_enabled, service_ready, term,
//                                 leader_address (where clients must go)
//   /role                  open   text: leader, standby or deposed (as Mooncake answers it)
//   /log_level             GET open, POST admin: common RegisterLogLevelEndpoint
//   /metrics/summary       admin  text, "name: value" lines for people (tenants included)
//   /get_all_segments      admin  text, one segment name per line (Mooncake's; SGLang
//                                 probes it without a token: refused with an empty body
//                                 while no segment is mounted, a JSON error after)
//   /get_segments_detail   admin  JSON, every segment with its use and state
//   /query_key?key=K       admin  JSON, one object: replicas, lease, pins, checksum -- no
//                                 lease taken
//   /batch_query_keys      admin  JSON, up to kMaxBatchKeys keys (GET ?keys=a,b or POST
//                                 {"keys":[]})
//   /get_all_keys          admin  text (or format=json), one page of keys: limit, cursor,
//                                 regex
//   /stats                 admin  JSON, every MasterStats field
//   /snapshot              admin  JSON, the last snapshot
//   /api/v1/drain_jobs     admin  POST: Mooncake's drain job (MasterService::CreateDrainJob);
//                                 /query?job_id=, /cancel?job_id=; /api/v1/segments/status?segment=
//
// Keys are user keys of the default tenant unless tenant=T is given; a stored key never
// leaves (common/base/tenant_key.h). JSON strings carry keys as UTF-8: a key that is not valid
// UTF-8 has its bad bytes replaced by U+FFFD there (the text forms carry its bytes).
//
// No endpoint takes a read lease, changes an object or holds a lock long: they read
// through MasterService's admin reads (a key at a time, or a slice of a shard at a time).
// The drain jobs change where objects live (never whether they do), as Mooncake's
// control API does.
// A master that does not serve clients (a standby, a deposed leader) answers /health,
// /role, /metrics, /metrics/summary and /log_level; every other endpoint answers 503 with
// error code -1600 (NOT_LEADER) to an admin caller.
//
// Input policy: query parameters and bodies are anyone's: a bad one answers 400 with
// code -600 and a message, never more work than kMaxBatchKeys keys or one page.
#ifndef MOONCAKE_MASTER_MASTER_ADMIN_H_
#define MOONCAKE_MASTER_MASTER_ADMIN_H_

#include <cstddef>
#include <functional>
#include <string>

#include "common/admin/admin_http.h"
#include "master/server/master_metrics.h"

namespace mooncake {

constexpr size_t kMaxBatchKeys = 1000;
constexpr size_t kDefaultKeyPage = 1000;
constexpr size_t kMaxKeyPage = 100000;

// Routes every endpoint above on server (before it starts). metrics (and the sources it
// names) outlive server. self_address: this master's "host:port" (asked at each /health:
// with --rpc_port 0 it is known once the RPC socket listens), the leader's address /health
// names without HA.
void RegisterMasterAdminRoutes(AdminHttpServer* server, const MasterMetrics* metrics,
                               std::function<std::string()> self_address);

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_MASTER_ADMIN_H_
