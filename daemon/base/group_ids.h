// The group ids of a put's rpc::ReplicateConfig (Mooncake's group_ids, docs/mooncake-api.md,
// "groups") as the daemon splits and joins batches: the master takes one id per key of the
// call, or none, so a batch cut into parts (chunks, retries, the group commit's merges)
// carries each part's own ids.
//
// Input policy: configs whose group_ids are empty or hold one id per key of the batch they
// came with (the daemon builds them so).
#ifndef MOONCAKE_DAEMON_GROUP_IDS_H_
#define MOONCAKE_DAEMON_GROUP_IDS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "master_types.h"

namespace mooncake {

// config for the keys picked (indices into the batch config was made for), in order.
inline rpc::ReplicateConfig PickGroups(const rpc::ReplicateConfig& config,
                                       const std::vector<size_t>& picked) {
  rpc::ReplicateConfig out = config;
  if (config.group_ids.empty()) return out;
  out.group_ids.clear();
  out.group_ids.reserve(picked.size());
  for (size_t i : picked) out.group_ids.push_back(config.group_ids[i]);
  return out;
}

// config for the count keys from first on.
inline rpc::ReplicateConfig GroupsFrom(const rpc::ReplicateConfig& config, size_t first,
                                       size_t count) {
  rpc::ReplicateConfig out = config;
  if (config.group_ids.empty()) return out;
  out.group_ids.assign(config.group_ids.begin() + first, config.group_ids.begin() + first + count);
  return out;
}

// The two configs place and pin alike: equal but for their group ids.
inline bool SameButGroups(const rpc::ReplicateConfig& a, const rpc::ReplicateConfig& b) {
  if (a.group_ids.empty() && b.group_ids.empty()) return a == b;
  rpc::ReplicateConfig x = a, y = b;
  x.group_ids.clear();
  y.group_ids.clear();
  return x == y;
}

// The single-key puts' group ids as one batch's, in order: "" for a put that named none
// (for a new object the same: no group); empty when none named one.
inline std::vector<std::string> JoinGroups(const std::vector<const rpc::ReplicateConfig*>& puts) {
  std::vector<std::string> out;
  bool any = false;
  for (const rpc::ReplicateConfig* c : puts) any = any || !c->group_ids.empty();
  if (!any) return out;
  out.reserve(puts.size());
  for (const rpc::ReplicateConfig* c : puts) {
    out.push_back(c->group_ids.empty() ? std::string() : c->group_ids[0]);
  }
  return out;
}

}  // namespace mooncake

#endif  // MOONCAKE_DAEMON_GROUP_IDS_H_
