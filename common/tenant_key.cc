#include "common/base/tenant_key.h"

#include "common/base/text.h"

namespace mooncake {
namespace tenant_key {

namespace {

// Where the tenant part of a stored key of a named tenant ends (its second NUL), or npos.
size_t TenantEnd(std::string_view stored) {
  if (stored.empty() || stored[0] != '\0') return std::string_view::npos;
  return stored.find('\0', 1);
}

}  // namespace

bool ValidTenant(std::string_view tenant) { return ValidName(tenant); }

bool ValidUserKey(std::string_view key) {
  return !key.empty() && key.size() <= MOONCAKE_STORE_MAX_KEY_LEN &&
         key.find('\0') == std::string_view::npos;
}

std::string UserKeyProblem(std::string_view key) {
  if (key.empty()) return "key is empty";
  if (key.size() > MOONCAKE_STORE_MAX_KEY_LEN) {
    return "key longer than " + std::to_string(MOONCAKE_STORE_MAX_KEY_LEN) + " bytes (" +
           std::to_string(key.size()) + ")";
  }
  size_t nul = key.find('\0');
  if (nul != std::string_view::npos) {
    return "key holds a NUL byte (at byte " + std::to_string(nul) + ")";
  }
  return "";
}

std::string Encode(std::string_view tenant, std::string_view key) {
  std::string stored;
  if (!tenant.empty()) {
    stored.reserve(tenant.size() + 2 + key.size());
    stored += '\0';
    stored += tenant;
    stored += '\0';
  }
  stored += key;
  return stored;
}

void EncodeInPlace(std::string_view tenant, std::string* key) {
  if (tenant.empty()) return;
  std::string prefix;
  prefix.reserve(tenant.size() + 2 + key->size());
  prefix += '\0';
  prefix += tenant;
  prefix += '\0';
  prefix += *key;
  key->swap(prefix);
}

bool ValidStoredKey(std::string_view stored) {
  size_t end = TenantEnd(stored);
  if (end == std::string_view::npos) return ValidUserKey(stored);
  return ValidTenant(stored.substr(1, end - 1)) && ValidUserKey(stored.substr(end + 1));
}

std::string_view TenantOf(std::string_view stored) {
  size_t end = TenantEnd(stored);
  return end == std::string_view::npos ? std::string_view() : stored.substr(1, end - 1);
}

std::string_view UserKeyOf(std::string_view stored) {
  size_t end = TenantEnd(stored);
  return end == std::string_view::npos ? stored : stored.substr(end + 1);
}

}  // namespace tenant_key
}  // namespace mooncake
