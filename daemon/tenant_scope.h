// The one place where the daemon turns the keys a client names into the keys the cluster
// stores for the client's tenant (common/base/tenant_key.h): every request's parsed arguments
// go through ScopeKeys before a handler sees them (StoreService::Run, and TryInline for
// the requests answered on the event loop). From there on every key the daemon handles —
// in its read cache, in master RPCs, in staged puts — is a stored key, so one tenant's
// requests can only ever name its own objects.
//
// Which fields are keys is said once, in common/uds/uds_ops.h: every field named
// uds::kKeyField, in the op's arguments or in the structs and lists nested in them.
//
// Input policy: a key that is not a valid user key (empty, over MOONCAKE_STORE_MAX_KEY_LEN
// bytes, or holding a NUL byte, which could otherwise spell another tenant's stored key)
// becomes "", which every handler refuses with -600 (StoreService's ValidKey), as it
// refuses a bad key of any other kind. ScopeKeys says which rule the first such key broke,
// for the refusal's reason (common/uds/uds_ops.h, "reasons").
#ifndef MOONCAKE_DAEMON_TENANT_SCOPE_H_
#define MOONCAKE_DAEMON_TENANT_SCOPE_H_

#include <cstring>
#include <string>
#include <vector>

#include "common/base/tenant_key.h"
#include "common/uds/uds_ops.h"

namespace mooncake {

namespace tenant_scope_detail {

struct KeyScoper {
  const std::string& tenant;
  std::string* problem;  // the first invalid key's rule; may be null

  void Scope(std::string* key) const {
    if (!tenant_key::ValidUserKey(*key)) {
      if (problem != nullptr && problem->empty()) *problem = tenant_key::UserKeyProblem(*key);
      key->clear();
    } else {
      tenant_key::EncodeInPlace(tenant, key);
    }
  }
  static bool IsKey(const char* name) { return std::strcmp(name, uds::kKeyField) == 0; }

  void operator()(const char* name, std::string& field) const {
    if (IsKey(name)) Scope(&field);
  }
  void operator()(const char* name, std::vector<std::string>& list) const {
    if (!IsKey(name)) return;
    for (std::string& key : list) Scope(&key);
  }
  // Nested structs, lists of them, and fields of other types (numbers, flags).
  template <class T>
  void operator()(const char* name, std::vector<T>& list) const {
    for (T& entry : list) (*this)(name, entry);
  }
  template <class T>
  void operator()(const char*, T& field) const {
    if constexpr (uds::fields_detail::HasFields<T>::value) T::Fields(field, *this);
  }
  // Only replies spread their fields.
  template <class T>
  void Spread(const char*, std::vector<T>&) const {}
};

}  // namespace tenant_scope_detail

// Rewrites every key of a request's arguments into tenant's stored key ("": the default
// tenant, whose stored keys are the keys themselves). *problem (when given, and still
// empty) gets the rule the first invalid key broke (tenant_key::UserKeyProblem).
template <class Args>
void ScopeKeys(const std::string& tenant, Args* args, std::string* problem = nullptr) {
  const tenant_scope_detail::KeyScoper scoper{tenant, problem};
  Args::Fields(*args, scoper);
}

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_TENANT_SCOPE_H_
