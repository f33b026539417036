// Who may claim which tenant on this daemon's socket, and which tenant a connection that
// names none gets: the daemon's --tenant_uids, e.g. "alice=1000:1001,bob=1002".
//
// A tenant listed there is protected: a connection that names it must come from one of
// its uids (as the kernel reports them, SO_PEERCRED), else HELLO is refused with
// PERMISSION_DENIED. A connection that names no tenant gets the first tenant (in the
// flag's order) that lists its uid, else the default tenant. A tenant not listed may be
// claimed by anyone who can open the socket: list a tenant to protect it. uid 0 is not
// special (list it where root must claim a tenant).
//
// Immutable once parsed; thread-safe.
#ifndef MOONCAKE_DAEMON_TENANT_POLICY_H_
#define MOONCAKE_DAEMON_TENANT_POLICY_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "common/error_code.h"

namespace mooncake {

class TenantPolicy {
 public:
  // No tenant listed: anyone may claim any tenant, and naming none is the default tenant.
  TenantPolicy() = default;

  // "tenant=uid[:uid...][,tenant=uid...]" (blanks around items ignored; "" lists none).
  // false with *error for a malformed item, an invalid tenant id, a uid that is not a
  // decimal number below 2^32 - 1, or a tenant listed twice.
  static bool Parse(const std::string& text, TenantPolicy* out, std::string* error);

  // The tenant of a connection from uid that asked for `named` ("" for none):
  // INVALID_PARAMS for a malformed id, PERMISSION_DENIED for a listed tenant uid is not
  // listed under.
  Result<std::string> Resolve(const std::string& named, uid_t uid) const;

  bool empty() const { return tenants_.empty(); }
  // For the start-up log line: "alice (uids 1000, 1001), bob (uid 1002)".
  std::string Describe() const;

 private:
  std::vector<std::pair<std::string, std::vector<uid_t>>> tenants_;  // in the flag's order
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TENANT_POLICY_H_
