#include "daemon/base/tenant_policy.h"

#include <algorithm>
#include <cstdlib>

#include "common/base/tenant_key.h"
#include "common/base/text.h"

namespace mooncake {

namespace {

// A decimal uid below 2^32 - 1 ((uid_t)-1 means "no uid" to the kernel).
bool ParseUid(const std::string& text, uid_t* out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos ||
      text.size() > 10) {
    return false;
  }
  unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (v >= 0xFFFFFFFFull) return false;
  *out = static_cast<uid_t>(v);
  return true;
}

bool Has(const std::vector<uid_t>& uids, uid_t uid) {
  return std::find(uids.begin(), uids.end(), uid) != uids.end();
}

// "1000, 1001"
std::string UidList(const std::vector<uid_t>& uids) {
  std::string text;
  for (size_t i = 0; i < uids.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(uids[i]);
  return text;
}

}  // namespace

bool TenantPolicy::Parse(const std::string& tenant_uids, std::vector<uid_t> roaming,
                         TenantPolicy* out, std::string* error) {
  TenantPolicy policy;
  for (const std::string& item :
       Trim(tenant_uids).empty() ? std::vector<std::string>() : SplitList(tenant_uids, ',')) {
    size_t eq = item.find('=');
    std::string tenant = Trim(item.substr(0, eq));
    if (eq == std::string::npos || !tenant_key::ValidTenant(tenant)) {
      *error = "--tenant_uids: '" + item + "' is not tenant=uid[:uid...] with a tenant id "
               "of 1..64 characters of [A-Za-z0-9_.-]";
      return false;
    }
    for (const auto& [known, uids] : policy.tenants_) {
      if (known == tenant) {
        *error = "--tenant_uids: tenant '" + tenant + "' is listed twice";
        return false;
      }
    }
    std::vector<uid_t> uids;
    for (const std::string& uid_text : SplitList(item.substr(eq + 1), ':')) {
      uid_t uid = 0;
      if (!ParseUid(uid_text, &uid)) {
        *error = "--tenant_uids: '" + uid_text + "' (tenant '" + tenant + "') is not a uid";
        return false;
      }
      uids.push_back(uid);
    }
    policy.tenants_.emplace_back(tenant, std::move(uids));
  }
  // A uid listed nowhere roams already: naming it is a mistake (a wrong uid, or a
  // --tenant_uids that lost its entry) better stopped at start than left to surprise.
  for (uid_t uid : roaming) {
    if (!policy.Listed(uid)) {
      *error = "--tenant_roaming_uids: uid " + std::to_string(uid) + " is listed under no "
               "tenant of --tenant_uids (a uid listed nowhere may claim unlisted tenants "
               "already)";
      return false;
    }
  }
  policy.roaming_ = std::move(roaming);
  *out = std::move(policy);
  return true;
}

bool TenantPolicy::Listed(uid_t uid) const {
  for (const auto& [tenant, uids] : tenants_) {
    if (Has(uids, uid)) return true;
  }
  return false;
}

bool TenantPolicy::Roaming(uid_t uid) const { return Has(roaming_, uid); }

Result<std::string> TenantPolicy::Resolve(const std::string& named, uid_t uid) const {
  if (!tenant_key::ValidTenantOrDefault(named)) return ErrorCode::INVALID_PARAMS;
  bool uid_listed = false;
  for (const auto& [tenant, uids] : tenants_) {
    bool listed = Has(uids, uid);
    if (named.empty() && listed) return tenant;  // the first tenant listing the uid
    if (!named.empty() && tenant == named) {
      if (!listed) return ErrorCode::PERMISSION_DENIED;
      return named;
    }
    uid_listed = uid_listed || listed;
  }
  // named is "" (and uid listed nowhere: the default tenant), or a tenant not listed: the
  // claim of any uid the flag does not confine.
  if (uid_listed && !Roaming(uid)) return ErrorCode::PERMISSION_DENIED;
  return named;
}

std::string TenantPolicy::Refusal(const std::string& named, uid_t uid) const {
  std::string head = "uid " + std::to_string(uid) + " may not claim tenant '" + named + "'";
  std::string own;
  for (const auto& [tenant, uids] : tenants_) {
    if (tenant == named) {
      return head + " (--tenant_uids lists it for other uids): name a tenant listed for " +
             "this uid, or none";
    }
    if (Has(uids, uid)) own += (own.empty() ? "'" : ", '") + tenant + "'";
  }
  return head + " (--tenant_uids confines this uid to " + own + "): name one of those, or " +
         "none; or list the uid in --tenant_roaming_uids to let it claim unlisted tenants";
}

std::string TenantPolicy::Describe() const {
  std::string text;
  for (const auto& [tenant, uids] : tenants_) {
    if (!text.empty()) text += ", ";
    text += tenant + (uids.size() == 1 ? " (uid " : " (uids ") + UidList(uids) + ")";
  }
  if (!roaming_.empty()) text += "; uids roaming: " + UidList(roaming_);
  return text;
}

}  // namespace mooncake
