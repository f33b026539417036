// Tenants' keys: how the key a client names becomes the key the cluster stores, so that
// every tenant has a key space of its own (docs/security.md, "Tenants").
//
// A tenant id is 1..kMaxTenantLen characters of [A-Za-z0-9_.-]; the empty id is the
// default tenant. A user key is 1..MOONCAKE_STORE_MAX_KEY_LEN bytes with no NUL (the C ABI
// takes keys as C strings, so it could not carry one). The stored key of tenant T's user
// key K is
//
//   default tenant:  K                      (unchanged: existing data and Mooncake clients
//                                            keep working)
//   tenant T:        "\0" + T + "\0" + K
//
// No default-tenant key begins with NUL, and the tenant part ends at the second NUL, so
// distinct (tenant, key) pairs never share a stored key. The daemon encodes each request's
// keys once, as it parses them (daemon/base/tenant_scope.h); the master keeps stored keys and
// uses TenantOf/UserKeyOf where it scopes a walk (RemoveByRegex, RemoveAll) or accounts a
// tenant's usage (master/directory/tenant_usage.h). Nothing that reaches a client carries a stored
// key.
//
// Input policy: Valid* judge untrusted bytes; Encode needs a valid tenant and user key;
// TenantOf and UserKeyOf need a key ValidStoredKey accepts (the master checks every key it
// stores).
#ifndef MOONCAKE_COMMON_TENANT_KEY_H_
#define MOONCAKE_COMMON_TENANT_KEY_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "common/base/text.h"

#include "include/mooncake_store.h"

namespace mooncake {
namespace tenant_key {

constexpr size_t kMaxTenantLen = kMaxNameLen;  // common/base/text.h
// The longest key the master stores: the longest user key of the longest tenant id.
constexpr size_t kMaxStoredKeyLen = MOONCAKE_STORE_MAX_KEY_LEN + kMaxTenantLen + 2;

// 1..kMaxTenantLen characters of [A-Za-z0-9_.-] (not the default tenant's "").
bool ValidTenant(std::string_view tenant);
// A tenant id, or "" (the default tenant).
inline bool ValidTenantOrDefault(std::string_view tenant) {
  return tenant.empty() || ValidTenant(tenant);
}
// 1..MOONCAKE_STORE_MAX_KEY_LEN bytes, no NUL.
bool ValidUserKey(std::string_view key);
// Which rule key breaks, in the words a refusal shows ("key is empty", "key longer than
// 4096 bytes (5000)", "key holds a NUL byte (at byte 3)"); "" for a valid user key. The
// key's bytes are never quoted: they are the caller's and may be anything.
std::string UserKeyProblem(std::string_view key);

// The stored key of tenant's key (the key itself for the default tenant).
std::string Encode(std::string_view tenant, std::string_view key);
// The same in place: *key becomes its stored form.
void EncodeInPlace(std::string_view tenant, std::string* key);

// A valid default-tenant key, or "\0" + a valid tenant id + "\0" + a valid user key.
bool ValidStoredKey(std::string_view stored);
// Its tenant ("" for the default tenant) and its user key.
std::string_view TenantOf(std::string_view stored);
std::string_view UserKeyOf(std::string_view stored);

}  // namespace tenant_key
}  // namespace mooncake

#endif  // MOONCAKE_COMMON_TENANT_KEY_H_
