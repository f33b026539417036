#include "daemon/tenant_policy.h"

#include <algorithm>
#include <cstdlib>

#include "common/tenant_key.h"
#include "common/text.h"

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

}  // namespace

bool TenantPolicy::Parse(const std::string& text, TenantPolicy* out, std::string* error) {
  TenantPolicy policy;
  if (Trim(text).empty()) {
    *out = policy;
    return true;
  }
  for (const std::string& item : SplitList(text, ',')) {
    size_t eq = item.find('=');
    std::string tenant = Trim(item.substr(0, eq));
    if (eq == std::string::npos || !tenant_key::ValidTenant(tenant)) {
      *error = "'" + item + "' is not tenant=uid[:uid...] with a tenant id of 1..64 "
               "characters of [A-Za-z0-9_.-]";
      return false;
    }
    for (const auto& [known, uids] : policy.tenants_) {
      if (known == tenant) {
        *error = "tenant '" + tenant + "' is listed twice";
        return false;
      }
    }
    std::vector<uid_t> uids;
    for (const std::string& uid_text : SplitList(item.substr(eq + 1), ':')) {
      uid_t uid = 0;
      if (!ParseUid(uid_text, &uid)) {
        *error = "'" + uid_text + "' (tenant '" + tenant + "') is not a uid";
        return false;
      }
      uids.push_back(uid);
    }
    policy.tenants_.emplace_back(tenant, std::move(uids));
  }
  *out = std::move(policy);
  return true;
}

Result<std::string> TenantPolicy::Resolve(const std::string& named, uid_t uid) const {
  if (!tenant_key::ValidTenantOrDefault(named)) return ErrorCode::INVALID_PARAMS;
  for (const auto& [tenant, uids] : tenants_) {
    bool listed = std::find(uids.begin(), uids.end(), uid) != uids.end();
    if (named.empty() && listed) return tenant;  // the first tenant listing the uid
    if (!named.empty() && tenant == named) {
      if (!listed) return ErrorCode::PERMISSION_DENIED;
      return named;
    }
  }
  return named;  // not listed: anyone's; or none named and the uid listed nowhere
}

std::string TenantPolicy::Describe() const {
  std::string text;
  for (const auto& [tenant, uids] : tenants_) {
    if (!text.empty()) text += ", ";
    text += tenant + (uids.size() == 1 ? " (uid " : " (uids ");
    for (size_t i = 0; i < uids.size(); ++i) {
      text += (i > 0 ? ", " : "") + std::to_string(uids[i]);
    }
    text += ")";
  }
  return text;
}

}  // namespace mooncake
