// Who may claim which tenant on this daemon's socket, and which tenant a connection that
// names none gets: the daemon's --tenant_uids, e.g. "alice=1000:1001,bob=1002", and
// --tenant_roaming_uids.
//
// The rule, for a connection from uid (as the kernel reports it, SO_PEERCRED):
//   - A tenant listed in --tenant_uids is protected: naming it needs one of its uids.
//   - A uid listed under any tenant is confined to the tenants that list it: it may name
//     only those, and naming none gives it the first of them (in the flag's order). So it
//     can neither claim a tenant the flag does not list (where its puts would escape its
//     tenant's quota and its eviction share) nor land in the default tenant. Unless it is
//     in --tenant_roaming_uids: then it may name any unlisted tenant too, as before the
//     rule (naming none still gives it its first tenant).
//   - A uid listed nowhere may name any tenant the flag does not list, and naming none
//     gives it the default tenant.
// Anything else is refused at HELLO with PERMISSION_DENIED. uid 0 is not special (list it
// where root must claim a tenant, or be confined).
//
// Immutable once made; thread-safe.
#ifndef MOONCAKE_DAEMON_TENANT_POLICY_H_
#define MOONCAKE_DAEMON_TENANT_POLICY_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "common/base/error_code.h"

namespace mooncake {

class TenantPolicy {
 public:
  // No tenant listed: anyone may claim any tenant, and naming none is the default tenant.
  TenantPolicy() = default;

  // tenant_uids: "tenant=uid[:uid...][,tenant=uid...]" (blanks around items ignored; ""
  // lists none). roaming: the uids of --tenant_roaming_uids, resolved by the caller. false
  // with *error (naming the flag) for a malformed item, an invalid tenant id, a uid that is
  // not a decimal number below 2^32 - 1, a tenant listed twice, or a roaming uid listed
  // under no tenant.
  static bool Parse(const std::string& tenant_uids, std::vector<uid_t> roaming,
                    TenantPolicy* out, std::string* error);

  // The tenant of a connection from uid that asked for `named` ("" for none):
  // INVALID_PARAMS for a malformed id, PERMISSION_DENIED for a tenant the rule does not
  // let uid claim (Refusal says which part of the rule, for the client and the log).
  Result<std::string> Resolve(const std::string& named, uid_t uid) const;
  // Why Resolve(named, uid) was PERMISSION_DENIED, and what to do, in one sentence that
  // starts "uid N may not claim tenant 'named'". named must be a valid tenant id (it is
  // the peer's input, and shown).
  std::string Refusal(const std::string& named, uid_t uid) const;

  bool empty() const { return tenants_.empty(); }
  // For the start-up log line: "alice (uids 1000, 1001), bob (uid 1002); uids roaming:
  // 1000".
  std::string Describe() const;

 private:
  bool Listed(uid_t uid) const;
  bool Roaming(uid_t uid) const;

  std::vector<std::pair<std::string, std::vector<uid_t>>> tenants_;  // in the flag's order
  std::vector<uid_t> roaming_;
};

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TENANT_POLICY_H_
