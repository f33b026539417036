// Mooncake's object groups on the master (ReplicateConfig.group_ids; docs/mooncake-api.md,
// "groups"): which objects belong to which group, so that the objects one logical cache
// entry is split into (a page's K and V, a tensor's shards) age, are leased and are evicted
// together.
//
// A put names its key's group, or none; the object stays in that group for as long as it
// exists (an upsert may not move it: MasterService refuses that, -600). Groups are per
// tenant: a group id names a group within the tenant of the key that joins it (its scoped
// form is the id encoded as common/base/tenant_key.h encodes a key), so two tenants' groups of one
// name are two groups. The table knows only the current members; a group exists while it
// has one. What a group changes (MasterService): a read's lease and an existence hit's use
// of one member are given to every member; an eviction that takes a member takes the rest
// with it, each under the usual per-object rules. All of it is best effort, as in Mooncake:
// no member count, no atomic creation or removal.
//
// Only grouped objects cost anything here (ObjectMetadata::grouped says whether to look):
// two map entries and the key twice.
//
// Thread roles: any thread. Its mutex is a leaf of MasterService's lock order, taken under
// a shard's lock or with none; every caller holds the state gate (shared) too, so a
// snapshot's fork never finds it held (the child reads it: ExportObjects).
//
// Input policy: keys are stored keys MasterService has validated; group ids are checked by
// ValidGroup before they get here.
#ifndef MOONCAKE_MASTER_GROUPS_H_
#define MOONCAKE_MASTER_GROUPS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace mooncake {

class GroupTable {
 public:
  // A group id as clients name it: 1..MOONCAKE_STORE_MAX_KEY_LEN bytes without NUL, the
  // rule of a key ("" is no group, and is never passed here).
  static bool ValidGroup(std::string_view group);

  // key joins group (as key's clients name it). key must not be a member of any group.
  void Join(std::string_view key, std::string_view group);
  // key leaves its group, which goes with its last member; no-op for a key in none.
  void Leave(std::string_view key);
  // key's group as its clients name it; false when it is in none.
  bool GroupOf(std::string_view key, std::string* group) const;
  // The other members of key's group, as stored keys; empty when it has none. kPeek just
  // lists them. kLease lists them to share a lease with, and clears the group's "gained a
  // member" mark; kLeaseIfFresh does that only when the group gained a member since (else
  // empty) -- how a read that did not need its own lease renewed still gives a newcomer the
  // group's lease (Mooncake's groups needing a lease refresh).
  enum class Share { kPeek, kLease, kLeaseIfFresh };
  std::vector<std::string> OthersOf(std::string_view key, Share share = Share::kPeek);

  size_t groups() const;
  size_t members() const;
  void Clear();

 private:
  struct Group {
    std::unordered_set<std::string> members;  // stored keys
    bool fresh = false;  // a member joined since OthersOf last shared the group's lease
  };
  mutable absl::Mutex mu_;
  std::unordered_map<std::string, std::string> group_of_ ABSL_GUARDED_BY(mu_);  // key -> group
  std::unordered_map<std::string, Group> groups_ ABSL_GUARDED_BY(mu_);  // group -> members
};

}  // namespace mooncake

#endif  // MOONCAKE_MASTER_GROUPS_H_
